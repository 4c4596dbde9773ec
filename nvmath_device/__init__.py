# SPDX-License-Identifier: Apache-2.0
"""nvmath_device: cuFFTDx FFTs and cuBLASDx GEMMs inside Numba ``@cuda.jit`` kernels.

Public names only. Importing the package picks, once, what runs the descriptors' methods:
numba's CUDA target (the numba layer types and lowers them in kernels) or, under
``NUMBA_ENABLE_CUDASIM=1``, the NumPy simulator.
"""

import os as _os

from . import common_cuda
from ._errors import CompileError, DriverError, LinkError, MathDxError
from ._prepare import prepare
from .fft import FFT
from .gemm import Matmul
from .memory import copy_async, copy_async_commit, copy_async_wait, load_complex, store_complex

__all__ = ["FFT", "Matmul", "MathDxError", "CompileError", "LinkError", "DriverError",
           "load_complex", "store_complex", "copy_async", "copy_async_commit", "copy_async_wait",
           "prepare", "common_cuda"]

if _os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
    from . import _sim  # noqa: E402,F401  (registers the NumPy implementations)
else:
    from . import _numba  # noqa: E402,F401  (registers the numba typing/lowering)
