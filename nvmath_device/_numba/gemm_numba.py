# SPDX-License-Identifier: Apache-2.0
"""Typing and lowering of GEMM (Matmul) descriptors inside @cuda.jit kernels.

Methods available in kernels:

- ``MM.execute(alpha, a, b, beta, c)``: shared-memory GEMM (C call through the shim);
- ``MM.execute(alpha, a, lda, b, ldb, beta, c, ldc)``: the same with run-time leading dimensions
  (a separate unit, linked only by kernels that call it);
- ``MM.execute(a, b, acc)``: register-accumulator GEMM, ``acc += a @ b``;
- ``MM.fragment_coordinates(rows, cols)``: (row, col) of each accumulator element;
- ``MM.load_a(gA, sA)``, ``MM.load_b(gB, sB)``, ``MM.load_c(gC, sC)``, ``MM.store_c(sC, gC)``:
  copies between a 2-D global array and the descriptor's shared-memory layout, by the threads
  of the descriptor's ``block_dim`` (plain Numba code, compiled inline).

Value types: numba's for NumPy dtypes (float16 ... float64, bfloat16, int8 ... uint64,
complex64/complex128); complex float16 (``nvmath_device.types.complex32``, cuBLASDx's
``complex<__half>``) is ``float16x2_type`` (one 4-byte vector), whose copy helpers also take
complex64/complex128 global arrays and convert each element.
"""

from __future__ import annotations

from numba import cuda
from numba.core import types
from numba.core.errors import TypingError
from numba.cuda.extending import infer_getattr, lower_builtin, typeof_impl

from .._vector import CONSTRUCTORS
from ..gemm import Matmul, runtime_ld_code
from ..types import Complex
from ._compat import AttributeTemplate, bfloat16, cgutils
from .common import (
    DescriptorType,
    call_extern,
    data_pointer,
    method_template,
    numba_dtype,
    register_descriptor_type,
)
from .vector import VectorNumbaType, numba_type_of

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
def _nb(vt):
    """The numba type of a value type: a NumPy dtype, or ``types.complex32`` (float16x2)."""
    return numba_type_of(vt) if isinstance(vt, Complex) else numba_dtype(vt)


def _value_types(mm):
    return tuple(_nb(v) for v in (mm.a_value_type, mm.b_value_type, mm.c_value_type))


def _is_half_complex(t) -> bool:
    return isinstance(t, VectorNumbaType)


@infer_getattr
class _ComplexHalfValueTypes(AttributeTemplate):
    """``MM.a_value_type`` ... in kernels when it is ``types.complex32`` (not a NumPy dtype, so
    the descriptor attributes' generic typing leaves it to this template): the float16x2 class,
    a dtype for ``cuda.shared.array`` / ``cuda.local.array``."""

    key = MatmulType

    def generic_resolve(self, ty, attr):
        if attr in ("a_value_type", "b_value_type", "c_value_type"):
            vt = getattr(ty.descriptor, attr)
            if isinstance(vt, Complex):
                return types.NumberClass(numba_type_of(vt))
        return None


def _tname(t) -> str:
    """A numba scalar type as users name it (numba calls bfloat16 ``__nv_bfloat16``)."""
    if t == bfloat16:
        return "bfloat16 (numpy.dtype(ml_dtypes.bfloat16))"
    if _is_half_complex(t):
        return "float16x2_type (complex float16, nvmath_device.types.complex32)"
    return str(t)


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
    half_complex = _is_half_complex(ctype)
    if not (isinstance(arg, (types.Integer, types.Float, types.Complex, types.Boolean)) or arg == bfloat16
            or (half_complex and arg == ctype)):
        raise TypingError(f"{what} must be a scalar convertible to {_tname(ctype)} (MM.c_value_type), got {arg}")
    if isinstance(arg, types.Complex) and not (isinstance(ctype, types.Complex) or half_complex):
        raise TypingError(f"{what} is complex ({arg}) but this GEMM is real (c_value_type {ctype})")


def _check_ld(arg, what):
    if not isinstance(arg, (types.Integer, types.IntegerLiteral)) or isinstance(arg, types.Boolean):
        raise TypingError(f"{what} must be an integer (the tile's leading dimension, at least the tight "
                          f"one of its arrangement), got {arg}")


_EXEC_KEY = "nvmath_device.Matmul.execute"
_COORDS_KEY = "nvmath_device.Matmul.fragment_coordinates"


# The tensor forms of execute, MM.execute(smem_a, smem_b, rmem_c | accumulator) and
# MM.execute(alpha, smem_a, smem_b, beta, smem_c) with tensors of nvmath_device.common.make_tensor:
# nvmath_device._numba.tensor_numba fills this in (it imports this module, not the other way round).
# "accepts"(argument types) -> bool, "type"(mm, args) -> args, "lower"(context, builder, mm, types, values)
TENSOR_EXECUTE: dict = {}


