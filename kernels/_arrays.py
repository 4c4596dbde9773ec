# SPDX-License-Identifier: Apache-2.0
"""What only the fused kernels need on top of :mod:`mathdx_operands`: their validated inputs
(:class:`Operand`, with NumPy inputs copied to the device), their outputs (:class:`Output`, the
caller's kind of array), :class:`DevArray` for the fast launch and the device-constant cache
(:func:`to_device_const`)."""

from __future__ import annotations

import functools
import math
import threading

import numpy as np

from mathdx_operands import (
    Stream,
    caller_kind,
    current_context,
    device_empty,
    ensure_context,
    numpy_dtype_of_torch,
    simulator,
)


def canonical(arr: np.ndarray) -> np.ndarray:
    """C-contiguous with the canonical strides: NumPy calls ``x[None, :]`` (strides (0, 4))
    C-contiguous, numba's device arrays do not, and then refuse views of another dtype."""
    arr = np.ascontiguousarray(arr)
    return arr.reshape(-1).reshape(arr.shape)


class DevArray:
    """A C-contiguous device array as a kernel launch needs it: data pointer, shape, dtype (and
    ``owner``, the object that keeps the memory alive). Made from ``__cuda_array_interface__``
    without numba's DeviceNDArray (no construction, context checks or ``typeof`` per array and
    call); it carries its numba type, and numba-cuda still accepts it as a kernel argument
    through the same interface."""

    __slots__ = ("ptr", "shape", "dtype", "owner", "size")

    def __init__(self, ptr: int, shape, dtype, owner):
        self.ptr, self.shape, self.dtype, self.owner = int(ptr), tuple(shape), np.dtype(dtype), owner
        self.size = math.prod(self.shape)

    @classmethod
    def of(cls, obj, name="array"):
        """``obj``'s memory through ``__cuda_array_interface__``; ValueError unless C-contiguous."""
        cai = obj.__cuda_array_interface__
        shape, dtype = tuple(cai["shape"]), np.dtype(cai["typestr"])
        strides = cai.get("strides")
        if strides is not None and not _c_contiguous(shape, strides, dtype.itemsize):
            raise ValueError(f"{name} must be C-contiguous (got strides {tuple(strides)})")
        return cls(cai["data"][0] or 0, shape, dtype, obj)

    @property
    def strides(self) -> tuple:
        out, step = [], self.dtype.itemsize
        for extent in reversed(self.shape):
            out.append(step)
            step *= extent
        return tuple(reversed(out))

    def reshape(self, *shape) -> DevArray:
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        if math.prod(shape) != self.size:
            raise ValueError(f"cannot reshape {self.shape} to {shape}")
        return DevArray(self.ptr, shape, self.dtype, self.owner)

    def view(self, dtype) -> DevArray:
        """The last axis reinterpreted as ``dtype`` (its bytes must divide evenly)."""
        dtype = np.dtype(dtype)
        nbytes = self.shape[-1] * self.dtype.itemsize
        if nbytes % dtype.itemsize:
            raise ValueError(f"rows of {nbytes} bytes cannot be viewed as {dtype.name}")
        return DevArray(self.ptr, self.shape[:-1] + (nbytes // dtype.itemsize,), dtype, self.owner)

    @property
    def _numba_type_(self):
        return _array_type(self.dtype, len(self.shape))

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "strides": None, "typestr": self.dtype.str, "data": (self.ptr, False),
                "version": 3}


def _c_contiguous(shape, strides, itemsize) -> bool:
    """C order in memory (axes of extent 1 may have any stride, as in NumPy)."""
    want = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != want:
            return False
        want *= extent
    return True


@functools.cache
def _array_type(dtype, ndim):
    from numba import from_dtype, types

    return types.Array(from_dtype(dtype), ndim, "C")


def _from_numba(d) -> DevArray:
    """A DevArray of a contiguous numba device array (kept alive by it)."""
    return DevArray(d.device_ctypes_pointer.value or 0, d.shape, d.dtype, d)


class Operand:
    """One input array of a fused kernel, checked and on the device, plus what is needed to
    hand results back (``package``: the caller's kind, see :func:`mathdx_operands.caller_kind`).

    ``dev`` is a :class:`DevArray` (GPU arrays: in place, no synchronisation with the producer's
    stream, the kernel runs on the caller's; NumPy arrays: copied), the simulator's array or a
    C-contiguous NumPy array under the simulator."""

    def __init__(self, name, obj, dtypes, ndim, stream):
        self.name = name
        self.obj = arr = obj
        self.package = caller_kind(obj, name)
        if self.package == "torch":
            dtype = numpy_dtype_of_torch(arr.dtype)
            dtype = np.dtype(np.void) if dtype is None else dtype
        else:
            dtype = np.dtype(arr.dtype)
        shape = tuple(arr.shape)
        if dtype not in dtypes:
            raise TypeError(f"{name} must have dtype {' or '.join(d.name for d in dtypes)}, got {dtype.name}")
        if len(shape) not in ndim:
            raise ValueError(f"{name} must have {' or '.join(map(str, ndim))} dimension(s), got shape {shape}")
        self.shape, self.dtype = shape, dtype
        if simulator():
            if self.package != "numpy" and not arr.is_c_contiguous():  # as on the GPU
                raise ValueError(f"{name} must be C-contiguous (got strides {arr.strides})")
            self.dev = np.ascontiguousarray(arr) if self.package == "numpy" else arr
        elif self.package == "numpy":
            from numba import cuda

            self.dev = _from_numba(cuda.to_device(canonical(arr), stream=stream.numba if stream else 0))
        else:
            self.dev = DevArray.of(arr, name)


class Output:
    """A result array allocated by the caller's package (its pool, on the stream): ``obj`` what
    the caller gets, ``dev`` what the kernel gets."""

    def __init__(self, shape, dtype, like: Operand, stream: Stream):
        self.like = like
        if simulator():
            self.obj = np.full(shape, np.nan, dtype=dtype) if np.dtype(dtype).kind in "fc" else np.zeros(shape, dtype)
            self.dev = self.obj
            return
        self.obj = obj = device_empty(like.package, shape, dtype, stream)
        if like.package == "cupy":
            self.dev = DevArray(obj.data.ptr, shape, dtype, obj)
        elif like.package == "torch":
            self.dev = DevArray(obj.data_ptr(), shape, dtype, obj)
        else:
            self.dev = _from_numba(obj)

    def result(self, stream: Stream, shape=None):
        """The caller's kind of array (NumPy: copied back, blocking), optionally reshaped."""
        if self.like.package == "numpy":
            if simulator():
                out = np.asarray(self.obj)
            else:
                out = self.obj.copy_to_host(stream=stream.numba)
                stream.synchronize()
        else:
            out = self.obj
        return out.reshape(shape) if shape is not None else out


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
