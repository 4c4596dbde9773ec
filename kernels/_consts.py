# SPDX-License-Identifier: Apache-2.0
"""The fused kernels' device constants (filter spectra, windows, weights): uploaded once per
content and CUDA context, ordered on the caller's stream, freed after their readers."""

from __future__ import annotations

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
        """The current context's work, all of it (only where a stream is gone, see _retire)."""
        from cuda.bindings import driver

        (err,) = driver.cuCtxSynchronize()
        self._check(err, "cuCtxSynchronize")


_drv = _Driver()


def _upload(value: np.ndarray, stream: Stream):
    """``value`` copied to the device on ``stream`` (asynchronous w.r.t. the device)."""
    from numba import cuda

    return _from_numba(cuda.to_device(value, stream=stream.numba))


class _Const:
    """A cached device constant: ``dev`` and the stream it was uploaded on (``stream``), with
    ``event`` recorded there after the upload until the upload is known to be complete (then
    None); ``streams``: every stream that has read it (they must pass it before it is freed)."""

    __slots__ = ("dev", "stream", "event", "streams")

    def __init__(self, dev, stream: int, event):
        self.dev, self.stream, self.event, self.streams = dev, stream, event, {stream}


_CONST_MAX = 32
_consts: dict = {}  # key -> _Const, least recently used first
_retired: list = []  # [(device memory owner, [events])]: evicted, freed once every event is done
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
    the point of eviction (an event per stream, polled on later misses). Thread-safe.

    A miss copies from pageable host memory, which CUDA starts only after the work already
    queued on ``stream`` (the host waits for it, on a miss only); a hit makes no copy."""
    arr = np.ascontiguousarray(arr)
    key = (arr.tobytes(), arr.dtype.str, arr.shape, make, current_context() or ensure_context())
    h = stream.handle
    with _consts_lock:
        c = _consts.pop(key, None)
        if c is None:
            c = _new_const(key, arr, stream, make)
        elif c.event is not None and h != c.stream:  # upload maybe in flight on another stream
            if _drv.done(c.event):
                _drv.destroy(c.event)
                c.event = None
            else:
                _drv.wait(h, c.event)
        if h not in c.streams:
            c.streams.add(h)
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
        return _Const(value, 0, None)
    dev = _upload(value, stream)
    return _Const(dev, stream.handle, _drv.record(stream.handle))


def _retire(c: _Const) -> None:
    """Keep ``c``'s memory until every stream that read it passes an event recorded now."""
    if c.event is not None:
        _drv.destroy(c.event)
    if simulator():
        return
    events = []
    for h in c.streams:
        try:
            events.append(_drv.record(h))
        except RuntimeError:  # the stream was destroyed: its work may still run; wait for all
            for ev in events:
                _drv.destroy(ev)
            _drv.synchronize()
            return
    _retired.append((c.dev, events))


def _reap() -> None:
    """Free the retired entries whose streams have passed their events."""
    keep = []
    for dev, events in _retired:
        if all(_drv.done(ev) for ev in events):
            for ev in events:
                _drv.destroy(ev)
        else:
            keep.append((dev, events))
    _retired[:] = keep
