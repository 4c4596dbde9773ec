# SPDX-License-Identifier: Apache-2.0
"""Fused FFT -> pointwise multiply -> inverse FFT (one kernel) vs CuPy's cuFFT (3 passes) vs
nvmath-python's device FFT, c2c fp32, same data, same process.

    python benchmarks/fft_convolution.py --out bench_out [--mbytes 512] [--sizes 64 512 4096]

Writes fft_convolution.json and fft_convolution.md into --out. Memory floor: read x, read the
per-element filter h, write y (3 x array bytes) at 4.3 TB/s (H200 device copy, measured); the
card floor puts them at this card's copy rate, measured at the start (``benchmarks/ceilings.py``). A
pointwise ``y = x * h`` kernel (same bytes, no FFT; first size only) shows what this access
pattern reaches at all.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time

import numpy as np
from numba import cuda  # a module global: the CUDA simulator swaps it inside simulated kernels

PEAK_BPS = 4.3e12


def _jit(fwd, min_blocks):
    """``cuda.jit``, with launch bounds for ``min_blocks`` blocks of ``fwd.block_dim`` per SM
    when given."""
    nthreads = fwd.block_dim[0] * fwd.block_dim[1] * fwd.block_dim[2]
    return cuda.jit(launch_bounds=(nthreads, min_blocks)) if min_blocks else cuda.jit


def conv_kernel(fwd, inv, n, ept, stride, fpb, storage, vt, prefetch=False, min_blocks=None, vector=False):
    """The fused kernel, written once for any pair of descriptors with ``execute(td, smem)``.
    ``prefetch``: h is loaded into registers with x, before the forward FFT (its loads are in
    flight during the FFT instead of after it). ``min_blocks``: launch bounds asking the compiler
    for registers that let that many blocks share an SM (occupancy; may spill). ``vector``: x, h
    and y move through ``nvmath_device.load_complex``/``store_complex`` (one 8-byte access per
    value instead of numba's two 4-byte ones). ``fwd``/``inv``: cuFFTDx descriptors or
    kernels._regfft's (the same ``execute``)."""
    from nvmath_device import load_complex, store_complex

    zero = np.dtype(vt).type(0)  # typed: a bare 0 would make every load a complex128 (f64 converts)

    @_jit(fwd, min_blocks)
    def conv(x, h, y, nrows):
        td = cuda.local.array(storage, dtype=vt)
        hv = cuda.local.array(ept, dtype=vt)
        smem = cuda.shared.array(0, dtype=vt)
        row = cuda.blockIdx.x * fpb + cuda.threadIdx.y
        base = row * n + cuda.threadIdx.x
        ok = row < nrows
        for i in range(ept):
            if vector:
                td[i] = load_complex(x, base + i * stride) if ok else zero
                if prefetch:
                    hv[i] = load_complex(h, base + i * stride) if ok else zero
            else:
                td[i] = x[base + i * stride] if ok else zero
                if prefetch:
                    hv[i] = h[base + i * stride] if ok else zero
        fwd.execute(td, smem)
        for i in range(ept):
            if ok:
                if prefetch:
                    td[i] = td[i] * hv[i]
                elif vector:
                    td[i] = td[i] * load_complex(h, base + i * stride)
                else:
                    td[i] = td[i] * h[base + i * stride]
        cuda.syncthreads()
        inv.execute(td, smem)
        if ok:
            for i in range(ept):
                if vector:
                    store_complex(y, base + i * stride, td[i])
                else:
                    y[base + i * stride] = td[i]

    return conv


def pipelined_kernel(fwd, inv, n, ept, stride, fpb, storage, vt, vector=False):
    """The fused kernel on a persistent grid, software-pipelined: each block walks its rows
    (row groups ``blockIdx.x, blockIdx.x + gridDim.x, ...``) and loads the next row's x and h
    into registers before the FFTs of the current one, so every block keeps loads in flight
    through its compute phases. Launch with as many blocks as fit on the GPU at once.
    ``vector``: as for :func:`conv_kernel`."""
    from nvmath_device import load_complex, store_complex

    zero = np.dtype(vt).type(0)

    @cuda.jit
    def conv(x, h, y, nrows):
        td = cuda.local.array(storage, dtype=vt)
        hv = cuda.local.array(ept, dtype=vt)
        nx = cuda.local.array(ept, dtype=vt)
        nh = cuda.local.array(ept, dtype=vt)
        smem = cuda.shared.array(0, dtype=vt)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        groups = (nrows + fpb - 1) // fpb
        g = cuda.blockIdx.x
        row = g * fpb + ty
        ok = row < nrows
        for i in range(ept):
            if vector:
                td[i] = load_complex(x, row * n + tx + i * stride) if ok else zero
                hv[i] = load_complex(h, row * n + tx + i * stride) if ok else zero
            else:
                td[i] = x[row * n + tx + i * stride] if ok else zero
                hv[i] = h[row * n + tx + i * stride] if ok else zero
        while g < groups:  # uniform in the block: every thread runs the same FFTs
            nrow = row + cuda.gridDim.x * fpb
            nok = nrow < nrows
            for i in range(ept):  # the next row, in flight during this row's FFTs
                if vector:
                    nx[i] = load_complex(x, nrow * n + tx + i * stride) if nok else zero
                    nh[i] = load_complex(h, nrow * n + tx + i * stride) if nok else zero
                else:
                    nx[i] = x[nrow * n + tx + i * stride] if nok else zero
                    nh[i] = h[nrow * n + tx + i * stride] if nok else zero
            fwd.execute(td, smem)
            for i in range(ept):
                td[i] = td[i] * hv[i]
            cuda.syncthreads()
            inv.execute(td, smem)
            if ok:
                for i in range(ept):
                    if vector:
                        store_complex(y, row * n + tx + i * stride, td[i])
                    else:
                        y[row * n + tx + i * stride] = td[i]
            cuda.syncthreads()
            for i in range(ept):
                td[i] = nx[i]
                hv[i] = nh[i]
            g += cuda.gridDim.x
            row = nrow
            ok = nok

    return conv


def async_kernel(fwd, inv, n, ept, stride, fpb, storage, vt, min_blocks=None):
    """The fused kernel on a persistent grid with the next row's x and h copied global ->
    shared by ``nvmath_device.copy_async`` (``cp.async``: no registers held) while the current
    row's FFTs run. Each thread copies, and later reads back, exactly its own elements, so the
    staging buffers (after cuFFTDx's shared memory) need no barrier. y is stored with
    ``store_complex``. Launch with as many blocks as fit at once; dynamic shared memory
    :func:`async_shared_bytes`. ``min_blocks``: as for :func:`conv_kernel`."""
    from nvmath_device import copy_async, copy_async_commit, copy_async_wait, store_complex

    zero = np.dtype(vt).type(0)
    fft_e = -(-fwd.shared_memory_size // 16) * 16 // np.dtype(vt).itemsize  # staging starts here
    stage = n * fpb

    @_jit(fwd, min_blocks)
    def conv(x, h, y, nrows):
        td = cuda.local.array(storage, dtype=vt)
        hv = cuda.local.array(ept, dtype=vt)
        smem = cuda.shared.array(0, dtype=vt)
        sx = smem[fft_e:fft_e + stage]
        sh = smem[fft_e + stage:fft_e + 2 * stage]
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        groups = (nrows + fpb - 1) // fpb
        g = cuda.blockIdx.x
        row = g * fpb + ty
        own = ty * n + tx  # this thread's first element in the staging buffers
        if row < nrows:
            for i in range(ept):
                copy_async(sx, own + i * stride, x, row * n + tx + i * stride)
                copy_async(sh, own + i * stride, h, row * n + tx + i * stride)
        copy_async_commit()
        while g < groups:  # uniform in the block: every thread runs the same FFTs
            copy_async_wait(0)
            ok = row < nrows
            for i in range(ept):  # this row's x and h: staged, into registers
                td[i] = sx[own + i * stride] if ok else zero
                hv[i] = sh[own + i * stride] if ok else zero
            nrow = row + cuda.gridDim.x * fpb
            if nrow < nrows:  # the next row, in flight during this row's FFTs
                for i in range(ept):
                    copy_async(sx, own + i * stride, x, nrow * n + tx + i * stride)
                    copy_async(sh, own + i * stride, h, nrow * n + tx + i * stride)
            copy_async_commit()
            fwd.execute(td, smem)
            for i in range(ept):
                td[i] = td[i] * hv[i]
            cuda.syncthreads()
            inv.execute(td, smem)
            if ok:
                for i in range(ept):
                    store_complex(y, row * n + tx + i * stride, td[i])
            cuda.syncthreads()
            g += cuda.gridDim.x
            row = nrow

    return conv


def async_shared_bytes(fwd, n, fpb, vt):
    """Dynamic shared memory of :func:`async_kernel`: cuFFTDx's, then x and h staging rows."""
    return -(-fwd.shared_memory_size // 16) * 16 + 2 * n * fpb * np.dtype(vt).itemsize


def pointwise_row(x, h, x_nb, h_nb, size, do_bench):
    """The ceiling of this access pattern: y = x * h element by element (read x, read h, write y;
    no FFT), one element per thread, 256 threads per block. No fused kernel can beat it."""
    import cupy as cp

    @cuda.jit
    def mul(x, h, y):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = x[i] * h[i]

    y = cp.full_like(x, cp.nan)
    y_nb = cuda.as_cuda_array(y.ravel())
    launch = mul[(x.size + 255) // 256, 256]
    launch(x_nb, h_nb, y_nb)
    cp.cuda.runtime.deviceSynchronize()
    ref = x * h
    err = float(cp.linalg.norm(y - ref) / cp.linalg.norm(ref))
    ms = do_bench(lambda: launch(x_nb, h_nb, y_nb), warmup=50, rep=300, return_mode="median")
    return dict(size=size, impl="pointwise y = x * h (no FFT: the ceiling)", config="256 threads", ms=ms,
                rel_err=err)


def ours_kernel(size, ept, fpb, prefetch=False, min_blocks=None, vector=False):
    """``prefetch``: False, True (h with x), "pipelined" (:func:`pipelined_kernel`) or "async"
    (:func:`async_kernel`, always with 8-byte stores); ``min_blocks``, ``vector``: see
    :func:`conv_kernel`."""
    from nvmath_device import FFT

    kw = dict(size=size, precision=np.float32, elements_per_thread=ept, ffts_per_block=fpb)
    fwd, inv = FFT(direction="forward", **kw), FFT(direction="inverse", **kw)
    e, f = fwd.elements_per_thread_value, fwd.ffts_per_block_value
    smem = fwd.shared_memory_size
    if prefetch == "async":
        make = functools.partial(async_kernel, min_blocks=min_blocks)
        smem = async_shared_bytes(fwd, size, f, fwd.value_type)
    elif prefetch == "pipelined":
        make = functools.partial(pipelined_kernel, vector=vector)
    else:
        make = functools.partial(conv_kernel, prefetch=prefetch, min_blocks=min_blocks, vector=vector)
    k = make(fwd, inv, size, e, fwd.stride, f, fwd.storage_size, fwd.value_type)
    label = {False: "", True: " h prefetched", "pipelined": " pipelined (persistent grid, next row prefetched)",
             "async": " copy_async (persistent grid, next row staged in shared memory)"}
    bounds = f" >= {min_blocks} blocks/SM" if min_blocks else ""
    vec = " 8-byte loads/stores" if vector and prefetch != "async" else ""
    return k, fwd.block_dim, smem, f, f"ept={e} fpb={f}" + label[prefetch] + bounds + vec


def own_kernel(size, ept, fpb, prefetch=False, min_blocks=None, vector=True):
    """The same kernel with our own block FFT (``kernels._regfft``; ``ept``/``fpb`` "suggested":
    its defaults)."""
    from kernels import _regfft

    fwd, inv = _regfft.pair(size, None if ept == "suggested" else ept, None if fpb == "suggested" else fpb)
    e, f = fwd.elements_per_thread_value, fwd.ffts_per_block_value
    k = conv_kernel(fwd, inv, size, e, fwd.stride, f, fwd.storage_size, fwd.value_type, prefetch, min_blocks,
                    vector)
    cfg = f"ept={e} fpb={f}" + (" h prefetched" if prefetch else "") + (" 8-byte loads/stores" if vector else "")
    return k, fwd.block_dim, fwd.shared_memory_size, f, cfg


def nvmath_kernel(size, ept, fpb, prefetch=False, min_blocks=None, vector=False):
    """The same kernel with nvmath-python's device FFT (its 1.0 API)."""
    from nvmath.device import FFT as NvFFT

    kw = dict(size=size, precision=np.float32, fft_type="c2c", execution="Block",
              elements_per_thread=ept, ffts_per_block=fpb)
    fwd, inv = NvFFT(direction="forward", **kw), NvFFT(direction="inverse", **kw)
    e, f = fwd.elements_per_thread, fwd.ffts_per_block
    k = conv_kernel(fwd, inv, size, e, fwd.stride, f, fwd.storage_size, fwd.value_type, prefetch, min_blocks,
                    vector)
    return k, fwd.block_dim, fwd.shared_memory_size, f, f"ept={e} fpb={f}" + (" h prefetched" if prefetch else "")


def own_unsupported(size, ept):
    """kernels._regfft's refusal of ``size`` points at ``ept`` elements per thread, or None."""
    from kernels import _regfft

    return _regfft.unsupported(size, ept, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_out")
    ap.add_argument("--mbytes", type=int, default=512, help="MiB per array")
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 512, 4096])
    ap.add_argument("--no-peer", action="store_true", help="skip nvmath-python")
    ap.add_argument("--sweep", action="store_true",
                    help="ours: every elements_per_thread cuFFTDx offers, plain / h prefetched / pipelined")
    ap.add_argument("--min-blocks", type=int, nargs="+", default=[],
                    help="ours, suggested layout: also with launch bounds for these blocks per SM")
    args = ap.parse_args()
    if any(b < 1 for b in args.min_blocks):
        ap.error(f"--min-blocks takes blocks per SM >= 1, got {args.min_blocks}")
    os.makedirs(args.out, exist_ok=True)

    import cupy as cp
    from triton.testing import do_bench

    rows_out = []
    nbytes = args.mbytes * 2**20
    floor_ms = 3 * nbytes / PEAK_BPS * 1e3
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ceilings.py
    from ceilings import measure_copy_rate

    copy_bps = measure_copy_rate()  # this card's floor: the same bytes at its own copy rate
    card_floor_ms = 3 * nbytes / copy_bps * 1e3
    print(f"# device copy rate: {copy_bps / 1e12:.2f} TB/s", flush=True)
    for size in args.sizes:
        nrows = nbytes // (8 * size)
        rng = cp.random.default_rng(size)
        x = (rng.standard_normal((nrows, size), dtype=cp.float32)
             + 1j * rng.standard_normal((nrows, size), dtype=cp.float32)).astype(cp.complex64)
        h = (rng.standard_normal((nrows, size), dtype=cp.float32)
             + 1j * rng.standard_normal((nrows, size), dtype=cp.float32)).astype(cp.complex64)
        h_scaled = (h / size).astype(cp.complex64)  # cuFFTDx's inverse is unnormalised
        ref = cp.fft.ifft(cp.fft.fft(x, axis=-1) * h, axis=-1)
        # float64 check of a few rows of the cuFFT result itself
        xs, hs = cp.asnumpy(x[:4]).astype(np.complex128), cp.asnumpy(h[:4]).astype(np.complex128)
        exact = np.fft.ifft(np.fft.fft(xs, axis=-1) * hs, axis=-1)
        cupy_err = float(np.linalg.norm(cp.asnumpy(ref[:4]) - exact) / np.linalg.norm(exact))

        def cupy_conv(x=x, h=h):
            return cp.fft.ifft(cp.fft.fft(x, axis=-1) * h, axis=-1)

        ms = do_bench(cupy_conv, warmup=50, rep=300, return_mode="median")
        rows_out.append(dict(size=size, impl="cupy cuFFT (3 passes)", config="", ms=ms, rel_err=cupy_err))

        x_nb, h_nb = cuda.as_cuda_array(x.ravel()), cuda.as_cuda_array(h_scaled.ravel())
        if size == args.sizes[0]:  # the same bytes for every size: once
            rows_out.append(pointwise_row(x, h_scaled, x_nb, h_nb, size, do_bench))
            print(rows_out[-1], flush=True)
        impls = [("numba-mathdx (ours)", ours_kernel), ("numba-mathdx, own FFT (kernels._regfft)", own_kernel)]
        if not args.no_peer:
            impls.append(("nvmath-python device FFT", nvmath_kernel))
        ours_cfgs = [("suggested", "suggested", False), ("suggested", 1, False),
                     ("suggested", "suggested", True), ("suggested", 1, True), ("suggested", 1, "async")]
        if args.sweep:
            from nvmath_device import FFT

            ours_cfgs = [(e, "suggested", pre) for e in FFT.valid_elements_per_thread(size, np.float32)
                         for pre in (False, True, "pipelined", "async")]
        # (ept, ffts per block, prefetch, min blocks per SM, 8-byte loads/stores)
        ours_cfgs = [c + (None, vec) for c in ours_cfgs for vec in ((False, True) if c[2] != "async" else (True,))]
        ours_cfgs += [("suggested", "suggested", pre, mb, vec) for mb in args.min_blocks for pre in (False, True)
                      for vec in (False, True)]
        ours_cfgs += [("suggested", 1, "async", mb, True) for mb in args.min_blocks]
        peer_cfgs = [("suggested", "suggested", False, None, False)]
        # own FFT: 8-byte accesses, h prefetched or not; with --sweep every elements_per_thread it takes
        own_cfgs = [(e, "suggested", pre, None, True) for pre in (False, True)
                    for e in (("suggested",) if not args.sweep else
                              [e for e in (4, 8, 16, 32) if own_unsupported(size, e) is None])]
        for name, build in impls:
            cfgs = own_cfgs if "own FFT" in name else ours_cfgs if name.startswith("numba") else peer_cfgs
            timed = set()  # configurations that resolve alike ("suggested" fpb = 1) are timed once
            for ept, fpb, pre, mb, vec in cfgs:
                try:
                    t0 = time.perf_counter()
                    kern, block, smem, fpb_v, cfg = build(size, ept, fpb, pre, mb, vec)
                    if cfg in timed:
                        continue
                    timed.add(cfg)
                    y = cp.full_like(x, cp.nan)
                    y_nb = cuda.as_cuda_array(y.ravel())
                    grid = (nrows + fpb_v - 1) // fpb_v
                    if pre in ("pipelined", "async"):  # persistent: the blocks that fit at once (compiled first)
                        kern[grid, block, 0, smem](x_nb, h_nb, y_nb, nrows)
                        y.fill(cp.nan)
                        fits = next(iter(kern.overloads.values())).max_cooperative_grid_blocks(block, smem)
                        grid = min(grid, fits)
                        cfg += f" grid={grid}"
                    kern[grid, block, 0, smem](x_nb, h_nb, y_nb, nrows)
                    cp.cuda.runtime.deviceSynchronize()
                    first_s = time.perf_counter() - t0
                    err = float(cp.linalg.norm(y - ref) / cp.linalg.norm(ref))
                    launch = kern[grid, block, 0, smem]
                    ms = do_bench(lambda launch=launch, a=(x_nb, h_nb, y_nb, nrows): launch(*a),
                                  warmup=50, rep=300, return_mode="median")
                    regs = kern.get_regs_per_thread()
                    regs = next(iter(regs.values())) if isinstance(regs, dict) else regs
                    rows_out.append(dict(size=size, impl=name, config=f"{cfg} regs={regs}", ms=ms, rel_err=err,
                                         first_call_s=round(first_s, 2)))
                except Exception as e:  # report, don't hide
                    rows_out.append(dict(size=size, impl=name, config=f"{ept}/{fpb}", ms=None,
                                         error=f"{type(e).__name__}: {str(e)[:300]}"))
                print(rows_out[-1], flush=True)
        del x, h, h_scaled, ref
        cp.get_default_memory_pool().free_all_blocks()

    for r in rows_out:
        if r.get("ms"):
            r["floor_ms"] = floor_ms
            r["fraction_of_floor"] = floor_ms / r["ms"]
            r["fraction_of_card_floor"] = card_floor_ms / r["ms"]
    import torch  # noqa: F401  (only for the device name)

    meta = dict(device=cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), mbytes_per_array=args.mbytes,
                floor_ms=floor_ms, copy_bps=copy_bps, card_floor_ms=card_floor_ms, command="python benchmarks/fft_convolution.py " + " ".join(
                    f"--{k.replace('_', '-')} {v}" if not isinstance(v, list) else f"--{k.replace('_', '-')} " + " ".join(map(str, v))
                    for k, v in vars(args).items() if k not in ("no_peer", "sweep") and v != []) + (" --sweep" if args.sweep else ""))
    with open(os.path.join(args.out, "fft_convolution.json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows_out), f, indent=1)
    lines = [f"Fused FFT convolution, c2c fp32, {args.mbytes} MiB per array, {meta['device']}; "
             f"floor {floor_ms:.3f} ms (3 x array bytes / 4.3 TB/s); card floor {card_floor_ms:.3f} ms "
             f"(at this card's measured copy rate, {copy_bps / 1e12:.2f} TB/s)", "",
             "| size | implementation | config | ms (median) | vs cuFFT | % of floor | % of card floor | rel. err |",
             "|---:|---|---|---:|---:|---:|---:|---:|"]
    for size in args.sizes:
        base = next((r["ms"] for r in rows_out if r["size"] == size and r["impl"].startswith("cupy")), None)
        for r in (r for r in rows_out if r["size"] == size):
            if r.get("ms"):
                lines.append(f"| {size} | {r['impl']} | {r['config']} | {r['ms']:.3f} | {base / r['ms']:.2f}x | "
                             f"{100 * r['fraction_of_floor']:.0f}% | {100 * r['fraction_of_card_floor']:.0f}% | "
                             f"{r['rel_err']:.1e} |")
            else:
                lines.append(f"| {size} | {r['impl']} | {r['config']} | failed: {r['error'][:120]} | | | | |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "fft_convolution.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
