# SPDX-License-Identifier: Apache-2.0
"""Instruction ceilings of the GPU in use, measured (not taken from a datasheet): what a kernel
built from one kind of arithmetic instruction can reach at most on this machine.

    python benchmarks/ceilings.py            # prints them (needs a GPU)

- ``fp32_fma``: FLOP/s of fp32 FMAs (8 independent ``fmaf`` chains per thread, the step loop
  unrolled 16 times: 128 FFMA per loop branch; 8 blocks of 256 threads per SM; 2 FLOP per FMA).
  The bound of the fp32 FFT kernels and of cuBLASDx's fp32 GEMM (FFMA: no tensor cores for fp32
  operands). Until 2026-12-02 this was a Numba kernel whose ``range`` loop spent 5 integer
  instructions per 8 FMAs (its sm_90 SASS: 64-bit trip-count compares and selects), which
  measured 32.0 TFLOP/s on the H200: an arithmetic bound about 1.5x too slow.
- ``mma_sync_f16`` / ``mma_sync_bf16``: FLOP/s of the warp-level tensor-core instruction
  ``mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32`` (4 or 8 independent
  accumulator chains per warp, 8 warps per block, 4 or 8 blocks per SM: the best of the four;
  2 x 16 x 8 x 16 FLOP per instruction).
  This is the instruction cuBLASDx 0.4 (nvidia-mathdx 25.6) uses for half-precision GEMMs on
  sm_90: its database (``cublasdx/database/cute_tensor_configs.hpp``) maps sm_90 to SM80 MMA
  atoms, never to the Hopper warpgroup instructions (``wgmma``) that cuBLAS uses, so a GEMM made
  with it cannot be faster than this ceiling however well it is pipelined.

- FFT throughput (``measure_fft_rate(fwd, inv)``): FFTs per second of cuFFTDx Block FFT
  descriptors (or of ``kernels._regfft``'s, our own) run back to back on data that never leaves
  registers and shared memory (as many blocks as fit on the GPU at once at the kernel's
  occupancy, each chaining ``reps`` forward [+ inverse] FFTs, rescaling between them): the arithmetic,
  shared-memory exchanges and synchronisation of the FFTs themselves, without loads or stores
  of the signal. The FFT kernels of ``kernels`` cannot run faster than their FFT work at this
  rate, whatever their memory traffic: ``fused_kernels.py`` reports that bound per case.

- ``copy``: bytes per second (read + written) of a device-to-device copy of 512 MiB, the faster
  of ``cudaMemcpy`` and a kernel that copies 16 bytes per thread: the memory ceiling of this
  card. The benchmarks' memory floors use 4.3e12 B/s, this figure on the H200; on another card
  they also report the floor at its own copy rate.

Each figure is the best of 5 CUDA-event-timed launches after one warm-up.
"""

from __future__ import annotations

import numpy as np
from numba import cuda  # cuda a module global: the simulator swaps it inside kernels

FMA_UNROLL = 16
_FMA_SRC = r"""
extern "C" __global__ void fma_chains(float* out, int steps) {
    const float y = 0.999999f, z = 1e-7f;
    float x[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) x[j] = (float)((threadIdx.x + j) % 7);
    for (int s = 0; s < steps; s += UNROLL) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
            for (int j = 0; j < 8; ++j) x[j] = fmaf(x[j], y, z);
        }
    }
    float t = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) t += x[j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = t;
}
""".replace("UNROLL", str(FMA_UNROLL))

_MMA_SRC = r"""
extern "C" __global__ void mma_chains(float* out, int steps) {
    unsigned a0 = threadIdx.x * 0x00010001u, a1 = a0 ^ 0x00100010u, a2 = a0 ^ 0x00200020u, a3 = a0 ^ 0x00300030u;
    unsigned b0 = a0 ^ 0x00400040u, b1 = a0 ^ 0x00500050u;
    float c[CHAINS][4];
    for (int j = 0; j < CHAINS; ++j) for (int i = 0; i < 4; ++i) c[j][i] = 0.f;
    for (int s = 0; s < steps; ++s) {
#pragma unroll
        for (int j = 0; j < CHAINS; ++j) {
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.TYPE.TYPE.f32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
        }
    }
    float t = 0.f;
    for (int j = 0; j < CHAINS; ++j) for (int i = 0; i < 4; ++i) t += c[j][i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = t;
}
"""
MMA_TYPES = {"f16": "f16", "bf16": "bf16"}

_COPY_SRC = r"""
extern "C" __global__ void copy16(const float4* __restrict__ src, float4* __restrict__ dst, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}
"""
COPY_BYTES = 512 << 20


