# SPDX-License-Identifier: Apache-2.0
"""The numba layer: types, typing and lowering of the descriptors' methods in kernels, linking
of their LTO-IR. Imported (by ``nvmath_device/__init__.py``) when the simulator is off.

numba-cuda's internals are used only through :mod:`._compat`, so that another numba CUDA front
end (numba-cuda-mlir) is this folder's work.
"""

from . import (
    fft_numba,  # noqa: F401  (registers typing and lowering)
    gemm_numba,  # noqa: F401,E402  (registers typing and lowering)
    layouts_numba,  # noqa: F401  (cuBLASDx Layouts in kernels, MM.get_layout_*())
    memory,  # noqa: F401  (load_complex / store_complex)
    pipeline_numba,  # noqa: F401  (DevicePipeline arguments, get_tile / reset_tile / TilePipeline.execute)
    random_numba,  # noqa: F401  (nvmath_device.random: States arguments, cuRAND calls)
    tensor_numba,  # noqa: F401  (nvmath_device.common: tensors, copies, partitioners, tensor execute)
    vector,  # noqa: F401  (float16x2 ... uint32x4, nvmath_device.types in kernels)
)
from ._compat import compile_kernel_library, linked_cubin  # the face nvmath_device.aot uses

__all__ = ["compile_kernel_library", "linked_cubin"]
