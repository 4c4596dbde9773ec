# SPDX-License-Identifier: Apache-2.0
"""Typing and lowering of device/tile pipelines (``DevicePipeline`` kernel arguments,
``get_tile``, ``reset_tile``, ``TilePipeline.execute``) and the launch extension that passes a
DevicePipeline to a kernel.

- A :class:`DevicePipelineType` is everything about the pipeline but its two array addresses
  (descriptor, depth, K slices, strides): the kernel argument is the addresses (two uint64), and
  ``pipeline_extensions`` turns the Python object into them at launch.
- A :class:`TilePipelineType` value points at three words in the thread's local memory (A's and
  B's tile origins, the shared ring), so ``reset_tile`` can move it.
- ``execute(accumulator)`` calls the tile's K loop: one unit of
  :mod:`nvmath_device._build.pipeline_codegen` per pipeline and accumulator layout.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import types
from numba.core.errors import TypingError
from numba.cuda.extending import (
    core_models,
    infer_getattr,
    lower_builtin,
    lower_getattr,
    register_model,
    typeof_impl,
)

from .._pipeline import DevicePipeline, PipelineOp, attribute_values, tile_steps
from ._compat import AbstractTemplate, AttributeTemplate, cgutils, signature
from .common import call_extern, data_pointer
from .tensor_numba import AccumulatorType

__all__ = ["DevicePipelineType", "TilePipelineType", "pipeline_extensions", "PipelineArguments"]


class DevicePipelineType(types.Type):
    """A DevicePipeline in a kernel: its type holds all but the two array addresses."""

    def __init__(self, key):
        self.mm, self.spec, self.a_strides, self.b_strides, self.ndim = key
        self._k = key
        super().__init__(name=f"DevicePipeline(depth={self.spec.depth}, k_tiles={self.spec.k_tiles}, "
                              f"a_strides={self.a_strides}, b_strides={self.b_strides}, {self.mm!r})")

    @property
    def key(self):
        return self._k


@register_model(DevicePipelineType)
class _DevicePipelineModel(core_models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("a", types.uint64), ("b", types.uint64)])


@typeof_impl.register(DevicePipeline)
def _typeof_pipeline(val, c):
    return DevicePipelineType(val._key)


class TilePipelineType(types.Type):
    """A TilePipeline in a kernel (of one DevicePipelineType)."""

    def __init__(self, pipeline: DevicePipelineType):
        self.pipeline = pipeline
        super().__init__(name=f"TilePipeline({pipeline.name})")


@register_model(TilePipelineType)
class _TilePipelineModel(core_models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("state", types.CPointer(types.uint64))])


class PipelineArguments:
    """numba-cuda launch extension: a DevicePipeline argument becomes its two array addresses."""

    def prepare_args(self, ty, val, stream=0, retr=None):
        """Map one kernel argument (numba-cuda calls this for every argument of a launch).

        Parameters
        ----------
        ty : numba type
        val : object
        stream, retr
            numba-cuda's launch context (unused).

        Returns
        -------
        tuple of (numba type, value)
        """
        if isinstance(val, DevicePipeline):
            a, b = val._ops
            return types.UniTuple(types.uint64, 2), (a.ptr, b.ptr)
        return ty, val


pipeline_extensions = [PipelineArguments()]


# ---------------------------------------------------------------------------- typing
def _index_type(fn, what, t, ndim):
    if isinstance(t, types.Integer):
        return t
    if isinstance(t, types.BaseTuple) and len(t) == 2 and all(isinstance(e, types.Integer) for e in t):
        if ndim != 3:
            raise TypingError(f"{fn}: {what} is a (tile, batch) pair, but the pipeline's arrays are 2-D")
        return t
    raise TypingError(f"{fn}: {what} must be an integer tile index (or a (tile, batch) pair of integers with 3-D "
                      f"arrays), got {t}")


def _type_get_tile(this, args):
    fn = "DevicePipeline.get_tile"
    if len(args) != 3:
        raise TypingError(f"{fn}(smem, blockIdx_x, blockIdx_y) takes 3 arguments, got {len(args)}")
    smem, bx, by = args
    if not isinstance(smem, types.Array) or smem.ndim != 1:
        raise TypingError(f"{fn}: smem must be a 1-D shared array of at least buffer_size ({this.spec.buffer_bytes}) "
                          f"bytes, got {smem}")
    _index_type(fn, "blockIdx_x", bx, this.ndim)
    _index_type(fn, "blockIdx_y", by, this.ndim)
    return signature(TilePipelineType(this), *args)


def _type_reset_tile(this, args):
    fn = "DevicePipeline.reset_tile"
    if len(args) != 3:
        raise TypingError(f"{fn}(tile_pipeline, idx, idy) takes 3 arguments, got {len(args)}")
    tp, idx, idy = args
    if not isinstance(tp, TilePipelineType) or tp.pipeline != this:
        raise TypingError(f"{fn}: tile_pipeline must be a TilePipeline of this DevicePipeline "
                          f"(device_pipeline.get_tile(...)), got {tp}")
    _index_type(fn, "idx", idx, this.ndim)
    _index_type(fn, "idy", idy, this.ndim)
    return signature(types.none, *args)


def _type_execute(this, args):
    fn = "TilePipeline.execute"
    if len(args) != 1 or not isinstance(args[0], AccumulatorType):
        raise TypingError(f"{fn}(accumulator) takes one accumulator (MM.get_accumulator() / "
                          f"MM.suggest_accumulator()), got {args}")
    if args[0].accumulator.descriptor != this.pipeline.mm:
        raise TypingError(f"{fn}: the accumulator belongs to another Matmul than the pipeline's")
    return signature(types.none, *args)


def _type_del(this, args):
    if args:
        raise TypingError(f"TilePipeline._del() takes no arguments, got {len(args)}")
    return signature(types.none)


_METHODS = {
    DevicePipelineType: {"get_tile": _type_get_tile, "reset_tile": _type_reset_tile},
    TilePipelineType: {"execute": _type_execute, "_del": _type_del},
}


def _template(owner, name, typer):
    class _M(AbstractTemplate):
        key = f"{owner}.{name}"

        def generic(self, args, kws):
            if kws:
                raise TypingError(f"{owner}.{name} takes positional arguments only")
            return typer(self.this, tuple(args)).replace(recvr=self.this)

    return _M


_TEMPLATES = {t: {n: _template(t.__name__[:-4], n, f) for n, f in m.items()} for t, m in _METHODS.items()}


_ATTRS = ("buffer_alignment", "buffer_size", "storage_bytes", "storage_alignment")


@infer_getattr
class _DevicePipelineAttrs(AttributeTemplate):
    key = DevicePipelineType

    def generic_resolve(self, ty, attr):
        if attr in _ATTRS:
            return types.IntegerLiteral(attribute_values(ty.spec)[attr])
        t = _TEMPLATES[DevicePipelineType].get(attr)
        return types.BoundFunction(t, ty) if t else None


@infer_getattr
class _TilePipelineAttrs(AttributeTemplate):
    key = TilePipelineType

    def generic_resolve(self, ty, attr):
        t = _TEMPLATES[TilePipelineType].get(attr)
        return types.BoundFunction(t, ty) if t else None


for _attr in _ATTRS:
    lower_getattr(DevicePipelineType, _attr)(
        lambda context, builder, ty, val, _a=_attr: context.get_constant(types.intp, attribute_values(ty.spec)[_a]))


# ---------------------------------------------------------------------------- lowering
def _origin(context, builder, ptype: DevicePipelineType, base, operand: int, ity, ival):
    """Address (uint64 value) of the tile ``ival`` (an index, or (index, batch)) of operand 0 (A)
    or 1 (B): ``base`` plus :func:`nvmath_device._pipeline.tile_steps` bytes."""
    strides = ptype.a_strides if operand == 0 else ptype.b_strides
    size = np.dtype((ptype.mm.a_value_type, ptype.mm.b_value_type)[operand]).itemsize
    tile_step, batch_step = tile_steps(ptype.mm, strides, operand)
    i64 = ir.IntType(64)
    if isinstance(ity, types.BaseTuple):
        t = context.cast(builder, builder.extract_value(ival, 0), ity[0], types.int64)
        bat = context.cast(builder, builder.extract_value(ival, 1), ity[1], types.int64)
    else:
        t, bat = context.cast(builder, ival, ity, types.int64), None
    off = builder.mul(t, ir.Constant(i64, tile_step * size))
    if bat is not None:
        off = builder.add(off, builder.mul(bat, ir.Constant(i64, batch_step * size)))
    return builder.add(base, off)


def _state_ptr(context, builder, tptype, tval):
    return cgutils.create_struct_proxy(tptype)(context, builder, value=tval).state


def _store_origins(context, builder, ptype, pval, state, argtys, vals):
    dp = cgutils.create_struct_proxy(ptype)(context, builder, value=pval)
    a = _origin(context, builder, ptype, dp.a, 0, argtys[0], vals[0])
    b = _origin(context, builder, ptype, dp.b, 1, argtys[1], vals[1])
    builder.store(a, state)
    builder.store(b, builder.gep(state, [ir.Constant(ir.IntType(32), 1)]))


def _split(sig, args):
    """(receiver type, receiver value, argument types, argument values) of a method's lowering."""
    this = sig.recvr if sig.recvr is not None else sig.args[0]
    argtys = tuple(sig.args) if sig.recvr is not None else tuple(sig.args[1:])
    return this, args[0], argtys, tuple(args[len(args) - len(argtys):])


