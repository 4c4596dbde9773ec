# SPDX-License-Identifier: Apache-2.0
"""The fused kernels' device constants (filter spectra, windows, weights): uploaded once per
content and CUDA context, ordered on the caller's stream, freed after their readers."""

from __future__ import annotations

import contextlib
import sys
import threading

import numpy as np

from mathdx_operands import Stream, current_context, ensure_context, simulator

from ._arrays import _from_numba


class _Driver:
    """The driver calls of the device-constant cache, in one place (tests replace ``_drv``)."""

    @staticmethod
    def _check(err, what):
        from cuda.bindings import driver

        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"{what} failed: {err.name}")

    def record(self, stream: int):
        """A new event recorded on ``stream`` (disabled timing: the cheapest kind)."""
        from cuda.bindings import driver

        err, ev = driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        self._check(err, "cuEventCreate")
        (err,) = driver.cuEventRecord(ev, stream)
        if err != driver.CUresult.CUDA_SUCCESS:
            driver.cuEventDestroy(ev)
            self._check(err, "cuEventRecord")
        return ev

    def done(self, event) -> bool:
        """Whether the work before ``event`` has completed."""
        from cuda.bindings import driver

        (err,) = driver.cuEventQuery(event)
        if err == driver.CUresult.CUDA_ERROR_NOT_READY:
            return False
        self._check(err, "cuEventQuery")
        return True

    def wait(self, stream: int, event) -> None:
        """Later work on ``stream`` waits for ``event`` (no host synchronisation)."""
        from cuda.bindings import driver

        (err,) = driver.cuStreamWaitEvent(stream, event, 0)
        self._check(err, "cuStreamWaitEvent")

    def destroy(self, event) -> None:
        from cuda.bindings import driver

        driver.cuEventDestroy(event)

    def synchronize(self) -> None:
        """The current context's work, all of it (where a reader stream's life is unknown, see
        _retire)."""
        from cuda.bindings import driver

        (err,) = driver.cuCtxSynchronize()
        self._check(err, "cuCtxSynchronize")

    @contextlib.contextmanager
    def in_context(self, ctx: int):
        """``ctx`` current for the block (pushed only when another one is)."""
        from cuda.bindings import driver

        err, cur = driver.cuCtxGetCurrent()
        if err == driver.CUresult.CUDA_SUCCESS and int(cur) == ctx:
            yield
            return
        (err,) = driver.cuCtxPushCurrent(driver.CUcontext(ctx))
        self._check(err, "cuCtxPushCurrent")
        try:
            yield
        finally:
            driver.cuCtxPopCurrent()

    @staticmethod
    def owner(handle: int):
        """The stream object behind ``handle`` when it is CuPy's or PyTorch's current stream
        (holding it keeps the handle valid), else None."""
        cp, torch = sys.modules.get("cupy"), sys.modules.get("torch")
        if cp is not None:
            st = cp.cuda.get_current_stream()
            if st.ptr == handle:
                return st
        if torch is not None and torch.cuda.is_initialized():
            st = torch.cuda.current_stream()
            if st.cuda_stream == handle:
                return st
        return None


_drv = _Driver()


def _upload(value: np.ndarray, stream: Stream):
    """``value`` copied to the device on ``stream`` (asynchronous w.r.t. the device)."""
    from numba import cuda

    return _from_numba(cuda.to_device(value, stream=stream.numba))


# cudaStreamLegacy / cudaStreamPerThread and the legacy default stream: never destroyed
_LASTING = (0, 1, 2)
_READERS_MAX = 16  # reader streams kept per entry; one more retires the entry (a fresh upload)


def _reader(stream: Stream):
    """What keeps ``stream``'s handle valid while an entry may record an event on it: the stream
    object (the caller's, or CuPy's/PyTorch's current one), ``True`` for a handle that lives
    forever, ``None`` when nothing is known (a raw handle): such an entry is freed after a
    context synchronisation instead."""
    if stream.handle in _LASTING:
        return True
    if stream.owner is not None:
        return stream.owner
    return _drv.owner(stream.handle)


class _Const:
    """A cached device constant: ``dev`` and the stream it was uploaded on (``stream``), with
    ``event`` recorded there after the upload until the upload is known to be complete (then
    None); ``streams``: handle -> :func:`_reader` of every stream that has read it (they must pass
    it before it is freed); ``ctx``: its CUDA context."""

    __slots__ = ("dev", "stream", "event", "streams", "ctx")

    def __init__(self, dev, stream: Stream, event, ctx: int):
        self.dev, self.stream, self.event, self.ctx = dev, stream.handle, event, ctx
        self.streams = {stream.handle: _reader(stream)}


