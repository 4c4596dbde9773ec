# SPDX-License-Identifier: Apache-2.0
"""The fused kernel library (``kernels/``) against the natural CuPy peer, same data, same process.

    python benchmarks/fused_kernels.py --out bench_out [--mbytes 512] [--cases conv_real fir ...]

Cases (CuPy arrays in, each function called exactly as a user would, on CuPy's current stream):

- ``main_job``: ``python -m kernels``'s call at its own size, 65536 x 4096 float32 (1 GiB; --mbytes
  does not change it) with its 63-tap low-pass, as conv_real otherwise;
- ``conv_real``: ``kernels.fft_convolve`` float32 (rows x 4096, 63 taps) vs CuPy rfft -> multiply
  by the precomputed filter spectrum -> irfft;
- ``conv_complex``: ``kernels.fft_convolve`` complex64 (rows x 512, 63 taps) vs fft -> multiply -> ifft;
- ``fir``: ``kernels.fir_filter`` float32 (rows x 2**20, 127 taps) vs
  ``cupyx.scipy.signal.oaconvolve(x, taps[None, :], axes=-1)[:, :L]`` (the causal FIR output,
  = ``lfilter(taps, 1, x)``);
- ``matched``: ``kernels.matched_filter`` complex64 (rows x 1024, 128-sample template embedded at
  random shifts) vs ``ifft(fft(x) * conj(fft(t, n)))`` -> ``abs()**2`` -> argmax; peak indices must
  agree exactly and peak powers to rel. 1e-4;
- ``stft``: ``kernels.stft_power`` float32 (64 x L, Hann 512, hop 256) vs frames by stride tricks *
  window -> rfft -> ``abs()**2``;
- ``gemm``: ``kernels.batched_gemm`` float32 32x32x32 vs ``cupy.matmul`` on the stacked arrays;
- ``beamform``: ``kernels.beamform_spectra`` complex64 (batch x 16 channels x 256 samples, 8 beams)
  vs ``cupy.matmul(W, x)`` then ``cupy.fft.fft``.

``--mbytes`` sets the size of the largest input array of every case (default 512 MiB; 1024 gives
the 65536 x 4096 convolution and 256 x 2**20 FIR). Before timing, each case compares ours with the
peer over the whole output and both with a float64/complex128 CuPy reference on a few rows.
Timing: ``triton.testing.do_bench(fn, return_mode="median")``. Memory floor: bytes the operation
must read + write (inputs once, outputs once; filters, windows and weights not counted) at
4.3e12 B/s (H200 device copy, measured); "card bound" puts the floor at the copy rate measured on
this card at the start of the run (``benchmarks/ceilings.py``), for cards other than the H200.
"first call" is the first call of our function: code generation or disk-cache load, plus one run.

Roofline bound: the larger of the memory floor and the arithmetic at the machine's fp32 FMA rate,
measured at the start of the run (``benchmarks/ceilings.py``: independent FMA chains on every SM;
FLOP = 2 per FMA). FLOP counts used (the usual ones; n = FFT length, radix-2 count): a complex FFT
5 n log2 n, a real FFT 2.5 n log2 n, a complex multiply 6, |z|^2 3, a complex multiply-add 8:

- conv_real and main_job: rows x (2 x 2.5 n log2 n + 6 (n/2 + 1)) with the FFT kernel; with direct summation
  (``fft_convolve``'s ``method="direct"``, its default for 63 taps) the operations that kernel does,
  ``kernels._direct.flops``: 2 per multiply-add, 1 per add, ~0.77 x 2 x 63 per output; conv_complex: rows x (2 x 5 n log2 n + 6 n);
- fir: segments x (2 x 2.5 N log2 N + 6 (N/2 + 1)), N the segment FFT (512 for 127 taps),
  segments = rows x ceil(L / (N - 126)); with ``--fir-method direct``, ``kernels._direct.flops``
  of the rows as for conv_real;
- matched: rows x (2 x 5 n log2 n + 6 n + 3 n); stft: frames x (2.5 n log2 n + n + 3 (n/2 + 1));
- gemm: batch x 2 m n k; beamform: batch x (8 beams samples channels + beams x 5 s log2 s).

FFT-work bound (measured, beside the FLOP-count bound above, which 5 n log2 n undercounts for
cuFFTDx: its shared-memory exchanges, twiddles and synchronisation are not FMAs): each FFT case's
FFTs at the throughput of the fused kernels' own float32 descriptors (``kernels._fused.fft_pair``;
forward + inverse pairs, forward only for stft and beamform, whose descriptor is approximated by
fft_pair's) chained in registers and shared memory (``benchmarks/ceilings.py``); the table gives
ours against max(floor, FFT work).

The FFT cases run their float32 FFTs as the library does: by ``kernels._regfft`` (our own block
FFT, conflict-free shared-memory exchanges; ``kernels._fused.OWN_FFT``) where it has the size,
else cuFFTDx's; their FFT-work column is then our pair's (its key in the JSON ends in "ours").
``--own-fft-ept`` sets our FFT's values per thread, ``--own-fft-buffers`` its shared-memory buffers per row. With ``--cufftdx-fft`` they run cuFFTDx's
instead. With ``--both-ffts``, each FFT case runs twice in the one process, with cuFFTDx's FFT
(rows "<case> (cuFFTDx FFT)") and then with ours.

With ``--fft-configs``, each FFT case (conv_real, conv_complex, fir, matched, stft) runs once with
cuFFTDx's suggested configuration and then once per other valid ``(elements_per_thread,
ffts_per_block)`` of its FFT (``FFT.valid``, plus twice the suggested rows per block) set in
``kernels._fused.FFT_CONFIGS``: the same function, data, checks and peer, one row per
configuration with its block size, registers and local memory per thread, its own FFT-work
figure, and the fastest per case marked; written to fft_configs.json / fft_configs.md. This is
how an entry of ``FFT_CONFIGS`` is chosen.

Writes kernels.json and kernels.md into --out. With ``--profile-window``, one call of each of our
functions runs between cudaProfilerStart and cudaProfilerStop, e.g.
``ncu --profile-from-start off --section SpeedOfLight --section WarpStateStats ... python
benchmarks/fused_kernels.py --profile-window --cases matched``. Exits with status 2 and a message (no traceback)
when no GPU is usable.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

PEAK_BPS = 4.3e12
MIB = 2**20
CASES = ("main_job", "conv_real", "conv_complex", "fir", "matched", "stft", "gemm", "beamform")
MAIN_JOB_ROWS = 65536  # python -m kernels on a GPU: 65536 x 4096 float32, 1 GiB
REF_ROWS = 2  # rows (batch entries) checked against the float64 reference
TOL = 1e-5  # relative error ours vs peer above which a row says MISMATCH (matched: 1e-4, see there)

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_out", help="folder for kernels.json and kernels.md")
    ap.add_argument("--mbytes", type=int, default=512, help="MiB of the largest input array per case")
    ap.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES), metavar="CASE",
                    help=f"subset of {', '.join(CASES)} (default: all)")
    ap.add_argument("--profile-window", action="store_true",
                    help="run one call of each of our functions between cudaProfilerStart/Stop, after its "
                         "check and before its timing: under `ncu --profile-from-start off` exactly our "
                         "kernels of one call per case are profiled")
    ap.add_argument("--fft-configs", action="store_true",
                    help="time every valid FFT configuration of each FFT case (fft_configs.md)")
    ap.add_argument("--conv-method", choices=("auto", "fft", "direct"), default="auto",
                    help="conv_real's and main_job's fft_convolve method (default auto: direct summation for their 63 taps)")
    ap.add_argument("--fir-method", choices=("auto", "fft", "direct"), default="auto",
                    help="fir's fir_filter method (default auto: the FFT kernel, overlap-save)")
    ap.add_argument("--direct-pipeline", action="store_true",
                    help="direct summation (conv_real's, and fir's with --fir-method direct) by the pipelined "
                         "kernel where it exists (kernels._direct.PIPELINE; rows or segments of 4096)")
    ap.add_argument("--cufftdx-fft", action="store_true",
                    help="the FFT cases' float32 FFTs (conv_real with --conv-method fft, conv_complex, fir, "
                         "matched, stft, beamform's direct kernel) by cuFFTDx instead of kernels._regfft (our own "
                         "block FFT, the library's default: kernels._fused.OWN_FFT)")
    ap.add_argument("--both-ffts", action="store_true",
                    help="each FFT case twice in one run: cuFFTDx's FFT (rows '<case> (cuFFTDx FFT)'), then ours")
    ap.add_argument("--own-fft-ept", type=int, choices=(4, 8, 16, 32),
                    help="complex values per thread of our FFTs (kernels._regfft.EPT; default: the library's, "
                         "kernels._fused.OWN_FFT_EPT by function and size, else kernels._regfft.default_ept)")
    ap.add_argument("--own-fft-buffers", type=int, choices=(1, 2),
                    help="shared-memory buffers per row of our FFTs (kernels._regfft.BUFFERS; default: the "
                         "library's, one)")
    ap.add_argument("--beamform-kernel", choices=("gemm", "direct"),
                    help="which beamforming kernel beamform_spectra runs (kernels.gemm.BEAMFORM_KERNEL; "
                         "default: the library's choice)")
    a = ap.parse_args(argv)
    if a.mbytes < 1:
        ap.error("--mbytes must be >= 1")
    if (a.own_fft_ept or a.own_fft_buffers) and (a.cufftdx_fft or a.fft_configs):
        ap.error("--own-fft-ept and --own-fft-buffers set our FFT's layout; --cufftdx-fft and --fft-configs run "
                 "cuFFTDx's")
    if a.cufftdx_fft and a.both_ffts:
        ap.error("--cufftdx-fft runs cuFFTDx's only, --both-ffts both: one of them")
    if a.both_ffts and a.fft_configs:
        ap.error("--both-ffts and --fft-configs: the configurations swept are cuFFTDx's; run them apart")
    return a


def no_gpu_reason():
    """None when a GPU is usable by numba-cuda and CuPy; otherwise why not (one line)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        return "NUMBA_ENABLE_CUDASIM is set: the CUDA simulator runs on the CPU and cannot be benchmarked"
    try:
        from numba import cuda

        if not cuda.is_available():
            return "numba-cuda finds no usable CUDA driver/GPU"
        if len(cuda.gpus) == 0:
            return "numba-cuda sees no GPU"
    except Exception as e:  # driver errors: report, no traceback
        return f"numba-cuda: {type(e).__name__}: {e}"
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "CuPy sees no GPU"
    except Exception as e:
        return f"CuPy unusable: {type(e).__name__}: {e}"
    try:
        import triton.testing  # noqa: F401
    except Exception as e:
        return f"triton (for triton.testing.do_bench) not importable: {type(e).__name__}: {e}"
    return None


