# SPDX-License-Identifier: Apache-2.0
"""Typing and lowering of nvmath_device.common's tensor API and of the partitioners/accumulators.

- A tensor (:class:`OpaqueTensorType`) is its buffer array plus a compile-time Layout: the
  numba value is a struct holding the array; the layout lives in the type.
- ``copy``, ``copy_fragment``, the tensor ``execute`` and the partitioner queries call one
  ``extern "C"`` function each, from a unit of :mod:`nvmath_device._build.tensor_codegen`
  (:class:`nvmath_device._tensor_code.TensorOp` is what is linked).
- ``clear``, ``axpby``, ``make_fragment_like``, fragment indexing are Numba code on the buffer.
- An accumulator (:class:`AccumulatorType`) is a register fragment made when
  ``MM.get_accumulator()`` / ``MM.suggest_accumulator()`` runs in the kernel, cleared to zero.
"""

from __future__ import annotations

import operator

from llvmlite import ir
from numba.core import types
from numba.core.errors import TypingError
from numba.cuda.extending import (
    core_models,
    infer_getattr,
    lower_builtin,
    lower_getattr,
    register_model,
    type_callable,
    typeof_impl,
)

from .. import common
from .._layouts import Layout
from .._partitioners import Accumulator, Partitioner
from .._tensor_code import TensorOp
from .._types import NUMBA_PRECISION_NAMES
from ._compat import (
    AbstractTemplate,
    AttributeTemplate,
    cgutils,
    local_array,
    lower_constant,
    signature,
)
from .common import DescriptorType, call_extern, data_pointer
from .gemm_numba import TENSOR_EXECUTE, MatmulType, _scalar_pointer, _tname, _value_types
from .layouts_numba import LayoutType
from .vector import VectorNumbaType

_ALIGNMENTS = (1, 2, 4, 8, 16)


# ---------------------------------------------------------------------------- types
class OpaqueTensorType(types.Type):
    """A tensor: a buffer array (global, shared or local) seen through one cuBLASDx Layout."""

    def __init__(self, layout: Layout, buffer: types.Array):
        self.layout = layout
        self.buffer = buffer
        super().__init__(name=f"OpaqueTensor({layout.name}({layout.leading_dimension or ''}) of "
                              f"{layout.descriptor.size}, {buffer})")

    @property
    def key(self):
        return (self.layout, self.buffer)

    @property
    def dtype(self):
        return self.buffer.dtype

    @property
    def memory(self) -> str:
        return self.layout.memory


@register_model(OpaqueTensorType)
class _TensorModel(core_models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("buffer", fe_type.buffer)])


class PartitionerType(DescriptorType):
    """A partitioner (stateless: which descriptor, which fragment layout)."""

    def __init__(self, partitioner: Partitioner):
        super().__init__(partitioner, "Partitioner")

    @property
    def layout(self) -> Layout:
        return self.descriptor.layout


register_model(PartitionerType)(core_models.OpaqueModel)


@lower_constant(PartitionerType)
def _lower_partitioner_constant(context, builder, ty, pyval):
    return context.get_dummy_value()  # a captured partitioner is its type: nothing to hold


class AccumulatorType(types.Type):
    """An accumulator: a register fragment of C (its buffer) plus its partitioner."""

    def __init__(self, accumulator: Accumulator):
        self.accumulator = accumulator
        mm = accumulator.descriptor
        self.buffer = types.Array(_value_types(mm)[2], 1, "C")
        super().__init__(name=f"Accumulator({accumulator!r})")

    @property
    def key(self):
        return self.accumulator

    @property
    def layout(self) -> Layout:
        return self.accumulator.layout


@register_model(AccumulatorType)
class _AccumulatorModel(core_models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("buffer", fe_type.buffer)])


@typeof_impl.register(Partitioner)
def _typeof_partitioner(val, c):
    if isinstance(val, Accumulator):
        raise TypingError(f"{val!r} is used as a global or closure variable of a kernel: an accumulator holds "
                          f"registers of the thread, so make it inside the kernel (MM.get_accumulator() or "
                          f"MM.suggest_accumulator()); a Partitioner can be captured")
    return PartitionerType(val)


# ---------------------------------------------------------------------------- helpers
def _dtype_name(t) -> str | None:
    """The dtype name of a numba element type for tensor_codegen, or None if not a tensor element."""
    if isinstance(t, VectorNumbaType):
        return "complex32" if str(t).startswith("float16x2") else None
    if t in (types.complex64, types.complex128):
        return str(t)
    return NUMBA_PRECISION_NAMES.get(str(t))


