# SPDX-License-Identifier: Apache-2.0
"""Value types for host and device, as nvmath-python 1.0's ``nvmath.device.types`` names them.

``complex32``, ``complex64``, ``complex128`` (:class:`Complex`) and ``half2``, ``half4``
(:class:`Vector`) stand for one value type on both sides: ``.dtype`` is the NumPy dtype of host
arrays, and inside a ``@cuda.jit`` kernel the object is a dtype (``cuda.local.array(n,
dtype=complex64)``) of the type our descriptors and kernels use:

========== ============================= ==========================================
object     host dtype (``.dtype``)       in kernels
========== ============================= ==========================================
complex32  ``np_float16x2`` (record x, y) ``float16x2_type`` (no NumPy complex32)
complex64  ``numpy.complex64``           numba ``complex64`` (``FFT``/``Matmul``'s)
complex128 ``numpy.complex128``          numba ``complex128``
half2      ``np_float16x2``              ``float16x2_type``
half4      ``np_float16x4``              ``float16x4_type``
========== ============================= ==========================================

Pure Python: imports no numba (the numba layer registers how these objects type in kernels).
"""

from __future__ import annotations

import warnings

import numpy as np

from ._vector import TYPES as _VECTOR_TYPES

__all__ = [
    "Complex",
    "Vector",
    "complex32",
    "complex64",
    "complex128",
    "half2",
    "half4",
    "np_float16x2",
    "np_float16x4",
    "REAL_NP_TYPES",
    "INT_NP_TYPES",
]

np_float16x2 = _VECTOR_TYPES["float16x2"].dtype
np_float16x4 = _VECTOR_TYPES["float16x4"].dtype

REAL_NP_TYPES: list = [np.float16, np.float32, np.float64]
INT_NP_TYPES: list = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]

_REAL = {np.dtype(t): t for t in REAL_NP_TYPES}


def _real(real_dtype, what: str):
    try:
        dt = np.dtype(real_dtype)
    except TypeError:
        dt = None
    if dt not in _REAL:
        raise ValueError(f"{what}: real_dtype must be numpy.float16, numpy.float32 or numpy.float64, "
                         f"got {real_dtype!r}")
    return _REAL[dt]


class Complex:
    """A complex value type (``complex32``, ``complex64``, ``complex128``).

    NumPy has no complex type of two float16, so ``complex32``'s host dtype is
    :data:`np_float16x2` (a record ``x, y``) and in kernels it is ``float16x2_type``.
    ``complex64`` / ``complex128`` are NumPy's complex dtypes on the host and numba's complex
    types in kernels (the value types of :class:`~nvmath_device.FFT` and
    :class:`~nvmath_device.Matmul`), with their arithmetic and ``.real`` / ``.imag``.

    Parameters
    ----------
    real_dtype : numpy.float16, numpy.float32 or numpy.float64
        The type of the real and the imaginary part.
    """

    def __init__(self, real_dtype):
        self._real_dtype = _real(real_dtype, "Complex")

    @property
    def real_dtype(self):
        """The NumPy type of each part (``numpy.float32`` for complex64)."""
        return self._real_dtype

    @property
    def dtype(self) -> np.dtype:
        """The host NumPy dtype: np_float16x2, numpy.complex64 or numpy.complex128."""
        if self._real_dtype is np.float16:
            return np_float16x2
        return np.dtype(np.complex64 if self._real_dtype is np.float32 else np.complex128)

    @property
    def make(self):
        """Deprecated (as in nvmath-python): the constructor of the two-element vector of
        ``real_dtype`` (``float16x2``, ``float32x2`` or ``float64x2``); its values convert to and
        from the complex type in kernels (``complex(re, im)`` builds one directly)."""
        warnings.warn("Complex.make is deprecated: build values with the numba types directly",
                      DeprecationWarning, stacklevel=2)
        return _VECTOR_TYPES[f"{np.dtype(self._real_dtype).name}x2"].make

    def __repr__(self) -> str:
        return f"nvmath_device.types.complex{np.dtype(self._real_dtype).itemsize * 16}"

    def __eq__(self, other):
        return isinstance(other, Complex) and other._real_dtype is self._real_dtype

    def __hash__(self):
        return hash((Complex, self._real_dtype))


class Vector:
    """A vector value type of float16 (``half2``, ``half4``).

    The host dtype is a record (:data:`np_float16x2` / :data:`np_float16x4`, aligned as
    float16); in kernels ``float16x2_type`` / ``float16x4_type``, aligned to the whole vector.

    Parameters
    ----------
    real_dtype : numpy.float16
        The element type (nvmath-python supports float16 only, so does this).
    size : int
        2 or 4 elements.
    """

    def __init__(self, real_dtype, size):
        if size not in (2, 4):
            raise ValueError(f"Vector: size must be 2 or 4, got {size!r}")
        if _real(real_dtype, "Vector") is not np.float16:
            raise ValueError(f"Vector: real_dtype must be numpy.float16, got {real_dtype!r}")
        self._real_dtype = np.float16
        self._size = size

    @property
    def real_dtype(self):
        """The NumPy element type (numpy.float16)."""
        return self._real_dtype

    @property
    def size(self) -> int:
        """Number of elements (2 or 4)."""
        return self._size

    @property
    def vector_type(self):
        """The vector type in kernels (``float16x2_type`` or ``float16x4_type``)."""
        return _VECTOR_TYPES[f"float16x{self._size}"]

    @property
    def dtype(self) -> np.dtype:
        """The host NumPy dtype (np_float16x2 or np_float16x4)."""
        return self.vector_type.dtype

    @property
    def make(self):
        """Deprecated (as in nvmath-python): the constructor (``float16x2`` / ``float16x4``)."""
        warnings.warn("Vector.make is deprecated: use float16x2 / float16x4 directly",
                      DeprecationWarning, stacklevel=2)
        return self.vector_type.make

    def __repr__(self) -> str:
        return f"nvmath_device.types.half{self._size}"

    def __eq__(self, other):
        return isinstance(other, Vector) and other._size == self._size

    def __hash__(self):
        return hash((Vector, self._size))


complex32 = Complex(np.float16)
complex64 = Complex(np.float32)
complex128 = Complex(np.float64)
half2 = Vector(np.float16, 2)
half4 = Vector(np.float16, 4)
