# SPDX-License-Identifier: Apache-2.0
"""Typing and lowering of GEMM (Matmul) descriptors inside @cuda.jit kernels.

Methods available in kernels:

- ``MM.execute(alpha, a, b, beta, c)``: shared-memory GEMM (C call through the shim);
- ``MM.execute(a, b, acc)``: register-accumulator GEMM, ``acc += a @ b``;
- ``MM.fragment_coordinates(rows, cols)``: (row, col) of each accumulator element;
- ``MM.load_a(gA, sA)``, ``MM.load_b(gB, sB)``, ``MM.load_c(gC, sC)``, ``MM.store_c(sC, gC)``:
  copies between a 2-D global array and the descriptor's shared-memory layout, by the threads
  of the descriptor's ``block_dim`` (plain Numba code, compiled inline).
"""

from __future__ import annotations

from numba import cuda
from numba.core import types
from numba.core.errors import TypingError
from numba.cuda.extending import lower_builtin, typeof_impl

from ..gemm import Matmul
from ._compat import bfloat16, cgutils
from .common import (
    DescriptorType,
    call_extern,
    data_pointer,
    method_template,
    numba_dtype,
    register_descriptor_type,
)

_KERNEL_ATTRS = {
    "size", "m", "n", "k", "a_dim", "b_dim", "c_dim", "data_type", "execution", "sm", "block_size",
    "a_value_type", "b_value_type", "c_value_type", "leading_dimension", "lda", "ldb", "ldc",
    "a_size", "b_size", "c_size", "a_shared_memory_offset", "b_shared_memory_offset",
    "c_shared_memory_offset", "shared_memory_size", "shared_memory_size_ab", "alignment",
    "max_threads_per_block", "block_dim", "suggested_block_dim", "suggested_leading_dimension", "accumulator_size",
}


class MatmulType(DescriptorType):
    """The numba type of one Matmul (GEMM) descriptor (a compile-time constant inside kernels)."""

    def __init__(self, mm):
        super().__init__(mm, "Matmul")


@typeof_impl.register(Matmul)
def _typeof_matmul(val, c):
    return MatmulType(val)


def _attr(mm, name):
    if name in ("a_arrangement", "b_arrangement", "c_arrangement"):
        return mm.arrangement["abc".index(name[0])]
    if name not in _KERNEL_ATTRS:
        raise AttributeError(name)
    return getattr(mm, name)


# ---------------------------------------------------------------------------- typing helpers
def _tname(t) -> str:
    """A numba scalar type as users name it (numba calls bfloat16 ``__nv_bfloat16``)."""
    return "bfloat16 (numpy.dtype(ml_dtypes.bfloat16))" if t == bfloat16 else str(t)


def _check_array(arg, dtype, what, hint, ndims=(1, 2)):
    if not isinstance(arg, types.Array):
        raise TypingError(f"{what} must be {hint}, got {arg}")
    if arg.dtype != dtype:
        raise TypingError(f"{what} must hold {_tname(dtype)} values ({hint}), got an array of "
                          f"{_tname(arg.dtype)}")
    if arg.ndim not in ndims or arg.layout != "C":
        raise TypingError(
            f"{what} must be a C-contiguous array with {' or '.join(map(str, ndims))} dimension(s) "
            f"({hint}), got {arg}"
        )


def _check_scalar(arg, ctype, what):
    if not (isinstance(arg, (types.Integer, types.Float, types.Complex, types.Boolean)) or arg == bfloat16):
        raise TypingError(f"{what} must be a scalar convertible to {_tname(ctype)} (MM.c_value_type), got {arg}")
    if isinstance(arg, types.Complex) and not isinstance(ctype, types.Complex):
        raise TypingError(f"{what} is complex ({arg}) but this GEMM is real (c_value_type {ctype})")


_EXEC_KEY = "nvmath_device.Matmul.execute"
_COORDS_KEY = "nvmath_device.Matmul.fragment_coordinates"