def _is_complex(t) -> bool:
    return isinstance(t, (types.Complex, VectorNumbaType))


def _desc(t: OpaqueTensorType):
    """(layout name, leading dimension, dtype name) of a tensor type: what a TensorOp records."""
    return (t.layout.name, t.layout.leading_dimension, _dtype_name(t.dtype))


def _where(t) -> str:
    lay = t.layout
    return {"gmem": "global", "smem": "shared", "rmem": "register"}[lay.memory] + f" {lay.operand.upper()}"


def _alignment_value(fn, alignment, dtype):
    """The alignment argument's value (None: the default), or raise naming what is allowed."""
    if alignment is None or isinstance(alignment, (types.NoneType, types.Omitted)):
        return None
    if isinstance(alignment, types.IntegerLiteral):
        v = alignment.literal_value
        size = dtype.bitwidth // 8 if hasattr(dtype, "bitwidth") else 1
        if v not in _ALIGNMENTS or v < size:
            raise TypingError(f"{fn}: alignment must be one of {_ALIGNMENTS} bytes and at least the element "
                              f"size ({size} bytes of {_tname(dtype)}), got {v}")
        return v
    raise TypingError(f"{fn}: alignment must be a compile-time integer constant (1, 2, 4, 8 or 16) or "
                      f"None, got {alignment}")


def _tensor_arg(fn, what, t, memories=None):
    if isinstance(t, AccumulatorType):
        raise TypingError(f"{fn}: {what} is an accumulator; pass accumulator.get_results() (its fragment)")
    if not isinstance(t, OpaqueTensorType):
        raise TypingError(f"{fn}: {what} must be a tensor (nvmath_device.common.make_tensor(array, layout)), got {t}")
    if memories is not None and t.memory not in memories:
        names = {"gmem": "global", "smem": "shared", "rmem": "register"}
        raise TypingError(f"{fn}: {what} must be a {' or '.join(names[m] for m in memories)}-memory tensor, "
                          f"got a {names[t.memory]}-memory tensor of layout {t.layout.name}")
    return t


def _fragment_type(layout: Layout, dtype) -> OpaqueTensorType:
    return OpaqueTensorType(layout, types.Array(dtype, 1, "C"))


def _new_fragment(context, builder, tensor_type: OpaqueTensorType, clear: bool = False):
    """A new register fragment value (storage in the thread's local memory)."""
    n = tensor_type.layout.cosize
    ary = local_array(context, builder, tensor_type.dtype, n, alignment=16)
    if clear:
        _clear_buffer(context, builder, tensor_type.buffer, ary, n)
    st = cgutils.create_struct_proxy(tensor_type)(context, builder)
    st.buffer = ary
    return st._getvalue()


def _buffer(context, builder, ty, val):
    """The buffer array value of a tensor or accumulator value."""
    return cgutils.create_struct_proxy(ty)(context, builder, value=val).buffer


def _clear_buffer(context, builder, arrty, ary, n):
    dt = arrty.dtype

    def impl(buf):
        for i in range(n):
            buf[i] = dt(0)

    context.compile_internal(builder, impl, types.none(arrty), [ary])


def _int_out(context, builder):
    return cgutils.alloca_once(builder, ir.IntType(32))


def _int_in(context, builder, ty, val):
    v = context.cast(builder, val, ty, types.int32)
    return cgutils.alloca_once_value(builder, v)


