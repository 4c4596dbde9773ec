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

from .._vector import VectorType, register


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
