# SPDX-License-Identifier: Apache-2.0
"""``FFT.execute`` under numba-cuda's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), in NumPy.

The data layouts are cuFFTDx's, with the descriptor's traits (the same numbers as on the GPU):

- Block execution: the FFTs of a block are numbered ``threadIdx.y`` (``+ block_dim.y *
  threadIdx.z``); thread ``threadIdx.x`` holds element ``threadIdx.x + i * stride`` of its FFT
  in register ``i``, for ``i < input_ept`` on input and ``i < output_ept`` on output (elements
  past ``input_length`` / ``output_length`` are not part of the FFT).
- Thread execution: each thread holds its whole FFT, in order (stride 1).
- Real data (r2c input, c2r output, real_mode "normal"): register ``i`` of the array viewed as
  ``precision`` holds real element ``threadIdx.x + i * stride``. Complex data: register ``i`` of
  the array viewed as ``value_type``. real_mode "folded": real data is handled as complex
  pairs ``(x[2j], x[2j + 1])``, laid out like complex data.
- Complex layouts of real FFTs: "natural" N//2 + 1 values; "packed" N/2 values with the
  Nyquist value's real part in the imaginary part of value 0; "full" N values.

Block execution is block-collective: each thread deposits its registers in its block's
exchange, a barrier (the simulator's ``syncthreads``), one thread computes all the block's FFTs
in float64 and writes every thread's registers, a barrier. Inverse transforms are unnormalised.
After ``execute`` the registers that hold no output and the first ``shared_memory_size`` bytes
of ``shared_memory`` hold NaN: their contents are unspecified on the GPU.

Misuse that is undefined on the GPU raises here: wrong argument types, a launch whose block
shape is not ``fft.block_dim``, too little shared memory, a thread of the block that does not
call ``execute`` (or calls a different FFT, or calls it a different number of times).
"""

from __future__ import annotations

import functools

import numpy as np

from ._block import Round, collective, is_shared
from ._compat import kernel_context as _kernel_context

__all__ = ["sim_execute"]

_BLOCK_HINT = "kernel[grid, fft.block_dim, 0, fft.shared_memory_size](...)"


# ---------------------------------------------------------------------------- descriptor facts
class _Plan:
    """What execute needs from a descriptor, read once (traits come from the codegen cache)."""

    def __init__(self, fft):
        if fft.precision_type.itemsize == 2:
            raise NotImplementedError(
                "FFT.execute: float16 FFTs are not yet callable from Numba kernels "
                "(cuFFTDx's complex<__half2> has no Numba type); use float32 or float64"
            )
        t = fft._traits
        self.fft = fft
        self.size = fft.size
        self.fft_type = fft.fft_type
        self.direction = fft.direction
        self.layout = fft.real_fft_options["complex_layout"]
        self.folded = fft.real_fft_options["real_mode"] == "folded"
        self.block = fft.execution == "Block"
        self.value_type = fft.value_type
        self.precision_type = fft.precision_type
        self.storage_size = t["storage_size"]
        self.stride = t["stride"]
        self.in_ept, self.out_ept = t["input_ept"], t["output_ept"]
        self.in_len, self.out_len = t["input_length"], t["output_length"]
        self.real_in = fft.input_type.kind == "f"
        self.real_out = fft.output_type.kind == "f"
        if self.block:
            self.block_dim = (t["block_dim_x"], t["block_dim_y"], t["block_dim_z"])
            self.shared_memory_size = t["shared_memory_size"]
            self.nfft = self.block_dim[1] * self.block_dim[2]
        # Output registers the FFT defines: (register index, element index) per threadIdx.x.
        self._idx_cache = {}

    def indices(self, x: int, ept: int, length: int):
        key = (x, ept, length)
        r = self._idx_cache.get(key)
        if r is None:
            idx = x + np.arange(ept) * self.stride
            regs = np.nonzero(idx < length)[0]
            r = self._idx_cache[key] = (regs, idx[regs])
        return r


# One plan per descriptor and process (descriptors are frozen and hashable).
_plan = functools.cache(_Plan)