def _type_execute(mm, args):
    if TENSOR_EXECUTE and TENSOR_EXECUTE["accepts"](args):
        return TENSOR_EXECUTE["type"](mm, args)
    at, bt, ct = _value_types(mm)
    if len(args) == 8:
        alpha, a, lda, b, ldb, beta, c, ldc = args
        _check_scalar(alpha, ct, "Matmul.execute: alpha (1st argument)")
        _check_array(a, at, "Matmul.execute: a (2nd argument)",
                     "a shared array of MM.a_value_type holding lda * (outer - 1) + inner values")
        _check_ld(lda, "Matmul.execute: lda (3rd argument)")
        _check_array(b, bt, "Matmul.execute: b (4th argument)",
                     "a shared array of MM.b_value_type holding ldb * (outer - 1) + inner values")
        _check_ld(ldb, "Matmul.execute: ldb (5th argument)")
        _check_scalar(beta, ct, "Matmul.execute: beta (6th argument)")
        _check_array(c, ct, "Matmul.execute: c (7th argument)",
                     "a shared array of MM.c_value_type holding ldc * (outer - 1) + inner values")
        _check_ld(ldc, "Matmul.execute: ldc (8th argument)")
        return args
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
        "Matmul.execute takes (alpha, a, b, beta, c) with A, B, C in shared memory, (alpha, a, lda, b, ldb, "
        "beta, c, ldc) with run-time leading dimensions, or (a, b, accumulator) with C in registers (or the "
        "tensor forms, (smem_a, smem_b, rmem_c or accumulator) and (alpha, smem_a, smem_b, beta, smem_c), "
        "with tensors of nvmath_device.common.make_tensor); got "
        f"{len(args)} argument(s)"
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
        vt = _value_types(mm)[idx]
        g, s = (args[1], args[0]) if store else args
        gpos, spos = ("2nd", "1st") if store else ("1st", "2nd")
        if not isinstance(g, types.Array) or g.ndim != 2:
            raise TypingError(f"Matmul.{name}: the global array ({gpos} argument) must be a 2-D array of "
                              f"shape {dims}, got {g}")
        if _is_half_complex(vt) and (g.dtype in (types.complex64, types.complex128) or _is_complex32_record(g.dtype)):
            pass  # complex float16 tiles: converted element by element (nvmath-python's cfp16 example)
        elif g.dtype != vt:
            also = (" (or complex64/complex128, converted, or records of numpy.dtype(types.complex32))"
                    if _is_half_complex(vt) else "")
            raise TypingError(f"Matmul.{name}: the global array ({gpos} argument) must hold {_tname(vt)}{also}, "
                              f"got {_tname(g.dtype)} (MM.{'abc'[idx]}_value_type: the copy does not convert)")
        _check_array(s, vt, f"Matmul.{name}: the shared array ({spos} argument)",
                     f"a 1-D shared array of MM.{'abc'[idx]}_size MM.{'abc'[idx]}_value_type", ndims=(1,))
        return args

    return typer


def _thread_rank(mm):
    bx, by, bz = mm.block_dim
    return 3 if bz != 1 else (2 if by != 1 else 1)


def _is_complex32_record(t) -> bool:
    """A record of the host dtype of ``types.complex32`` (fields x, y of float16)."""
    if not isinstance(t, types.Record):
        return False
    fields = [(k, v.type) for k, v in t.fields.items()]
    return fields == [("x", types.float16), ("y", types.float16)] and t.size == 4


def _make_record_copy_impl(mm, name):
    """Copies between records (x, y) of float16 in global memory and a float16x2 tile."""
    idx = _COPY[name]
    rows, cols, col_major = mm._copy_layout(idx)
    ld = mm.leading_dimension[idx]
    nthreads = mm.max_threads_per_block
    total = rows * cols
    rank = _thread_rank(mm)
    make = CONSTRUCTORS["float16x2"]

    if name == "store_c":
        def impl(mm_, s, g):
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
                        w = s[r + c * ld]
                    else:
                        r = i // cols
                        c = i % cols
                        w = s[r * ld + c]
                    rec = g[r, c]  # a reference into the array
                    rec.x = w.x
                    rec.y = w.y
    else:
        def impl(mm_, g, s):
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
                        v = g[r, c]
                        s[r + c * ld] = make(v.x, v.y)
                    else:
                        r = i // cols
                        c = i % cols
                        v = g[r, c]
                        s[r * ld + c] = make(v.x, v.y)
    return impl


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
    if _is_half_complex(toty) and not isinstance(fromty, (types.Complex, VectorNumbaType)):
        # a real alpha/beta for a complex float16 GEMM: through complex128 (re, 0) to float16x2
        val = context.cast(builder, val, fromty, types.complex128)
        fromty = types.complex128
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
    if TENSOR_EXECUTE and TENSOR_EXECUTE["accepts"](argtys):
        TENSOR_EXECUTE["lower"](context, builder, mm, argtys, vals)
    elif len(vals) == 8:
        ct = _value_types(mm)[2]
        ptrs = []
        for i, (t, v) in enumerate(zip(argtys, vals)):
            if i in (0, 5):
                ptrs.append(_scalar_pointer(context, builder, t, ct, v))
            elif i in (2, 4, 7):
                ptrs.append(cgutils.alloca_once_value(builder, context.cast(builder, v, t, types.uint32)))
            else:
                ptrs.append(data_pointer(context, builder, t, v))
        code = runtime_ld_code(mm)
        call_extern(context, builder, code, f"{code.symbol}_smem", ptrs)
    elif len(vals) == 5:
        ct = _value_types(mm)[2]
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
        g = argtys[1] if name == "store_c" else argtys[0]
        record = _is_complex32_record(g.dtype)
        impl = (_make_record_copy_impl if record else _make_copy_impl)(mm, name)
        recvr_ty = sig.recvr if sig.recvr is not None else sig.args[0]
        isig = types.none(recvr_ty, *argtys)
        recv = args[0] if len(args) > len(argtys) else context.get_dummy_value()
        return context.compile_internal(builder, impl, isig, [recv, *vals])


for _name in _COPY:
    _register_copy(_name)