def _type_execute(mm, args):
    at, bt, ct = (numba_dtype(mm.a_value_type), numba_dtype(mm.b_value_type), numba_dtype(mm.c_value_type))
    if len(args) == 5:
        alpha, a, b, beta, c = args
        _check_scalar(alpha, ct, "Matmul.execute: alpha (1st argument)")
        _check_array(a, at, "Matmul.execute: a (2nd argument)", "a shared array of MM.a_size MM.a_value_type")
        _check_array(b, bt, "Matmul.execute: b (3rd argument)", "a shared array of MM.b_size MM.b_value_type")
        _check_scalar(beta, ct, "Matmul.execute: beta (4th argument)")
        _check_array(c, ct, "Matmul.execute: c (5th argument)", "a shared array of MM.c_size MM.c_value_type")
        return args
    if len(args) == 3:
        a, b, acc = args
        _check_array(a, at, "Matmul.execute: a (1st argument)", "a shared array of MM.a_size MM.a_value_type")
        _check_array(b, bt, "Matmul.execute: b (2nd argument)", "a shared array of MM.b_size MM.b_value_type")
        _check_array(acc, ct, "Matmul.execute: accumulator (3rd argument)",
                     "a local array cuda.local.array(MM.accumulator_size, dtype=MM.c_value_type)", ndims=(1,))
        return args
    raise TypingError(
        "Matmul.execute takes (alpha, a, b, beta, c) with A, B, C in shared memory, or (a, b, accumulator) "
        f"with C in registers; got {len(args)} argument(s)"
    )


def _type_coords(mm, args):
    if len(args) != 2:
        raise TypingError(f"Matmul.fragment_coordinates takes (rows, cols), got {len(args)} argument(s)")
    for i, arg in enumerate(args):
        _check_array(arg, types.int32, f"Matmul.fragment_coordinates: {('rows', 'cols')[i]}",
                     "a local array cuda.local.array(MM.accumulator_size, dtype=numpy.int32)", ndims=(1,))
    return args


# ---------------------------------------------------------------------------- copy helpers
_COPY = {"load_a": 0, "load_b": 1, "load_c": 2, "store_c": 2}


def _copy_key(name):
    return f"nvmath_device.Matmul.{name}"


def _make_copy_typer(name):
    idx = _COPY[name]
    store = name == "store_c"

    def typer(mm, args):
        if len(args) != 2:
            src, dst = ("sC", "gC") if store else (f"g{'ABC'[idx]}", f"s{'ABC'[idx]}")
            raise TypingError(f"Matmul.{name} takes ({src}, {dst}), got {len(args)} argument(s)")
        dims = mm._copy_layout(idx)[:2]
        vt = numba_dtype((mm.a_value_type, mm.b_value_type, mm.c_value_type)[idx])
        g, s = (args[1], args[0]) if store else args
        gpos, spos = ("2nd", "1st") if store else ("1st", "2nd")
        if not isinstance(g, types.Array) or g.ndim != 2:
            raise TypingError(f"Matmul.{name}: the global array ({gpos} argument) must be a 2-D array of "
                              f"shape {dims}, got {g}")
        if g.dtype != vt:
            raise TypingError(f"Matmul.{name}: the global array ({gpos} argument) must hold {_tname(vt)}, got "
                              f"{_tname(g.dtype)} (MM.{'abc'[idx]}_value_type: the copy does not convert)")
        _check_array(s, vt, f"Matmul.{name}: the shared array ({spos} argument)",
                     f"a 1-D shared array of MM.{'abc'[idx]}_size MM.{'abc'[idx]}_value_type", ndims=(1,))
        return args

    return typer


def _thread_rank(mm):
    bx, by, bz = mm.block_dim
    return 3 if bz != 1 else (2 if by != 1 else 1)


def _make_copy_impl(mm, name):
    idx = _COPY[name]
    rows, cols, col_major = mm._copy_layout(idx)
    ld = mm.leading_dimension[idx]
    nthreads = mm.max_threads_per_block
    total = rows * cols
    rank = _thread_rank(mm)
    store = name == "store_c"

    # Thread numbering as cuBLASDx's (by the rank of block_dim); consecutive threads walk the
    # shared tile's contiguous dimension.
    if store:
        def impl(mm_, s, g):
            sf = s
            t = cuda.threadIdx.x
            if rank >= 2:
                t += cuda.threadIdx.y * cuda.blockDim.x
            if rank == 3:
                t += cuda.threadIdx.z * cuda.blockDim.x * cuda.blockDim.y
            if t < nthreads:
                for i in range(t, total, nthreads):
                    if col_major:
                        r = i % rows
                        c = i // rows
                        g[r, c] = sf[r + c * ld]
                    else:
                        r = i // cols
                        c = i % cols
                        g[r, c] = sf[r * ld + c]
    else:
        def impl(mm_, g, s):
            sf = s
            t = cuda.threadIdx.x
            if rank >= 2:
                t += cuda.threadIdx.y * cuda.blockDim.x
            if rank == 3:
                t += cuda.threadIdx.z * cuda.blockDim.x * cuda.blockDim.y
            if t < nthreads:
                for i in range(t, total, nthreads):
                    if col_major:
                        r = i % rows
                        c = i // rows
                        sf[r + c * ld] = g[r, c]
                    else:
                        r = i // cols
                        c = i % cols
                        sf[r * ld + c] = g[r, c]
    return impl