# ---------------------------------------------------------------------------- make_tensor
@type_callable(common.make_tensor)
def _type_make_tensor(context):
    def typer(array, layout):
        fn = "make_tensor"
        if not isinstance(layout, LayoutType):
            raise TypingError(f"{fn}: layout (2nd argument) must be a Layout of a Matmul "
                              f"(MM.get_layout_*() / MM.suggest_layout_*()), got {layout}")
        lay = layout.descriptor
        if not isinstance(array, types.Array):
            raise TypingError(f"{fn}: array (1st argument) must be an array (global, shared or local memory), "
                              f"got {array}")
        mm = lay.descriptor
        idx = "abc".index(lay.operand)
        vt = _value_types(mm)[idx]
        if _dtype_name(array.dtype) is None:
            raise TypingError(f"{fn}: array (1st argument) holds {array.dtype}, which no cuBLASDx tensor holds "
                              f"(real: float16, bfloat16, float32, float64, int8..uint64; complex: complex64, "
                              f"complex128, float16x2)")
        if _is_complex(array.dtype) != _is_complex(vt):
            raise TypingError(f"{fn}: array (1st argument) holds {_tname(array.dtype)} but {lay.operand.upper()} "
                              f"of this GEMM is {'complex' if _is_complex(vt) else 'real'} "
                              f"(MM.{lay.operand}_value_type {_tname(vt)})")
        if lay.memory == "gmem":
            if array.ndim not in (1, 2):
                raise TypingError(f"{fn}: a global-memory array must be 1-D or 2-D, got {array}")
            arrangement = mm.arrangement[idx]
            if array.ndim == 2 and array.layout in ("C", "F"):
                want = "C" if arrangement == "row_major" else "F"
                if array.layout != want:
                    raise TypingError(
                        f"{fn}: {lay.operand.upper()} is {arrangement}, so its 2-D global array must be "
                        f"{'C' if want == 'C' else 'F (Fortran)'}-contiguous, got a {array.layout}-contiguous "
                        f"array (the layout addresses element (i, j) at its own leading dimension, "
                        f"{lay.leading_dimension}, not at the array's strides)")
        elif array.ndim != 1:
            where = "shared" if lay.memory == "smem" else "register (local)"
            raise TypingError(f"{fn}: a {where}-memory buffer must be a 1-D array of layout.cosize "
                              f"({lay.cosize}) elements, got {array}")
        return OpaqueTensorType(lay, array)

    return typer


@lower_builtin(common.make_tensor, types.Array, LayoutType)
def _lower_make_tensor(context, builder, sig, args):
    st = cgutils.create_struct_proxy(sig.return_type)(context, builder)
    st.buffer = args[0]
    return st._getvalue()


# ---------------------------------------------------------------------------- tensor attributes, indexing
@infer_getattr
class _TensorAttrs(AttributeTemplate):
    key = OpaqueTensorType

    def resolve_layout(self, ty):
        return LayoutType(ty.layout)

    def resolve_buffer(self, ty):
        return ty.buffer


@lower_getattr(OpaqueTensorType, "layout")
def _lower_tensor_layout(context, builder, ty, val):
    return context.get_dummy_value()


@lower_getattr(OpaqueTensorType, "buffer")
def _lower_tensor_buffer(context, builder, ty, val):
    return _buffer(context, builder, ty, val)


def _check_indexable(t):
    if t.memory != "rmem":
        raise TypingError(f"a {_where(t)} tensor is opaque (its layout may be swizzled): index its buffer "
                          f"through the layout in C++, or use copy / copy_fragment; only register fragments "
                          f"take t[i]")
    if t.layout.size != t.layout.cosize:
        raise TypingError(f"register fragment of layout {t.layout.name} is not compact "
                          f"(size {t.layout.size}, cosize {t.layout.cosize}): index its buffer instead")


@type_callable(operator.getitem)
def _type_getitem(context):
    def typer(t, i):
        if isinstance(t, OpaqueTensorType) and isinstance(i, types.Integer):
            _check_indexable(t)
            return t.dtype
        return None

    return typer


@type_callable(operator.setitem)
def _type_setitem(context):
    def typer(t, i, v):
        if isinstance(t, OpaqueTensorType) and isinstance(i, types.Integer):
            _check_indexable(t)
            return types.none
        return None

    return typer


@lower_builtin(operator.getitem, OpaqueTensorType, types.Integer)
def _lower_getitem(context, builder, sig, args):
    t, ity = sig.args
    buf = _buffer(context, builder, t, args[0])
    return context.compile_internal(builder, lambda b, i: b[i], t.dtype(t.buffer, ity), [buf, args[1]])


@lower_builtin(operator.setitem, OpaqueTensorType, types.Integer, types.Any)
def _lower_setitem(context, builder, sig, args):
    t, ity, vty = sig.args
    buf = _buffer(context, builder, t, args[0])
    dt = t.dtype

    def impl(b, i, v):
        b[i] = dt(v)

    return context.compile_internal(builder, impl, types.none(t.buffer, ity, vty), [buf, args[1], args[2]])


# ---------------------------------------------------------------------------- copy, copy_fragment
@type_callable(common.copy)
def _type_copy(context):
    def typer(src, dst, alignment=None):
        fn = "copy"
        _tensor_arg(fn, "src (1st argument)", src, ("gmem", "smem"))
        _tensor_arg(fn, "dst (2nd argument)", dst, ("gmem", "smem"))
        if {src.memory, dst.memory} != {"gmem", "smem"}:
            raise TypingError(f"{fn}: copies one operand between global and shared memory (either direction); "
                              f"got {_where(src)} -> {_where(dst)}")
        if src.layout.descriptor != dst.layout.descriptor or src.layout.operand != dst.layout.operand:
            raise TypingError(f"{fn}: src and dst must be layouts of the same operand of the same Matmul, got "
                              f"{_where(src)} -> {_where(dst)}")
        if src.dtype != dst.dtype:
            raise TypingError(f"{fn}: src and dst must hold the same element type, got {_tname(src.dtype)} -> "
                              f"{_tname(dst.dtype)}")
        _alignment_value(fn, alignment, src.dtype)  # a non-literal int is refused; numba retries with its literal
        return types.none

    return typer


