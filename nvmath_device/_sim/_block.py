# SPDX-License-Identifier: Apache-2.0
"""What the FFT and GEMM simulators share: the kernel context of the calling simulator thread,
shared-memory detection, and the per-block exchange in which block-collective calls meet."""

from __future__ import annotations

import threading
import traceback
import weakref

import numpy as np


def is_shared(ctx, arr: np.ndarray) -> bool:
    """Whether ``arr`` lies in the block's (dynamic or static) shared memory."""
    shared = ctx.shared
    bufs = [getattr(shared, "_dynshared", None), *getattr(shared, "_allocations", {}).values()]
    return any(b is not None and b.size and np.may_share_memory(arr, b) for b in bufs)


class Failure:
    """An exception raised by one simulated thread inside a block-collective call."""

    def __init__(self, tid: tuple, block: tuple, exc: BaseException):
        self.tid, self.block, self.exc = tid, block, exc
        self.traceback = "".join(traceback.format_exception(exc)).rstrip()

    def relay(self, what: str, call: int) -> BaseException:
        """The error another thread of the block raises for it: the same type and message, with
        the raising thread and its traceback (numba-cuda's simulator reports the exception of
        whichever thread it finds first, keeping only type and message)."""
        msg = (
            f"{self.exc} [raised in thread {self.tid} of block {self.block} during {what} call "
            f"#{call + 1}; every thread of the block stops with it. That thread's traceback:\n"
            f"{self.traceback}\n]"
        )
        return _same_type(self.exc, msg)


def _same_type(exc: BaseException, msg: str) -> BaseException:
    # numba-cuda's BlockThread.run rebuilds a thread's exception as type(e)(message): a type
    # whose constructor does not take one string would lose the error there
    try:
        return type(exc)(msg)
    except Exception:  # noqa: BLE001 - e.g. UnicodeDecodeError needs 5 arguments
        return RuntimeError(f"{type(exc).__name__}: {msg}")


class Round:
    """One block-wide call: the threads' deposits and the outcome."""

    def __init__(self):
        self.deposits = {}  # threadIdx tuple -> what the thread handed in
        self.closed = False
        self.error = None  # misuse found when the round closed: every thread raises RuntimeError
        self.failure = None  # Failure: an exception while the round closed
        self.leaving = 0


class Exchange:
    """The block's meeting point for block-collective calls."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = {}  # threadIdx tuple -> calls made so far
        self.rounds = {}  # call number -> Round
        self.failed = {}  # threadIdx tuple -> Failure of its own argument checks


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


def _missing_threads(what: str, ex: Exchange, rnd: Round, call: int, block, block_dim, hint: str):
    """(error message, Failure) when threads of the block did not reach this call, else (None, None).

    A thread missing because its own argument checks raised is that error: the others relay it."""
    bx, by, bz = block_dim
    expected = {(x, y, z) for z in range(bz) for y in range(by) for x in range(bx)}
    missing = expected - set(rnd.deposits)
    if not missing:
        return None, None
    failed = sorted((t for t in missing if t in ex.failed), key=lambda t: t[::-1])
    if failed:
        return None, ex.failed[failed[0]]
    return (
        f"{what} is block-collective: every thread of the block must call it, the same number of "
        f"times, but in block {block} {len(missing)} of {len(expected)} thread(s) did not reach "
        f"call #{call + 1}: threadIdx {fmt_threads(missing)} ({hint})"
    ), None


def collective(what: str, kind: str, thread, ctx, checks, close, hint: str) -> None:
    """One block-collective call (``FFT.execute``, ``Matmul.execute``) of the calling thread.

    ``checks()`` checks this thread's arguments (raising for misuse) and returns what it hands
    in. Every thread deposits, meets the others at a barrier (the simulator's ``syncthreads``);
    the first one past it closes the round, holding the exchange's lock: threads missing from it
    make every thread raise, otherwise ``close(rnd, call)`` (misuse across threads: set
    ``rnd.error``; else compute every thread's result). A second barrier ends the call.

    Errors reach the caller with their traceback, and no thread waits for one that has failed:
    a thread whose checks raise records the exception before leaving; an exception inside
    ``close`` is re-raised by the closing thread, and the other threads of the round raise it
    too (same type and message, with the failing thread's traceback in the message) instead of
    running on to the next barrier with registers that were never computed.
    """
    tid = tuple(thread.threadIdx)
    block = tuple(thread.blockIdx)
    ex = exchange(thread, kind)
    try:
        deposit = checks()
    except BaseException as e:
        with ex.lock:
            ex.failed.setdefault(tid, Failure(tid, block, e))
        raise
    with ex.lock:
        call = ex.calls.get(tid, 0)
        ex.calls[tid] = call + 1
        rnd = ex.rounds.get(call)
        if rnd is None:
            rnd = ex.rounds[call] = Round()
        late = rnd.closed
        if not late:
            rnd.deposits[tid] = deposit
    if late:
        raise RuntimeError(
            f"{what} is block-collective, but thread {tid} of block {block} reached call "
            f"#{call + 1} after the rest of the block had gone through it (a thread that skipped "
            "an earlier call, or called it in a divergent branch?)"
        )
    try:
        thread.syncthreads()
        with ex.lock:
            if not rnd.closed:
                rnd.closed = True
                rnd.error, rnd.failure = _missing_threads(
                    what, ex, rnd, call, block, tuple(ctx.blockDim), hint)
                if rnd.error is None and rnd.failure is None:
                    try:
                        close(rnd, call)
                    except BaseException as e:
                        rnd.failure = Failure(tid, block, e)
                        if type(_same_type(e, "")) is type(e):
                            raise  # the original exception, with its traceback
                        raise _same_type(e, f"{e}\n{rnd.failure.traceback}") from e
        if rnd.failure is not None:
            raise rnd.failure.relay(what, call)
        if rnd.error:
            raise RuntimeError(rnd.error)
        thread.syncthreads()
    finally:
        with ex.lock:
            rnd.leaving += 1
            if rnd.leaving == len(rnd.deposits):
                ex.rounds.pop(call, None)
