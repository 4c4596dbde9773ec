# SPDX-License-Identifier: Apache-2.0
"""The main job: low-pass filter a batch of noisy synthetic signals with ``kernels.fft_convolve``
(direct summation or the fused FFT convolution, --method), check it against NumPy, time it against
CuPy's cuFFT path, and optionally plot it.

    python -m kernels [--batch B] [--n N] [--taps T] [--method auto|fft|direct] [--plot FILE.png]
    python -m kernels --gpus N [N ...] [--batch ROWS_PER_GPU] [--n N] [--taps T] [--passes P]

--n must be an FFT length the fused kernel implements (FFT.valid_sizes(), e.g. a power of 2 up
to 4096) and larger than 2 * --taps (the noise figure leaves out --taps samples at each end);
--plot needs matplotlib: pip install "numba-mathdx[plot]".

Without a GPU it re-runs itself under numba-cuda's CUDA simulator at a small size, and says so.

--gpus runs the job on Dask arrays of CuPy blocks across GPUs, once per count given: a
dask_cuda.LocalCUDACluster of N workers (one per GPU, the first N of CUDA_VISIBLE_DEVICES), --batch
rows per GPU (default 262144) made on the workers, --passes chained fused convolutions (default
20) timed as one graph; a sample of rows is checked against NumPy, and the throughput printed per
GPU count next to the plain call on one GPU. It needs GPUs and pip install "numba-mathdx[dask]".
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np


def _has_gpu() -> bool:
    from nvmath_device.common_cuda import get_current_device_cc

    try:
        get_current_device_cc()
    except RuntimeError:  # DriverError: no GPU or driver here
        return False
    return True


def lowpass_taps(ntaps: int, cutoff: float) -> np.ndarray:
    """Windowed-sinc low-pass FIR (cutoff in cycles/sample, 0 < cutoff < 0.5), unit DC gain."""
    k = np.arange(ntaps) - (ntaps - 1) / 2
    h = 2 * cutoff * np.sinc(2 * cutoff * k) * np.hamming(ntaps)
    return h / h.sum()


def synthetic_signals(batch: int, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """(clean, noisy) float32 signals: two low tones per row plus white noise."""
    t = np.arange(n)
    f1 = rng.uniform(0.005, 0.02, (batch, 1))
    f2 = rng.uniform(0.02, 0.04, (batch, 1))
    clean = np.sin(2 * np.pi * f1 * t) + 0.5 * np.sin(2 * np.pi * f2 * t + rng.uniform(0, 6, (batch, 1)))
    noisy = clean + 0.8 * rng.standard_normal((batch, n))
    return clean.astype(np.float32), noisy.astype(np.float32)


PLOT_INSTALL = 'pip install "numba-mathdx[plot]"'
DASK_INSTALL = 'pip install "numba-mathdx[dask]"'


def median_ms(fn, warmup: int = 3, repeat: int = 20, inner: int = 5, event=None, elapsed_ms=None) -> float:
    """Median GPU time of one ``fn()`` in milliseconds, after ``warmup`` calls: each of ``repeat``
    samples enqueues one untimed call, then records a CUDA event on the current CuPy stream, makes
    ``inner`` calls and records a second event; the sample is the time between the events over
    ``inner``. The untimed lead call keeps the GPU busy while the host prepares the timed ones, so
    the figure is the device time per call, not the host's launch overhead (measured separately
    by ``benchmarks/host_overhead.py``) — an event pair around a single call on an idle stream
    would add that overhead to it. ``event`` (an event factory) and ``elapsed_ms(start, end)``
    default to CuPy's."""
    if event is None:
        import cupy

        event, elapsed_ms = cupy.cuda.Event, cupy.cuda.get_elapsed_time
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start, end = event(), event()
        fn()
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        times.append(elapsed_ms(start, end) / inner)
    return float(np.median(times))


def _check_args(ap, args, simulated: bool) -> None:
    """argparse errors (exit status 2) for values the job cannot run with."""
    if args.batch is not None and args.batch < 1:
        ap.error(f"--batch must be >= 1, got {args.batch}")
    if args.taps < 1:
        ap.error(f"--taps must be >= 1, got {args.taps}")
    if args.n is None:
        return
    from nvmath_device import FFT

    sizes = FFT.valid_sizes(np.float32, sm=90 if simulated else None)
    if args.n not in sizes:
        lo = max((v for v in sizes if v < args.n), default=None)
        hi = min((v for v in sizes if v > args.n), default=None)
        near = " and ".join(str(v) for v in (lo, hi) if v is not None)
        ap.error(f"--n must be an FFT length the fused kernel implements (nvmath_device.FFT.valid_sizes(): "
                 f"{len(sizes)} lengths from {sizes[0]} to {sizes[-1]}, every power of 2 among them); "
                 f"the nearest to {args.n} are {near}")
    if args.n <= 2 * args.taps:
        ap.error(f"--n must be larger than 2 * --taps = {2 * args.taps} (the noise figure leaves out "
                 f"--taps samples at each end); got --n {args.n}")