@type_callable(common.copy_fragment)
def _type_copy_fragment(context):
    def typer(src, dst, alignment=None):
        fn = "copy_fragment"
        _tensor_arg(fn, "src (1st argument)", src)
        _tensor_arg(fn, "dst (2nd argument)", dst)
        mems = (src.memory, dst.memory)
        if mems.count("rmem") != 1:
            raise TypingError(f"{fn}: copies between a register fragment and a C tensor in global or shared "
                              f"memory (either direction); got {_where(src)} -> {_where(dst)}")
        other = dst if src.memory == "rmem" else src
        if other.layout.operand != "c":
            raise TypingError(f"{fn}: the memory tensor must be a C tensor (get_layout_gmem_c, "
                              f"get/suggest_layout_smem_c), got {other.layout.name}")
        if src.layout.descriptor != dst.layout.descriptor:
            raise TypingError(f"{fn}: src and dst must be layouts of the same Matmul")
        if src.dtype != dst.dtype:
            raise TypingError(f"{fn}: src and dst must hold the same element type, got {_tname(src.dtype)} -> "
                              f"{_tname(dst.dtype)} (make the fragment with make_fragment_like(fragment, dtype) "
                              f"or accumulator.make_partition_and_copy(tensor))")
        _alignment_value(fn, alignment, src.dtype)
        return types.none

    return typer


def _lower_tensor_op(kind):
    def lower(context, builder, sig, args):
        src, dst = sig.args[:2]
        alignment = sig.args[2].literal_value if len(sig.args) > 2 and isinstance(
            sig.args[2], types.IntegerLiteral) else None
        op = TensorOp(src.layout.descriptor, kind, (_desc(src), _desc(dst)), alignment)
        ptrs = [data_pointer(context, builder, t.buffer, _buffer(context, builder, t, v))
                for t, v in zip((src, dst), args[:2])]
        call_extern(context, builder, op, op.symbol, ptrs)
        return context.get_dummy_value()

    return lower


for _fn, _kind in ((common.copy, "copy"), (common.copy_fragment, "copy_fragment")):
    lower_builtin(_fn, OpaqueTensorType, OpaqueTensorType)(_lower_tensor_op(_kind))
    lower_builtin(_fn, OpaqueTensorType, OpaqueTensorType, types.Any)(_lower_tensor_op(_kind))


# ---------------------------------------------------------------------------- copy_wait
@type_callable(common.copy_wait)
def _type_copy_wait(context):
    def typer():
        return types.none

    return typer


@lower_builtin(common.copy_wait)
def _lower_copy_wait(context, builder, sig, args):
    # cuBLASDx's copy_wait: cp.async commit + wait for all groups, then the block barrier
    asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []),
                       "cp.async.commit_group;\n\tcp.async.wait_group 0;\n\tbar.sync 0;", "~{memory}",
                       side_effect=True)
    builder.call(asm, [])
    return context.get_dummy_value()


# ---------------------------------------------------------------------------- clear, axpby, make_fragment_like
@type_callable(common.clear)
def _type_clear(context):
    def typer(t):
        _tensor_arg("clear", "tensor", t, ("rmem",))
        return types.none

    return typer


@lower_builtin(common.clear, OpaqueTensorType)
def _lower_clear(context, builder, sig, args):
    (t,) = sig.args
    _clear_buffer(context, builder, t.buffer, _buffer(context, builder, t, args[0]), t.layout.cosize)
    return context.get_dummy_value()


def _check_scalar(fn, what, s):
    if not isinstance(s, (types.Integer, types.Float, types.Complex, types.Boolean)):
        raise TypingError(f"{fn}: {what} must be a scalar, got {s}")