_methods = {
    "execute": method_template(_EXEC_KEY, _type_execute),
    "__call__": method_template(_EXEC_KEY, _type_execute),  # MM(...) is MM.execute(...)
    "fragment_coordinates": method_template(_COORDS_KEY, _type_coords),
}
for _name in _COPY:
    _methods[_name] = method_template(_copy_key(_name), _make_copy_typer(_name))

register_descriptor_type(MatmulType, _attr, _methods)


def _split(sig, args):
    """(descriptor, argument types, argument values) whether or not the receiver is in ``args``."""
    mm = sig.recvr.descriptor if sig.recvr is not None else sig.args[0].descriptor
    argtys = sig.args if sig.recvr is not None else sig.args[1:]
    vals = args[len(args) - len(argtys):]
    return mm, argtys, vals


def _scalar_pointer(context, builder, fromty, toty, val):
    if toty == bfloat16 and fromty != bfloat16:
        # numba-cuda 0.30 converts to bfloat16 only from some types (float16/32/64 and 16-64 bit
        # ints); float64 holds every real alpha/beta exactly (up to int64 beyond 2**53), and
        # float64 -> bfloat16 rounds once (__double2bfloat16).
        val = context.cast(builder, val, fromty, types.float64)
        fromty = types.float64
    v = context.cast(builder, val, fromty, toty)
    return cgutils.alloca_once_value(builder, v)


@lower_builtin(MatmulType, MatmulType, types.VarArg(types.Any))  # MM(...): a call of the descriptor
@lower_builtin(_EXEC_KEY, MatmulType, types.VarArg(types.Any))
def _lower_execute(context, builder, sig, args):
    mm, argtys, vals = _split(sig, args)
    if len(vals) == 5:
        ct = numba_dtype(mm.c_value_type)
        alpha = _scalar_pointer(context, builder, argtys[0], ct, vals[0])
        beta = _scalar_pointer(context, builder, argtys[3], ct, vals[3])
        ptrs = [alpha, data_pointer(context, builder, argtys[1], vals[1]),
                data_pointer(context, builder, argtys[2], vals[2]), beta,
                data_pointer(context, builder, argtys[4], vals[4])]
        call_extern(context, builder, mm, f"{mm.symbol}_smem", ptrs)
    else:
        ptrs = [data_pointer(context, builder, t, v) for t, v in zip(argtys, vals)]
        call_extern(context, builder, mm, f"{mm.symbol}_rmem", ptrs)
    return context.get_dummy_value()


@lower_builtin(_COORDS_KEY, MatmulType, types.VarArg(types.Any))
def _lower_coords(context, builder, sig, args):
    mm, argtys, vals = _split(sig, args)
    ptrs = [data_pointer(context, builder, t, v) for t, v in zip(argtys, vals)]
    call_extern(context, builder, mm, f"{mm.symbol}_coords", ptrs)
    return context.get_dummy_value()


def _register_copy(name):
    @lower_builtin(_copy_key(name), MatmulType, types.VarArg(types.Any))
    def _lower_copy(context, builder, sig, args):
        mm, argtys, vals = _split(sig, args)
        impl = _make_copy_impl(mm, name)
        recvr_ty = sig.recvr if sig.recvr is not None else sig.args[0]
        isig = types.none(recvr_ty, *argtys)
        recv = args[0] if len(args) > len(argtys) else context.get_dummy_value()
        return context.compile_internal(builder, impl, isig, [recv, *vals])


for _name in _COPY:
    _register_copy(_name)