def import_kernels():
    """The ``kernels`` package of this repository (this script was once named kernels.py and
    shadowed it; no file in benchmarks/ may be named after a package of the project)."""
    if _ROOT not in sys.path:  # run from a checkout without installing it
        sys.path.append(_ROOT)
    import kernels

    return kernels


# ----------------------------------------------------------------------------------------------
# helpers (GPU side)


def _rel(a, b):
    """||a - b|| / ||b|| on the device (CuPy arrays of the same shape)."""
    import cupy as cp

    return float(cp.linalg.norm((a - b).ravel()) / cp.linalg.norm(b.ravel()))


def _errors(yo, yp, ref):
    """Ours vs the peer (whole output), and each vs the float64 reference (first REF_ROWS rows)."""
    return dict(rel_err=_rel(yo, yp), ours_ref_err=_rel(yo[:REF_ROWS], ref),
                peer_ref_err=_rel(yp[:REF_ROWS], ref))


def _sync():
    import cupy as cp

    cp.cuda.get_current_stream().synchronize()


def _first_call(fn):
    t0 = time.perf_counter()
    out = fn()
    _sync()
    return out, time.perf_counter() - t0


def _cnoise(rng, shape):
    import cupy as cp

    return (rng.standard_normal(shape, dtype=cp.float32)
            + 1j * rng.standard_normal(shape, dtype=cp.float32)).astype(cp.complex64)


