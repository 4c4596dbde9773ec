# SPDX-License-Identifier: Apache-2.0
"""Lowering of nvmath_device.load_complex / store_complex: complex values as one vector access.

numba lowers ``x[i]`` of a complex64 array as two 4-byte accesses (the real and the imaginary
part; sm_90 SASS: two ``LDG.E`` per value). In a strided access pattern such as cuFFTDx's
register layout that doubles the L1 work per byte. These load the pair as one ``<2 x float>``
(``<2 x double>`` for complex128), aligned to the element size: one ``LDG.E.64``
(``LDG.E.128``) per value.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import types
from numba.core.errors import TypingError
from numba.cuda import cgutils
from numba.cuda.extending import lower_builtin, type_callable

from ..memory import load_complex, store_complex

_COMPLEX = (types.complex64, types.complex128)


def _check(name, ary, index):
    if not isinstance(ary, types.Array) or ary.dtype not in _COMPLEX:
        raise TypingError(f"{name}: the array must be complex64 or complex128, got {ary}")
    if isinstance(index, types.Integer):
        count = 1
    elif isinstance(index, types.BaseTuple) and all(isinstance(t, types.Integer) for t in index.types):
        count = len(index.types)
    else:
        raise TypingError(f"{name}: the index must be an integer or a tuple of integers, got {index}")
    if count != ary.ndim:
        raise TypingError(f"{name}: a {ary.ndim}-D array takes {ary.ndim} indices, got {count}")


def _vector_pointer(context, builder, aryty, ary, idxty, idx):
    """Pointer to element ``idx`` of ``ary``, as a pointer to a 2-vector of its parts."""
    if isinstance(idxty, types.BaseTuple):
        itys = list(idxty.types)
        raw = cgutils.unpack_tuple(builder, idx, len(itys))
    else:
        raw, itys = [idx], [idxty]
    indices = [context.cast(builder, i, t, types.intp) for i, t in zip(raw, itys)]
    arr = context.make_array(aryty)(context, builder, value=ary)
    ptr = cgutils.get_item_pointer(context, builder, aryty, arr, indices, wraparound=False)
    part = ir.FloatType() if aryty.dtype == types.complex64 else ir.DoubleType()
    return builder.bitcast(ptr, ir.VectorType(part, 2).as_pointer())


@type_callable(load_complex)
def _type_load(context):
    def typer(array, index):
        _check("load_complex", array, index)
        return array.dtype

    return typer


@type_callable(store_complex)
def _type_store(context):
    def typer(array, index, value):
        _check("store_complex", array, index)
        if not isinstance(value, (types.Complex, types.Float, types.Integer)):
            raise TypingError(f"store_complex: the value must be a number, got {value}")
        return types.void

    return typer


@lower_builtin(load_complex, types.Array, types.Any)
def _lower_load(context, builder, sig, args):
    aryty, idxty = sig.args
    vec = builder.load(_vector_pointer(context, builder, aryty, args[0], idxty, args[1]),
                       align=aryty.dtype.bitwidth // 8)
    out = context.make_complex(builder, aryty.dtype)
    out.real = builder.extract_element(vec, ir.Constant(ir.IntType(32), 0))
    out.imag = builder.extract_element(vec, ir.Constant(ir.IntType(32), 1))
    return out._getvalue()


@lower_builtin(store_complex, types.Array, types.Any, types.Any)
def _lower_store(context, builder, sig, args):
    aryty, idxty, valty = sig.args
    val = context.make_complex(builder, aryty.dtype, value=context.cast(builder, args[2], valty, aryty.dtype))
    vty = ir.VectorType(val.real.type, 2)
    vec = builder.insert_element(ir.Constant(vty, ir.Undefined), val.real, ir.Constant(ir.IntType(32), 0))
    vec = builder.insert_element(vec, val.imag, ir.Constant(ir.IntType(32), 1))
    builder.store(vec, _vector_pointer(context, builder, aryty, args[0], idxty, args[1]),
                  align=aryty.dtype.bitwidth // 8)
    return context.get_dummy_value()