# ---------------------------------------------------------------------------- the math
def _transform(p: _Plan, x: np.ndarray) -> np.ndarray:
    """FFTs of the rows of ``x`` (input layout, float64/complex128) -> rows in output layout."""
    n = p.size
    if p.fft_type == "c2c":
        return np.fft.fft(x, axis=-1) if p.direction == "forward" else np.fft.ifft(x, axis=-1) * n
    if p.fft_type == "r2c":
        if p.folded:  # complex pairs (x[2j], x[2j+1]) -> the real signal
            x = np.stack([x.real, x.imag], axis=-1).reshape(x.shape[0], n)
        if p.layout == "full":
            return np.fft.fft(x, axis=-1)
        spec = np.fft.rfft(x, axis=-1)
        if p.layout == "packed":
            out = spec[:, : n // 2].copy()
            out[:, 0] = spec[:, 0].real + 1j * spec[:, n // 2].real
            return out
        return spec
    # c2r
    if p.layout == "full":
        spec = x[:, : n // 2 + 1]
    elif p.layout == "packed":
        spec = np.empty((x.shape[0], n // 2 + 1), dtype=np.complex128)
        spec[:, : n // 2] = x
        spec[:, 0] = x[:, 0].real
        spec[:, n // 2] = x[:, 0].imag
    else:
        spec = x
    y = np.fft.irfft(spec, n=n, axis=-1) * n
    if p.folded:
        y = y[:, 0::2] + 1j * y[:, 1::2]
    return y


def _views(p: _Plan, regs: np.ndarray):
    """(input view, output view) of one thread's registers, ``storage_size`` values long."""
    if regs.dtype == p.value_type:
        cplx = regs[: p.storage_size]
        real = cplx.view(p.precision_type)
    else:
        real = regs[: 2 * p.storage_size]
        cplx = real.view(p.value_type)
    return (real if p.real_in else cplx), (real if p.real_out else cplx)


def _gather(p: _Plan, dst: np.ndarray, row: int, x: int, regs: np.ndarray) -> None:
    view_in, _ = _views(p, regs)
    r, e = p.indices(x, p.in_ept, p.in_len)
    dst[row, e] = view_in[r]


def _scatter(p: _Plan, src: np.ndarray, row: int, x: int, regs: np.ndarray) -> None:
    _, view_out = _views(p, regs)
    r, e = p.indices(x, p.out_ept, p.out_len)
    # registers that hold no output: unspecified on the GPU (NaN in both parts)
    (view_out if p.real_out else view_out.view(p.precision_type))[:] = np.nan
    view_out[r] = src[row, e]


def _in_dtype(p: _Plan):
    return np.float64 if p.real_in else np.complex128


# ---------------------------------------------------------------------------- argument checks
def _check_registers(p: _Plan, regs) -> None:
    what = "FFT.execute: thread_data (1st argument)"
    hint = "cuda.local.array(fft.storage_size, dtype=fft.value_type)"
    if not isinstance(regs, np.ndarray):
        raise TypeError(f"{what} must be a local array ({hint}), got {type(regs).__name__}")
    if regs.dtype not in (p.value_type, p.precision_type):
        raise TypeError(
            f"{what} must hold {p.value_type} (fft.value_type) or {p.precision_type} "
            f"(fft.precision_type) values, got an array of {regs.dtype}"
        )
    if regs.ndim != 1 or not regs.flags.c_contiguous:
        raise TypeError(
            f"{what} must be a 1-D contiguous local array, got shape {regs.shape}"
            f"{'' if regs.flags.c_contiguous else ' (not contiguous)'}"
        )
    need = p.storage_size * (1 if regs.dtype == p.value_type else 2)
    if regs.shape[0] < need:
        raise ValueError(
            f"{what} has {regs.shape[0]} {regs.dtype} values; this FFT needs at least {need} "
            f"(fft.storage_size = {p.storage_size} {p.value_type} values"
            f"{'' if regs.dtype == p.value_type else ', i.e. 2 * fft.storage_size ' + str(regs.dtype)})"
        )


def _check_shared(p: _Plan, ctx, smem) -> None:
    what = "FFT.execute: shared_memory (2nd argument)"
    if not isinstance(smem, np.ndarray):
        raise TypeError(
            f"{what} must be a shared array, e.g. cuda.shared.array(0, dtype=fft.value_type), "
            f"got {type(smem).__name__}"
        )
    if smem.ndim != 1 or not smem.flags.c_contiguous:
        raise TypeError(f"{what} must be a 1-D contiguous shared array, got shape {smem.shape}")
    dyn = getattr(ctx.shared, "_dynshared_size", None)
    if smem.nbytes < p.shared_memory_size:
        raise ValueError(
            f"{what} has {smem.nbytes} bytes but this FFT needs fft.shared_memory_size = "
            f"{p.shared_memory_size} bytes; launch with {_BLOCK_HINT}"
            + (
                f" (this launch has {dyn} bytes of dynamic shared memory)"
                if dyn is not None
                else ""
            )
        )
    if p.shared_memory_size and not is_shared(ctx, smem):
        raise TypeError(
            f"{what} is not shared memory (a local or global array?); pass "
            "cuda.shared.array(0, dtype=fft.value_type) or a slice of a shared array"
        )


def _check_block_dim(p: _Plan, ctx) -> None:
    launched = tuple(ctx.blockDim)
    if launched != p.block_dim:
        raise ValueError(
            f"FFT.execute (execution='Block') needs the kernel launched with exactly "
            f"fft.block_dim = {p.block_dim} threads per block, but this launch has blockDim = "
            f"{launched}; launch with {_BLOCK_HINT}"
        )


# ---------------------------------------------------------------------------- block exchange
def _close_round(p: _Plan, rnd: Round, call: int, block: tuple) -> None:
    """Every FFT of the block, run by the first thread past the barrier (see ``_block.collective``)."""
    by = p.block_dim[1]
    others = {f for f, _, _ in rnd.deposits.values() if f != p.fft}
    if others:
        rnd.error = (
            f"FFT.execute call #{call + 1} in block {block}: the threads of the block called "
            f"different FFT descriptors ({p.fft!r} and {next(iter(others))!r}); all threads "
            "must call the same FFT together"
        )
        return
    x_in = np.zeros((p.nfft, p.in_len), dtype=_in_dtype(p))
    for (x, y, z), (_, regs, _) in rnd.deposits.items():
        _gather(p, x_in, y + by * z, x, regs)
    y_out = _transform(p, x_in)
    for (x, y, z), (_, regs, _) in rnd.deposits.items():
        _scatter(p, y_out, y + by * z, x, regs)
    # cuFFTDx uses the shared memory as scratch: its contents after execute are unspecified.
    for smem in {id(s): s for _, _, s in rnd.deposits.values()}.values():
        smem.view(np.uint8)[: p.shared_memory_size] = 0xFF  # NaN in any float type


def _execute_block(p: _Plan, thread_data, shared_memory) -> None:
    thread, ctx = _kernel_context("FFT.execute")

    def checks():
        _check_registers(p, thread_data)
        _check_block_dim(p, ctx)
        _check_shared(p, ctx, shared_memory)
        return (p.fft, thread_data, shared_memory)

    block = tuple(thread.blockIdx)
    collective(
        "FFT.execute", "fft", thread, ctx, checks,
        lambda rnd, call: _close_round(p, rnd, call, block),
        "did they return early, or skip execute in a branch? all threads must call execute, also "
        "those that load no data")


def _execute_thread(p: _Plan, thread_data) -> None:
    _kernel_context("FFT.execute")
    _check_registers(p, thread_data)
    x_in = np.zeros((1, p.in_len), dtype=_in_dtype(p))
    _gather(p, x_in, 0, 0, thread_data)
    _scatter(p, _transform(p, x_in), 0, 0, thread_data)


def _execute_shared(p: _Plan, shared_memory) -> None:
    """``fft.execute(shared_memory)``: the block's FFTs in natural order in shared memory (FFT
    ``threadIdx.y + block_dim.y * threadIdx.z`` at element ``fft_id * size``), as the numba layer
    runs it: load the thread's elements, barrier, the register form, barrier, store."""
    thread, ctx = _kernel_context("FFT.execute")
    forms = ("FFT.execute with execution='Block' takes (thread_data, shared_memory), or "
             "(shared_memory,) with the block's data in shared memory")
    if p.fft_type != "c2c":
        raise TypeError(
            f"{forms}: the shared-memory form supports fft_type='c2c' only here; this FFT is "
            f"{p.fft_type!r}: pass (thread_data, shared_memory)"
        )
    if not isinstance(shared_memory, np.ndarray) or shared_memory.dtype != p.value_type \
            or shared_memory.ndim != 1 or not shared_memory.flags.c_contiguous:
        raise TypeError(
            f"{forms}: the one argument must be a 1-D contiguous shared array of {p.value_type} "
            "(fft.value_type) holding the block's FFTs one after another, got "
            f"{type(shared_memory).__name__}{getattr(shared_memory, 'shape', '')}"
        )
    if not is_shared(ctx, shared_memory):
        raise TypeError(
            f"{forms}; got 1 argument that is not shared memory (registers without the shared "
            "memory? shared_memory is cuda.shared.array(0, dtype=fft.value_type) with "
            "fft.shared_memory_size bytes of dynamic shared memory at launch)"
        )
    _check_block_dim(p, ctx)
    x, y, z = thread.threadIdx
    base = (y + p.block_dim[1] * z) * p.size
    if shared_memory.size < p.nfft * p.size:
        raise ValueError(
            f"FFT.execute(shared_memory): the shared array has {shared_memory.size} values; the "
            f"block's {p.nfft} FFTs of size {p.size} need {p.nfft * p.size} (launch with at least "
            f"max(fft.shared_memory_size, fft.ffts_per_block * fft.size * itemsize) bytes)"
        )
    regs, idx = p.indices(x, p.in_ept, p.size)
    td = np.zeros(p.storage_size, dtype=p.value_type)
    td[regs] = shared_memory[base + idx]
    thread.syncthreads()
    _execute_block(p, td, shared_memory)
    shared_memory[base + idx] = td[regs]


def sim_execute(fft, *args) -> None:
    """``fft.execute(thread_data[, shared_memory])`` or ``fft.execute(shared_memory)`` inside a
    simulated kernel (see module doc)."""
    p = _plan(fft)
    if p.block:
        if len(args) == 1:
            _execute_shared(p, args[0])
            return
        if len(args) != 2:
            raise TypeError(
                "FFT.execute with execution='Block' takes (thread_data, shared_memory), got "
                f"{len(args)} argument(s); shared_memory is cuda.shared.array(0, dtype=fft.value_type) "
                "with fft.shared_memory_size bytes of dynamic shared memory at launch"
            )
        _execute_block(p, *args)
    else:
        if len(args) != 1:
            raise TypeError(
                "FFT.execute with execution='Thread' takes (thread_data,) only: a Thread FFT works "
                f"in the thread's registers and uses no shared memory; got {len(args)} argument(s)"
            )
        _execute_thread(p, args[0])
