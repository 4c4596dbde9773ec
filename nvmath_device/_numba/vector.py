# SPDX-License-Identifier: Apache-2.0
"""Typing and lowering of the vector value types (``float16x2`` ... ``uint32x4``) and of the
``nvmath_device.types`` objects in kernels.

A vector value is one LLVM vector register (``<2 x float>`` for float32x2; float16 elements are
numba-cuda's ``i16``), so an array of vectors is loaded and stored one vector access per element
(``ld.v2.f32``), aligned to the vector's size. As in nvmath-python 1.0 the elements are
read-only (``.x .y .z .w``), a two-element float vector converts implicitly to and from numba's
complex types (so ``v / 4`` is complex arithmetic and storing a complex into a float32x2 array
converts it), and the types are numbers (``types.number_domain``), hence local/shared array
dtypes.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import types
from numba.core.errors import TypingError
from numba.core.typeconv import Conversion
from numba.cuda import types as cuda_types
from numba.cuda.extending import (
    core_models,
    infer_getattr,
    lower_builtin,
    lower_cast,
    lower_getattr_generic,
    lower_setattr_generic,
    register_model,
    type_callable,
    typeof_impl,
)

from .._vector import CONSTRUCTORS, TYPES, VectorType, register
from ..types import Complex, Vector
from ._compat import AttributeTemplate, lower_constant

_SCALARS = {"float16": types.float16, "float32": types.float32, "float64": types.float64,
            "uint32": types.uint32}


class VectorNumbaType(types.Number):
    """The numba type of one vector value (``float32x2`` ...)."""

    def __init__(self, spec: VectorType):
        self.spec = spec
        self.dtype = _SCALARS[spec.scalar.name]
        self.count = spec.count
        self.bitwidth = spec.itemsize * 8
        super().__init__(name=spec.name)

    @property
    def is_complex_like(self) -> bool:
        """Two floats: converts to and from numba's complex types (nvmath-python's rule)."""
        return self.count == 2 and isinstance(self.dtype, types.Float)

    def can_convert_from(self, typingctx, other):
        if self.is_complex_like and isinstance(other, types.Complex):
            if other.bitwidth == self.bitwidth:
                return Conversion.exact
            return Conversion.safe if other.bitwidth < self.bitwidth else Conversion.unsafe
        return None

    def can_convert_to(self, typingctx, other):
        if self.is_complex_like and isinstance(other, types.Complex):
            if other.bitwidth == self.bitwidth:
                return Conversion.exact
            return Conversion.safe if other.bitwidth > self.bitwidth else Conversion.unsafe
        return None


class VectorClass(types.NumberClass):
    """``float32x2_type`` in a kernel: a dtype, and called, the constructor."""

    def get_impl_key(self, sig):
        return CONSTRUCTORS[self.instance_type.spec.name]


NUMBA_TYPES = {name: VectorNumbaType(spec) for name, spec in TYPES.items()}
BY_CONSTRUCTOR = {CONSTRUCTORS[name]: ty for name, ty in NUMBA_TYPES.items()}

# Numbers: cuda.local.array / cuda.shared.array take only dtypes of number_domain (numba-cuda's
# cudaimpl._generic_array reads both its own and numba's set).
_new = frozenset(NUMBA_TYPES.values())
cuda_types.number_domain = cuda_types.number_domain | _new
types.number_domain = types.number_domain | _new


def _llvm_vector(ty: VectorNumbaType, context) -> ir.VectorType:
    return ir.VectorType(context.get_value_type(ty.dtype), ty.count)


@register_model(VectorNumbaType)
class _VectorModel(core_models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        scalar = dmm[fe_type.dtype].get_value_type()
        super().__init__(dmm, fe_type, ir.VectorType(scalar, fe_type.count))


register_model(VectorClass)(core_models.OpaqueModel)


@lower_constant(VectorClass)
def _lower_class(context, builder, ty, pyval):
    return context.get_dummy_value()


# ---------------------------------------------------------------- Python objects in kernels
@typeof_impl.register(VectorType)
def _typeof_vector_type(val, c):
    return VectorClass(NUMBA_TYPES[val.name])


@typeof_impl.register(Complex)
def _typeof_complex(val, c):
    return types.NumberClass(numba_type_of(val))


@typeof_impl.register(Vector)
def _typeof_vector(val, c):
    return types.NumberClass(numba_type_of(val))


def numba_type_of(obj):
    """The numba value type of a ``nvmath_device.types`` object (Complex / Vector) or a
    :class:`~nvmath_device._vector.VectorType`."""
    if isinstance(obj, VectorType):
        return NUMBA_TYPES[obj.name]
    if isinstance(obj, Complex):
        if obj.real_dtype == np.float16:
            return NUMBA_TYPES["float16x2"]
        return types.complex64 if obj.real_dtype == np.float32 else types.complex128
    return NUMBA_TYPES[obj.vector_type.name]


register(numba_type=numba_type_of)


# ---------------------------------------------------------------- construction
_ORDINAL = ("1st", "2nd", "3rd", "4th")


def _check_args(ty: VectorNumbaType, args) -> None:
    name, fields = ty.spec.name, ty.spec.fields
    if ty.is_complex_like and len(args) == 1 and isinstance(args[0], types.Complex):
        return
    if len(args) != ty.count:
        extra = " or one complex number" if ty.is_complex_like else ""
        raise TypingError(f"{name}() takes {ty.count} numbers ({', '.join(fields)}){extra}, "
                          f"got {len(args)} argument(s)")
    for i, (field, arg) in enumerate(zip(fields, args)):
        if not isinstance(arg, (types.Integer, types.Float)) or isinstance(arg, types.Boolean):
            raise TypingError(f"{name}(): {field} (the {_ORDINAL[i]} argument) must be a real "
                              f"number (an integer or a float), got {arg}")


def _make_typer(ty: VectorNumbaType):
    def typer(x, y=None, z=None, w=None):
        args = [a for a in (x, y, z, w) if a is not None]
        _check_args(ty, args)
        return ty

    return typer


def _build(context, builder, ty: VectorNumbaType, values, valtys):
    vec = ir.Constant(_llvm_vector(ty, context), ir.Undefined)
    for i, (v, vty) in enumerate(zip(values, valtys)):
        v = context.cast(builder, v, vty, ty.dtype)
        vec = builder.insert_element(vec, v, ir.Constant(ir.IntType(32), i))
    return vec


def _from_complex(context, builder, cty, ty: VectorNumbaType, value):
    cplx = context.make_complex(builder, cty, value=value)
    part = cty.underlying_float
    return _build(context, builder, ty, (cplx.real, cplx.imag), (part, part))


def _lower_constructor(context, builder, sig, args):
    ty = sig.return_type
    if len(args) == 1 and isinstance(sig.args[0], types.Complex):
        return _from_complex(context, builder, sig.args[0], ty, args[0])
    return _build(context, builder, ty, args, sig.args)


for _ctor, _ty in BY_CONSTRUCTOR.items():
    type_callable(_ctor)(lambda context, _ty=_ty: _make_typer(_ty))
    lower_builtin(_ctor, types.VarArg(types.Any))(_lower_constructor)


@infer_getattr
class _VectorClassAttrs(AttributeTemplate):
    key = VectorClass

    def resolve___call__(self, classty):
        return self.context.resolve_value_type(CONSTRUCTORS[classty.instance_type.spec.name])


# ---------------------------------------------------------------- elements and conversions
@infer_getattr
class _VectorAttrs(AttributeTemplate):
    key = VectorNumbaType

    def generic_resolve(self, ty, attr):
        if attr in ty.spec.fields:
            return ty.dtype
        return None


@lower_getattr_generic(VectorNumbaType)
def _lower_element(context, builder, ty, val, attr):
    return builder.extract_element(val, ir.Constant(ir.IntType(32), ty.spec.fields.index(attr)))


@lower_cast(types.Complex, VectorNumbaType)
def _cast_from_complex(context, builder, fromty, toty, val):
    return _from_complex(context, builder, fromty, toty, val)


@lower_cast(VectorNumbaType, types.Complex)
def _cast_to_complex(context, builder, fromty, toty, val):
    out = context.make_complex(builder, toty)
    part = toty.underlying_float
    for i, field in enumerate(("real", "imag")):
        elem = builder.extract_element(val, ir.Constant(ir.IntType(32), i))
        setattr(out, field, context.cast(builder, elem, fromty.dtype, part))
    return out._getvalue()


@lower_setattr_generic(VectorNumbaType)
def _refuse_setattr(context, builder, sig, args, attr):
    ty = sig.args[0]
    raise TypingError(f"{ty.spec.name}.{attr} is read-only (as in nvmath-python): build a new value, "
                      f"e.g. v = {ty.spec.name}({', '.join(ty.spec.fields)})")


# ---------------------------------------------------------------- complex(v)
@type_callable(complex)
def _type_complex_of_vector(context):
    """``complex(v)`` of a two-element float vector: a complex128, as Python's ``complex()`` of
    the simulator's value (numba's own ``complex`` template takes real numbers only)."""

    def typer(real, imag=None):
        if isinstance(real, VectorNumbaType) and real.is_complex_like and imag is None:
            return types.complex128
        return None

    return typer


@lower_builtin(complex, VectorNumbaType)
def _lower_complex_of_vector(context, builder, sig, args):
    ty = sig.args[0]
    if not ty.is_complex_like:
        # numba's own complex() template takes every number_domain type, ours among them: refuse
        # what the simulator's value refuses (only float16x2/float32x2/float64x2 are complex)
        raise TypingError(f"complex() of a {ty.spec.name} value: only float16x2, float32x2 and "
                          "float64x2 convert to complex numbers")
    return _cast_to_complex(context, builder, ty, sig.return_type, args[0])