@type_callable(common.axpby)
def _type_axpby(context):
    def typer(alpha, x, beta, y):
        fn = "axpby"
        _check_scalar(fn, "alpha (1st argument)", alpha)
        _tensor_arg(fn, "x (2nd argument)", x, ("rmem",))
        _check_scalar(fn, "beta (3rd argument)", beta)
        _tensor_arg(fn, "y (4th argument)", y, ("rmem",))
        if x.layout.cosize != y.layout.cosize or x.layout.descriptor != y.layout.descriptor:
            raise TypingError(f"{fn}: x and y must be fragments of one GEMM's register layout, got "
                              f"{x.layout!r} and {y.layout!r}")
        for what, s, t in (("alpha", alpha, x), ("beta", beta, y)):
            if isinstance(s, types.Complex) and not _is_complex(t.dtype):
                raise TypingError(f"{fn}: {what} is complex ({s}) but the fragment holds {_tname(t.dtype)}")
        return types.none

    return typer


@lower_builtin(common.axpby, types.Any, OpaqueTensorType, types.Any, OpaqueTensorType)
def _lower_axpby(context, builder, sig, args):
    aty, xty, bty, yty = sig.args
    n = yty.layout.cosize
    xt, yt = xty.dtype, yty.dtype

    def impl(a, xb, b, yb):
        a_ = xt(a)
        b_ = yt(b)
        if b_ == yt(0):
            for i in range(n):
                yb[i] = yt(a_ * xb[i])
        else:
            for i in range(n):
                yb[i] = yt(a_ * xb[i]) + b_ * yb[i]

    xb = _buffer(context, builder, xty, args[1])
    yb = _buffer(context, builder, yty, args[3])
    context.compile_internal(builder, impl, types.none(aty, xty.buffer, bty, yty.buffer), [args[0], xb, args[2], yb])
    return context.get_dummy_value()


def _dtype_arg(fn, dtype):
    if isinstance(dtype, (types.NumberClass, types.DType)):
        return dtype.dtype
    raise TypingError(f"{fn}: dtype must be a NumPy scalar type (numpy.float64, MM.c_value_type ...), got {dtype}")


@type_callable(common.make_fragment_like)
def _type_make_fragment_like(context):
    def typer(t, dtype):
        fn = "make_fragment_like"
        _tensor_arg(fn, "tensor (1st argument)", t, ("rmem",))
        dt = _dtype_arg(fn, dtype)
        if _dtype_name(dt) is None:
            raise TypingError(f"{fn}: dtype {dt} is not a cuBLASDx element type")
        return _fragment_type(t.layout, dt)

    return typer


@lower_builtin(common.make_fragment_like, OpaqueTensorType, types.Any)
def _lower_make_fragment_like(context, builder, sig, args):
    return _new_fragment(context, builder, sig.return_type)


# ---------------------------------------------------------------------------- partition_like_C
class PartitionedTensorType(types.Type):
    """``partitioner.partition_like_C(gmem_c)``: this thread's part of a global C tensor, element
    ``i`` being C's element ``map_fragment_index(i)`` (read and written by ``pc[i]``)."""

    def __init__(self, tensor: OpaqueTensorType, fragment_layout: Layout):
        self.tensor = tensor
        self.fragment_layout = fragment_layout
        self.buffer = tensor.buffer
        super().__init__(name=f"PartitionedTensor({tensor}, {fragment_layout.name})")

    @property
    def key(self):
        return (self.tensor, self.fragment_layout)


@register_model(PartitionedTensorType)
class _PartitionedModel(core_models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("buffer", fe_type.buffer)])


def _partitioned_pointer(context, builder, pty, value, ity, index):
    """Pointer to C's element map_fragment_index(index) in the tensor's buffer (the layout's leading
    dimension and C's arrangement, as every tensor operation addresses global C)."""
    lay = pty.tensor.layout
    mm = lay.descriptor
    op = _part_op(pty.fragment_layout)
    r, c = _int_out(context, builder), _int_out(context, builder)
    call_extern(context, builder, op, f"{op.symbol}_map", [_int_in(context, builder, ity, index), r, c])
    i64 = ir.IntType(64)
    row, col = builder.sext(builder.load(r), i64), builder.sext(builder.load(c), i64)
    ld = ir.Constant(i64, lay.leading_dimension)
    flat = builder.add(row, builder.mul(col, ld)) if mm.arrangement[2] == "col_major" else builder.add(
        builder.mul(row, ld), col)
    data = data_pointer(context, builder, pty.buffer, _buffer(context, builder, pty, value))
    return builder.gep(data, [flat])


@type_callable(operator.getitem)
def _type_partitioned_getitem(context):
    def typer(t, i):
        if isinstance(t, PartitionedTensorType) and isinstance(i, types.Integer):
            return t.buffer.dtype
        return None

    return typer


@type_callable(operator.setitem)
def _type_partitioned_setitem(context):
    def typer(t, i, v):
        if isinstance(t, PartitionedTensorType) and isinstance(i, types.Integer):
            return types.none
        return None

    return typer


