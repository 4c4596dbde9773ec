# SPDX-License-Identifier: Apache-2.0
"""nvmath_device: cuFFTDx FFTs (and cuBLASDx GEMMs) inside Numba ``@cuda.jit`` kernels."""

from ._errors import CompileError, DriverError, LinkError, MathDxError
from .fft import FFT
from .gemm import Matmul
from .memory import copy_async, copy_async_commit, copy_async_wait, load_complex, store_complex

__all__ = ["FFT", "Matmul", "MathDxError", "CompileError", "LinkError", "DriverError",
           "load_complex", "store_complex", "copy_async", "copy_async_commit", "copy_async_wait"]

from ._sim import running_in_simulator as _in_sim

if not _in_sim():
    from . import _numba  # noqa: E402,F401  (registers the numba typing/lowering; imported last)
