# SPDX-License-Identifier: Apache-2.0
"""The vector value types (``float16x2`` ... ``uint32x4``) under the CUDA simulator.

A value is a ``numpy.record`` of the type's host dtype (fields ``x, y[, z, w]``), so it is stored
into and loaded from arrays of ``float32x2_type`` (``cuda.local.array(n, dtype=float32x2_type)``
gives a record array here) and its elements read as ``.x .y .z .w``, as in kernels. Elements are
converted as they are on the GPU: a float rounds to nearest into float32/float16, truncates
towards zero into uint32 saturating at 0 and 2**32 - 1 (NaN gives 0), an integer wraps into
uint32.
"""

from __future__ import annotations

import numbers

import numpy as np

from .._vector import VectorRecord, VectorType, is_vector_dtype, register


def _ordinal(i: int) -> str:
    return ("1st", "2nd", "3rd", "4th")[i]


def make(spec: VectorType, args: tuple):
    """``spec.make(*args)``: a record of ``spec.dtype`` (TypeError naming the bad argument)."""
    complex_like = spec.count == 2 and spec.scalar.kind == "f"
    if complex_like and len(args) == 1 and isinstance(args[0], (complex, np.complexfloating)):
        args = (args[0].real, args[0].imag)
    if len(args) != spec.count:
        extra = " or one complex number" if complex_like else ""
        raise TypeError(f"{spec.name}() takes {spec.count} numbers ({', '.join(spec.fields)}){extra}, "
                        f"got {len(args)} argument(s)")
    values = []
    for i, (field, arg) in enumerate(zip(spec.fields, args)):
        if isinstance(arg, (bool, np.bool_)) or not isinstance(arg, (numbers.Integral, numbers.Real)):
            raise TypeError(f"{spec.name}(): {field} (the {_ordinal(i)} argument) must be a real number "
                            f"(an integer or a float), got {type(arg).__name__}")
        if spec.scalar.kind == "u" and not isinstance(arg, numbers.Integral):
            # PTX cvt.rzi.u32.f*: towards zero, saturating (NaN -> 0)
            arg = 0 if np.isnan(arg) else np.clip(np.trunc(arg), 0, np.iinfo(spec.scalar).max)
        values.append(arg)
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.zeros(1, dtype=spec.dtype)
        for field, v in zip(spec.fields, values):
            out[field] = np.asarray(v).astype(spec.scalar, casting="unsafe")
    return out[0]


register(make=make)


# ---------------------------------------------------------------- stores, as kernels convert them
def _vname(dtype) -> str:
    from .._vector import _vector_name

    return _vector_name(dtype)


def _complex_like(dtype: np.dtype) -> bool:
    return dtype.names == ("x", "y") and dtype.fields["x"][0].kind == "f"


def convert_store(dtype: np.dtype, value, in_kernel: bool = True):
    """``value`` as a kernel stores it into an array of ``dtype``: numba's CUDA target converts a
    complex number to a two-element float vector (float16x2, float32x2, float64x2) and back (see
    :mod:`nvmath_device._numba.vector`); NumPy knows neither conversion (a complex into a record
    is a TypeError, a record into a complex array too). In a kernel, storing a real number or
    another vector type into a vector array is the TypeError kernels raise at compile time
    (NumPy would copy a real number into every element)."""
    kind = dtype.kind
    if kind == "c":
        if isinstance(value, VectorRecord):
            if not _complex_like(value.dtype):
                raise TypeError(f"cannot store a {_vname(value.dtype)} value into a {dtype} array: only "
                                "float16x2/float32x2/float64x2 values convert to complex numbers")
            return dtype.type(complex(value))
        if isinstance(value, np.ndarray) and is_vector_dtype(value.dtype) and _complex_like(value.dtype):
            return (value["x"] + 1j * value["y"]).astype(dtype)
        return value
    if not is_vector_dtype(dtype):
        return value
    name = _vname(dtype)
    if isinstance(value, np.void):
        if value.dtype != dtype:
            raise TypeError(f"cannot store a {_vname(value.dtype)} value into an array of {name}_type "
                            f"(no conversion between vector types): build a {name}(...)")
        return value
    if isinstance(value, (complex, np.complexfloating)):
        if not _complex_like(dtype):
            raise TypeError(f"cannot store a complex number into an array of {name}_type: only "
                            "float16x2/float32x2/float64x2 convert from complex numbers")
        return (value.real, value.imag)
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "c" and _complex_like(dtype):
            out = np.empty(value.shape, dtype)
            out["x"], out["y"] = value.real, value.imag
            return out
        return value
    if in_kernel and isinstance(value, (numbers.Number, np.number, np.bool_, tuple, list)):
        raise TypeError(f"cannot store {type(value).__name__} {value!r} into an array of {name}_type: "
                        f"kernels store {name} values"
                        + (" or complex numbers" if _complex_like(dtype) else "")
                        + f" (build one with {name}({', '.join(dtype.names)}))")
    return value


class SimArray(np.ndarray):
    """A simulated local or shared array of complex numbers or vectors: stores convert as in
    kernels (:func:`convert_store`)."""

    def __setitem__(self, key, value):
        super().__setitem__(key, convert_store(self.dtype, value))


def sim_array(arr: np.ndarray) -> np.ndarray:
    """``arr`` as a :class:`SimArray` when its dtype is complex or a vector's (else ``arr``)."""
    if arr.dtype.kind == "c" or is_vector_dtype(arr.dtype):
        return arr.view(SimArray)
    return arr