@lower_builtin(operator.getitem, PartitionedTensorType, types.Integer)
def _lower_partitioned_getitem(context, builder, sig, args):
    pty, ity = sig.args
    ptr = _partitioned_pointer(context, builder, pty, args[0], ity, args[1])
    return context.unpack_value(builder, pty.buffer.dtype, ptr)


@lower_builtin(operator.setitem, PartitionedTensorType, types.Integer, types.Any)
def _lower_partitioned_setitem(context, builder, sig, args):
    pty, ity, vty = sig.args
    ptr = _partitioned_pointer(context, builder, pty, args[0], ity, args[1])
    v = context.cast(builder, args[2], vty, pty.buffer.dtype)
    context.pack_value(builder, pty.buffer.dtype, v, ptr)
    return context.get_dummy_value()


# ---------------------------------------------------------------------------- MM.get/suggest_partitioner/accumulator
_PART_METHODS = {"get_partitioner": (False, False), "suggest_partitioner": (True, False),
                 "get_accumulator": (False, True), "suggest_accumulator": (True, True)}


def _make_part_method(name):
    suggested, accumulator = _PART_METHODS[name]

    class _Method(AbstractTemplate):
        key = f"Matmul.{name}"

        def generic(self, args, kws):
            if args or kws:
                raise TypingError(f"Matmul.{name}() takes no arguments")
            mm = self.this.descriptor
            ret = AccumulatorType(Accumulator(mm, suggested)) if accumulator else PartitionerType(
                Partitioner(mm, suggested))
            return signature(ret).replace(recvr=self.this)

    return _Method


_PART_TEMPLATES = {name: _make_part_method(name) for name in _PART_METHODS}


@infer_getattr
class _MatmulPartitionerMethods(AttributeTemplate):
    key = MatmulType

    def generic_resolve(self, ty, attr):
        template = _PART_TEMPLATES.get(attr)
        return types.BoundFunction(template, ty) if template is not None else None


def _lower_make_partitioner(context, builder, sig, args):
    if isinstance(sig.return_type, AccumulatorType):
        acc = sig.return_type
        frag = _fragment_type(acc.layout, acc.buffer.dtype)
        value = _new_fragment(context, builder, frag, clear=True)
        st = cgutils.create_struct_proxy(acc)(context, builder)
        st.buffer = _buffer(context, builder, frag, value)
        return st._getvalue()
    return context.get_dummy_value()


for _name in _PART_METHODS:
    lower_builtin(f"Matmul.{_name}", MatmulType)(_lower_make_partitioner)


# ---------------------------------------------------------------------------- partitioner methods
_QUERY = ("is_thread_active", "is_predicated", "is_index_in_bounds", "map_fragment_index")
_P_METHODS = _QUERY + ("make_accumulator_fragment", "make_empty_fragment", "partition_and_copy", "partition_like_C",
                       "make_partition_and_copy")
_A_METHODS = _P_METHODS + ("get_results",)


def _part_op(lay: Layout) -> TensorOp:
    """The partitioner-query unit of fragments of register layout ``lay``."""
    ct = _dtype_name(_value_types(lay.descriptor)[2])
    return TensorOp(lay.descriptor, "partitioner", ((lay.name, None, ct),))


