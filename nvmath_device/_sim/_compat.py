# SPDX-License-Identifier: Apache-2.0
"""numba-cuda's simulator internals, in one place: the calling block thread and its kernel
context, the ndarray behind a simulated device array, and two patches of the simulator.

The patches make two spellings that
work in device code work in numba-cuda's simulator as well (applied by :func:`install_simulator_compat` when ``nvmath_device`` is
imported with the simulator enabled):

- ``cuda.local.array(n, dtype, alignment=16)`` / ``cuda.shared.array(..., alignment=...)``:
  numba-cuda implements ``alignment=`` on the GPU (NVIDIA/numba-cuda#143) but its simulator
  (0.30.x, ``simulator/kernelapi.py``) raises "Array alignment is not supported in cudasim".
  Our README asks for ``alignment=16`` on real-typed register arrays, so the simulator must take it.
- ``dtype=numpy.complex64`` (a numpy scalar class rather than a ``numpy.dtype``) in
  ``cuda.shared.array(0, ...)``: the simulator reads ``dtype.itemsize`` and fails. The same
  holds for ``ml_dtypes.bfloat16``; ``dtype=numba.cuda.types.bfloat16`` has no NumPy mapping in
  the simulator: both become ``numpy.dtype(ml_dtypes.bfloat16)`` here, the dtype numba-cuda
  gives bfloat16 arrays.
"""

from __future__ import annotations

import struct
import sys
import threading

import numpy as np


def _validate_alignment(alignment) -> None:
    # Same rules as numba-cuda's device-side check (cudaimpl._validate_alignment, 0.30.x).
    if alignment is None:
        return
    if isinstance(alignment, bool) or not isinstance(alignment, (int, np.integer)):
        raise ValueError("Alignment must be an integer")
    if alignment <= 0:
        raise ValueError("Alignment must be positive")
    if alignment & (alignment - 1):
        raise ValueError("Alignment must be a power of 2")
    pointer_size = struct.calcsize("P")
    if alignment % pointer_size:
        raise ValueError(f"Alignment must be a multiple of {pointer_size}")


def _as_dtype(dtype) -> np.dtype:
    from numba.core import types
    from numba.np import numpy_support

    if isinstance(dtype, types.Type):
        if str(dtype) == "__nv_bfloat16":  # numba.cuda.types.bfloat16: no numpy_support mapping
            from .._types import bfloat16_dtype

            return bfloat16_dtype()
        return numpy_support.as_dtype(dtype)
    return np.dtype(dtype)


def _aligned_empty(shape, dtype: np.dtype, alignment) -> np.ndarray:
    if alignment is None:
        return np.empty(shape, dtype)
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = count * dtype.itemsize
    buf = np.empty(nbytes + alignment, dtype=np.uint8)
    offset = (-buf.ctypes.data) % alignment
    return buf[offset : offset + nbytes].view(dtype).reshape(shape)


def _local_array(self, shape, dtype, alignment=None):
    _validate_alignment(alignment)
    return _aligned_empty(shape, _as_dtype(dtype), alignment)


def _shared_array(self, shape, dtype, alignment=None):
    # Same semantics as numba-cuda 0.30.x FakeCUDAShared.array (dynamic shared memory: shape 0,
    # all such arrays alias one buffer; static arrays: one per source line), plus alignment=
    # and numpy scalar classes as dtype.
    _validate_alignment(alignment)
    dtype = _as_dtype(dtype)
    if isinstance(shape, (int, np.integer)) and shape == 0:
        count = self._dynshared_size // dtype.itemsize
        return np.frombuffer(self._dynshared.data, dtype=dtype, count=count)
    frame = sys._getframe(1)
    caller = (frame.f_code.co_filename, frame.f_lineno)
    res = self._allocations.get(caller)
    if res is None:
        res = _aligned_empty(shape, dtype, alignment)
        self._allocations[caller] = res
    return res


_installed = False


def install_simulator_compat() -> None:
    """Let the simulator accept ``alignment=`` and numpy scalar classes as local/shared dtypes.

    Idempotent; does nothing when the simulator is not enabled.
    """
    global _installed
    if _installed:
        return
    from numba.cuda.simulator import kernelapi

    kernelapi.FakeCUDALocal.array = _local_array
    kernelapi.FakeCUDAShared.array = _shared_array
    _installed = True



def kernel_context(what: str):
    """(thread, kernel context) of the calling simulator thread; RuntimeError outside a kernel."""
    from numba.cuda.simulator.kernel import BlockThread, _get_kernel_context

    thread = threading.current_thread()
    ctx = _get_kernel_context()
    if ctx is None or not isinstance(thread, BlockThread):
        raise RuntimeError(f"{what} can only be called inside a @cuda.jit kernel (here: the CUDA simulator)")
    return thread, ctx


def unwrap(x):
    """The ndarray behind a simulator kernel argument (FakeWithinKernelCUDAArray / FakeCUDAArray)."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray, FakeWithinKernelCUDAArray

    if isinstance(x, FakeWithinKernelCUDAArray):
        x = x.__dict__["_item"]
    if isinstance(x, FakeCUDAArray):
        x = x._ary
    return x
