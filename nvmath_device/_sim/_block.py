# SPDX-License-Identifier: Apache-2.0
"""What the FFT and GEMM simulators share: the kernel context of the calling simulator thread,
shared-memory detection, and the per-block exchange in which block-collective calls meet."""

from __future__ import annotations

import threading
import weakref

import numpy as np


def kernel_context(what: str):
    """(thread, kernel context) of the calling simulator thread; RuntimeError outside a kernel."""
    from numba.cuda.simulator.kernel import BlockThread, _get_kernel_context

    thread = threading.current_thread()
    ctx = _get_kernel_context()
    if ctx is None or not isinstance(thread, BlockThread):
        raise RuntimeError(f"{what} can only be called inside a @cuda.jit kernel (here: the CUDA simulator)")
    return thread, ctx


def is_shared(ctx, arr: np.ndarray) -> bool:
    """Whether ``arr`` lies in the block's (dynamic or static) shared memory."""
    shared = ctx.shared
    bufs = [getattr(shared, "_dynshared", None), *getattr(shared, "_allocations", {}).values()]
    return any(b is not None and b.size and np.may_share_memory(arr, b) for b in bufs)


class Round:
    """One block-wide call: the threads' deposits and the outcome."""

    def __init__(self):
        self.deposits = {}  # threadIdx tuple -> what the thread handed in
        self.closed = False
        self.error = None
        self.leaving = 0


class Exchange:
    """The block's meeting point for block-collective calls."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = {}  # threadIdx tuple -> calls made so far
        self.rounds = {}  # call number -> Round
        self.failed = {}  # threadIdx tuple -> message of a misuse error it raised


_exchanges: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_exchanges_lock = threading.Lock()


def exchange(thread, kind: str) -> Exchange:
    """The exchange of ``thread``'s block for one kind of call ("fft" or "gemm")."""
    manager = thread._manager  # numba-cuda's BlockManager: one per simulated block
    with _exchanges_lock:
        per_block = _exchanges.get(manager)
        if per_block is None:
            per_block = _exchanges[manager] = {}
        ex = per_block.get(kind)
        if ex is None:
            ex = per_block[kind] = Exchange()
    return ex


def fmt_threads(tids, limit=8) -> str:
    """``(x, y, z), ...`` for a few thread indices."""
    tids = sorted(tids, key=lambda t: (t[2], t[1], t[0]))
    s = ", ".join(f"({x}, {y}, {z})" for x, y, z in tids[:limit])
    return s + (f" and {len(tids) - limit} more" if len(tids) > limit else "")


def missing_threads_error(what: str, ex: Exchange, rnd: Round, call: int, block, block_dim, hint: str):
    """The error message when threads of the block did not reach this call (None if all did)."""
    bx, by, bz = block_dim
    expected = {(x, y, z) for z in range(bz) for y in range(by) for x in range(bx)}
    missing = expected - set(rnd.deposits)
    if not missing:
        return None
    msg = (
        f"{what} is block-collective: every thread of the block must call it, the same number of "
        f"times, but in block {block} {len(missing)} of {len(expected)} thread(s) did not reach "
        f"call #{call + 1}: threadIdx {fmt_threads(missing)}"
    )
    failed = {t: m for t, m in ex.failed.items() if t in missing}
    if failed:
        t, m = next(iter(failed.items()))
        return msg + f" (thread {t} raised: {m})"
    return msg + f" ({hint})"
