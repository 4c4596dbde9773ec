# SPDX-License-Identifier: Apache-2.0
"""Numba layer: types, typeof, attributes and execute() lowering. Types and lowers only.

Kept thin so a later move to another Numba CUDA front end is this folder's work.
"""

from . import (
    fft_numba,  # noqa: F401  (registers typing and lowering)
    gemm_numba,  # noqa: F401,E402  (registers typing and lowering)
    memory,  # noqa: F401  (load_complex / store_complex)
)
