# SPDX-License-Identifier: Apache-2.0
"""The tables every layer reads: precisions, value types, architectures and their limits.

The one leaf of the package: it imports nothing of ``nvmath_device``. Each table lives here
and nowhere else.
"""

from __future__ import annotations

import operator
import re

import numpy as np

# ---------------------------------------------------------------------------- architectures
# Compute capabilities cuFFTDx/cuBLASDx 25.6 know (value = major * 10 + minor).
SUPPORTED_SM = (70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121)

_SM_HINT = "an int like 90, a tuple like (9, 0) or a string like 'sm_90'"


def show(value, limit: int = 80) -> str:
    """``repr(value)`` for a message: shortened, and never raising (a huge int's repr does)."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - ValueError for ints past sys.get_int_max_str_digits()
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _as_int(value):
    """``value`` as an int when it is an integer (Python or NumPy, not bool), else None."""
    if isinstance(value, (bool, np.bool_)):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


class SM(int):
    """A target architecture: the int ``90`` for sm_90 (what comparisons, keys and code
    generation use), with nvmath-python's ``ComputeCapability`` fields, since its descriptors'
    ``.sm`` is one: ``major`` (9), ``minor`` (0), ``arch`` (``""``) and ``integer`` (900).
    Prints as ``90``, where nvmath-python's prints ``9.0``."""

    __slots__ = ()

    @property
    def major(self) -> int:
        return int(self) // 10

    @property
    def minor(self) -> int:
        return int(self) % 10

    @property
    def arch(self) -> str:
        return ""

    @property
    def integer(self) -> int:
        return int(self) * 10

    def __reduce__(self):
        return SM, (int(self),)


def parse_sm(sm, argname: str = "sm", current_cc=None) -> int:
    """Normalise ``sm`` to an int like 90 (an :class:`SM`: also ``.major`` ... ``.integer``).

    Accepts 90 (also a NumPy integer), (9, 0), a ComputeCapability (9, 0, "" / "a" / "f"),
    "sm_90", "90", "sm_90a", or None: the current
    GPU, whose ``(major, minor)`` ``current_cc()`` returns (None without a GPU). Messages show
    the value shortened (never the digits of an int too long to print).
    """
    allowed = ", ".join(map(str, SUPPORTED_SM))
    if sm is None:
        cc = current_cc() if current_cc is not None else None
        if cc is None:
            raise ValueError(
                f"{argname}=None means 'the current GPU', but no CUDA GPU/driver is available here; "
                f"pass {argname} explicitly, e.g. {argname}=90 (allowed: {allowed})"
            )
        value = cc[0] * 10 + cc[1]
    elif _as_int(sm) is not None:
        value = _as_int(sm)
    elif (isinstance(sm, tuple) and len(sm) in (2, 3) and all(_as_int(x) is not None for x in sm[:2])
          and (len(sm) == 2 or sm[2] in ("", "a", "f"))):  # (9, 0) or a ComputeCapability (9, 0, "a")
        major, minor = (_as_int(x) for x in sm[:2])
        value = major * 10 + minor
    elif isinstance(sm, str):
        m = re.fullmatch(r"(?:sm_|compute_)?(\d+)a?", sm.strip().lower())
        if not m:
            raise ValueError(f"{argname}={show(sm)} is not an architecture string; use e.g. 'sm_90'")
        digits = m.group(1).lstrip("0") or "0"
        value = int(digits) if len(digits) <= 4 else None  # int() of thousands of digits raises
    else:
        raise TypeError(f"{argname} must be {_SM_HINT}, got {show(sm)}")
    if value not in SUPPORTED_SM:
        raise ValueError(f"{argname}={show(sm)} is not supported; allowed: {allowed}")
    return SM(value)


# ---------------------------------------------------------------------------- value types
def bfloat16_dtype() -> np.dtype:
    """``numpy.dtype(ml_dtypes.bfloat16)``: the value type of bfloat16 GEMM operands.

    NumPy has no bfloat16; ml_dtypes provides one, and numba-cuda types arrays of it as its own
    ``bfloat16`` (``numba.cuda.types.bfloat16``, C++ ``__nv_bfloat16``).
    """
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - ml_dtypes is a dependency
        raise ImportError(
            "bfloat16 precision needs the ml_dtypes package (pip install ml_dtypes): NumPy has no "
            "bfloat16 dtype, and numba-cuda types ml_dtypes.bfloat16 arrays as bfloat16"
        ) from None
    return np.dtype(ml_dtypes.bfloat16)


