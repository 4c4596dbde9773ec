# SPDX-License-Identifier: Apache-2.0
"""The simulator: NumPy implementations of the descriptors' methods, with the devices' layouts.

Imported (by ``nvmath_device/__init__.py``) only under NUMBA_ENABLE_CUDASIM=1; importing it
registers the implementations of ``_sim/fft.py`` and ``_sim/gemm.py`` with the descriptors
(:mod:`nvmath_device._dispatch`). Besides, this module makes two spellings that
work in device code work in numba-cuda's simulator as well (applied when ``nvmath_device`` is
imported with the simulator enabled; see :func:`install_simulator_compat`):

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

import os
import struct
import sys

import numpy as np


def running_in_simulator() -> bool:
    """True when numba-cuda's simulator is enabled for this process."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


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
    if _installed or not running_in_simulator():
        return
    from numba.cuda.simulator import kernelapi

    kernelapi.FakeCUDALocal.array = _local_array
    kernelapi.FakeCUDAShared.array = _shared_array
    _installed = True


install_simulator_compat()


def _register() -> None:
    """Give the descriptors their host-side implementations: the NumPy ones of this package."""
    from .. import _dispatch
    from .fft import sim_execute as fft_execute
    from .gemm import sim_copy, sim_execute, sim_fragment_coordinates

    _dispatch.register({"FFT.execute": fft_execute, "Matmul.execute": sim_execute,
                        "Matmul.fragment_coordinates": sim_fragment_coordinates,
                        "Matmul.copy": sim_copy, "prepare": _prepare_gemms}, links_device_code=False)


def _prepare_gemms(mms) -> None:
    """``nvmath_device.prepare`` under the simulator: the GEMMs' register-fragment tables too."""
    if mms:
        from .._build.gemm_sim_tables import prefetch_fragment_tables

        prefetch_fragment_tables(mms)


_register()  # the simulator registers itself when imported
