# SPDX-License-Identifier: Apache-2.0
"""A device-wide GEMM written with the pipeline API (``DevicePipeline`` / ``TilePipeline``) against
cuBLAS, and the same GEMM with a fused bias + ReLU epilogue against cuBLAS + a separate epilogue.

    python benchmarks/device_gemm.py --out DIR [--size 4096] [--cases fp16 bf16 fp32 fused] [--no-peer]

Cases (M = N = K = --size; A row-major, B column-major, C row-major; inputs uniform(-1, 1)):

- ``fp16``: float16 A and B, float32 accumulation and C; peers: ``torch.matmul`` and
  ``cupy.matmul`` of the float16 arrays (cuBLAS, float32 accumulation, float16 C), and
  nvmath-python 1.0's DevicePipeline kernel written the same way (when nvmath-python imports);
- ``bf16``: the same with bfloat16 (peer: ``torch.matmul``);
- ``fp32``: float32 throughout; peers: ``torch.matmul`` with TF32 off, ``cupy.matmul``;
- ``fused``: fp16 with ``relu(A @ B + bias)`` (bias per column) in the GEMM's epilogue; peers:
  ``torch.relu(torch.addmm(bias, A, B))`` (cuBLAS + an elementwise kernel) and
  ``nvmath_host.matmul(..., epilog=RELU_BIAS)`` (cuBLASLt's fused epilogue).

Ours: each of a few tile shapes / pipeline depths (``--all-tiles``: more) is timed and the best is
reported with its configuration (all are in the JSON). TFLOP/s = 2 M N K / time. Timing: median
of CUDA-event-timed batches (warm-up first). Correctness: every output against the float64
product on 64 sampled rows (rel. err over those rows). Writes device_gemm.json and
device_gemm.md into --out. Exits with status 2 and a message when no GPU is usable.

Bound: cuBLASDx 0.4 (nvidia-mathdx 25.6) computes half-precision GEMMs with the warp-level
``mma.sync`` on sm_90 (its database maps sm_90 to SM80 MMA atoms) and fp32 GEMMs with FFMA;
cuBLAS uses Hopper's warpgroup ``wgmma``. The run measures those instruction ceilings first
(``benchmarks/ceilings.py``) and reports each result as a fraction of its case's ceiling beside
the fraction of cuBLAS. The JSON and the table are rewritten after each case (a run cut short
keeps what it measured).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = ("fp16", "bf16", "fp32", "fused")
# (tile m, n, k, threads, depth, resident blocks asked for through launch bounds). On sm_90 cubins
# (CPU, aot.compile_kernel): 128x128x32 depth 3 takes 132 registers (1 block of 256 threads per SM),
# 123 with 2 blocks asked for, no spills either way; 128x256x32: 201 registers.
# H200, 2026-12-02, bf16 4096^3 (ms): 0.651 / 0.436 / 0.434 / 0.465 / 0.450 in this order; fp32:
# 5.49 / 5.10 / 6.48. Added after that run: 4 warps on 128 x 128 (64 x 64 per warp, as CUTLASS's
# sm80 default; 201 registers with 2 blocks asked, no spills) and 128 x 256 at depth 4 (201, no
# spills); timed in the next session's run (bf16, ms): 256 threads depth 3 / depth 4 0.472 / 0.453,
# **4 warps 0.408** (336 TFLOP/s, 53 % of the mma.sync ceiling), 128 x 256 depth 4 0.469.
# Why the 64 x 64 warp tiles were expected to win (sm_90 SASS of the K loop, fp16, CPU: cuobjdump -sass): the 8-warp 128 x 128 tile
# gives each warp 32 x 64 (per K step of 32: 12 LDSM.16.M88.4 for 32 HMMA.16816), the two 64 x 64
# warp tiles 16 LDSM for 64 HMMA: a third less shared-memory read per FLOP. At mma.sync's rate the
# 32 x 64 tile's LDSM + LDGSTS traffic is about 150 B/clock/SM against shared memory's 128, which
# would explain 0.434 ms (317 TFLOP/s); the 4-warp tile did win, by 6 %. Each loop iteration also has one
# DEPBAR + BAR.SYNC and 4 (8-warp) or 8 (4-warp) LDGSTS.128 per thread.
TILES_ALL = ((128, 128, 32, 256, 3, 1), (128, 128, 32, 256, 3, 2), (128, 128, 32, 256, 4, 2), (128, 128, 32, 128, 4, 2),
             (128, 128, 64, 256, 3, 1), (128, 256, 32, 256, 3, 1), (128, 256, 32, 256, 4, 1))
TILES_FP32_ALL = ((128, 128, 16, 256, 3, 1), (128, 128, 16, 256, 3, 2), (64, 64, 16, 128, 4, 4))
# the default: the fastest tile of the H200 sweep of 2026-12-02 (bf16: 0.408 ms against 0.453-0.472
# for the others, benchmarks/RESULTS.md); one tile keeps a run of every case with its peers inside
# one GPU call (each tile costs a ~30 s compile there); --all-tiles sweeps TILES_ALL
TILES = TILES_ALL[3:4]
TILES_FP32 = TILES_FP32_ALL[1:2]
# the instruction ceiling (benchmarks/ceilings.py) that bounds each case's kernel
CEILING = {"fp16": "mma_sync_f16", "fused": "mma_sync_f16", "bf16": "mma_sync_bf16", "fp32": "fp32_fma"}
SAMPLE_ROWS = 64


def no_gpu_reason():
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        return "NUMBA_ENABLE_CUDASIM is set: the simulator cannot be benchmarked"
    try:
        from numba import cuda

        if not cuda.is_available() or len(cuda.gpus) == 0:
            return "numba-cuda finds no usable GPU"
    except Exception as e:  # noqa: BLE001
        return f"numba-cuda: {type(e).__name__}: {e}"
    try:
        import torch

        if not torch.cuda.is_available():
            return "PyTorch sees no GPU"
    except Exception as e:  # noqa: BLE001
        return f"PyTorch unusable: {type(e).__name__}: {e}"
    return None


def _median_ms(fn, reps=15, inner=5):
    import torch

    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(inner):
            fn()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / inner)
    return float(np.median(times))


def _kernel(MM, n, fused, min_blocks=1):
    from numba import cuda

    from nvmath_device import make_tensor
    from nvmath_device.cublasdx_numba import pipeline_extensions

    tm, tn, _ = MM.size

    def plain(c, bias, device_pipeline):
        smem = cuda.shared.array(shape=(0,), dtype=np.byte, alignment=device_pipeline.buffer_alignment)
        bx, by = cuda.blockIdx.x, cuda.blockIdx.y
        tile = device_pipeline.get_tile(smem, bx, by)
        acc = MM.suggest_accumulator()
        tile.execute(acc)
        if acc.is_thread_active():
            gc = make_tensor(c[bx * tm:(bx + 1) * tm, by * tn:(by + 1) * tn], MM.get_layout_gmem_c(n))
            res = acc.get_results()
            if fused:
                for i in range(MM.accumulator_size):
                    _, col = acc.map_fragment_index(i)
                    v = res[i] + bias[by * tn + col]
                    res[i] = v if v > 0 else v * 0
            acc.partition_and_copy(res, gc)
        tile._del()

    return cuda.jit(extensions=pipeline_extensions, launch_bounds=(MM.block_size, min_blocks))(plain)


def _descriptor(tile, prec):
    from nvmath_device import Matmul

    tm, tn, tk, threads = tile[:4]
    return Matmul(size=(tm, tn, tk), precision=prec, data_type="real", arrangement=("row_major", "col_major", "row_major"),
                  alignment=16, block_size=threads, with_pipeline=True, enable_input_streaming=True,
                  static_block_dim=True)


def _ours(a, b, c, bias, size, prec, tiles, fused):
    """(best ms, config, all (config, ms)) of our pipeline GEMM over ``tiles``."""
    from numba import cuda

    from nvmath_device import prepare

    rows, runs, made = [], {}, {}
    for tile in tiles:  # descriptors and pipelines first: their units compile in parallel
        try:
            MM = _descriptor(tile, prec)
            made[tile] = (MM, MM.suggest_device_pipeline(tile[4], a, b))
        except Exception as e:  # noqa: BLE001  (recorded below)
            made[tile] = e
    prepare(*[dp for v in made.values() if not isinstance(v, Exception) for dp in v[1:]])
    for tile in tiles:
        tm, tn, tk, threads, depth, blocks = tile
        cfg = f"{tm}x{tn}x{tk} {threads}thr depth {depth} {blocks} blocks/SM asked"
        try:
            if isinstance(made[tile], Exception):
                raise made[tile]
            MM, dp = made[tile]
            kern = _kernel(MM, size, fused, blocks)
            grid = (size // tm, size // tn)

            def run(kern=kern, dp=dp, grid=grid):
                kern[grid, dp.block_dim, 0, dp.buffer_size](c, bias, dp)

            t0 = time.perf_counter()
            run()
            cuda.synchronize()
            first = time.perf_counter() - t0
            rows.append(dict(config=cfg, ms=_median_ms(run), first_call_s=round(first, 1)))
            runs[cfg] = run
        except Exception as e:  # noqa: BLE001  (a configuration cuBLASDx or the GPU refuses: recorded)
            rows.append(dict(config=cfg, ms=None, error=f"{type(e).__name__}: {str(e)[:200]}"))
        print(f"#   ours {cfg}: {rows[-1].get('ms') or rows[-1].get('error')}", flush=True)
    ok = [r for r in rows if r["ms"]]
    if not ok:
        return None, None, rows
    best = min(ok, key=lambda r: r["ms"])
    runs[best["config"]]()  # leave c holding the best configuration's output for the check
    return best["ms"], best["config"], rows


def _nvmath_peer(a, b, c, size, prec):
    """nvmath-python 1.0's DevicePipeline GEMM (its public API, our own kernel text): ms or a reason."""
    try:
        from numba import cuda
        from nvmath.device import Matmul as NMatmul
        from nvmath.device import axpby as naxpby
        from nvmath.device.common import make_tensor as nmake_tensor
        from nvmath.device.cublasdx_backend import MAX_ALIGNMENT
        from nvmath.device.cublasdx_numba import pipeline_extensions as next_
    except Exception as e:  # noqa: BLE001
        return None, f"nvmath-python not importable: {type(e).__name__}: {e}"
    try:
        # the form of its example cublasdx_device_gemm_performance_pipeline.py (128 threads, the tile
        # pipeline ended before the epilogue) at our depth 4. nvmath-python 1.0 needs libmathdx
        # >= 0.3.1, < 0.4: with 0.4.2 its kernel fails a cuBLASDx static assertion (2026-12-03)
        tm, tn, tk, depth = 128, 128, 32, 4
        MM = NMatmul(size=(tm, tn, tk), precision=prec, data_type="real",
                     arrangement=("row_major", "col_major", "row_major"), alignment=MAX_ALIGNMENT,
                     execution="Block", block_size=128, with_pipeline=True, enable_input_streaming=True,
                     static_block_dim=True)

        @cuda.jit(extensions=next_, launch_bounds=[MM.block_size, 1])
        def kernel(c, device_pipeline):
            smem = cuda.shared.array(shape=(0,), dtype=np.byte, alignment=device_pipeline.buffer_alignment)
            bx, by = cuda.blockIdx.x, cuda.blockIdx.y
            gc = nmake_tensor(c[bx * tm:(bx + 1) * tm, by * tn:(by + 1) * tn], MM.get_layout_gmem_c(size))
            tile = device_pipeline.get_tile(smem, bx, by)
            acc = MM.suggest_accumulator()
            tile.execute(acc)
            tile._del()
            if acc.is_thread_active():
                frag = acc.make_partition_and_copy(gc)
                naxpby(1.0, acc.get_results(), 0.0, frag)
                acc.partition_and_copy(frag, gc)

        dp = MM.suggest_device_pipeline(depth, a, b)

        def run():
            kernel[(size // tm, size // tn), dp.block_dim, 0, dp.buffer_size](c, dp)

        try:
            run()
            cuda.synchronize()
        except Exception:  # noqa: BLE001
            if dp.buffer_size <= 48 * 1024:
                raise
            # more than 48 KiB of dynamic shared memory needs the kernel's opt-in; our module
            # callback (nvmath_device._numba.launch) only reaches kernels that link our device code,
            # and a launch without it fails with CUDA_ERROR_INVALID_VALUE (as this peer's did,
            # 2026-12-03). The failed launch compiled the kernel (numba.typeof cannot type the
            # pipeline: nvmath-python's launch extension converts it), so its overloads are there.
            # get_cufunc().handle is a CUkernel (cuda.core) or a CUfunction, as in kernels._launch
            from cuda.bindings import driver

            from nvmath_device import common_cuda
            from nvmath_device._numba.launch import (
                set_function_max_dynamic_shared_memory,
                set_kernel_max_dynamic_shared_memory,
            )

            for compiled in kernel.overloads.values():  # each raises a DriverError on failure
                handle = compiled.library.get_cufunc().handle
                if isinstance(handle, driver.CUkernel):
                    err, dev = common_cuda.current_device(driver)
                    if err != driver.CUresult.CUDA_SUCCESS:
                        return None, f"nvmath-python pipeline: no current device for its opt-in: {err}"
                    set_kernel_max_dynamic_shared_memory(handle, dp.buffer_size, dev, driver)
                else:
                    set_function_max_dynamic_shared_memory(
                        driver.CUfunction(int(getattr(handle, "value", handle))), dp.buffer_size, driver)
            run()
            cuda.synchronize()

        return _median_ms(run), f"{tm}x{tn}x{tk} {MM.block_size}thr depth {depth} (its TMA pipeline)"
    except Exception as e:  # noqa: BLE001
        return None, f"nvmath-python pipeline failed: {type(e).__name__}: {str(e)[:200]}"


def _check(out, a64, b64, rows, bias=None):
    ref = a64[rows] @ b64
    if bias is not None:
        ref = np.maximum(ref + bias, 0)
    return float(np.linalg.norm(out[rows].astype(np.float64) - ref) / np.linalg.norm(ref))


def run_case(case, size, all_tiles=False):
    import cupy as cp
    import torch
    from numba import cuda

    rng = np.random.default_rng(1)
    a64 = rng.uniform(-1, 1, (size, size))
    b64 = rng.uniform(-1, 1, (size, size))
    bias64 = rng.uniform(-1, 1, size) if case == "fused" else None
    rows_idx = rng.choice(size, SAMPLE_ROWS, replace=False)
    tdt = {"fp16": torch.float16, "fused": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[case]
    ta = torch.tensor(a64, dtype=tdt, device="cuda").contiguous()
    tb = torch.tensor(b64, dtype=tdt, device="cuda").t().contiguous().t()  # column-major K x N
    # the values as rounded to the inputs' type (what every implementation multiplies)
    a64 = ta.double().cpu().numpy()
    b64 = tb.double().cpu().numpy()
    if case == "bf16":
        import ml_dtypes

        da = cuda.as_cuda_array(ta.view(torch.int16)).view(ml_dtypes.bfloat16)
        db = cuda.as_cuda_array(tb.view(torch.int16)).view(ml_dtypes.bfloat16)
        prec = ("bfloat16", "bfloat16", np.float32)
    else:
        da, db = cuda.as_cuda_array(ta), cuda.as_cuda_array(tb)
        prec = (np.float16, np.float16, np.float32) if case != "fp32" else np.float32
    c = cuda.device_array((size, size), np.float32)
    tbias = torch.tensor(bias64 if bias64 is not None else np.zeros(size), dtype=torch.float32, device="cuda")
    bias = cuda.as_cuda_array(tbias)
    flops = 2.0 * size ** 3
    res = dict(case=case, size=size, peers=[])
    tiles = (TILES_FP32_ALL if all_tiles else TILES_FP32) if case == "fp32" else (TILES_ALL if all_tiles else TILES)
    ms, cfg, tried = _ours(da, db, c, bias, size, prec, tiles, case == "fused")
    res.update(ours_ms=ms, ours_config=cfg, ours_tried=tried)
    if ms:
        res["ours_tflops"] = flops / ms / 1e9
        res["ours_rel_err"] = _check(c.copy_to_host(), a64, b64, rows_idx, bias64)

    def peer(name, fn, out_fn):
        try:
            t = _median_ms(fn)
            err = _check(out_fn(), a64, b64, rows_idx, bias64)
            res["peers"].append(dict(name=name, ms=t, tflops=flops / t / 1e9, rel_err=err))
        except Exception as e:  # noqa: BLE001
            res["peers"].append(dict(name=name, ms=None, note=f"{type(e).__name__}: {str(e)[:200]}"))
        print(f"#   peer {name}: {res['peers'][-1].get('ms') or res['peers'][-1].get('note')}", flush=True)

    holder = {}
    if case == "fused":
        peer("torch relu(addmm(bias, a, b)) (cuBLAS + elementwise)",
             lambda: holder.__setitem__("t", torch.relu(torch.addmm(tbias.half(), ta, tb))),
             lambda: holder["t"].float().cpu().numpy())
        try:
            from nvmath_host import MatmulEpilog, matmul

            peer("nvmath_host.matmul RELU_BIAS (cuBLASLt fused)",
                 lambda: holder.__setitem__("h", matmul(ta, tb, epilog=MatmulEpilog.RELU_BIAS,
                                                       epilog_inputs={"bias": tbias.half()})),
                 lambda: holder["h"].float().cpu().numpy())
        except Exception as e:  # noqa: BLE001
            res["peers"].append(dict(name="nvmath_host.matmul RELU_BIAS", ms=None, note=f"{type(e).__name__}: {e}"))
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        peer(f"torch.matmul ({'TF32 off' if case == 'fp32' else 'cuBLAS'})",
             lambda: holder.__setitem__("t", ta @ tb), lambda: holder["t"].float().cpu().numpy())
        if case != "bf16":
            ca, cb = cp.asarray(ta), cp.asarray(tb)
            peer("cupy.matmul", lambda: holder.__setitem__("c", ca @ cb), lambda: cp.asnumpy(holder["c"]).astype(np.float32))
        if case != "fused":  # nvmath-python's pipeline on the same operands (a failure is recorded)
            nc = cuda.device_array((size, size), np.float32)
            ms_n, note = _nvmath_peer(da, db, nc, size, prec)
            entry = dict(name="nvmath-python DevicePipeline", ms=ms_n, note=note)
            if ms_n:
                entry.update(tflops=flops / ms_n / 1e9, rel_err=_check(nc.copy_to_host(), a64, b64, rows_idx))
            res["peers"].append(entry)
            print(f"#   peer nvmath-python: {ms_n or note}", flush=True)
    best_cublas = min((p["ms"] for p in res["peers"] if p.get("ms") and "nvmath-python" not in p["name"]),
                      default=None)
    if ms and best_cublas:
        res["pct_of_best_cublas_peer"] = 100.0 * best_cublas / ms
    return res


def render(results, size, gpu, ceilings) -> str:
    """The markdown table of ``results`` (run_case's dicts) and the measured ``ceilings``."""
    lines = [f"Device-wide GEMM {size}^3 with the pipeline API vs cuBLAS, {gpu}; median ms (CUDA events); "
             f"TFLOP/s = 2MNK/t", "",
             "Measured ceilings: " + ", ".join(
                 f"{k} {v / 1e12:.0f} TFLOP/s" if isinstance(v, float) else f"{k}: {v}" for k, v in ceilings.items()),
             "", "| case | implementation | config | ms | TFLOP/s | % of ceiling | rel. err (64 rows vs fp64) |",
             "|---|---|---|---:|---:|---:|---:|"]

    def pct(r, tflops):
        ceil = ceilings.get(CEILING[r["case"]])
        return f"{100 * tflops * 1e12 / ceil:.0f} % of {CEILING[r['case']]}" if isinstance(ceil, float) else "-"

    for r in results:
        if r.get("ours_ms"):
            lines.append(f"| {r['case']} | ours (DevicePipeline) | {r['ours_config']} | {r['ours_ms']:.3f} | "
                         f"{r['ours_tflops']:.0f} | {pct(r, r['ours_tflops'])} | {r['ours_rel_err']:.1e} |")
        else:
            lines.append(f"| {r['case']} | ours | - | - | - | - | {r['ours_tried'][0].get('error', '')} |")
        for p in r["peers"]:
            if p.get("ms"):
                lines.append(f"| {r['case']} | {p['name']} | {p.get('note') or ''} | {p['ms']:.3f} | "
                             f"{p['tflops']:.0f} | {pct(r, p['tflops'])} | {p.get('rel_err', float('nan')):.1e} |")
            else:
                lines.append(f"| {r['case']} | {p['name']} | {p.get('note')} | - | - | - | - |")
        if "pct_of_best_cublas_peer" in r:
            lines.append(f"| {r['case']} | **ours / best cuBLAS peer** | | | **{r['pct_of_best_cublas_peer']:.0f} %** | | |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench_out")
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    ap.add_argument("--all-tiles", action="store_true", help="every tile configuration, not the default few")
    a = ap.parse_args(argv)
    if a.size < 256 or a.size % 256:
        ap.error("--size must be a multiple of 256")
    reason = no_gpu_reason()
    if reason:
        print(f"device_gemm: no GPU to benchmark on: {reason}", file=sys.stderr)
        return 2
    if _ROOT not in sys.path:
        sys.path.append(_ROOT)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ceilings.py
    from ceilings import measure_all
    from numba import cuda

    dev = cuda.get_current_device()
    gpu = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    ceilings = measure_all()
    print("# ceilings: " + ", ".join(f"{k} {v / 1e12:.1f} TFLOP/s" if isinstance(v, float) else f"{k}: {v}"
                                     for k, v in ceilings.items()), flush=True)
    os.makedirs(a.out, exist_ok=True)
    cmd = ("python benchmarks/device_gemm.py --out DIR " + f"--size {a.size} --cases {' '.join(a.cases)}"
           + (" --all-tiles" if a.all_tiles else ""))
    results = []
    for case in a.cases:
        print(f"# {case} {a.size}^3", flush=True)
        results.append(run_case(case, a.size, a.all_tiles))
        with open(os.path.join(a.out, "device_gemm.json"), "w") as f:
            json.dump(dict(gpu=gpu, command=cmd, ceilings=ceilings, results=results), f, indent=1)
        md = render(results, a.size, gpu, ceilings)
        with open(os.path.join(a.out, "device_gemm.md"), "w") as f:
            f.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