PROFILE_WINDOW = False  # --profile-window (main sets it)
CONV_METHOD = "auto"  # --conv-method (main sets it)
FIR_METHOD = "auto"  # --fir-method (main sets it)


def _measure(ours, peer, check):
    """First calls, correctness (``check(y_ours, y_peer) -> dict``), then median timings (with
    --profile-window, one call of ``ours`` inside the profiler window before them)."""
    from triton.testing import do_bench

    y_ours, first = _first_call(ours)
    y_peer, peer_first = _first_call(peer)
    res = dict(first_call_s=round(first, 3), peer_first_call_s=round(peer_first, 3))
    res.update(check(y_ours, y_peer))
    del y_ours, y_peer
    if PROFILE_WINDOW:
        import cupy as cp

        cp.cuda.profiler.start()
        ours()
        _sync()
        cp.cuda.profiler.stop()
    res["ms"] = do_bench(ours, return_mode="median")
    res["peer_ms"] = do_bench(peer, return_mode="median")
    return res


# ----------------------------------------------------------------------------------------------
# cases: each returns a dict with shape, peer, bytes and _measure's fields


def _real_convolution(K, rows, n, h):
    """conv_real and main_job: ``kernels.fft_convolve`` of float32 (rows, n) with taps ``h`` (the
    method --conv-method picks), against CuPy's rfft -> multiply -> irfft."""
    import cupy as cp

    ntaps = len(h)
    rng = cp.random.default_rng(1)
    x = rng.standard_normal((rows, n), dtype=cp.float32)
    H = cp.asarray(np.fft.rfft(h, n).astype(np.complex64))

    def peer():
        return cp.fft.irfft(cp.fft.rfft(x, axis=-1) * H, n=n, axis=-1)

    def check(yo, yp):
        xs = x[:REF_ROWS].astype(cp.float64)
        ref = cp.fft.irfft(cp.fft.rfft(xs, axis=-1) * cp.asarray(np.fft.rfft(h, n)), n=n, axis=-1)
        return _errors(yo, yp, ref)

    from kernels import _direct
    from kernels.convolution import convolve_method

    method = convolve_method(CONV_METHOD, n, h, np.float32)
    res = _measure(lambda: K.fft_convolve(x, h, method=method), peer, check)
    if method == "direct":  # no FFT: its own operation count, no FFT-work bound
        work = dict(flops=rows * _direct.flops(n, ntaps))
    else:
        work = dict(flops=rows * (2 * _rfft_flops(n) + 6 * (n // 2 + 1)), fft=(n, True, rows, True))
    return dict(shape=f"{rows}x{n} f32, {ntaps} taps, {method}", peer="CuPy rfft * H -> irfft",
                bytes=2 * x.nbytes, **work, **res)


def case_main_job(K, mbytes):
    """``python -m kernels``'s job: its size (MAIN_JOB_ROWS x 4096; --mbytes does not apply) and
    its 63-tap low-pass taps, on random rows (the timing does not depend on the values)."""
    from kernels.__main__ import lowpass_taps

    return _real_convolution(K, MAIN_JOB_ROWS, 4096, lowpass_taps(63, cutoff=0.06))


def case_conv_real(K, mbytes):
    n = 4096
    return _real_convolution(K, max(1, mbytes * MIB // (4 * n)), n, np.random.default_rng(1).standard_normal(63))


def case_conv_complex(K, mbytes):
    import cupy as cp

    n, ntaps = 512, 63
    rows = max(1, mbytes * MIB // (8 * n))
    rng = cp.random.default_rng(2)
    x = _cnoise(rng, (rows, n))
    g = np.random.default_rng(2)
    h = g.standard_normal(ntaps) + 1j * g.standard_normal(ntaps)
    H = cp.asarray(np.fft.fft(h, n).astype(np.complex64))

    def peer():
        return cp.fft.ifft(cp.fft.fft(x, axis=-1) * H, axis=-1)

    def check(yo, yp):
        xs = x[:REF_ROWS].astype(cp.complex128)
        ref = cp.fft.ifft(cp.fft.fft(xs, axis=-1) * cp.asarray(np.fft.fft(h, n)), axis=-1)
        return _errors(yo, yp, ref)

    res = _measure(lambda: K.fft_convolve(x, h), peer, check)
    return dict(shape=f"{rows}x{n} c64, {ntaps} taps", peer="CuPy fft * H -> ifft",
                bytes=2 * x.nbytes, flops=rows * (2 * _cfft_flops(n) + 6 * n), fft=(n, False, rows, True), **res)


def case_fir(K, mbytes):
    import cupy as cp
    from cupyx.scipy.signal import oaconvolve

    length, ntaps = 2**20, 127
    rows = max(1, mbytes * MIB // (4 * length))
    rng = cp.random.default_rng(3)
    x = rng.standard_normal((rows, length), dtype=cp.float32)
    taps = np.random.default_rng(3).standard_normal(ntaps)
    taps_d = cp.asarray(taps.astype(np.float32))[None, :]

    def peer():  # full linear convolution; its first L samples are the causal FIR output
        return oaconvolve(x, taps_d, axes=-1)[:, :length]

    def check(yo, yp):
        # float64 reference independent of oaconvolve: one zero-padded FFT of the whole row
        nfft = 1 << (length + ntaps - 1 - 1).bit_length()
        xs = x[:REF_ROWS].astype(cp.float64)
        spec = cp.fft.rfft(xs, n=nfft, axis=-1) * cp.asarray(np.fft.rfft(taps, nfft))
        ref = cp.fft.irfft(spec, n=nfft, axis=-1)[:, :length]
        return dict(_errors(yo, yp, ref), peer_dtype=str(yp.dtype))

    from kernels.convolution import fir_method

    method = fir_method(FIR_METHOD, length, taps, np.float32)
    res = _measure(lambda: K.fir_filter(x, taps, method=method), peer, check)
    if method == "direct":  # no FFT: its own operation count, no FFT-work bound
        from kernels import _direct

        work = dict(flops=rows * _direct.flops(length, ntaps))  # its 4096-sample segments: the same sums per output
    else:
        nfft = 512  # fir_filter's default segment FFT for 127 taps: the smallest power of 2 >= 4 * 127
        segments = rows * -(-length // (nfft - ntaps + 1))
        work = dict(flops=segments * (2 * _rfft_flops(nfft) + 6 * (nfft // 2 + 1)), fft=(nfft, True, segments, True))
    return dict(shape=f"{rows}x{length} f32, {ntaps} taps, {method}", peer="cupyx oaconvolve(axes=-1)[:, :L]",
                bytes=2 * x.nbytes, **work, **res)


def case_matched(K, mbytes):
    import cupy as cp

    n, m = 1024, 128
    rows = max(1, mbytes * MIB // (8 * n))
    rng = cp.random.default_rng(4)
    x = 0.5 * _cnoise(rng, (rows, n))
    g = np.random.default_rng(4)
    t = (g.standard_normal(m) + 1j * g.standard_normal(m)).astype(np.complex64)
    shifts = cp.asarray(g.integers(0, n - m, rows))
    cols = shifts[:, None] + cp.arange(m)[None, :]
    x[cp.arange(rows)[:, None], cols] += cp.asarray(t)[None, :]  # distinct peaks: exact argmax test
    x = x.astype(cp.complex64)
    T = cp.conj(cp.fft.fft(cp.asarray(t), n))

    def peer():
        p = cp.abs(cp.fft.ifft(cp.fft.fft(x, axis=-1) * T, axis=-1)) ** 2
        idx = cp.argmax(p, axis=-1)
        return idx, cp.take_along_axis(p, idx[:, None], axis=-1)[:, 0]

    def check(yo, yp):
        (io, vo), (ip, vp) = yo, yp
        mism = int(cp.count_nonzero(io.astype(cp.int64) != ip.astype(cp.int64)))
        xs = x[:REF_ROWS].astype(cp.complex128)
        pr = cp.abs(cp.fft.ifft(cp.fft.fft(xs, axis=-1) * cp.conj(cp.fft.fft(cp.asarray(t, cp.complex128), n)),
                                axis=-1)) ** 2
        ir, vr = cp.argmax(pr, axis=-1), pr.max(axis=-1)
        ref_mism = int(cp.count_nonzero(io[:REF_ROWS].astype(cp.int64) != ir))
        rel = float(cp.max(cp.abs(vo.astype(cp.float64) - vp) / vp))
        ok = mism == 0 and ref_mism == 0 and rel <= 1e-4
        return dict(rel_err=rel, tol=1e-4, ok=ok,
                    ours_ref_err=float(cp.max(cp.abs(vo[:REF_ROWS] - vr) / vr)),
                    peer_ref_err=float(cp.max(cp.abs(vp[:REF_ROWS] - vr) / vr)),
                    check=f"peak idx differ {mism}/{rows} (vs fp64 {ref_mism}/{REF_ROWS}); "
                          f"rel. err = max over rows of peak power")

    res = _measure(lambda: K.matched_filter(x, t), peer, check)
    return dict(shape=f"{rows}x{n} c64, {m}-sample template", peer="CuPy fft * conj(T) -> ifft -> abs^2 -> argmax",
                bytes=x.nbytes + rows * (4 + 4), flops=rows * (2 * _cfft_flops(n) + 6 * n + 3 * n),
                fft=(n, False, rows, True), **res)


def case_stft(K, mbytes):
    import cupy as cp
    from cupy.lib.stride_tricks import as_strided

    batch, nfft, hop = 64, 512, 256
    length = max(nfft, mbytes * MIB // (4 * batch))
    rng = cp.random.default_rng(5)
    x = rng.standard_normal((batch, length), dtype=cp.float32)
    w = np.hanning(nfft)
    wd = cp.asarray(w.astype(np.float32))
    nfr = 1 + (length - nfft) // hop

    def frames(a):
        return as_strided(a, shape=(a.shape[0], nfr, nfft), strides=(a.strides[0], hop * a.itemsize, a.itemsize))

    def peer():
        return cp.abs(cp.fft.rfft(frames(x) * wd, axis=-1)) ** 2

    def check(yo, yp):
        xs = cp.ascontiguousarray(x[:REF_ROWS]).astype(cp.float64)
        ref = cp.abs(cp.fft.rfft(frames(xs) * cp.asarray(w), axis=-1)) ** 2
        return _errors(yo, yp, ref)

    res = _measure(lambda: K.stft_power(x, w, hop), peer, check)
    return dict(shape=f"{batch}x{length} f32, nfft {nfft}, hop {hop}", peer="CuPy strided frames * w -> rfft -> abs^2",
                bytes=x.nbytes + batch * nfr * (nfft // 2 + 1) * 4,
                flops=batch * nfr * (_rfft_flops(nfft) + nfft + 3 * (nfft // 2 + 1)),
                fft=(nfft, True, batch * nfr, False), **res)


def case_gemm(K, mbytes):
    import cupy as cp

    m = n = k = 32
    batch = max(1, mbytes * MIB // (4 * m * k))
    rng = cp.random.default_rng(6)
    a = rng.standard_normal((batch, m, k), dtype=cp.float32)
    b = rng.standard_normal((batch, k, n), dtype=cp.float32)

    def check(yo, yp):
        ref = cp.matmul(a[:REF_ROWS].astype(cp.float64), b[:REF_ROWS].astype(cp.float64))
        return _errors(yo, yp, ref)

    res = _measure(lambda: K.batched_gemm(a, b), lambda: cp.matmul(a, b), check)
    return dict(shape=f"{batch} x ({m}x{k} @ {k}x{n}) f32", peer="cupy.matmul (cuBLAS batched)",
                bytes=a.nbytes + b.nbytes + batch * m * n * 4, flops=batch * 2 * m * n * k, **res)


def case_beamform(K, mbytes):
    import cupy as cp

    channels, nsamp, beams = 16, 256, 8
    batch = max(1, mbytes * MIB // (8 * channels * nsamp))
    rng = cp.random.default_rng(7)
    x = _cnoise(rng, (batch, channels, nsamp))
    g = np.random.default_rng(7)
    w = (g.standard_normal((beams, channels)) + 1j * g.standard_normal((beams, channels))).astype(np.complex64)
    wd = cp.asarray(w)

    def peer():
        return cp.fft.fft(cp.matmul(wd, x), axis=-1)

    def check(yo, yp):
        ref = cp.fft.fft(cp.matmul(cp.asarray(w, cp.complex128), x[:REF_ROWS].astype(cp.complex128)), axis=-1)
        return _errors(yo, yp, ref)

    res = _measure(lambda: K.beamform_spectra(x, w), peer, check)
    return dict(shape=f"{batch}x{channels}x{nsamp} c64, {beams} beams", peer="cupy.matmul(W, x) -> cupy.fft.fft",
                bytes=x.nbytes + batch * beams * nsamp * 8,
                flops=batch * (8 * beams * nsamp * channels + beams * _cfft_flops(nsamp)),
                fft=(nsamp, False, batch * beams, False), fft_config=_beamform_fft_config(beams, nsamp), **res)


def _beamform_fft_config(beams, nsamp):
    """[ept, fpb] of beamform_spectra's own FFT (kernels.gemm._beamform_fft), for the FFT-work
    meter: not the suggested configuration the other cases' pairs start from."""
    from kernels.gemm import _beamform_fft

    fft = _beamform_fft(beams, nsamp, np.float32, None)
    return [fft.elements_per_thread_value, fft.ffts_per_block_value]


RUNNERS = {name: globals()[f"case_{name}"] for name in CASES}


def _cfft_flops(n: int) -> float:
    return 5 * n * math.log2(n)


def _rfft_flops(n: int) -> float:
    return 2.5 * n * math.log2(n)


# ----------------------------------------------------------------------------------------------
# bookkeeping (no GPU needed: tested on the CPU)


def finish_row(case, res, flop_rate=None, fft_rate=None, copy_bps=None):
    """Add floor, bound and verdict fields to one successful case's result dict (``flop_rate``:
    the measured fp32 FLOP/s; without it, or without the case's ``flops``, the bound is the
    memory floor). ``fft_rate(n, real, pair, kernel, config)``: FFTs (pairs) per second measured
    for the case's descriptors (``kernel``: the FFT_CASES function whose configuration it uses,
    or None; ``config``: the case's own ``fft_config`` [ept, fpb], if it has one);
    with it and the case's ``fft`` (n, real, count, pair) the row also gets ``fft_ms`` (the FFT
    work alone at that rate) and ``pct_fft_bound`` (ours against max(floor, fft_ms)).
    ``copy_bps``: this card's measured copy rate (B/s, read + written); with it the row also
    gets ``card_bound_ms`` (the bound with the floor at that rate instead of PEAK_BPS) and
    ``pct_card_bound``: the roofline fraction on cards other than the H200, whose rate PEAK_BPS is."""
    row = dict(case=case, **res)
    row["floor_ms"] = row["bytes"] / PEAK_BPS * 1e3
    row["pct_floor"] = 100 * row["floor_ms"] / row["ms"]
    row["arith_ms"] = row["flops"] / flop_rate * 1e3 if flop_rate and row.get("flops") else None
    row["bound_ms"] = max(row["floor_ms"], row["arith_ms"] or 0.0)
    row["bound_by"] = "arithmetic" if row["arith_ms"] and row["arith_ms"] > row["floor_ms"] else "memory"
    row["pct_bound"] = 100 * row["bound_ms"] / row["ms"]
    row["card_bound_ms"] = row["pct_card_bound"] = None
    if copy_bps:
        row["card_bound_ms"] = max(row["bytes"] / copy_bps * 1e3, row["arith_ms"] or 0.0)
        row["pct_card_bound"] = 100 * row["card_bound_ms"] / row["ms"]
    row["fft_ms"] = row["pct_fft_bound"] = None
    if fft_rate is not None and row.get("fft"):
        n, real, count, pair = row["fft"]
        fn = FFT_CASES.get(case, ("beamform_spectra" if case == "beamform" else None,))[0]
        row["fft_ms"] = count / fft_rate(n, real, pair, fn, row.get("fft_config")) * 1e3
        row["pct_fft_bound"] = 100 * max(row["floor_ms"], row["fft_ms"]) / row["ms"]
    row["peer_pct_floor"] = 100 * row["floor_ms"] / row["peer_ms"]
    row["speedup"] = row["peer_ms"] / row["ms"]
    if "ok" not in row:
        row["ok"] = bool(row["rel_err"] <= row.get("tol", TOL))
    return row


def run_cases(names, runner_for, K, mbytes, log=print, flop_rate=None, fft_rate=None, copy_bps=None):
    """Run each case; a failing case becomes a row with its error string, the next one runs.
    Each row also gets ``resources``: registers and local memory per thread of the kernels the
    case compiled (what bounds their occupancy)."""
    from kernels import _launch

    rows = []
    for name in names:
        before = set(_launch._LAUNCHERS)
        try:
            row = finish_row(name, runner_for[name](K, mbytes), flop_rate, fft_rate, copy_bps)
            row["resources"] = _new_kernels_resources(before)
        except Exception as e:  # report, don't hide; go on with the next case
            row = dict(case=name, error=f"{type(e).__name__}: {str(e)[:300]}")
        rows.append(row)
        _logged(row, log)
    return rows


def _logged(row, log) -> None:
    """Print one result row as JSON, then give the case's arrays back to the GPU."""
    log(json.dumps(row))
    try:
        import cupy as cp

        cp.get_default_memory_pool().free_all_blocks()
    except Exception:
        pass


def _cell(text: str) -> str:
    """An error message as one markdown table cell (no pipes, one line, 200 characters)."""
    return text.replace("|", "/").replace("\n", " ")[:200]


def _e(v):
    return f"{v:.1e}" if v is not None else "-"


def _ms(v):
    return f"{v:.3f}" if v is not None else "-"


def _pct(v):
    return f"{v:.0f}%" if v is not None else "-"


def format_table(rows, meta):
    lines = [f"Fused kernels (`kernels/`) vs CuPy, {meta.get('device', '?')}, largest input "
             f"{meta.get('mbytes')} MiB per case; median ms (`triton.testing.do_bench`); floor = bytes "
             f"read + written / 4.3e12 B/s; bound = max(floor, FLOP / measured fp32 FMA rate"
             + (f" {meta['fp32_flops'] / 1e12:.1f} TFLOP/s" if meta.get("fp32_flops") else "") + ")"
             + (f"; card bound = the same with the floor at this card's measured copy rate, "
                f"{meta['copy_bps'] / 1e12:.2f} TB/s (benchmarks/ceilings.py)" if meta.get("copy_bps") else ""), "",
             "; FFT work ms = the case's FFTs at the throughput measured for its own descriptors (ours, or cuFFTDx's with --cufftdx-fft) "
             "(benchmarks/ceilings.py: FFTs chained in registers and shared memory, no signal traffic)", "",
             *([f"FFTs timed: {meta['fft_layout']}", ""] if meta.get("fft_layout") else []),
             "| case | data | ours ms | peer | peer ms | speedup | ours % of floor | bound ms | ours % of bound | "
             "ours % of card bound | "
             "FFT work ms | ours % of max(floor, FFT work) | "
             "peer % of floor | rel. err vs peer | ours vs fp64 | peer vs fp64 | first call s | "
             "registers, local memory per thread | check |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['case']} | | failed: {_cell(r['error'])} | | | | | | | | | | | | | | | | FAILED |")
            continue
        verdict = "ok" if r["ok"] else "MISMATCH"
        if r.get("check"):
            verdict += f": {r['check']}"
        lines.append(
            f"| {r['case']} | {r['shape']} | {r['ms']:.3f} | {r['peer']} | {r['peer_ms']:.3f} | "
            f"{r['speedup']:.2f}x | {r['pct_floor']:.0f}% | {r['bound_ms']:.3f} ({r['bound_by']}) | "
            f"{r['pct_bound']:.0f}% | {_pct(r.get('pct_card_bound'))} | {_ms(r.get('fft_ms'))} | {_pct(r.get('pct_fft_bound'))} | "
            f"{r['peer_pct_floor']:.0f}% | "
            f"{_e(r['rel_err'])} | {_e(r.get('ours_ref_err'))} | {_e(r.get('peer_ref_err'))} | "
            f"{r['first_call_s']:.2f} | {r.get('resources', '-')} | {verdict} |")
    return "\n".join(lines) + "\n"


def write_results(out, rows, meta, name="kernels", table=None):
    """``out/<name>.json`` (meta and rows) and ``out/<name>.md`` (``table(rows, meta)``, this
    benchmark's table by default); returns the markdown."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    text = (table or format_table)(rows, meta)
    with open(os.path.join(out, f"{name}.md"), "w") as f:
        f.write(text)
    return text


def fft_rate_meter(meta):
    """``fft_rate(n, real, pair, kernel, config)`` for finish_row: FFTs (or forward + inverse
    pairs) per second of the float32 descriptor pair function ``kernel`` uses for length ``n``
    (``kernels._fused.fft_pair``, folded where real; at ``config`` = [ept, fpb] when given),
    measured once each (benchmarks/ceilings.py) and recorded in ``meta``."""
    from ceilings import measure_fft_rate

    from kernels._fused import can_fold, fft_pair

    rates = meta.setdefault("fft_rates", {})

    def rate(n, real, pair, kernel=None, config=None):
        ept, fpb = config if config else (None, None)
        fwd, inv = fft_pair(n, np.float32, real, ept, fpb, folded=real and can_fold(n), kernel=kernel)
        own = " ours" if hasattr(fwd, "executor") else ""  # kernels._regfft's (the default)
        key = (f"{n} {'real' if real else 'c2c'} {'pair' if pair else 'forward'} "
               f"ept {fwd.elements_per_thread_value} fpb {fwd.ffts_per_block_value}{own}")
        if key not in rates:
            rates[key] = measure_fft_rate(fwd, inv if pair else None)
            print(f"# FFT throughput, {key}: {rates[key] / 1e6:.1f} M FFTs/s", flush=True)
        return rates[key]

    return rate


FFT_CASES = {"conv_real": ("fft_convolve", 4096, True), "conv_complex": ("fft_convolve", 512, False),
             "fir": ("fir_filter", 512, True), "matched": ("matched_filter", 1024, False),
             "stft": ("stft_power", 512, True)}  # each case's kernels function and float32 FFT (n, real)


def case_configs(name):
    """``(FFT_CONFIGS key, suggested (ept, fpb), the other configurations to time)`` of the FFT
    case ``name`` (its FFT as FFT_CASES declares it; cuFFTDx's suggestion, whatever the table
    holds)."""
    from kernels import _fused

    fn, n, real = FFT_CASES[name]
    folded = real and _fused.can_fold(n)
    fwd, _ = _fused.fft_pair(n, np.float32, real, "suggested", "suggested", folded=folded)
    used = (fwd.elements_per_thread_value, fwd.ffts_per_block_value)
    return (fn, n, "float32", real, folded), used, config_candidates(fwd.valid("elements_per_thread", "ffts_per_block"), used)


def prepare_fft_configs(names) -> int:
    """Build every configuration's descriptor pair of these cases in one parallel NVRTC batch
    (``nvmath_device.prepare``) before anything is timed; returns how many descriptors."""
    from kernels import _fused
    from nvmath_device import prepare

    descs = []
    for name in names:
        if name not in FFT_CASES:
            continue
        (_, n, _, real, folded), used, candidates = case_configs(name)
        for e, f in [used, *candidates]:
            try:
                descs += list(_fused._pair_descriptors(n, np.float32, real, e, f, folded=folded))
            except ValueError as err:  # e.g. too many threads: its row will say so
                print(f"# {name} ept {e} fpb {f}: {err}", flush=True)
    prepare(*descs)
    return len(descs)


def config_candidates(valid, suggested) -> list:
    """The configurations to time after the suggested one: every valid ``(ept, fpb)`` pair
    (``FFT.valid``) but the suggestion itself, then the suggested ept at twice its rows per
    block."""
    out = [tuple(c) for c in valid if tuple(c) != tuple(suggested)]
    doubled = (suggested[0], 2 * suggested[1])
    if doubled not in out:
        out.append(doubled)
    return out


def _new_kernels_resources(before):
    """(block threads, registers, local bytes) per thread of the kernels compiled since
    ``before`` (a set of kernels._launch launcher keys), as one string."""
    from kernels import _launch

    out = []
    for key in set(_launch._LAUNCHERS) - before:
        kernel, argtypes, _ = key
        try:  # the dispatcher's compiled overload of these argument types (a tuple, not a signature)
            compiled = kernel.overloads[argtypes]
            out.append(f"{compiled.regs_per_thread} regs, {compiled.local_mem_per_thread} B local")
        except Exception as e:  # the figure is extra: say why it is missing
            out.append(f"? ({type(e).__name__})")
    return "; ".join(sorted(out)) or "(compiled earlier)"


def sweep_fft_configs(names, K, mbytes, flop_rate, fft_rate, log=print, case_done=None):
    """Each FFT case at the suggested configuration, then at each of :func:`config_candidates`
    (set in ``kernels._fused.FFT_CONFIGS`` under the case's key for its run only; the table's
    other entries stay, and the table is as it was after the sweep). Rows as :func:`run_cases`'s,
    with ``config``, ``block``, ``resources`` and ``best`` (the fastest correct row per case).
    ``case_done(rows)``, if given, gets the rows so far after each case (a run cut by a time
    limit keeps the cases it finished)."""
    from kernels import _fused, _launch

    rows = []
    table = _fused.FFT_CONFIGS
    for name in names:
        if name not in FFT_CASES:
            continue
        key, _, candidates = case_configs(name)
        fn, n, _, real, folded = key
        kept = table.pop(key, None)
        case_rows = []
        for cfg in [None, *candidates]:
            table.pop(key, None)
            if cfg is not None:
                table[key] = cfg
            before = set(_launch._LAUNCHERS)
            try:
                row = finish_row(name, RUNNERS[name](K, mbytes), flop_rate, fft_rate)
                if tuple(row["fft"][:2]) != (n, real):
                    raise RuntimeError(f"{name} ran FFTs of ({row['fft'][0]}, real={row['fft'][1]}); "
                                       f"FFT_CASES says {(n, real)}")
                fwd, _ = _fused.fft_pair(n, np.float32, real, folded=folded, kernel=fn)  # what the run used
                used = (fwd.elements_per_thread_value, fwd.ffts_per_block_value)
                row.update(config=f"ept {used[0]} fpb {used[1]}" + (" (suggested)" if cfg is None else ""),
                           block=list(fwd.block_dim), resources=_new_kernels_resources(before))
            except Exception as e:  # report, don't hide; go on with the next configuration
                row = dict(case=name, config=str(cfg), error=f"{type(e).__name__}: {str(e)[:300]}")
            case_rows.append(row)
            _logged(row, log)
            if cfg is None and "error" in row:  # the case itself fails: no configuration will run
                break
        table.pop(key, None)
        if kept is not None:
            table[key] = kept
        good = [r for r in case_rows if "error" not in r and r["ok"]]
        if good:
            min(good, key=lambda r: r["ms"])["best"] = True
        rows += case_rows
        if case_done is not None:
            case_done(rows)
    return rows


def format_config_table(rows, meta):
    """fft_configs.md: one row per case and configuration."""
    lines = [f"FFT configurations of the fused kernels, {meta.get('device', '?')}, largest input "
             f"{meta.get('mbytes')} MiB per case; median ms (`triton.testing.do_bench`); `{meta.get('command', '')}`", "",
             "| case | configuration | block | registers, local memory | ours ms | ours % of floor | "
             "FFT work ms | peer ms | rel. err vs peer | check | fastest |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['case']} | {r.get('config', '')} | | | failed: {_cell(r['error'])} | | | | | FAILED | |")
            continue
        lines.append(f"| {r['case']} | {r['config']} | {'x'.join(map(str, r['block']))} | {r['resources']} | "
                     f"{r['ms']:.3f} | {r['pct_floor']:.0f}% | {_ms(r.get('fft_ms'))} | {r['peer_ms']:.3f} | "
                     f"{_e(r['rel_err'])} | {'ok' if r['ok'] else 'MISMATCH'} | {'**fastest**' if r.get('best') else ''} |")
    return "\n".join(lines) + "\n"


OWN_FFT_CASES = ("conv_real", "conv_complex", "fir", "matched", "stft", "beamform")  # cases an FFT engine changes


def use_own_fft(ept=None, buffers=None) -> None:
    """Our FFT (kernels._regfft) for every function that takes it from here on (``ept``: its
    values per thread, ``buffers`` its shared-memory buffers per row; None: the library's default,
    left as it is, so a run without ``--own-fft-*`` times what a user's call runs)."""
    from kernels import _fused, _regfft

    _fused.OWN_FFT.update(_fused.OWN_FFT_FUNCTIONS)
    if ept is not None:
        _regfft.EPT = ept
    if buffers is not None:
        _regfft.BUFFERS = buffers


def fft_layout() -> str:
    """The FFT engine and layout the FFT cases run with now, as the table's header says it."""
    from kernels import _fused, _regfft

    if not _fused.OWN_FFT:
        return "cuFFTDx's (the FFT cases' float32 FFTs)"
    ept = ("the library's per function and size (kernels._fused.OWN_FFT_EPT, else kernels._regfft.default_ept)"
           if _regfft.EPT is None else _regfft.EPT)
    buffers = "two where they fit, else one" if _regfft.BUFFERS is None else _regfft.BUFFERS
    return f"ours (kernels._regfft): values per thread {ept}, shared-memory buffers per row {buffers}"


def use_cufftdx_fft() -> None:
    """cuFFTDx's FFT for every function from here on."""
    from kernels import _fused

    _fused.OWN_FFT.clear()


def main(argv=None):
    global PROFILE_WINDOW, CONV_METHOD, FIR_METHOD
    args = parse_args(argv)
    PROFILE_WINDOW = args.profile_window
    CONV_METHOD = "fft" if args.fft_configs else args.conv_method  # configurations are the FFT kernel's
    FIR_METHOD = "fft" if args.fft_configs else args.fir_method
    if args.direct_pipeline:
        from kernels import _direct

        _direct.PIPELINE = True
    if args.cufftdx_fft or args.fft_configs or args.both_ffts:  # --both-ffts: cuFFTDx's first
        use_cufftdx_fft()
    else:
        use_own_fft(args.own_fft_ept, args.own_fft_buffers)
    why = no_gpu_reason()
    if why:
        print(f"benchmarks/fused_kernels.py needs a CUDA GPU (with CuPy and triton): {why}", file=sys.stderr)
        return 2
    import cupy as cp

    K = import_kernels()
    from kernels import gemm as kgemm

    if args.beamform_kernel:
        kgemm.BEAMFORM_KERNEL = args.beamform_kernel
    meta = dict(beamform_kernel=kgemm.BEAMFORM_KERNEL, cufftdx_fft=args.cufftdx_fft, both_ffts=args.both_ffts,
                own_fft_ept=args.own_fft_ept, own_fft_buffers=args.own_fft_buffers, fft_layout=fft_layout(), device=cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode(),
                mbytes=args.mbytes, peak_bps=PEAK_BPS, ref_rows=REF_ROWS, cupy=cp.__version__,
                command="python benchmarks/fused_kernels.py " + " ".join(sys.argv[1:] if argv is None else argv))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ceilings.py
    from ceilings import measure_copy_rate, measure_fp32_fma_rate

    meta["fp32_flops"] = measure_fp32_fma_rate()
    print(f"# fp32 FMA rate: {meta['fp32_flops'] / 1e12:.1f} TFLOP/s", flush=True)
    meta["copy_bps"] = measure_copy_rate()
    print(f"# device copy rate: {meta['copy_bps'] / 1e12:.2f} TB/s", flush=True)
    if args.fft_configs:
        t0 = time.perf_counter()
        count = prepare_fft_configs(args.cases)
        print(f"# {count} FFT descriptors of the configurations built in {time.perf_counter() - t0:.0f} s", flush=True)
        def write(rows):
            return write_results(args.out, rows, meta, name="fft_configs", table=format_config_table)

        print(write(sweep_fft_configs(args.cases, K, args.mbytes, meta["fp32_flops"], fft_rate_meter(meta),
                                      case_done=write)))
        return 0
    rows = []
    if args.both_ffts:  # the FFT cases with cuFFTDx's FFT first (conv_real only where it runs the FFT kernel)
        first = [c for c in args.cases if c in OWN_FFT_CASES and (c != "conv_real" or CONV_METHOD == "fft")]
        for r in run_cases(first, RUNNERS, K, args.mbytes, flop_rate=meta["fp32_flops"], fft_rate=fft_rate_meter(meta),
                            copy_bps=meta["copy_bps"]):
            r["case"] += " (cuFFTDx FFT)"
            rows.append(r)
        use_own_fft(args.own_fft_ept, args.own_fft_buffers)
        meta["fft_layout"] = "rows '(cuFFTDx FFT)': cuFFTDx's; the others " + fft_layout()
    rows += run_cases(args.cases, RUNNERS, K, args.mbytes, flop_rate=meta["fp32_flops"],
                      fft_rate=fft_rate_meter(meta), copy_bps=meta["copy_bps"])
    print(write_results(args.out, rows, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