def _type_part_method(name, this, args):
    fn = f"{'Accumulator' if isinstance(this, AccumulatorType) else 'Partitioner'}.{name}"
    lay = this.layout
    ct = _value_types(lay.descriptor)[2]
    if name in ("is_thread_active", "is_predicated", "make_accumulator_fragment", "make_empty_fragment",
                "get_results"):
        if args:
            raise TypingError(f"{fn}() takes no arguments, got {len(args)}")
        if name in ("is_thread_active", "is_predicated"):
            return signature(types.boolean)
        return signature(_fragment_type(lay, ct))
    if name in ("is_index_in_bounds", "map_fragment_index"):
        if len(args) != 1 or not isinstance(args[0], types.Integer):
            raise TypingError(f"{fn}(index) takes one integer (a fragment element, 0 <= index < "
                              f"{lay.size}), got {args}")
        ret = types.boolean if name == "is_index_in_bounds" else types.UniTuple(types.int32, 2)
        return signature(ret, *args)
    if name == "make_partition_and_copy":
        if len(args) != 1:
            raise TypingError(f"{fn}(tensor) takes one C tensor in global or shared memory, got {len(args)} arguments")
        src = _tensor_arg(fn, "tensor", args[0], ("gmem", "smem"))
        if src.layout.operand != "c" or src.layout.descriptor != lay.descriptor:
            raise TypingError(f"{fn}: tensor must be a C tensor of the same Matmul, got {src.layout!r}")
        return signature(_fragment_type(lay, src.dtype), *args)
    if name == "partition_and_copy":
        if len(args) != 2:
            raise TypingError(f"{fn}(src, dst) takes a fragment and a C tensor (either order), got {len(args)} "
                              f"arguments")
        src, dst = (_tensor_arg(fn, w, t) for w, t in (("src", args[0]), ("dst", args[1])))
        frag = src if src.memory == "rmem" else dst
        if frag.memory != "rmem" or frag.layout.cosize != lay.cosize:
            raise TypingError(f"{fn}: one of src and dst must be a register fragment of this partitioner's "
                              f"layout ({lay.name})")
        _type_copy_fragment(None)(src, dst)
        return signature(types.none, *args)
    if name == "partition_like_C":
        if len(args) != 1:
            raise TypingError(f"{fn}(gmem_c) takes one C tensor in global memory, got {len(args)} arguments")
        t = _tensor_arg(fn, "gmem_c", args[0], ("gmem",))
        if t.layout.operand != "c" or t.layout.descriptor != lay.descriptor:
            raise TypingError(f"{fn}: gmem_c must be a C tensor of the same Matmul (get_layout_gmem_c), got {t.layout!r}")
        return signature(PartitionedTensorType(t, lay), *args)
    raise TypingError(f"{fn} is not supported")  # pragma: no cover - names come from _P_METHODS


def _make_p_template(name):
    class _M(AbstractTemplate):
        key = f"Partitioner.{name}"

        def generic(self, args, kws):
            if kws:
                raise TypingError(f"{name} takes positional arguments only")
            return _type_part_method(name, self.this, tuple(args)).replace(recvr=self.this)

    return _M


_P_TEMPLATES = {name: _make_p_template(name) for name in _A_METHODS}


@infer_getattr
class _PartitionerAttrs(AttributeTemplate):
    key = PartitionerType

    def generic_resolve(self, ty, attr):
        if attr == "layout":
            return LayoutType(ty.layout)
        return types.BoundFunction(_P_TEMPLATES[attr], ty) if attr in _P_METHODS else None


@infer_getattr
class _AccumulatorAttrs(AttributeTemplate):
    key = AccumulatorType

    def generic_resolve(self, ty, attr):
        if attr == "layout":
            return LayoutType(ty.layout)
        return types.BoundFunction(_P_TEMPLATES[attr], ty) if attr in _A_METHODS else None


for _t in (PartitionerType, AccumulatorType):
    lower_getattr(_t, "layout")(lambda context, builder, ty, val: context.get_dummy_value())


def _lower_part_method(name):
    def lower(context, builder, sig, args):
        this = sig.recvr if sig.recvr is not None else sig.args[0]
        argtys = sig.args if sig.recvr is not None else sig.args[1:]
        vals = args[len(args) - len(argtys):]
        op = _part_op(this.layout)
        if name in ("is_thread_active", "is_predicated"):
            out = _int_out(context, builder)
            call_extern(context, builder, op, f"{op.symbol}_{'active' if name == 'is_thread_active' else 'predicated'}", [out])
            return builder.icmp_signed("!=", builder.load(out), ir.Constant(ir.IntType(32), 0))
        if name == "is_index_in_bounds":
            out = _int_out(context, builder)
            call_extern(context, builder, op, f"{op.symbol}_in_bounds", [_int_in(context, builder, argtys[0], vals[0]), out])
            return builder.icmp_signed("!=", builder.load(out), ir.Constant(ir.IntType(32), 0))
        if name == "map_fragment_index":
            r, c = _int_out(context, builder), _int_out(context, builder)
            call_extern(context, builder, op, f"{op.symbol}_map", [_int_in(context, builder, argtys[0], vals[0]), r, c])
            return context.make_tuple(builder, sig.return_type, [builder.load(r), builder.load(c)])
        if name in ("make_accumulator_fragment", "make_empty_fragment"):
            return _new_fragment(context, builder, sig.return_type)
        if name == "get_results":
            st = cgutils.create_struct_proxy(sig.return_type)(context, builder)
            st.buffer = _buffer(context, builder, this, args[0])
            return st._getvalue()
        if name == "make_partition_and_copy":
            frag = _new_fragment(context, builder, sig.return_type)
            csig = types.none(argtys[0], sig.return_type)
            _lower_tensor_op("copy_fragment")(context, builder, csig, [vals[0], frag])
            return frag
        if name == "partition_and_copy":
            csig = types.none(*argtys)
            return _lower_tensor_op("copy_fragment")(context, builder, csig, list(vals))
        if name == "partition_like_C":
            st = cgutils.create_struct_proxy(sig.return_type)(context, builder)
            st.buffer = _buffer(context, builder, argtys[0], vals[0])
            return st._getvalue()
        raise NotImplementedError(name)  # pragma: no cover

    return lower


