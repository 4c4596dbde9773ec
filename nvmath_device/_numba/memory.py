# SPDX-License-Identifier: Apache-2.0
"""Lowering of nvmath_device.load_complex / store_complex (complex values as one vector access)
and copy_async / copy_async_commit / copy_async_wait (PTX ``cp.async``).

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
from numba.cuda.extending import lower_builtin, type_callable

from ..memory import copy_async, copy_async_commit, copy_async_wait, load_complex, store_complex
from ._compat import cgutils

_COMPLEX = (types.complex64, types.complex128)


def _index_count(name, what, index):
    """How many indices ``index`` (an integer or a tuple of integers) holds."""
    if isinstance(index, types.Integer):
        return 1
    if isinstance(index, types.BaseTuple) and all(isinstance(t, types.Integer) for t in index.types):
        return len(index.types)
    raise TypingError(f"{name}: {what} must be an integer or a tuple of integers, got {index}")


def _check(name, ary, index):
    if not isinstance(ary, types.Array) or ary.dtype not in _COMPLEX:
        raise TypingError(f"{name}: the array must be complex64 or complex128, got {ary}")
    count = _index_count(name, "the index", index)
    if count != ary.ndim:
        raise TypingError(f"{name}: a {ary.ndim}-D array takes {ary.ndim} indices, got {count}")


def _item_pointer(context, builder, aryty, ary, idxty, idx):
    """Pointer to element ``idx`` of ``ary`` (no wraparound, no bounds check)."""
    if isinstance(idxty, types.BaseTuple):
        itys = list(idxty.types)
        raw = cgutils.unpack_tuple(builder, idx, len(itys))
    else:
        raw, itys = [idx], [idxty]
    indices = [context.cast(builder, i, t, types.intp) for i, t in zip(raw, itys)]
    arr = context.make_array(aryty)(context, builder, value=ary)
    return cgutils.get_item_pointer(context, builder, aryty, arr, indices, wraparound=False)


def _vector_pointer(context, builder, aryty, ary, idxty, idx):
    """Pointer to element ``idx`` of ``ary``, as a pointer to a 2-vector of its parts."""
    ptr = _item_pointer(context, builder, aryty, ary, idxty, idx)
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


def _element_pointer(context, builder, aryty, ary, idxty, idx, space):
    """Address of element ``idx`` of ``ary`` in address space ``space`` (3 shared, 1 global) as
    an i64. The cast is LLVM's, not PTX's ``cvta`` in the asm: LLVM folds it into the array's own
    shared/global base, so that the element offsets stay constants (one base register and
    immediate offsets for a run of copies, instead of an address computed per copy)."""
    ptr = _item_pointer(context, builder, aryty, ary, idxty, idx)
    return builder.ptrtoint(builder.addrspacecast(ptr, ir.PointerType(ptr.type.pointee, space)), ir.IntType(64))


@type_callable(copy_async)
def _type_copy_async(context):
    def typer(dst, dst_index, src, src_index):
        for what, ary, index in (("dst", dst, dst_index), ("src", src, src_index)):
            if not isinstance(ary, types.Array):
                raise TypingError(f"copy_async: {what} must be an array, got {ary}")
            count = _index_count("copy_async", f"{what}_index", index)
            if count != ary.ndim:
                raise TypingError(f"copy_async: {what} is {ary.ndim}-D and takes {ary.ndim} indices, got {count}")
        if dst.dtype != src.dtype:
            raise TypingError(f"copy_async: dst and src must have the same dtype, got {dst.dtype} and {src.dtype}")
        if getattr(dst.dtype, "bitwidth", 0) // 8 not in (4, 8, 16):
            raise TypingError(f"copy_async: elements must be 4, 8 or 16 bytes (e.g. float32, float64, complex64, "
                              f"complex128), got {dst.dtype}")
        return types.void

    return typer


@type_callable(copy_async_commit)
def _type_commit(context):
    def typer():
        return types.void

    return typer


@type_callable(copy_async_wait)
def _type_wait(context):
    def typer(pending):
        if not isinstance(pending, types.IntegerLiteral) or not 0 <= pending.literal_value <= 7:
            raise TypingError(f"copy_async_wait: pending must be an integer constant from 0 to 7, got {pending}")
        return types.void

    return typer


def _asm(builder, text, args=(), constraints=""):
    fnty = ir.FunctionType(ir.VoidType(), [a.type for a in args])
    builder.call(ir.InlineAsm(fnty, text, constraints, side_effect=True), list(args))


@lower_builtin(copy_async, types.Array, types.Any, types.Array, types.Any)
def _lower_copy_async(context, builder, sig, args):
    dty, dity, sty, sity = sig.args
    dst = _element_pointer(context, builder, dty, args[0], dity, args[1], 3)
    src = _element_pointer(context, builder, sty, args[2], sity, args[3], 1)
    size = dty.dtype.bitwidth // 8
    # shared (32-bit) and global addresses. 16 bytes: .cg, cached in L2 only (data
    # streamed into shared memory has no use in L1, and L1 is what a large shared-memory carveout
    # leaves small); 4 and 8 bytes: .ca, the only form PTX allows for them
    level = "cg" if size == 16 else "ca"
    _asm(builder, "{ .reg .u32 nmdx_s; cvt.u32.u64 nmdx_s, $0;"
         f" cp.async.{level}.shared.global [nmdx_s], [$1], {size}; }}", (dst, src), "l,l,~{memory}")
    return context.get_dummy_value()


@lower_builtin(copy_async_commit)
def _lower_commit(context, builder, sig, args):
    _asm(builder, "cp.async.commit_group;", (), "~{memory}")
    return context.get_dummy_value()


@lower_builtin(copy_async_wait, types.IntegerLiteral)
def _lower_wait(context, builder, sig, args):
    _asm(builder, f"cp.async.wait_group {sig.args[0].literal_value};", (), "~{memory}")
    return context.get_dummy_value()
