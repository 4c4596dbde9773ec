# SPDX-License-Identifier: Apache-2.0
"""nvmath_host matmul vs nvmath-python, torch and CuPy, in one process on the same data.

GPU time: ``triton.testing.do_bench`` median (CUDA events, L2 flushed between runs).
Host latency per call: ``execute()`` (or the function) + ``torch.cuda.synchronize()``,
median of many calls timed with ``time.perf_counter``; every implementation once per round, three
rounds interleaved, the best round's median reported.

Usage: ``python benchmarks/host_matmul.py --out DIR [--quick] [--profile]``; writes
``DIR/host_matmul.json`` and ``DIR/host_matmul.md`` (``--profile``: also
``DIR/host_matmul_profile.txt``, a cProfile of ``Matmul.execute`` and ``matmul()`` calls at 128^3).
"""

# ruff: noqa: B023  (the lambdas run inside the loop iteration that binds them)
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def _nvmath():
    try:
        import nvmath.linalg.advanced as nva

        return nva
    except Exception as e:  # peer not importable: its rows are left out
        print(f"nvmath-python not importable: {e!r}", file=sys.stderr)
        return None


ROUNDS = 3  # interleaved rounds of the per-call latencies


def profile(fn, sync, calls, path, title) -> None:
    """cProfile of ``calls`` calls of ``fn`` each followed by ``sync``, appended to ``path``
    under a ``# title`` line (``call_overhead.py``'s profile of each call and its sync)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)  # benchmarks/call_overhead.py
    from call_overhead import profile as profile_calls

    def call():
        fn()
        sync()

    profile_calls(call, calls, path, lambda: None, title)


def latency_us(fn, sync, n=2000, warm=50):
    for _ in range(warm):
        fn()
    sync()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench_out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--profile", action="store_true",
                    help="also write a cProfile of Matmul.execute and matmul() calls at 128^3 (host_matmul_profile.txt)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    import cupy as cp
    import torch
    from triton.testing import do_bench

    from nvmath_host import Matmul, MatmulComputeType, MatmulEpilog, matmul

    nva = _nvmath()
    torch.manual_seed(0)
    dev = "cuda"
    results = []

    def bench(fn):
        return do_bench(fn, warmup=25, rep=100 if not args.quick else 30, return_mode="median")

    def add(case, impl, ms=None, us=None, flops=None, note=""):
        row = {"case": case, "impl": impl, "gpu_ms": ms, "host_us_per_call": us, "note": note}
        if ms and flops:
            row["tflops"] = flops / (ms * 1e-3) / 1e12
        results.append(row)
        print(json.dumps(row), flush=True)

    def check(name, got, want, tol):
        err = ((got.double() - want.double()).abs().max() / want.double().abs().max()).item()
        if not err < tol:
            raise AssertionError(f"{name}: relative error {err:.3g} >= {tol}")

    # ---------------------------------------------------------------- GPU time, big shapes
    shapes = [
        ("fp16 4096^3 RELU_BIAS", torch.float16, 4096, 4096, 4096, "relu_bias", None),
        ("bf16 8192x4096x4096 RELU_BIAS", torch.bfloat16, 8192, 4096, 4096, "relu_bias", None),
        ("fp32 4096^3", torch.float32, 4096, 4096, 4096, None, None),
        ("fp32 4096^3 TF32", torch.float32, 4096, 4096, 4096, None, "tf32"),
        ("fp16 1024^3 RELU_BIAS", torch.float16, 1024, 1024, 1024, "relu_bias", None),
        ("fp16 128^3 RELU_BIAS", torch.float16, 128, 128, 128, "relu_bias", None),
        ("fp16 16^3 RELU_BIAS", torch.float16, 16, 16, 16, "relu_bias", None),
    ]
    if args.quick:
        shapes = shapes[:1] + shapes[5:6]
    rounds = 2 if args.quick else 3
    for case, dt, M, N, K, epi, ct in shapes:
        flops = 2.0 * M * N * K
        a = torch.randn(M, K, device=dev, dtype=dt)
        b = torch.randn(K, N, device=dev, dtype=dt)
        bias = torch.randn(N, device=dev, dtype=dt)
        bias_col = torch.randn(M, 1, device=dev, dtype=dt)  # nvmath-python's bias is (M, 1)
        if epi:
            want = torch.relu(a.float() @ b.float() + bias.float())
        else:
            want = a.double() @ b.double()
        tol = 2e-2 if ct == "tf32" or dt != torch.float32 else 1e-4
        opts = {"compute_type": MatmulComputeType.COMPUTE_32F_FAST_TF32} if ct else None
        ep = {"epilog": MatmulEpilog.RELU_BIAS, "epilog_inputs": {"bias": bias}} if epi else {}
        impls = []  # (name, fn, note)
        mm = Matmul(a, b, options=opts)
        mm.plan(**ep)
        check("ours", mm.execute(), want, tol)
        impls.append(("nvmath_host Matmul (heuristic #0)", mm.execute, ""))
        mt = Matmul(a, b, options=opts)
        mt.plan(**ep)
        mt.autotune(iterations=10)
        check("ours tuned", mt.execute(), want, tol)
        impls.append(("nvmath_host Matmul (autotuned)", mt.execute, ""))
        check("ours fn", matmul(a, b, options=opts, **ep), want, tol)
        impls.append(("nvmath_host matmul()", lambda: matmul(a, b, options=opts, **ep), ""))
        nm = None
        if nva is not None:
            nopts = {"compute_type": nva.MatmulComputeType.COMPUTE_32F_FAST_TF32} if ct else None
            nep = (
                {"epilog": nva.MatmulEpilog.RELU_BIAS, "epilog_inputs": {"bias": bias_col}}
                if epi
                else {}
            )
            nm = nva.Matmul(a, b, options=nopts)
            nm.plan(**nep)
            d = nm.execute()
            if epi:
                check("nvmath", d, torch.relu(a.float() @ b.float() + bias_col.float()), tol)
            else:
                check("nvmath", d, want, tol)
            impls.append(("nvmath-python Matmul", nm.execute, "bias (M,1): its bias runs along M"))
        tf32 = ct == "tf32"

        def torch_fn(f):
            def g():
                torch.backends.cuda.matmul.allow_tf32 = tf32
                return f()

            return g

        if epi:
            check("torch", torch.relu(a @ b + bias), want, tol)
            impls.append(
                ("torch relu(a @ b + bias)", torch_fn(lambda: torch.relu(a @ b + bias)), "")
            )
            impls.append(
                (
                    "torch _addmm_activation",
                    torch_fn(lambda: torch._addmm_activation(bias, a, b)),
                    "",
                )
            )
        else:
            impls.append(
                ("torch a @ b" + (" (allow_tf32)" if tf32 else ""), torch_fn(lambda: a @ b), "")
            )
        if dt != torch.bfloat16 and ct is None:
            ca, cb, cbias = cp.asarray(a), cp.asarray(b), cp.asarray(bias)
            f = (lambda: cp.maximum(ca @ cb + cbias, 0)) if epi else (lambda: ca @ cb)
            impls.append(("cupy" + (" maximum(a @ b + bias, 0)" if epi else " a @ b"), f, ""))
        times = {name: [] for name, _, _ in impls}
        for r in range(rounds):  # interleaved, rotated: no implementation always goes first
            k = r % len(impls)
            for name, fn, _ in impls[k:] + impls[:k]:
                times[name].append(bench(fn))
        torch.backends.cuda.matmul.allow_tf32 = False
        for name, _, note in impls:
            ms = statistics.median(times[name])
            add(
                case,
                name,
                ms,
                flops=flops,
                note=note + f" rounds={[round(t, 4) for t in times[name]]}",
            )
        mm.free()
        mt.free()
        if nm is not None:
            nm.free()
        del a, b
        torch.cuda.empty_cache()

    # ---------------------------------------------------------------- host latency per call
    # every implementation once per round, ROUNDS rounds interleaved; the best round's median
    # (the host's speed drifts by tens of percent within a run: interleaving exposes each
    # implementation to the same drift)
    sync = torch.cuda.synchronize
    n = 300 if args.quick else 2000
    for size in (128, 16):
        case = f"per call fp16 {size}^3 RELU_BIAS (execute + synchronize)"
        a = torch.randn(size, size, device=dev, dtype=torch.float16)
        b = torch.randn(size, size, device=dev, dtype=torch.float16)
        bias = torch.randn(size, device=dev, dtype=torch.float16)
        bias_col = torch.randn(size, 1, device=dev, dtype=torch.float16)
        ep = {"epilog": MatmulEpilog.RELU_BIAS, "epilog_inputs": {"bias": bias}}
        ca, cb, cbias = cp.asarray(a), cp.asarray(b), cp.asarray(bias)
        cp_sync = cp.cuda.get_current_stream().synchronize
        with contextlib.ExitStack() as plans:
            mm = plans.enter_context(Matmul(a, b))
            mm.plan(**ep)
            mmc = plans.enter_context(Matmul(ca, cb))
            mmc.plan(epilog=MatmulEpilog.RELU_BIAS, epilog_inputs={"bias": cbias})
            impls = {  # name: (call, sync, calls per round)
                "nvmath_host Matmul.execute": (mm.execute, sync, n),
                "nvmath_host matmul()": (lambda: matmul(a, b, **ep), sync, n),
                "nvmath_host Matmul.execute (cupy operands)": (mmc.execute, cp_sync, n),
            }
            if nva is not None:
                nep = {"epilog": nva.MatmulEpilog.RELU_BIAS, "epilog_inputs": {"bias": bias_col}}
                nm = nva.Matmul(a, b)
                plans.callback(nm.free)
                nm.plan(**nep)
                impls["nvmath-python Matmul.execute"] = (nm.execute, sync, n)
                impls["nvmath-python matmul()"] = (lambda: nva.matmul(a, b, **nep), sync, max(n // 4, 100))
            impls["torch relu(a @ b + bias)"] = (lambda: torch.relu(a @ b + bias), sync, n)
            impls["torch _addmm_activation"] = (lambda: torch._addmm_activation(bias, a, b), sync, n)
            best = {}
            for _ in range(ROUNDS):
                for impl, (fn, fsync, calls) in impls.items():
                    us = latency_us(fn, fsync, calls)
                    best[impl] = min(us, best.get(impl, us))
            for impl, us in best.items():
                add(case, impl, us=us, note=f"best of {ROUNDS} interleaved rounds' medians")
            if args.profile and size == 128:
                for impl in ("nvmath_host Matmul.execute", "nvmath_host matmul()"):
                    fn, fsync, calls = impls[impl]
                    profile(fn, fsync, calls, os.path.join(args.out, "host_matmul_profile.txt"), f"{impl}, {case}")

    meta = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cupy": cp.__version__,
        "nvmath-python": getattr(sys.modules.get("nvmath"), "__version__", None),
        "cublasLt": __import__("nvmath_host._cublaslt", fromlist=["version"]).version(),
    }
    with open(os.path.join(args.out, "host_matmul.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    lines = [
        f"GPU: {meta['gpu']}; cuBLASLt {meta['cublasLt']}; torch {meta['torch']}; "
        f"nvmath-python {meta['nvmath-python']}",
        "",
        f"| case | implementation | GPU ms (median) | TFLOP/s | host us/call (best of {ROUNDS} rounds' medians) |",
        "|---|---|---:|---:|---:|",
    ]
    for r in results:
        ms = f"{r['gpu_ms']:.4f}" if r["gpu_ms"] is not None else ""
        tf = f"{r['tflops']:.1f}" if r.get("tflops") else ""
        us = f"{r['host_us_per_call']:.1f}" if r["host_us_per_call"] is not None else ""
        lines.append(f"| {r['case']} | {r['impl']} | {ms} | {tf} | {us} |")
    md = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "host_matmul.md"), "w") as f:
        f.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