def mma_source(kind: str, chains: int = 4) -> str:
    """CUDA C++ of the mma.sync kernel for ``kind`` ('f16' or 'bf16'): ``chains`` independent
    accumulators per warp, each step one ``mma.sync`` on each."""
    if kind not in MMA_TYPES:
        raise ValueError(f"kind must be one of {sorted(MMA_TYPES)}, got {kind!r}")
    if isinstance(chains, bool) or not isinstance(chains, int) or not 1 <= chains <= 16:
        raise ValueError(f"chains must be an int from 1 to 16, got {chains!r}")
    return _MMA_SRC.replace("TYPE", MMA_TYPES[kind]).replace("CHAINS", str(chains))


def _best_seconds(launch, reps=5) -> float:
    launch()
    cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        e0, e1 = cuda.event(), cuda.event()
        e0.record()
        launch()
        e1.record()
        e1.synchronize()
        best = min(best, cuda.event_elapsed_time(e0, e1) / 1e3)
    return best


def fma_source() -> str:
    """CUDA C++ of the fp32 FMA kernel ``fma_chains(out, steps)`` (steps: a multiple of
    ``FMA_UNROLL``)."""
    return _FMA_SRC


def measure_fp32_fma_rate() -> float:
    """FLOP/s of fp32 FMAs on this GPU (see the module)."""
    import cupy as cp

    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    blocks, threads, steps = 8 * sms, 256, 4096
    kernel = cp.RawKernel(fma_source(), "fma_chains")  # NVRTC, for this GPU
    out = cp.empty(blocks * threads, cp.float32)
    seconds = _best_seconds(lambda: kernel((blocks,), (threads,), (out, np.int32(steps))))
    return 2.0 * 8 * steps * blocks * threads / seconds


def copy_source() -> str:
    """CUDA C++ of the copy kernel ``copy16(src, dst, n)``: one float4 (16 bytes) per thread."""
    return _COPY_SRC


def measure_copy_rate(nbytes: int = COPY_BYTES) -> float:
    """Bytes per second, read + written counted, of a device-to-device copy of ``nbytes`` (a
    multiple of 16) on this GPU: the faster of ``cudaMemcpy`` and ``copy16`` (see the module)."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes <= 0 or nbytes % 16:
        raise ValueError(f"nbytes must be a positive multiple of 16, got {nbytes!r}")
    import cupy as cp

    seconds = _copy_seconds(cp, nbytes)
    cp.get_default_memory_pool().free_all_blocks()  # the arrays' memory back to the GPU, not kept by CuPy's pool
    return 2.0 * nbytes / seconds


def _copy_seconds(cp, nbytes: int) -> float:
    """The faster of ``copy16`` (checked) and ``cudaMemcpy`` on two arrays of ``nbytes``."""
    n, threads = nbytes // 16, 256
    src, dst = cp.ones(nbytes // 4, cp.float32), cp.empty(nbytes // 4, cp.float32)
    kernel = cp.RawKernel(_COPY_SRC, "copy16")  # NVRTC, for this GPU
    kernel_s = _best_seconds(lambda: kernel(((n + threads - 1) // threads,), (threads,), (src, dst, np.int64(n))))
    if not bool((dst == src).all()):
        raise RuntimeError("the copy kernel's result differs from its source")
    return min(kernel_s, _best_seconds(lambda: dst.data.copy_from_device(src.data, nbytes)))


def measure_mma_sync_rate(kind: str) -> float:
    """FLOP/s of ``mma.sync`` m16n8k16 with fp32 accumulation for ``kind`` inputs: the best of
    4 or 8 chains per warp and 4 or 8 blocks of 8 warps per SM (see the module)."""
    import cupy as cp

    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    threads, steps, best = 256, 4096, 0.0
    for chains in (4, 8):
        kernel = cp.RawKernel(mma_source(kind, chains), "mma_chains")  # NVRTC, for this GPU
        for per_sm in (4, 8):
            blocks = per_sm * sms
            out = cp.empty(blocks * threads, cp.float32)
            seconds = _best_seconds(lambda k=kernel, b=blocks, o=out: k((b,), (threads,), (o, np.int32(steps))))
            warps = blocks * threads // 32
            best = max(best, 2.0 * 16 * 8 * 16 * chains * steps * warps / seconds)
    return best


def _input_floats(fwd) -> int:
    """How many of a thread's registers (precision floats) hold its input: ``input_ept`` reals for
    an unfolded r2c FFT, twice ``input_ept`` (complex values or folded real pairs) otherwise."""
    real = fwd.fft_type == "r2c"
    folded = real and fwd.real_fft_options["real_mode"] == "folded"
    return fwd.input_ept if real and not folded else 2 * fwd.input_ept


def fft_chain_kernel(fwd, inv=None):
    """A kernel ``(out, reps)`` chaining ``reps`` times ``fwd`` (then ``inv``) on each block's
    registers, rescaled after each step so that the values stay bounded (by 1/n after a forward
    + inverse pair, which returns the input; by 1/sqrt(n) after a forward FFT alone); each thread
    then writes the sum of its input registers to ``out[thread]``. Launch with ``fwd.block_dim``
    threads and ``fwd.shared_memory_size`` bytes of dynamic shared memory."""
    import math

    prec = fwd.precision_type
    s2 = 2 * max(fwd.storage_size, inv.storage_size if inv is not None else 0)
    nin = _input_floats(fwd)
    fpb, bdx = fwd.ffts_per_block_value, fwd.block_dim[0]
    scale = np.dtype(prec).type(1.0 / fwd.size if inv is not None else 1.0 / math.sqrt(fwd.size))
    step, zero = np.dtype(prec).type(1.0 / 64), np.dtype(prec).type(0)
    nthreads = fwd.block_dim[0] * fwd.block_dim[1] * fwd.block_dim[2]

    pair = inv is not None
    second = inv if pair else fwd  # typed in both variants; run only in the pair (a constant branch)
    cdt = fwd.value_type  # the shared memory's type (kernels._regfft's FFT takes complex64 only)

    @cuda.jit(launch_bounds=nthreads)
    def fft_chain(out, reps):
        r = cuda.local.array(s2, dtype=prec, alignment=16)
        smem = cuda.shared.array(0, dtype=cdt)
        t = (cuda.blockIdx.x * fpb + cuda.threadIdx.y) * bdx + cuda.threadIdx.x
        for i in range(s2):
            r[i] = ((t * 7 + i * 3) % 13 - 6) * step if i < nin else zero
        for _ in range(reps):
            fwd.execute(r, smem)
            if pair:
                cuda.syncthreads()
                second.execute(r, smem)
            for i in range(s2):
                r[i] *= scale
            cuda.syncthreads()
        acc = zero
        for i in range(nin):
            acc += r[i]
        out[t] = acc

    return fft_chain


def fft_chain_sums(fwd, blocks: int) -> np.ndarray:
    """What :func:`fft_chain_kernel`'s forward + inverse chain writes for ``blocks`` blocks: each
    thread's sum of its input registers, the pair returning its input (a round trip)."""
    prec = fwd.precision_type
    nin = _input_floats(fwd)
    t = np.arange(blocks * fwd.ffts_per_block_value * fwd.block_dim[0])[:, None]
    i = np.arange(nin)[None, :]
    return (((t * 7 + i * 3) % 13 - 6) / 64).sum(axis=1).astype(prec)


