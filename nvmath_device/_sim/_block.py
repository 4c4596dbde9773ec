# SPDX-License-Identifier: Apache-2.0
"""What the FFT and GEMM simulators share: the kernel context of the calling simulator thread,
shared-memory detection, and the per-block exchange in which block-collective calls meet.

Two kinds of meeting (:func:`collective`):

- block-wide (``FFT.execute``): every thread of the launched block calls, and the threads meet
  at the simulator's own barrier, ``syncthreads``;
- by thread group (``Matmul.execute``): only the threads of the groups that call take part (a
  GEMM's threads are those of its ``block_dim``; a launch may hold several such groups, and
  threads of no group). They meet at a barrier of their own, so threads that do not call wait
  at their next ``cuda.syncthreads()`` until the GEMMs are done, as on the GPU. numba-cuda's
  simulator (``simulator/kernel.py``, ``BlockManager.run``) releases a ``syncthreads`` only
  when every live thread of the block is blocked in one; a thread waiting at the groups'
  barrier is live and not in ``syncthreads``, so the others keep waiting for it.
"""

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
        # a round of one thread group (collective(..., group=...)):
        self.members = frozenset()  # the group's threadIdx tuples
        self.label = ""  # the group, in words
        self.threads = []  # the depositing BlockThreads
        self.watcher = None  # threadIdx of the thread that watches for a group that cannot complete


class Exchange:
    """The block's meeting point for block-collective calls."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = {}  # threadIdx tuple -> calls made so far
        self.rounds = {}  # call number (by thread group: (call number, group key)) -> Round
        self.failed = {}  # threadIdx tuple -> Failure of its own argument checks
        self.cond = threading.Condition(self.lock)  # rounds by thread group: their barrier
        self.waiting = set()  # BlockThreads waiting in an open round by thread group


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


def collective(what: str, kind: str, thread, ctx, checks, close, hint: str, group=None, conflict=None) -> None:
    """One block-collective call (``FFT.execute``, ``Matmul.execute``) of the calling thread.

    With ``group`` the call is collective over thread groups instead of the block: see
    :func:`_grouped` (``group`` and ``conflict`` are described there). Without it:

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
    if group is not None:
        _grouped(what, kind, thread, ctx, checks, close, hint, group, conflict)
        return
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
                    _close(rnd, call, close, tid, block)
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


# ---------------------------------------------------------------------------- rounds by thread group
_POLL_FIRST_S, _POLL_MAX_S = 0.002, 0.05  # the watcher's look at the block: first and longest wait
_WAIT_S = 0.1  # how often the other waiting threads look at the abort flag


def _grouped(what, kind, thread, ctx, checks, close, hint, group, conflict) -> None:
    """One call, collective over the threads of one group (``Matmul.execute``: one GEMM).

    ``checks()`` as for :func:`collective`; ``group(deposit)`` gives ``None`` for a thread that
    takes no part (it returns at once: an idle thread of a larger launch) or ``(key, threads,
    label)``: a hashable key of its group, the group's threadIdx tuples (a frozenset), and words
    naming the group for messages. ``conflict(call, (tid1, deposit1), (tid2, deposit2))`` gives
    the message for two threads of one group whose calls put them in different groups (another
    descriptor), or ``None`` for a generic one.

    Each group meets in rounds of its own, one per call (its threads' n-th call): a thread
    deposits, then waits at the exchange's own barrier (``Exchange.cond``). Once every thread of
    the group is in, the thread that completed it runs ``close(rnd, call)`` (holding the
    exchange's lock, as in :func:`collective`) and the round leaves the exchange. Groups none of
    whose threads call take no part; groups meet independently, at the same time or one after
    the other. A group that only some of its threads reach is misuse: the round's first depositor
    watches the block, and once no thread can arrive any more (every other thread of the block
    has exited, waits in ``syncthreads`` or waits in a round of its own) the round closes with
    the error, which every thread of the round raises (or it relays the exception of a missing
    thread whose own argument checks raised). If the block is aborted (another thread raised:
    numba-cuda's simulator sets ``abort``), a waiting thread raises as ``syncthreads`` does.
    """
    tid = tuple(thread.threadIdx)
    block = tuple(thread.blockIdx)
    ex = exchange(thread, kind)
    try:
        deposit = checks()
        member = group(deposit)
    except BaseException as e:
        with ex.cond:
            ex.failed.setdefault(tid, Failure(tid, block, e))
            ex.cond.notify_all()  # the watchers need not wait for their next look
        raise
    if member is None:
        return
    key, members, label = member
    with ex.cond:
        call = ex.calls.get(tid, 0)
        ex.calls[tid] = call + 1
        rnd = ex.rounds.get((call, key))
        if rnd is None:
            rnd = ex.rounds[(call, key)] = Round()
            rnd.watcher, rnd.members, rnd.label = tid, members, label
        rnd.deposits[tid] = deposit
        rnd.threads.append(thread)
        ex.waiting.add(thread)
        if len(rnd.deposits) == len(members):
            _close_grouped(what, ex, rnd, (call, key), tid, block, close, None)
        delay = _POLL_FIRST_S
        while not rnd.closed:
            if thread.abort:  # another thread raised: numba-cuda's simulator stops the block
                ex.waiting.discard(thread)
                raise RuntimeError(f"abort flag set while waiting in {what}")
            if rnd.watcher == tid:
                if _no_one_can_arrive(thread, ctx):
                    _close_grouped(what, ex, rnd, (call, key), tid, block, close, (hint, conflict))
                    break
                ex.cond.wait(delay)
                delay = min(2 * delay, _POLL_MAX_S)
            else:
                ex.cond.wait(_WAIT_S)
    # (a thread whose close() raised has left with its own exception)
    if rnd.failure is not None:
        raise rnd.failure.relay(what, call)
    if rnd.error:
        raise RuntimeError(rnd.error)