def main(argv=None) -> int:
    """Run the main job; returns the process exit status (0: result matches NumPy)."""
    ap = argparse.ArgumentParser(prog="python -m kernels", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=None, help="signals, >= 1 (default 65536 on a GPU, 8 simulated)")
    ap.add_argument("--n", type=int, default=None,
                    help="samples per signal, in FFT.valid_sizes() and > 2 * TAPS (default 4096 on a GPU, "
                         "256 simulated)")
    ap.add_argument("--taps", type=int, default=63, help="low-pass FIR length, >= 1 (default 63)")
    ap.add_argument("--method", choices=("auto", "fft", "direct"), default="auto",
                    help="fft_convolve's method: the FFT kernel, direct summation (float32, <= 128 taps), "
                         "or auto (default: direct where it runs and was measured faster)")
    ap.add_argument("--plot", metavar="FILE.png",
                    help=f"draw signal, filtered signal and their spectra (needs matplotlib: {PLOT_INSTALL})")
    ap.add_argument("--gpus", type=int, nargs="+", metavar="N",
                    help="run the job on Dask arrays across N GPUs (one run per N given; needs "
                         f"{DASK_INSTALL})")
    ap.add_argument("--passes", type=int, default=20,
                    help="with --gpus: chained convolutions timed as one graph, >= 1 (default 20)")
    ap.add_argument("--chunk-rows", type=int, default=None,
                    help="with --gpus: rows per Dask block (default: 1 GiB blocks, at most --batch)")
    args = ap.parse_args(argv)
    if args.gpus is not None:
        return _main_gpus(ap, args)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            ap.error(f"--plot needs matplotlib, which is not installed: {PLOT_INSTALL}")

    simulated = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
    if not simulated and not _has_gpu():
        print("No CUDA GPU found: re-running under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1) at a small size.",
              flush=True)
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
        os.execve(sys.executable, [sys.executable, "-m", "kernels", *(argv if argv is not None else sys.argv[1:])], env)

    _check_args(ap, args, simulated)
    batch = args.batch or (8 if simulated else 65536)
    n = args.n or (256 if simulated else 4096)
    if n <= 2 * args.taps:
        ap.error(f"--taps must be smaller than n / 2 = {n / 2:g} (n = {n}); got {args.taps}")
    from kernels import fft_convolve
    from kernels.convolution import convolve_method

    taps = lowpass_taps(args.taps, cutoff=0.06)
    try:
        method = convolve_method(args.method, n, taps, np.float32)
    except ValueError as e:
        ap.error(f"--method direct cannot run here ({e})")
    how = ("fused FFT -> multiply -> inverse FFT kernel" if method == "fft"
           else "direct-summation kernel (two-parallel fast FIR, no FFT)")
    where = "CUDA simulator (CPU)" if simulated else "GPU"
    print(f"numba-mathdx main job on the {where}: low-pass filtering {batch} noisy signals of {n} samples "
          f"with a {args.taps}-tap FIR as one {how} (--method {args.method})", flush=True)

    rng = np.random.default_rng(0)
    clean, noisy = synthetic_signals(batch, n, rng)

    t0 = time.perf_counter()
    if simulated:
        filtered = fft_convolve(noisy, taps, method=method)
    else:
        import cupy as cp

        d_noisy = cp.asarray(noisy)
        d_filtered = fft_convolve(d_noisy, taps, method=method)
        filtered = cp.asnumpy(d_filtered)
    first = time.perf_counter() - t0
    print(f"first call (includes code generation or cache load): {first:.2f} s")

    ref = np.fft.irfft(np.fft.rfft(noisy.astype(np.float64), axis=-1) * np.fft.rfft(taps, n), n=n, axis=-1)
    err = float(np.linalg.norm(filtered - ref) / np.linalg.norm(ref))
    ok = err < 1e-5
    print(f"check against NumPy (float64): relative error {err:.2e} -> {'OK' if ok else 'MISMATCH'}")
    noise_in = float(np.std(noisy - clean))
    delay = (args.taps - 1) // 2
    noise_out = float(np.std(np.roll(filtered, -delay, axis=-1)[:, args.taps:-args.taps] - clean[:, args.taps:-args.taps]))
    print(f"noise std: {noise_in:.3f} before, {noise_out:.3f} after filtering")

    if not simulated:
        import cupy as cp

        spec = cp.asarray(np.fft.rfft(taps, n).astype(np.complex64))

        def cupy_path():
            return cp.fft.irfft(cp.fft.rfft(d_noisy, axis=-1) * spec, n=n, axis=-1)

        ms_ours = median_ms(lambda: fft_convolve(d_noisy, taps, method=method))
        ms_cupy = median_ms(cupy_path)
        d_copy = cp.empty_like(d_noisy)
        ms_copy = median_ms(lambda: cp.copyto(d_copy, d_noisy))  # this GPU's own read + write
        floor = 2 * noisy.nbytes / 4.3e12 * 1e3
        print(f"time per call (median, {batch}x{n} float32): numba-mathdx {ms_ours:.3f} ms, "
              f"CuPy cuFFT (rfft, multiply, irfft) {ms_cupy:.3f} ms -> {ms_cupy / ms_ours:.2f}x; "
              f"memory floor {floor:.3f} ms (read + write at 4.3 TB/s, an H200's); a device-to-device "
              f"copy of the same array on this GPU: {ms_copy:.3f} ms")
    else:
        print("timing against CuPy skipped: no GPU in the simulator")

    if args.plot:
        _plot(args.plot, noisy[0], filtered[0], clean[0], delay)
        print(f"plot written to {args.plot}")
    return 0 if ok else 1


