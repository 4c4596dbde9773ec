# SPDX-License-Identifier: Apache-2.0
"""Transitional re-export of :mod:`mathdx_operands` under the names nvmath_host imports.

nvmath_host's modules import ``from ._operands import ...``; they switch to ``mathdx_operands``
and this module goes. ``_GPU`` stays a seam here until then: tests and
``benchmarks/host_overhead.py`` set ``nvmath_host._operands._GPU`` to pretend there is (or is
not) a GPU; None asks :func:`mathdx_operands.gpu_available`.
"""

from __future__ import annotations

import mathdx_operands as _ops
from mathdx_operands import (
    DTYPES,
    UINT8,
    DType,
    Operand,
    Package,
    dtype_of_name,
    host_array,
    memory_order_bytes,
    numpy_dtype,
    package,
    stream_handle,
    wrap,
)

# private names that nvmath_host, its tests and benchmarks/host_overhead.py reach for
from mathdx_operands import c_strides as _c_strides  # noqa: F401
from mathdx_operands import package_of as _package_of  # noqa: F401
from mathdx_operands import pointer_device as _pointer_device  # noqa: F401
from mathdx_operands._packages import _PACKAGES, _CuPy, _Numba, _Torch  # noqa: F401

__all__ = [
    "DTYPES",
    "UINT8",
    "DType",
    "Operand",
    "Package",
    "dtype_of_name",
    "gpu_available",
    "host_array",
    "memory_order_bytes",
    "numpy_dtype",
    "package",
    "stream_handle",
    "wrap",
]

_GPU = None  # None: ask mathdx_operands; a bool: what tests and benchmarks pretend


def gpu_available() -> bool:
    """Whether a CUDA device can be used (:func:`mathdx_operands.gpu_available` unless ``_GPU``
    is set)."""
    return _ops.gpu_available() if _GPU is None else _GPU