def _close_grouped(what, ex, rnd, at, tid, block, close, stuck) -> None:
    """Close ``rnd``, ``ex.rounds[at]`` (the exchange's lock held): ``stuck`` is ``None`` when
    the group is complete, else ``(hint, conflict)``: no thread can arrive any more."""
    rnd.closed = True
    del ex.rounds[at]
    for t in rnd.threads:
        ex.waiting.discard(t)
    ex.cond.notify_all()  # they run once this thread lets go of the lock
    call = at[0]
    if stuck is not None:
        rnd.error, rnd.failure = _incomplete_group(what, ex, rnd, call, block, *stuck)
        return
    _close(rnd, call, close, tid, block)


def _close(rnd: Round, call: int, close, tid: tuple, block: tuple) -> None:
    """``close(rnd, call)`` run by the closing thread ``tid``: an exception in it is recorded as
    the round's failure (the other threads relay it) and re-raised here, the original one where
    its type takes a message, else the same type with the traceback in the message."""
    try:
        close(rnd, call)
    except BaseException as e:
        rnd.failure = Failure(tid, block, e)
        if type(_same_type(e, "")) is type(e):
            raise  # the original exception, with its traceback
        raise _same_type(e, f"{e}\n{rnd.failure.traceback}") from e


def _incomplete_group(what, ex, rnd, call, block, hint, conflict):
    """(error message, Failure) for a round whose group no thread can complete any more."""
    missing = rnd.members - set(rnd.deposits)
    failed = sorted((t for t in missing if t in ex.failed), key=lambda t: t[::-1])
    if failed:
        return None, ex.failed[failed[0]]
    # a missing thread waiting in another group's round: its call made it a member of another group
    elsewhere = {t: r.deposits[t] for r in ex.rounds.values() for t in missing if t in r.deposits}
    if elsewhere:
        t2 = min(elsewhere, key=lambda t: t[::-1])
        t1 = min(rnd.deposits, key=lambda t: t[::-1])
        msg = conflict and conflict(call, (t1, rnd.deposits[t1]), (t2, elsewhere[t2]))
        return msg or (
            f"{what} in block {block}: threads {t1} and {t2} belong to one group of threads but "
            "made different calls; the threads of a group must make the same call together"
        ), None
    return (
        f"{what} is collective over a group of threads ({rnd.label}): every thread of a group that "
        f"calls it must call it, the same number of times, but in block {block} {len(missing)} "
        f"of {len(rnd.members)} thread(s) did not reach call #{call + 1}: threadIdx "
        f"{fmt_threads(missing)} (they exited or wait at a barrier while the rest of their "
        f"group waits in {what}; {hint})"
    ), None


def _block_threads(manager) -> list | None:
    """Every simulator thread of ``manager``'s block created so far, running or not; ``None`` if
    this Python keeps no registry of created threads."""
    dangling = getattr(threading, "_dangling", None)  # every Thread made: a WeakSet
    if dangling is None:
        return None
    for _ in range(100):
        try:
            return [t for t in list(dangling) if getattr(t, "_manager", None) is manager]
        except RuntimeError:  # the set changed while it was copied: another thread was made
            continue
    return None


def _no_one_can_arrive(thread, ctx) -> bool:
    """Whether no thread of the calling thread's block can reach a collective call any more:
    each has exited, waits in ``syncthreads`` or waits in a round by thread group (the manager
    releases a ``syncthreads`` only when every live thread waits in one, which those in a round
    never do). The caller holds the exchange's lock. False while the block's threads are still
    being created."""
    manager = thread._manager
    bx, by, bz = ctx.blockDim
    threads = _block_threads(manager)
    if threads is None:
        threads = [t for t in threading.enumerate() if getattr(t, "_manager", None) is manager]
    if len(threads) < bx * by * bz:
        return False  # threads not made yet (or, without a registry, some exited: wait for the rest)
    with _exchanges_lock:
        exchanges = list(_exchanges.get(manager, {}).values())
    waiting = set()
    for other in exchanges:
        waiting |= set(other.waiting)
    for t in threads:
        if t in waiting or t.syncthreads_blocked:
            continue
        started = getattr(t, "_started", None)
        if (started.is_set() if started is not None else t.ident is not None) and not t.is_alive():
            continue  # exited
        return False
    return True