@lower_builtin("DevicePipeline.get_tile", DevicePipelineType, types.VarArg(types.Any))
def _lower_get_tile(context, builder, sig, args):
    ptype, pval, (smty, bxty, byty), (smem, bx, by) = _split(sig, args)
    state = cgutils.alloca_once(builder, ir.IntType(64), size=3)
    _store_origins(context, builder, ptype, pval, state, (bxty, byty), (bx, by))
    sp = builder.ptrtoint(data_pointer(context, builder, smty, smem), ir.IntType(64))
    builder.store(sp, builder.gep(state, [ir.Constant(ir.IntType(32), 2)]))
    tp = cgutils.create_struct_proxy(sig.return_type)(context, builder)
    tp.state = state
    return tp._getvalue()


@lower_builtin("DevicePipeline.reset_tile", DevicePipelineType, types.VarArg(types.Any))
def _lower_reset_tile(context, builder, sig, args):
    ptype, pval, (tpty, ity, jty), (tval, idx, idy) = _split(sig, args)
    _store_origins(context, builder, ptype, pval, _state_ptr(context, builder, tpty, tval), (ity, jty), (idx, idy))
    return context.get_dummy_value()


@lower_builtin("TilePipeline.execute", TilePipelineType, types.VarArg(types.Any))
def _lower_execute(context, builder, sig, args):
    tptype, tval, (accty,), (acc,) = _split(sig, args)
    ptype = tptype.pipeline
    op = PipelineOp(ptype.mm, ptype.spec._replace(suggested=accty.accumulator.layout.name == "suggest_layout_rmem_c"))
    state = _state_ptr(context, builder, tptype, tval)
    i8p = ir.IntType(8).as_pointer()
    ptrs = [builder.inttoptr(builder.load(builder.gep(state, [ir.Constant(ir.IntType(32), i)])), i8p)
            for i in range(3)]
    buf = cgutils.create_struct_proxy(accty)(context, builder, value=acc).buffer
    cptr = data_pointer(context, builder, accty.buffer, buf)
    call_extern(context, builder, op, op.symbol, ptrs + [cptr])
    return context.get_dummy_value()


@lower_builtin("TilePipeline._del", TilePipelineType, types.VarArg(types.Any))
def _lower_del(context, builder, sig, args):
    return context.get_dummy_value()
