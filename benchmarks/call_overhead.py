# SPDX-License-Identifier: Apache-2.0
"""Host time per call of every ``kernels`` function on small inputs (the GPU work is tiny, so the
time is the Python and launch path), with the default launch ("fast": cuLaunchKernel, parameters
packed by kernels._launch) and with numba-cuda's launch (what NUMBA_MATHDX_FAST_LAUNCH=0 selects),
against the CuPy peer doing the same on the same data.

    python benchmarks/fused_kernels.py ...            # GPU time on large inputs
    python benchmarks/call_overhead.py --out DIR      # host time per call on small inputs

A third mode times the stateful form, ``kernels.plan(fn, ...)`` made once per case and then
called on the same inputs (its recorded launches replayed as one CUDA graph, the default), and a
fourth the same plan launching kernel by kernel (``NUMBA_MATHDX_PLAN_GRAPHS=0``: one
``cuLaunchKernel`` per kernel), and where PyTorch is installed a fifth the plan made and called on
PyTorch tensors sharing the CuPy arrays' memory. Per case: the output of the fast launch must
equal numba-cuda's launch's, and each plan's the function's, bit for bit (the same kernels, the
same inputs) before anything is timed (a PyTorch plan that differs or fails is reported in its
own cell). ``--profile`` also writes a cProfile of
each case's function and plan calls, and of the plan calls on PyTorch tensors where they ran
(OUT/profile/{function,plan,plan_torch}.txt, one section per case). Then, best of
``--rounds`` rounds: ``enqueue`` = wall time of ``--calls`` back-to-back calls / calls (no sync in
between: what a pipeline of calls costs the host), ``call+sync`` = one call followed by a stream
synchronize, averaged; and the GPU time per call of the plan and of the peer (50 calls queued
behind a spinning kernel, timed with CUDA events: what call+sync cannot go below, with enqueue and
the synchronisation on top). Writes call_overhead.json and call_overhead.md. Exits with status 2 and
a message when no GPU is usable.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = ("conv_real", "conv_complex", "fir", "matched", "stft", "gemm", "beamform")
MODES = ("numba", "fast")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_out")
    ap.add_argument("--calls", type=int, default=200, help="calls per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    ap.add_argument("--profile", action="store_true",
                    help="also write a cProfile of each case's function and plan calls into OUT/profile")
    return ap.parse_args(argv)


def build_cases(K, cp):
    """{case: (ours, peer, plan, plan launching kernel by kernel, plan on PyTorch tensors or None)}:
    zero-argument callables on small CuPy inputs (the PyTorch tensors share their memory)."""
    rng = cp.random.default_rng(0)
    g = np.random.default_rng(0)
    xr = rng.standard_normal((8, 4096), dtype=cp.float32)
    xc = (rng.standard_normal((8, 512), dtype=cp.float32)
          + 1j * rng.standard_normal((8, 512), dtype=cp.float32)).astype(cp.complex64)
    xm = (rng.standard_normal((8, 1024), dtype=cp.float32)
          + 1j * rng.standard_normal((8, 1024), dtype=cp.float32)).astype(cp.complex64)
    xl = rng.standard_normal((2, 65536), dtype=cp.float32)
    a = rng.standard_normal((64, 32, 32), dtype=cp.float32)
    b = rng.standard_normal((64, 32, 32), dtype=cp.float32)
    xb = (rng.standard_normal((4, 16, 256), dtype=cp.float32)
          + 1j * rng.standard_normal((4, 16, 256), dtype=cp.float32)).astype(cp.complex64)
    h = g.standard_normal(63)
    t = (g.standard_normal(128) + 1j * g.standard_normal(128)).astype(np.complex64)
    w = (g.standard_normal((8, 16)) + 1j * g.standard_normal((8, 16))).astype(np.complex64)
    win = np.hanning(512)
    Hr = cp.asarray(np.fft.rfft(h, 4096).astype(np.complex64))
    Hc = cp.asarray(np.fft.fft(h, 512).astype(np.complex64))
    T = cp.asarray(np.conj(np.fft.fft(t, 1024)).astype(np.complex64))
    W = cp.asarray(w)
    win_d = cp.asarray(win.astype(np.float32))
    from kernels import _launch

    def plans(conv=lambda v: v):
        """Plan calls on the inputs as ``conv`` gives them (CuPy's by default)."""
        d = {k: conv(v) for k, v in dict(xr=xr, xc=xc, xl=xl, xm=xm, a=a, b=b, xb=xb).items()}
        P = {name: K.plan(fn, *args) for name, (fn, *args) in {
            "conv_real": (K.fft_convolve, d["xr"], h), "conv_complex": (K.fft_convolve, d["xc"], h),
            "fir": (K.fir_filter, d["xl"], h), "matched": (K.matched_filter, d["xm"], t),
            "stft": (K.stft_power, d["xl"], win, 256), "gemm": (K.batched_gemm, d["a"], d["b"]),
            "beamform": (K.beamform_spectra, d["xb"], w)}.items()}
        return {"conv_real": lambda: P["conv_real"](d["xr"]), "conv_complex": lambda: P["conv_complex"](d["xc"]),
                "fir": lambda: P["fir"](d["xl"]), "matched": lambda: P["matched"](d["xm"]),
                "stft": lambda: P["stft"](d["xl"]), "gemm": lambda: P["gemm"](d["a"], d["b"]),
                "beamform": lambda: P["beamform"](d["xb"])}

    planned = plans()  # as configured (one CUDA graph per plan by default)
    default, _launch.GRAPHS = _launch.GRAPHS, False
    try:
        kernel_by_kernel = plans()  # NUMBA_MATHDX_PLAN_GRAPHS=0: one cuLaunchKernel per kernel
    finally:
        _launch.GRAPHS = default
    try:  # the same plans on PyTorch tensors sharing the CuPy arrays' memory (where PyTorch is installed)
        import torch

        on_torch = plans(torch.from_dlpack)
    except ImportError:
        on_torch = {}
    except Exception as e:  # reported; the other columns still run
        print(f"plans on PyTorch tensors not timed: {type(e).__name__}: {e}", file=sys.stderr)
        on_torch = {}
    return {name: (ours, peer, planned[name], kernel_by_kernel[name], on_torch.get(name))
            for name, (ours, peer) in {
        "conv_real": (lambda: K.fft_convolve(xr, h), lambda: cp.fft.irfft(cp.fft.rfft(xr, axis=-1) * Hr, n=4096)),
        "conv_complex": (lambda: K.fft_convolve(xc, h), lambda: cp.fft.ifft(cp.fft.fft(xc, axis=-1) * Hc)),
        "fir": (lambda: K.fir_filter(xl, h), lambda: cp.fft.irfft(cp.fft.rfft(xl, n=131072) * cp.fft.rfft(
            cp.asarray(h.astype(np.float32)), n=131072), n=131072)[:, :65536]),
        "matched": (lambda: K.matched_filter(xm, t), lambda: cp.argmax(cp.abs(cp.fft.ifft(cp.fft.fft(xm) * T)) ** 2,
                                                                        axis=-1)),
        "stft": (lambda: K.stft_power(xl, win, 256), lambda: cp.abs(cp.fft.rfft(cp.lib.stride_tricks.as_strided(
            xl, (2, 255, 512), (xl.strides[0], 256 * 4, 4)) * win_d)) ** 2),
        "gemm": (lambda: K.batched_gemm(a, b), lambda: cp.matmul(a, b)),
        "beamform": (lambda: K.beamform_spectra(xb, w), lambda: cp.fft.fft(cp.matmul(W, xb))),
    }.items()}


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def _bitwise_equal(x, y, cp) -> bool:
    return all(a.shape == b.shape and a.dtype == b.dtype and bool(cp.all((a == b) | (cp.isnan(a) & cp.isnan(b))))
               for a, b in zip(_as_tuple(x), _as_tuple(y)))


def time_calls(fn, calls, rounds, sync):
    """Best of ``rounds``: (enqueue us per call, call+sync us per call)."""
    fn()
    sync()
    enq, cs = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        sync()
        t2 = time.perf_counter()
        for _ in range(max(1, calls // 4)):
            fn()
            sync()
        t3 = time.perf_counter()
        enq.append((t1 - t0) / calls * 1e6)
        cs.append((t3 - t2) / max(1, calls // 4) * 1e6)
    return min(enq), min(cs)


# a one-thread kernel that spins for ``cycles`` clock cycles: calls queued behind it start back to
# back once it ends, with no gap left by the host
_SPIN = r"""extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}"""


def gpu_time(fn, calls, cp):
    """GPU time per call in us: ``calls`` calls queued behind a kernel spinning long enough for
    the host to queue them all, then timed with CUDA events (the GPU runs them back to back, so
    host time does not enter). None when the host had not queued them all before the spin ended."""
    spin = cp.RawKernel(_SPIN, "spin")
    clock_hz = cp.cuda.Device().attributes["ClockRate"] * 1e3
    seconds = max(5e-3, calls * 200e-6)
    ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
    fn()
    cp.cuda.get_current_stream().synchronize()
    spin((1,), (1,), (np.int64(clock_hz * seconds),))
    t0 = time.perf_counter()
    ev0.record()
    for _ in range(calls):
        fn()
    ev1.record()
    queued = time.perf_counter() - t0
    ev1.synchronize()
    if queued > 0.8 * seconds:
        return None
    return cp.cuda.get_elapsed_time(ev0, ev1) * 1e3 / calls


def profile(fn, calls, path, sync, title="") -> None:
    """cProfile of ``calls`` calls of ``fn`` (then one sync) appended to ``path`` under a
    ``# title`` line: the 30 most expensive functions by cumulative and by own time (where the
    host time per call goes)."""
    import cProfile
    import io
    import pstats

    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        fn()
    sync()
    pr.disable()
    buf = io.StringIO()
    for key in ("cumulative", "tottime"):
        pstats.Stats(pr, stream=buf).sort_stats(key).print_stats(30)
    with open(path, "a") as f:
        f.write(f"# {title}\n{buf.getvalue()}\n")


def run(K, cp, names, calls, rounds, profile_dir=None):
    from kernels import _launch

    sync = cp.cuda.get_current_stream().synchronize
    default = _launch.FAST
    cases = build_cases(K, cp)
    if profile_dir:  # this run's sections only
        for stale in ("function.txt", "plan.txt", "plan_torch.txt"):
            if os.path.exists(os.path.join(profile_dir, stale)):
                os.remove(os.path.join(profile_dir, stale))
    rows = []
    for name in names:
        ours, peer, planned, by_kernel, on_torch = cases[name]
        row = dict(case=name)
        try:
            outs = {}
            for mode in MODES:
                _launch.FAST = mode == "fast"
                outs[mode] = ours()
                sync()
            _launch.FAST = default
            outs["plan"] = planned()
            outs["plan_launches"] = by_kernel()
            sync()
            row["fast_equals_numba"] = _bitwise_equal(outs["fast"], outs["numba"], cp)
            row["plan_equals_fast"] = _bitwise_equal(outs["plan"], outs["fast"], cp)
            if not row["fast_equals_numba"]:
                raise AssertionError("the fast launch's output differs from numba-cuda's launch")
            if not row["plan_equals_fast"] or not _bitwise_equal(outs["plan_launches"], outs["fast"], cp):
                raise AssertionError("the plan's output differs from the function's")
            for mode in MODES:
                _launch.FAST = mode == "fast"
                row[f"{mode}_enqueue_us"], row[f"{mode}_sync_us"] = time_calls(ours, calls, rounds, sync)
            _launch.FAST = default
            row["plan_enqueue_us"], row["plan_sync_us"] = time_calls(planned, calls, rounds, sync)
            row["plan_launches_enqueue_us"], row["plan_launches_sync_us"] = time_calls(by_kernel, calls, rounds, sync)
            if on_torch is not None:
                try:  # its own error: the row's other figures stand
                    got = tuple(cp.asarray(o) for o in _as_tuple(on_torch()))
                    sync()
                    if not _bitwise_equal(got, outs["fast"], cp):
                        raise AssertionError("the plan's output on PyTorch tensors differs from the function's")
                    row["plan_torch_enqueue_us"], row["plan_torch_sync_us"] = time_calls(on_torch, calls, rounds, sync)
                except Exception as e:
                    row["plan_torch_error"] = f"{type(e).__name__}: {str(e)[:300]}"
            row["peer_enqueue_us"], row["peer_sync_us"] = time_calls(peer, calls, rounds, sync)
            row["plan_gpu_us"], row["peer_gpu_us"] = gpu_time(planned, 50, cp), gpu_time(peer, 50, cp)
            if profile_dir:
                os.makedirs(profile_dir, exist_ok=True)
                profile(ours, calls, os.path.join(profile_dir, "function.txt"), sync, f"{name}: function calls")
                profile(planned, calls, os.path.join(profile_dir, "plan.txt"), sync, f"{name}: plan calls")
                if "plan_torch_sync_us" in row:
                    profile(on_torch, calls, os.path.join(profile_dir, "plan_torch.txt"), sync,
                            f"{name}: plan calls on PyTorch tensors")
        except Exception as e:  # report, keep going
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        finally:
            _launch.FAST = default
        print(row, flush=True)
        rows.append(row)
    return rows


def format_table(rows, meta) -> str:
    lines = [f"Host time per call, small inputs, {meta['device']}; best of {meta['rounds']} rounds of "
             f"{meta['calls']} calls; `{meta['command']}`", "",
             "| case | numba launch: enqueue / call+sync us | fast launch: enqueue / call+sync us | "
             "kernels.plan: enqueue / call+sync us | plan, kernel by kernel: enqueue / call+sync us | "
             "plan on PyTorch tensors: enqueue / call+sync us | "
             "CuPy peer: enqueue / call+sync us | GPU time per call: plan / peer us | fast == numba, plan == fast |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['case']} | failed: {r['error'][:150]} | | | | | | |")
            continue
        cell = ["-" if r.get(f"{m}_enqueue_us") is None else f"{r[f'{m}_enqueue_us']:.1f} / {r[f'{m}_sync_us']:.1f}"
                for m in ("numba", "fast", "plan", "plan_launches", "plan_torch", "peer")]
        if "plan_torch_error" in r:
            cell[4] = f"failed: {r['plan_torch_error'][:80]}"
        gpu = " / ".join("-" if r.get(f"{m}_gpu_us") is None else f"{r[f'{m}_gpu_us']:.1f}" for m in ("plan", "peer"))
        lines.append(f"| {r['case']} | {' | '.join(cell)} | {gpu} | "
                     f"{r['fast_equals_numba']}, {r['plan_equals_fast']} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))
    from fused_kernels import import_kernels, no_gpu_reason, write_results

    why = no_gpu_reason()
    if why:
        print(f"benchmarks/call_overhead.py needs a CUDA GPU (with CuPy): {why}", file=sys.stderr)
        return 2
    import cupy as cp

    K = import_kernels()

    meta = dict(device=cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode(),
                calls=args.calls, rounds=args.rounds,
                command="python benchmarks/call_overhead.py " + " ".join(sys.argv[1:] if argv is None else argv))
    rows = run(K, cp, args.cases, args.calls, args.rounds,
               os.path.join(args.out, "profile") if args.profile else None)
    print(write_results(args.out, rows, meta, "call_overhead", format_table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
