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
- float16 (cuFFTDx's implicit batching): a register value holds the same element of two FFTs,
  ``float16x4`` records ``(re0, re1, im0, im1)`` (``value_type`` ``half4``); real data is viewed
  as ``float16x2`` records ``(x0, x1)`` (``half2``). FFT pair ``threadIdx.y`` of a block (or the
  thread, for Thread execution) is FFTs ``2 * pair`` (the ``.x`` lane) and ``2 * pair + 1``.
  The transforms are computed in float64 and rounded to float16 once (the GPU rounds at every
  butterfly, so it is less accurate than this).

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
        t = fft._traits
        self.fft = fft
        self.size = fft.size
        self.fft_type = fft.fft_type
        self.direction = fft.direction
        self.layout = fft.real_fft_options["complex_layout"]
        self.folded = fft.real_fft_options["real_mode"] == "folded"
        self.block = fft.execution == "Block"
        self.value_type = np.dtype(fft.value_type)  # half4 (a float16x4 record) for float16
        self.precision_type = fft.precision_type
        self.real_type = np.dtype(fft._real_type)  # half2 (a float16x2 record) for float16
        self.lanes = t["implicit_type_batching"]  # FFTs one value holds: 2 for float16
        self.storage_size = t["storage_size"]
        self.stride = t["stride"]
        self.in_ept, self.out_ept = t["input_ept"], t["output_ept"]
        self.in_len, self.out_len = t["input_length"], t["output_length"]
        self.real_in = fft._real_in  # real data in (r2c, real_mode "normal")
        self.real_out = fft._real_out
        if self.block:
            self.block_dim = (t["block_dim_x"], t["block_dim_y"], t["block_dim_z"])
            self.shared_memory_size = t["shared_memory_size"]
            self.nfft = self.block_dim[1] * self.block_dim[2]  # FFTs (pairs of FFTs for float16)
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
        real = cplx.view(p.real_type)
    else:
        real = regs[: 2 * p.storage_size]
        cplx = real.view(p.value_type)
    return (real if p.real_in else cplx), (real if p.real_out else cplx)


def _halves(view: np.ndarray) -> np.ndarray:
    """float16 records (float16x4 / float16x2) as a (values, 4 or 2) float16 array (a view)."""
    return view.view(np.float16).reshape(view.shape[0], -1)


def _gather(p: _Plan, dst: np.ndarray, row: int, x: int, regs: np.ndarray) -> None:
    """Input registers of thread ``x`` into row ``row`` of ``dst`` (rows ``2 * row``, ``2 * row + 1``
    for float16: one per lane)."""
    view_in, _ = _views(p, regs)
    r, e = p.indices(x, p.in_ept, p.in_len)
    if p.lanes == 1:
        dst[row, e] = view_in[r]
        return
    h = _halves(view_in)[r].astype(np.float64)
    for lane in range(2):
        dst[2 * row + lane, e] = h[:, lane] if p.real_in else h[:, lane] + 1j * h[:, 2 + lane]


def _scatter(p: _Plan, src: np.ndarray, row: int, x: int, regs: np.ndarray) -> None:
    _, view_out = _views(p, regs)
    r, e = p.indices(x, p.out_ept, p.out_len)
    if p.lanes == 1:
        # registers that hold no output: unspecified on the GPU (NaN in both parts)
        (view_out if p.real_out else view_out.view(p.precision_type))[:] = np.nan
        view_out[r] = src[row, e]
        return
    h = _halves(view_out)
    h[:] = np.nan
    with np.errstate(over="ignore", invalid="ignore"):  # past float16's range: inf, as on the GPU
        for lane in range(2):
            v = src[2 * row + lane, e]
            if p.real_out:
                h[r, lane] = v.real
            else:
                h[r, lane] = v.real
                h[r, 2 + lane] = v.imag


def _in_dtype(p: _Plan):
    return np.float64 if p.real_in else np.complex128


# ---------------------------------------------------------------------------- argument checks
def _type_name(p: _Plan, dt: np.dtype) -> str:
    if p.lanes == 1:
        return str(dt)
    return "float16x4" if dt == p.value_type else "float16x2" if dt == p.real_type else str(dt)


def _check_registers(p: _Plan, regs) -> None:
    what = "FFT.execute: thread_data (1st argument)"
    hint = "cuda.local.array(fft.storage_size, dtype=fft.value_type)"
    if not isinstance(regs, np.ndarray):
        raise TypeError(f"{what} must be a local array ({hint}), got {type(regs).__name__}")
    if regs.dtype not in (p.value_type, p.real_type):
        realname = "the real view, fft.input_type of r2c" if p.lanes == 2 else "fft.precision_type"
        raise TypeError(
            f"{what} must hold {_type_name(p, p.value_type)} (fft.value_type) or "
            f"{_type_name(p, p.real_type)} ({realname}) values, got an array of {_type_name(p, regs.dtype)}"
        )
    if regs.ndim != 1 or not regs.flags.c_contiguous:
        raise TypeError(
            f"{what} must be a 1-D contiguous local array, got shape {regs.shape}"
            f"{'' if regs.flags.c_contiguous else ' (not contiguous)'}"
        )
    need = p.storage_size * (1 if regs.dtype == p.value_type else 2)
    if regs.shape[0] < need:
        name = _type_name(p, regs.dtype)
        raise ValueError(
            f"{what} has {regs.shape[0]} {name} values; this FFT needs at least {need} "
            f"(fft.storage_size = {p.storage_size} {_type_name(p, p.value_type)} values"
            f"{'' if regs.dtype == p.value_type else ', i.e. 2 * fft.storage_size ' + name})"
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
    x_in = np.zeros((p.nfft * p.lanes, p.in_len), dtype=_in_dtype(p))
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
    x_in = np.zeros((p.lanes, p.in_len), dtype=_in_dtype(p))
    _gather(p, x_in, 0, 0, thread_data)
    _scatter(p, _transform(p, x_in), 0, 0, thread_data)


def _execute_shared(p: _Plan, shared_memory) -> None:
    """``fft.execute(shared_memory)``: the block's FFTs in natural order in shared memory (cuFFTDx's
    shared-memory API): the input of FFT ``fft_id = threadIdx.y + block_dim.y * threadIdx.z``
    at element ``fft_id * input_length`` of the array viewed as ``input_type``, its output at
    element ``fft_id * output_length`` of the array viewed as ``output_type`` (float16: one
    element holds a pair of FFTs). As the numba layer runs it: load the thread's input elements,
    barrier, the register form, barrier, store its output elements."""
    thread, ctx = _kernel_context("FFT.execute")
    forms = ("FFT.execute with execution='Block' takes (thread_data, shared_memory), or "
             "(shared_memory,) with the block's data in shared memory")
    if not isinstance(shared_memory, np.ndarray) or shared_memory.dtype != p.value_type \
            or shared_memory.ndim != 1 or not shared_memory.flags.c_contiguous:
        got = shared_memory.dtype if isinstance(shared_memory, np.ndarray) else type(shared_memory).__name__
        raise TypeError(
            f"{forms}: the one argument must be a 1-D contiguous shared array of "
            f"{_type_name(p, p.value_type)} (fft.value_type) holding the block's FFTs one after "
            f"another, got {_type_name(p, got) if isinstance(got, np.dtype) else got}"
            f"{getattr(shared_memory, 'shape', '')}"
        )
    if not is_shared(ctx, shared_memory):
        raise TypeError(
            f"{forms}; got 1 argument that is not shared memory (registers without the shared "
            "memory? shared_memory is cuda.shared.array(0, dtype=fft.value_type) with "
            "fft.shared_memory_size bytes of dynamic shared memory at launch)"
        )
    _check_block_dim(p, ctx)
    in_t = p.real_type if p.real_in else p.value_type
    out_t = p.real_type if p.real_out else p.value_type
    need = p.nfft * max(p.in_len * in_t.itemsize, p.out_len * out_t.itemsize)
    if shared_memory.nbytes < need:
        values = -(-need // p.value_type.itemsize)
        raise ValueError(
            f"FFT.execute(shared_memory): the shared array has {shared_memory.size} values; the "
            f"block's {p.nfft} FFT{' pairs' if p.lanes == 2 else 's'} of size {p.size} need {values} "
            f"({need} bytes: fft.block_dim.y * max(fft.input_length * input itemsize, "
            f"fft.output_length * output itemsize)); launch with at least "
            f"max(fft.shared_memory_size, {need}) bytes"
        )
    x, y, z = thread.threadIdx
    fft_id = y + p.block_dim[1] * z
    td = np.zeros(p.storage_size, dtype=p.value_type)
    regs_in, regs_out = _views(p, td)
    r, idx = p.indices(x, p.in_ept, p.in_len)
    regs_in[r] = shared_memory.view(in_t)[fft_id * p.in_len + idx]
    thread.syncthreads()
    _execute_block(p, td, shared_memory)
    r, idx = p.indices(x, p.out_ept, p.out_len)
    shared_memory.view(out_t)[fft_id * p.out_len + idx] = regs_out[r]


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
