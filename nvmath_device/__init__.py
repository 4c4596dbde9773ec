# SPDX-License-Identifier: Apache-2.0
"""nvmath_device: cuFFTDx FFTs and cuBLASDx GEMMs inside Numba ``@cuda.jit`` kernels.

Public names only. Importing the package picks, once, what runs the descriptors' methods:
numba's CUDA target (the numba layer types and lowers them in kernels) or, under
``NUMBA_ENABLE_CUDASIM=1``, the NumPy simulator.
"""

import os as _os

from . import _vector, common_cuda, random, types
from ._errors import CompileError, DriverError, LinkError, MathDxError
from ._pipeline import DevicePipeline, TilePipeline
from ._prepare import prepare
from ._vector import *  # noqa: F403  (float16x2 ... uint32x4 and their *_type)
from .common import (  # nvmath-python's nvmath.device.common, exported at the top as there
    MAX_ALIGNMENT,
    Accumulator,
    OpaqueTensor,
    Partitioner,
    axpby,
    clear,
    copy,
    copy_fragment,
    copy_wait,
    make_fragment_like,
    make_tensor,
)
from .common_cuda import Dim3, current_device_sm
from .fft import FFT
from .gemm import Matmul
from .memory import copy_async, copy_async_commit, copy_async_wait, load_complex, store_complex
from .types import *  # noqa: F403  (Complex, Vector, complex32 ... half4, np_float16x2 ...)

__all__ = ["FFT", "Matmul", "MathDxError", "CompileError", "LinkError", "DriverError",
           "load_complex", "store_complex", "copy_async", "copy_async_commit", "copy_async_wait",
           "prepare", "common_cuda", "random"]
__all__ += ["types", *_vector.__all__, *types.__all__]  # as nvmath.device exports them
__all__ += ["Dim3", "current_device_sm"]  # nvmath-python's names (nvmath.device.Dim3, ...)
__all__ += ["MAX_ALIGNMENT", "Accumulator", "OpaqueTensor", "Partitioner", "axpby", "clear", "copy",
            "copy_fragment", "copy_wait", "make_fragment_like", "make_tensor"]  # the tensor API
__all__ += ["DevicePipeline", "TilePipeline"]  # cuBLASDx's device/tile pipelines (nvmath.device's names)

if _os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
    from . import _sim  # noqa: E402,F401  (registers the NumPy implementations)
else:
    from . import _numba  # noqa: E402,F401  (registers the numba typing/lowering)
