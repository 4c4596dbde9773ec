# SPDX-License-Identifier: Apache-2.0
"""nvmath_host: cuBLASLt matmul with fused epilogs for the arrays that flow between kernels.

Operands may be Numba device arrays, CuPy arrays, PyTorch CUDA tensors or NumPy arrays; the
result is of the same kind, on the same device, computed on the caller's stream with no hidden
synchronisation. Importing this package loads no CUDA library and imports neither CuPy nor
torch.
"""

from ._algorithm import Algorithm, AlgorithmCapabilities
from ._cpu import CPUExecutionWarning
from ._cublaslt import CublasLtError
from ._function import matmul  # the package's `matmul` is this function, not the module
from ._options import (
    CudaDataType,
    MatmulComputeType,
    MatmulEpilogPreferences,
    MatmulNumericalImplFlags,
    MatmulOptions,
    MatmulPlanPreferences,
    MatmulReductionScheme,
    matrix_qualifiers_dtype,
)
from .epilogs import MatmulEpilog
from .matmul import Matmul

__all__ = [
    "Matmul",
    "matmul",
    "MatmulEpilog",
    "MatmulComputeType",
    "MatmulOptions",
    "MatmulPlanPreferences",
    "MatmulEpilogPreferences",
    "MatmulReductionScheme",
    "MatmulNumericalImplFlags",
    "Algorithm",
    "AlgorithmCapabilities",
    "CudaDataType",
    "matrix_qualifiers_dtype",
    "CublasLtError",
    "CPUExecutionWarning",
]