for _name in _A_METHODS:
    for _t in (PartitionerType, AccumulatorType):
        lower_builtin(f"Partitioner.{_name}", _t, types.VarArg(types.Any))(_lower_part_method(_name))


# ---------------------------------------------------------------------------- MM.execute with tensors
def _accepts(args) -> bool:
    return any(isinstance(a, (OpaqueTensorType, AccumulatorType)) for a in args)


def _type_tensor_execute(mm, args):
    fn = "Matmul.execute"
    at, bt, ct = _value_types(mm)
    if len(args) == 3:
        a, b, c = args
        cpos = "3rd"
    elif len(args) == 5:
        alpha, a, b, beta, c = args
        for what, s in (("alpha (1st argument)", alpha), ("beta (4th argument)", beta)):
            _check_scalar(fn, what, s)
        cpos = "5th"
    else:
        raise TypingError(f"{fn} with tensors takes (smem_a, smem_b, rmem_c or accumulator) or (alpha, smem_a, "
                          f"smem_b, beta, smem_c), got {len(args)} arguments")
    apos, bpos = ("1st", "2nd") if len(args) == 3 else ("2nd", "3rd")
    for what, t, op, vt in ((f"a ({apos} argument)", a, "a", at), (f"b ({bpos} argument)", b, "b", bt)):
        _tensor_arg(fn, what, t, ("smem",))
        if t.layout.operand != op or t.layout.descriptor != mm:
            raise TypingError(f"{fn}: {what} must be a shared-memory tensor of {op.upper()} of this Matmul "
                              f"(get_layout_smem_{op}() or suggest_layout_smem_{op}()), got {t.layout!r}")
        if t.dtype != vt:
            raise TypingError(f"{fn}: {what} must hold MM.{op}_value_type ({_tname(vt)}), got {_tname(t.dtype)}")
    if len(args) == 3:
        if isinstance(c, AccumulatorType):
            if c.accumulator.descriptor != mm:
                raise TypingError(f"{fn}: the accumulator belongs to another Matmul")
            return args
        _tensor_arg(fn, f"c ({cpos} argument)", c, ("rmem",))
    else:
        _tensor_arg(fn, f"c ({cpos} argument)", c, ("smem",))
    if c.layout.descriptor != mm or c.layout.operand != "c":
        raise TypingError(f"{fn}: c ({cpos} argument) must be a C tensor of this Matmul, got {c.layout!r}")
    if c.dtype != ct:
        raise TypingError(f"{fn}: c ({cpos} argument) must hold MM.c_value_type ({_tname(ct)}), got {_tname(c.dtype)}")
    return args


def _lower_tensor_execute(context, builder, mm, argtys, vals):
    if len(argtys) == 3:
        a, b, c = argtys
        if isinstance(c, AccumulatorType):
            cdesc = (c.layout.name, None, _dtype_name(c.buffer.dtype))
        else:
            cdesc = _desc(c)
        op = TensorOp(mm, "execute_rmem", (_desc(a), _desc(b), cdesc))
        ptrs = [data_pointer(context, builder, t.buffer, _buffer(context, builder, t, v)) for t, v in zip(argtys, vals)]
    else:
        alpha, a, b, beta, c = argtys
        ct = _value_types(mm)[2]
        op = TensorOp(mm, "execute_smem", (_desc(a), _desc(b), _desc(c)))
        ptrs = [_scalar_pointer(context, builder, alpha, ct, vals[0])]
        ptrs += [data_pointer(context, builder, t.buffer, _buffer(context, builder, t, v))
                 for t, v in ((a, vals[1]), (b, vals[2]))]
        ptrs += [_scalar_pointer(context, builder, beta, ct, vals[3]),
                 data_pointer(context, builder, c.buffer, _buffer(context, builder, c, vals[4]))]
    call_extern(context, builder, op, op.symbol, ptrs)


TENSOR_EXECUTE.update(accepts=_accepts, type=_type_tensor_execute, lower=_lower_tensor_execute)

__all__ = ["OpaqueTensorType", "PartitionerType", "AccumulatorType", "PartitionedTensorType"]