def chain_blocks(resident, sms: int) -> int:
    """The FFT chain's grid: every block that fits on the GPU at once at the kernel's own
    occupancy (``resident``: one full wave, no tail), or 8 per SM where that is unknown (None).
    A fixed 8 per SM (the rule until 2026-12-02) left a 64-thread block at a quarter of the
    threads an SM holds, so the meter undercounted small-block configurations: the matched
    filter's kernel at (ept 16, 1 FFT per block) ran faster than its FFT pair "alone"."""
    return int(resident) if resident else 8 * sms


def measure_fft_rate(fwd, inv=None, reps: int = 32) -> float:
    """Forward (+ inverse) FFTs per second of these Block descriptors on this GPU (see the
    module): :func:`chain_blocks` blocks, ``reps`` chained steps per block, the best of 5
    launches."""
    from numba import typeof

    kernel = fft_chain_kernel(fwd, inv)
    argtypes = (typeof(cuda.device_array(1, fwd.precision_type)), typeof(reps))  # for the occupancy query
    resident = kernel.compile(argtypes).max_cooperative_grid_blocks(fwd.block_dim, fwd.shared_memory_size)
    blocks = chain_blocks(resident, cuda.get_current_device().MULTIPROCESSOR_COUNT)
    out = cuda.device_array(blocks * fwd.ffts_per_block_value * fwd.block_dim[0], fwd.precision_type)
    cfg = kernel[blocks, fwd.block_dim, 0, fwd.shared_memory_size]
    return blocks * fwd.ffts_per_block_value * reps / _best_seconds(lambda: cfg(out, reps))


def measure_all() -> dict:
    """{name: FLOP/s, or B/s for ``copy``} of every ceiling above; a ceiling that cannot be
    measured maps to its error."""
    out: dict = {}
    for name, fn in (("fp32_fma", measure_fp32_fma_rate), ("mma_sync_f16", lambda: measure_mma_sync_rate("f16")),
                     ("mma_sync_bf16", lambda: measure_mma_sync_rate("bf16")), ("copy", measure_copy_rate)):
        try:
            out[name] = fn()
        except Exception as e:  # noqa: BLE001  (recorded, e.g. no cupy)
            out[name] = f"{type(e).__name__}: {str(e)[:200]}"
    return out


if __name__ == "__main__":
    for k, v in measure_all().items():
        unit = "TB/s" if k == "copy" else "TFLOP/s"
        print(f"{k}: {v / 1e12:.2f} {unit}" if isinstance(v, float) else f"{k}: {v}")
