# SPDX-License-Identifier: Apache-2.0
"""Typing and lowering of FFT descriptors inside @cuda.jit kernels."""

from __future__ import annotations

from numba import cuda
from numba.core import types
from numba.core.errors import TypingError
from numba.cuda.extending import lower_builtin, typeof_impl

from .._build.fft_codegen import TwiddleTables
from ..fft import FFT
from ..types import Vector
from .common import (
    DescriptorType,
    call_extern,
    data_pointer,
    linkable_ltoir,
    method_template,
    numba_dtype,
    register_descriptor_type,
)
from .vector import numba_type_of

_KERNEL_ATTRS = {
    "size", "fft_type", "direction", "execution", "sm",
    "value_type", "input_type", "output_type", "precision_type",
    "storage_size", "stride", "implicit_type_batching", "input_ept", "output_ept",
    "input_length", "output_length", "block_dim", "shared_memory_size", "max_threads_per_block",
    "requires_workspace", "workspace_size", "elements_per_thread_value", "ffts_per_block_value",
    "elements_per_thread", "ffts_per_block",
}


class FFTType(DescriptorType):
    """The numba type of one FFT descriptor (a compile-time constant inside kernels)."""

    def __init__(self, fft):
        super().__init__(fft, "FFT")


@typeof_impl.register(FFT)
def _typeof_fft(val, c):
    return FFTType(val)


def _attr(fft, name):
    if name not in _KERNEL_ATTRS:
        raise AttributeError(name)
    return getattr(fft, name)


def _numba_type(value_type):
    """The numba type of a descriptor's value/input/output type: a numpy dtype (complex64,
    float32, ...) or, for float16, nvmath_device.types.half4 / half2 (float16x4 / float16x2)."""
    if isinstance(value_type, Vector):
        return numba_type_of(value_type)
    return numba_dtype(value_type)


def _register_types(fft):
    """(value type, real type) in numba types: complex64/float32, complex128/float64, or for
    float16 float16x4 (cuFFTDx's complex<__half2>) / float16x2 (__half2)."""
    vt = _numba_type(fft.value_type)
    real = _numba_type(fft._real_type)
    return vt, real


def _check_registers(fft, arg, what):
    vt, real = _register_types(fft)
    if not isinstance(arg, types.Array):
        raise TypingError(
            f"FFT.execute: {what} must be a local array (cuda.local.array(fft.storage_size, "
            f"dtype=fft.value_type)), got {arg}"
        )
    if arg.dtype not in (vt, real):
        realname = "the real view, fft.input_type of r2c" if fft.precision_type.itemsize == 2 else "fft.precision_type"
        raise TypingError(
            f"FFT.execute: {what} must hold {vt} (fft.value_type) or {real} ({realname}) "
            f"values, got an array of {arg.dtype}"
        )
    if arg.ndim != 1 or arg.layout != "C":
        raise TypingError(f"FFT.execute: {what} must be a 1-D contiguous local array, got {arg}")


_EXEC_KEY = "nvmath_device.FFT.execute"


def _type_execute(fft, args):
    if fft.execution == "Block":
        if len(args) == 1:
            return _type_shared_execute(fft, args)
        if len(args) != 2:
            raise TypingError(
                "FFT.execute with execution='Block' takes (thread_data, shared_memory) or (shared_memory,), got "
                f"{len(args)} argument(s); shared_memory is cuda.shared.array(0, dtype=fft.value_type) "
                "with fft.shared_memory_size bytes of dynamic shared memory at launch"
            )
        _check_registers(fft, args[0], "thread_data (1st argument)")
        smem = args[1]
        if not isinstance(smem, types.Array):
            raise TypingError(
                "FFT.execute: shared_memory (2nd argument) must be a shared array, e.g. "
                f"cuda.shared.array(0, dtype=fft.value_type), got {smem}"
            )
        if smem.ndim != 1 or smem.layout != "C":
            raise TypingError(f"FFT.execute: shared_memory must be a 1-D contiguous shared array, got {smem}")
        return args
    if len(args) != 1:
        raise TypingError(f"FFT.execute with execution='Thread' takes (thread_data,), got {len(args)} argument(s)")
    _check_registers(fft, args[0], "thread_data (1st argument)")
    return args


def _type_shared_execute(fft, args):
    """``fft.execute(shared_memory)``: the block's FFTs in natural order in shared memory (cuFFTDx's
    shared-memory API): the input of FFT ``threadIdx.y`` (+ ``block_dim.y * threadIdx.z``) at
    element ``fft_id * input_length`` of the array viewed as ``input_type``; its output replaces
    it at element ``fft_id * output_length`` of the array viewed as ``output_type``."""
    smem = args[0]
    vt, _ = _register_types(fft)
    forms = ("FFT.execute with execution='Block' takes (thread_data, shared_memory), or "
             "(shared_memory,) with the block's data in shared memory")
    if not isinstance(smem, types.Array) or smem.dtype != vt or smem.ndim != 1 or smem.layout != "C":
        raise TypingError(
            f"{forms}: the one argument must be a 1-D contiguous shared array of {vt} "
            f"(fft.value_type) holding the block's FFTs one after another, got {smem}"
        )
    return args