def precision_dtype(name: str) -> np.dtype:
    """The NumPy dtype of a precision name ("float16", "bfloat16", "float32", "float64")."""
    return bfloat16_dtype() if name == "bfloat16" else np.dtype(name)


def complex_dtype(real: np.dtype) -> np.dtype:
    """complex64 for a 4-byte real type, complex128 for an 8-byte one."""
    return np.dtype(np.complex64 if np.dtype(real).itemsize == 4 else np.complex128)


# ---------------------------------------------------------------------------- FFT (cuFFTDx)
# precision dtype -> cuFFTDx's database tag
FFT_PRECISIONS = {np.dtype(np.float16): "fp16", np.dtype(np.float32): "fp32", np.dtype(np.float64): "fp64"}
# precision name -> cuFFTDx's Precision<> type
FFT_CPP_TYPES = {"float16": "__half", "float32": "float", "float64": "double"}
# precision name -> database tag (the file names of the codelets and records)
FFT_PRECISION_TAGS = {dt.name: tag for dt, tag in FFT_PRECISIONS.items()}
# Architecture whose records an SM uses (cufftdx/database/detail/block_fft.hpp forwards these).
FFT_RECORD_ARCH = {70: 700, 72: 700, 75: 750, 80: 800, 86: 700, 87: 800, 89: 890, 90: 900,
                   100: 1000, 101: 1000, 103: 1000, 120: 1200, 121: 1200}
# cufftdx/detail/fft_sizes.hpp: largest Block FFT per SM and precision (fp16, fp32, fp64).
FFT_BLOCK_MAX = {
    70: (24389, 24389, 12167), 72: (24389, 24389, 12167), 75: (16384, 16384, 8192),
    80: (32768, 32768, 16384), 86: (24389, 24389, 12167), 87: (32768, 32768, 16384),
    89: (24389, 24389, 12167), 90: (32768, 32768, 16384), 100: (32768, 32768, 16384),
    101: (32768, 32768, 16384), 103: (32768, 32768, 16384), 120: (24389, 24389, 12167),
    121: (24389, 24389, 12167),
}
FFT_PRECISION_INDEX = {"fp16": 0, "fp32": 1, "fp64": 2}
# Largest Thread FFT per precision tag.
FFT_THREAD_MAX = {"fp16": 64, "fp32": 64, "fp64": 40}

# ---------------------------------------------------------------------------- GEMM (cuBLASDx)
# precision name -> (cuBLASDx's Precision<> type, bytes). bfloat16 has no NumPy dtype: its
# value type is bfloat16_dtype().
GEMM_PRECISIONS = {
    "float16": ("__half", 2), "bfloat16": ("__nv_bfloat16", 2),
    "float32": ("float", 4), "float64": ("double", 8),
    "int8": ("int8_t", 1), "uint8": ("uint8_t", 1), "int16": ("int16_t", 2), "uint16": ("uint16_t", 2),
    "int32": ("int32_t", 4), "uint32": ("uint32_t", 4), "int64": ("int64_t", 8), "uint64": ("uint64_t", 8),
}
# names of numba's scalar types (numba.float32, numba.cuda.types.bfloat16, ...) -> precision name
NUMBA_PRECISION_NAMES = {"float16": "float16", "__nv_bfloat16": "bfloat16", "float32": "float32",
                         "float64": "float64", **{t: t for t in ("int8", "uint8", "int16", "uint16", "int32",
                                                                 "uint32", "int64", "uint64")}}
# Bytes of shared memory one block may use, per architecture (cuBLASDx's commondx::device_info).
SHARED_MEMORY_LIMIT = {
    70: 96 * 1024, 72: 96 * 1024, 75: 64 * 1024, 80: 163 * 1024, 86: 99 * 1024, 87: 163 * 1024,
    89: 99 * 1024, 90: 227 * 1024, 100: 227 * 1024, 101: 227 * 1024, 103: 227 * 1024,
    120: 99 * 1024, 121: 99 * 1024,
}