_CONST_MAX = 32
_consts: dict = {}  # key -> _Const, least recently used first
_retired: list = []  # [(device memory owner, [events], context)]: evicted, freed once every event is done
_consts_lock = threading.Lock()


def to_device_const(arr, stream: Stream, make=None):
    """A small host array (filter spectrum, window) on the device, kept for reuse (the 32 most
    recent per CUDA context). With ``make``, ``arr`` is only the key (e.g. the taps) and
    ``make(arr)`` computes the array on a miss: a repeated call skips the host computation too.

    Keyed on the content and the current CUDA context (a pointer of one GPU is never handed to
    another). Ordered on the caller's ``stream`` without host synchronisation: the upload runs on
    the stream of the call that missed, an event is recorded after it, and a call on another
    stream makes its stream wait for that event (``cuStreamWaitEvent``) until the upload is
    seen complete. An evicted entry is freed only after every stream that read it has passed
    the point of eviction (an event per stream, polled on later misses). To record that event
    the entry keeps each reader stream alive (the caller's stream object, or CuPy's/PyTorch's
    current one) until then; a reader known only by a raw handle, which may be destroyed,
    makes the eviction synchronise the context instead. Thread-safe.

    A miss copies from pageable host memory, which CUDA starts only after the work already
    queued on ``stream`` (the host waits for it, on a miss only); a hit makes no copy."""
    arr = np.ascontiguousarray(arr)
    key = (arr.tobytes(), arr.dtype.str, arr.shape, make, current_context() or ensure_context())
    h = stream.handle
    with _consts_lock:
        c = _consts.pop(key, None)
        if c is not None and h not in c.streams and len(c.streams) >= _READERS_MAX:
            _retire(c)  # it would keep too many streams alive: start again
            c = None
        if c is None:
            c = _new_const(key, arr, stream, make)
        elif c.event is not None and h != c.stream:  # upload maybe in flight on another stream
            if _drv.done(c.event):
                _drv.destroy(c.event)
                c.event = None
            else:
                _drv.wait(h, c.event)
        if h not in c.streams:
            c.streams[h] = _reader(stream)
        _consts[key] = c
    return c.dev


def _new_const(key, arr, stream: Stream, make):
    """A new entry (called with the lock held): evict the least recently used one beyond the
    limit, free retired ones whose readers are done, compute and upload."""
    _reap()
    if len(_consts) >= _CONST_MAX:
        _retire(_consts.pop(next(iter(_consts))))
    value = np.ascontiguousarray(make(arr)) if make is not None else arr
    if simulator():
        return _Const(value, Stream(), None, 0)
    dev = _upload(value, stream)
    return _Const(dev, stream, _drv.record(stream.handle), key[-1])


def _retire(c: _Const) -> None:
    """Keep ``c``'s memory until every stream that read it passes an event recorded now (in
    ``c``'s context; a reader whose handle may be gone: the context's work, all of it)."""
    if simulator():
        return
    with _drv.in_context(c.ctx):
        if c.event is not None:
            _drv.destroy(c.event)
        events = _reader_events(c)
        if events is None:
            _drv.synchronize()
            return
    c.streams = {}  # the reader streams are no longer held
    _retired.append((c.dev, events, c.ctx))


def _reader_events(c: _Const):
    """An event recorded now on each of ``c``'s reader streams, or None where that cannot be
    done: a reader known only by a raw handle (no event on a handle that may be destroyed), or a
    failing record (the events recorded before it are destroyed)."""
    if any(r is None for r in c.streams.values()):
        return None
    events = []
    try:
        for h in c.streams:
            events.append(_drv.record(h))
    except RuntimeError:
        for ev in events:
            _drv.destroy(ev)
        return None
    return events


def _reap() -> None:
    """Free the retired entries whose streams have passed their events."""
    keep = []
    for dev, events, ctx in _retired:
        with _drv.in_context(ctx):
            if all(_drv.done(ev) for ev in events):
                for ev in events:
                    _drv.destroy(ev)
                continue
        keep.append((dev, events, ctx))
    _retired[:] = keep