def _shared_execute_impl(fft):
    """The shared-memory form as Numba code: load this thread's input elements (the register
    layout, through the ``input_type`` view), barrier, the register form on the same shared
    memory as scratch, barrier, store the output elements (through the ``output_type`` view)."""
    n, stride = fft.storage_size, fft.stride
    in_ept, out_ept = fft.input_ept, fft.output_ept
    in_len, out_len = fft.input_length, fft.output_length
    by = fft.block_dim[1]
    vt, real = _register_types(fft)
    in_t = real if fft._real_in else vt
    out_t = real if fft._real_out else vt

    def impl(f, smem):
        td = cuda.local.array(n, dtype=vt)
        fft_id = cuda.threadIdx.y + cuda.threadIdx.z * by
        src = smem.view(in_t)
        regs_in = td.view(in_t)
        base = fft_id * in_len
        for i in range(in_ept):
            idx = cuda.threadIdx.x + i * stride
            if idx < in_len:
                regs_in[i] = src[base + idx]
        cuda.syncthreads()
        f.execute(td, smem)
        cuda.syncthreads()
        dst = smem.view(out_t)
        regs_out = td.view(out_t)
        base = fft_id * out_len
        for i in range(out_ept):
            idx = cuda.threadIdx.x + i * stride
            if idx < out_len:
                dst[base + idx] = regs_out[i]

    return impl


_METHODS = {
    "execute": method_template(_EXEC_KEY, _type_execute),
    "__call__": method_template(_EXEC_KEY, _type_execute),  # fft(...) is fft.execute(...)
}


register_descriptor_type(FFTType, _attr, _METHODS)


def _check_address_space(context, builder, ptr, space, message):
    """Emit ``if (!isspacep.<space>(ptr)) { printf(message); trap(); }``."""
    import llvmlite.ir as llir

    from ._compat import declare_vprint

    i8p = llir.IntType(8).as_pointer()
    fnty = llir.FunctionType(llir.IntType(1), [i8p])
    name = f"llvm.nvvm.isspacep.{space}"
    fn = builder.module.globals.get(name) or llir.Function(builder.module, fnty, name)
    ok = builder.call(fn, [builder.bitcast(ptr, i8p)])
    with builder.if_then(builder.not_(ok), likely=False):
        fmt = context.insert_string_const_addrspace(builder, message + "\n")
        builder.call(declare_vprint(builder.module), [fmt, llir.Constant(i8p, None)])
        trap = builder.module.globals.get("llvm.trap") or llir.Function(
            builder.module, llir.FunctionType(llir.VoidType(), []), "llvm.trap")
        builder.call(trap, [])


def address_space_checks_enabled() -> bool:
    """NUMBA_MATHDX_CHECK_ADDRESS_SPACES=1 at compile time adds run-time address-space checks."""
    import os

    return os.environ.get("NUMBA_MATHDX_CHECK_ADDRESS_SPACES", "0") not in ("", "0")


@lower_builtin(FFTType, FFTType, types.VarArg(types.Any))  # fft(...): a call of the descriptor
@lower_builtin(_EXEC_KEY, FFTType, types.VarArg(types.Any))
def _lower_execute(context, builder, sig, args):
    fft = sig.recvr.descriptor if sig.recvr is not None else sig.args[0].descriptor
    argtys = sig.args[1:] if sig.recvr is None else sig.args
    vals = args[1:] if len(args) == len(sig.args) + 1 or sig.recvr is None else args
    if fft.execution == "Block" and len(vals) == 1:
        # always checked (one isspacep per call): the register form without its shared-memory
        # argument types the same, and would otherwise run on registers as if they were shared
        _check_address_space(context, builder, data_pointer(context, builder, argtys[-1], vals[0]), "shared",
                             "FFT.execute(shared_memory): the array must be a shared array "
                             "(cuda.shared.array); the register form is execute(thread_data, shared_memory)")
        recvr_ty = sig.recvr if sig.recvr is not None else sig.args[0]
        return context.compile_internal(builder, _shared_execute_impl(fft), types.none(recvr_ty, argtys[-1]),
                                        [context.get_dummy_value(), vals[0]])
    ptrs = [data_pointer(context, builder, t, v) for t, v in zip(argtys[-len(vals):], vals)]
    if address_space_checks_enabled():
        # numba's array types carry no address space, so typing cannot tell a global array
        # from registers; this opt-in check catches it when the kernel runs.
        _check_address_space(context, builder, ptrs[0], "local",
                             "FFT.execute: thread_data must be a local array (cuda.local.array), got global/shared memory")
        if len(ptrs) > 1:
            _check_address_space(context, builder, ptrs[1], "shared",
                                 "FFT.execute: shared_memory must be a shared array (cuda.shared.array), got another memory space")
    # the units declare cuFFTDx's twiddle tables; one shared module per arch defines them
    context.active_code_library.add_linking_file(linkable_ltoir(TwiddleTables(fft.sm)))
    call_extern(context, builder, fft, fft.symbol, ptrs)
    return context.get_dummy_value()