def _gpu_count() -> int:
    """CUDA devices this process sees (0 without a driver)."""
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return 0
        err, count = driver.cuDeviceGetCount()
        return count if err == driver.CUresult.CUDA_SUCCESS else 0
    except Exception:  # no libcuda at all
        return 0


def _main_gpus(ap, args) -> int:
    """``--gpus``: the job on Dask arrays across GPUs (see the module); 0 when every check passes."""
    if any(g < 1 for g in args.gpus):
        ap.error(f"--gpus counts must be >= 1, got {' '.join(map(str, args.gpus))}")
    if args.passes < 1:
        ap.error(f"--passes must be >= 1, got {args.passes}")
    if args.chunk_rows is not None and args.chunk_rows < 1:
        ap.error(f"--chunk-rows must be >= 1, got {args.chunk_rows}")
    if args.plot:
        ap.error("--plot is not available with --gpus")
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        ap.error("--gpus needs CUDA GPUs, and NUMBA_ENABLE_CUDASIM is set (the CUDA simulator runs on the "
                 "CPU); unset it, or run python -m kernels without --gpus")
    have = _gpu_count()
    if have == 0:
        ap.error("--gpus needs CUDA GPUs, and none is visible here (python -m kernels without --gpus runs "
                 "under the CUDA simulator)")
    if max(args.gpus) > have:
        ap.error(f"--gpus {max(args.gpus)}: only {have} GPU(s) visible (CUDA_VISIBLE_DEVICES selects them)")
    from kernels import _gpus

    missing = _gpus.missing_dask()
    if missing:
        ap.error(f"--gpus needs dask[array], distributed and dask-cuda: {missing}. Install them: {DASK_INSTALL}")
    _check_args(ap, args, simulated=False)
    n = args.n or 4096
    if n <= 2 * args.taps:
        ap.error(f"--taps must be smaller than n / 2 = {n / 2:g} (n = {n}); got {args.taps}")
    rows = args.batch or 262144
    chunk = args.chunk_rows or max(1, min(rows, (1 << 30) // (4 * n)))
    taps = lowpass_taps(args.taps, cutoff=0.06)
    print(f"numba-mathdx main job on {', '.join(map(str, args.gpus))} GPU(s) through Dask: {rows} signals of {n} "
          f"samples per GPU, blocks of {chunk} rows, {args.taps}-tap low-pass FIR as one fused kernel per "
          f"block, {args.passes} chained passes timed", flush=True)
    plain = _gpus.plain_one_gpu(rows, n, taps, median_ms)
    print(f"plain call on one GPU (CuPy array, {rows} x {n}): {plain['ms']:.3f} ms, "
          f"{plain['gsamples_per_s']:.1f} Gsamples/s", flush=True)
    results = _gpus.scaling(args.gpus, rows, n, taps, args.passes, chunk)
    print(_gpus.summary(results, plain))
    return 0 if all(r["ok"] for r in results) else 1


def _plot(path, noisy, filtered, clean, delay):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = noisy.size
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(10, 7))
    a1.plot(noisy, lw=0.6, color="0.6", label="noisy signal")
    a1.plot(np.roll(filtered, -delay), lw=1.2, label="filtered (delay removed)")
    a1.plot(clean, lw=1, ls="--", label="clean")
    a1.set_xlabel("sample")
    a1.legend(loc="upper right")
    a1.set_title("Fused FFT convolution (numba-mathdx)")
    f = np.fft.rfftfreq(n)
    a2.semilogy(f, np.abs(np.fft.rfft(noisy)) ** 2 + 1e-12, lw=0.6, color="0.6", label="noisy")
    a2.semilogy(f, np.abs(np.fft.rfft(filtered)) ** 2 + 1e-12, lw=1, label="filtered")
    a2.set_xlabel("frequency (cycles/sample)")
    a2.set_ylabel("power")
    a2.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
