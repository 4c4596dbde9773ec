# SPDX-License-Identifier: Apache-2.0
"""What only the fused kernels need on top of :mod:`mathdx_operands`: their validated inputs
(:class:`Operand`, with NumPy inputs copied to the device), their outputs (:class:`Output`, the
caller's kind of array) and :class:`DevArray` for the fast launch."""

from __future__ import annotations

import functools
import math

import numpy as np

from mathdx_operands import (
    Stream,
    caller_kind,
    device_empty,
    numpy_dtype_of_torch,
    simulator,
)

from ._launch import recorder


def host_numbers(name, obj, kinds="biufc", what="numbers") -> np.ndarray:
    """``obj`` as a NumPy array whose dtype kind is one of ``kinds``; TypeError naming ``name``
    (and ``what`` the array must hold) otherwise, e.g. for a ragged list."""
    try:
        arr = np.asarray(obj)
    except (TypeError, ValueError) as e:  # e.g. a ragged list, a tensor on another device
        raise TypeError(f"{name} must be an array of numbers, got {type(obj).__name__}: {e}") from None
    if arr.dtype.kind not in kinds:
        raise TypeError(f"{name} must be an array of {what}, got dtype {arr.dtype}")
    return arr


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
        rec = getattr(recorder, "active", None)
        if rec is not None:  # kernels.plan is recording this call
            rec.outputs.append(self)
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
