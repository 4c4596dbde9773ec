# SPDX-License-Identifier: Apache-2.0
"""``kernels.fft_convolve``'s two kernels on float32 rows, by row length and tap count, against
CuPy's rfft -> multiply -> irfft on the same data: where direct summation (``method="direct"``)
beats the FFT kernel (``method="fft"``), and so what ``method="auto"`` should pick.

    python benchmarks/conv_methods.py --out DIR [--mbytes 1024] [--sizes 512 1024 2048 4096] [--taps 7 15 31 63 64]
                                      [--levels 1 2] [--pipeline] [--min-blocks 4 8]

Each (n, taps): rows = mbytes MiB / (4 n); the direct and FFT results are checked against a
float64 reference on a few rows and against each other over the whole output before timing
(``triton.testing.do_bench``, median). Memory floor: read + write at 4.3e12 B/s; the direct
kernel's arithmetic bound: ``kernels._direct.flops`` at the fp32 FMA rate measured at the start
(``benchmarks/ceilings.py``). With ``--levels``, the direct kernel is also timed (and checked)
with its taps split each given number of times (``kernels._direct.levels`` overridden; 0: plain
sums, 1: two-parallel fast FIR, 2: nested), one column per level; ``--pipeline`` adds the
pipelined kernel (persistent, cp.async into two row buffers; rows of 4096) at each level and at
the default one; ``--min-blocks`` the kernel compiled with launch bounds for each number of
blocks of 128 threads per SM (``kernels._direct.MIN_BLOCKS``: a register cap). Writes conv_methods.json and conv_methods.md into --out; exits with
status 2 and a message when no GPU is usable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

PEAK_BPS = 4.3e12
MIB = 2**20
REF_ROWS = 2


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_out", help="folder for conv_methods.json and .md")
    ap.add_argument("--mbytes", type=int, default=1024, help="MiB of input per case (default 1024)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048, 4096], help="row lengths")
    ap.add_argument("--taps", type=int, nargs="+", default=[7, 15, 31, 63, 64], help="tap counts")
    ap.add_argument("--levels", type=int, nargs="+", default=[], choices=(0, 1, 2),
                    help="also time the direct kernel with its taps split this many times")
    ap.add_argument("--min-blocks", type=int, nargs="+", default=[], choices=range(1, 17), metavar="B",
                    help="also time the direct kernel (at levels() or each --levels) with launch bounds asking for "
                         "B blocks of 128 threads per SM (kernels._direct.MIN_BLOCKS; a register cap)")
    ap.add_argument("--pipeline", action="store_true",
                    help="also time the pipelined direct kernel (kernels._direct.PIPELINE) where it exists")
    a = ap.parse_args(argv)
    if a.mbytes < 1:
        ap.error("--mbytes must be >= 1")
    bad = [n for n in a.sizes if n < 64 or n > 4096 or n & (n - 1)]
    if bad:
        ap.error(f"--sizes must be powers of 2 from 64 to 4096 (both kernels run them), got {bad}")
    bad = [m for m in a.taps if not 1 <= m <= 128]
    if bad:
        ap.error(f"--taps must be from 1 to 128 (the direct kernel's range), got {bad}")
    return a


def measure(n, m, mbytes, fma_flops, do_bench, levels=(), pipeline=False, min_blocks=()):
    """One (n, taps) row: both methods and CuPy's peer (and the direct kernel at each of
    ``levels``, and pipelined), checked, timed."""
    from unittest import mock

    import cupy as cp

    import kernels
    from kernels import _direct

    rows = max(1, mbytes * MIB // (4 * n))
    x = cp.random.default_rng(n * 131 + m).standard_normal((rows, n), dtype=cp.float32)
    h = np.random.default_rng(m).standard_normal(m)
    H = cp.asarray(np.fft.rfft(h, n).astype(np.complex64))
    ref = cp.fft.irfft(cp.fft.rfft(x[:REF_ROWS].astype(cp.float64), axis=-1) * cp.asarray(np.fft.rfft(h, n)),
                       n=n, axis=-1)
    row = dict(n=n, taps=m, rows=rows)
    ys = {}
    for method in ("direct", "fft"):
        y = kernels.fft_convolve(x, h, method=method)
        row[f"{method}_rel_err"] = float(cp.linalg.norm(y[:REF_ROWS] - ref) / cp.linalg.norm(ref))
        ys[method] = y
    row["direct_vs_fft"] = float(cp.linalg.norm(ys["direct"] - ys["fft"]) / cp.linalg.norm(ys["fft"]))
    del ys
    row["ok"] = max(row["direct_rel_err"], row["fft_rel_err"], row["direct_vs_fft"]) < 1e-5
    row["direct_ms"] = do_bench(lambda: kernels.fft_convolve(x, h, method="direct"), return_mode="median")
    row["fft_ms"] = do_bench(lambda: kernels.fft_convolve(x, h, method="fft"), return_mode="median")
    row["cupy_ms"] = do_bench(lambda: cp.fft.irfft(cp.fft.rfft(x, axis=-1) * H, n=n, axis=-1), return_mode="median")
    row["levels"] = {}
    mb0 = _direct.MIN_BLOCKS
    variants = [(str(lev), lev, False, mb0) for lev in levels]
    if pipeline:
        variants += [(f"{lev}p", lev, True, mb0) for lev in [*levels, _direct.levels(m)]
                     if _direct.pipelines(n, m, lev) and f"{lev}p" not in {v[0] for v in variants}]
    variants += [(f"{lev}/{mb}b", lev, False, mb) for lev in (levels or [_direct.levels(m)]) for mb in min_blocks
                 if mb != mb0]
    for name, lev, pipe, mb in variants:  # the kernel of this many splits, whatever levels() picks
        with mock.patch.object(_direct, "levels", lambda m, lev=lev: lev), \
                mock.patch.object(_direct, "PIPELINE", pipe), mock.patch.object(_direct, "MIN_BLOCKS", mb):
            y = kernels.fft_convolve(x, h, method="direct")
            err = float(cp.linalg.norm(y[:REF_ROWS] - ref) / cp.linalg.norm(ref))
            del y
            ms = do_bench(lambda: kernels.fft_convolve(x, h, method="direct"), return_mode="median")
        row["levels"][name] = dict(ms=ms, rel_err=err, flops=rows * _direct.flops(n, m, lev))
        row["ok"] = row["ok"] and err < 1e-5
    row["floor_ms"] = 2 * x.nbytes / PEAK_BPS * 1e3
    row["direct_arith_ms"] = rows * _direct.flops(n, m) / fma_flops * 1e3
    row["direct_pct_bound"] = 100 * max(row["floor_ms"], row["direct_arith_ms"]) / row["direct_ms"]
    row["faster"] = "direct" if row["direct_ms"] < row["fft_ms"] else "fft"
    return row


def format_table(rows, meta) -> str:
    lines = [f"fft_convolve's kernels, float32 rows ({meta['device']}; fp32 FMA {meta['fp32_flops'] / 1e12:.1f} "
             f"TFLOP/s measured; {meta['mbytes']} MiB per case)", "",
             "| n | taps | rows | direct ms | fft ms | CuPy ms | faster | direct / fft | floor ms | direct arith. ms "
             "| direct % of bound | rel. err direct / fft | direct ms at levels (p: pipelined; /Bb: B blocks per SM) | check |",
             "|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---|---|"]
    for r in rows:
        levs = ", ".join(f"{k}: {v['ms']:.3f}" for k, v in r.get("levels", {}).items())
        lines.append(f"| {r['n']} | {r['taps']} | {r['rows']} | {r['direct_ms']:.3f} | {r['fft_ms']:.3f} | "
                     f"{r['cupy_ms']:.3f} | {r['faster']} | {r['direct_ms'] / r['fft_ms']:.2f} | {r['floor_ms']:.3f} | "
                     f"{r['direct_arith_ms']:.3f} | {r['direct_pct_bound']:.0f}% | "
                     f"{r['direct_rel_err']:.1e} / {r['fft_rel_err']:.1e} | "
                     f"{levs} | "
                     f"{'ok' if r['ok'] else 'MISMATCH'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from fused_kernels import no_gpu_reason

    why = no_gpu_reason()
    if why:
        print(f"benchmarks/conv_methods.py needs a CUDA GPU (with CuPy and triton): {why}", file=sys.stderr)
        return 2
    import cupy as cp
    from ceilings import measure_fp32_fma_rate
    from triton.testing import do_bench

    meta = dict(device=cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode(),
                mbytes=args.mbytes, fp32_flops=measure_fp32_fma_rate())
    print(f"# fp32 FMA rate: {meta['fp32_flops'] / 1e12:.1f} TFLOP/s", flush=True)
    rows = []
    for n in args.sizes:
        for m in args.taps:
            if m > n // 2:
                continue
            r = measure(n, m, args.mbytes, meta["fp32_flops"], do_bench, args.levels, args.pipeline, args.min_blocks)
            print(f"n={n} taps={m}: direct {r['direct_ms']:.3f} ms, fft {r['fft_ms']:.3f} ms, CuPy "
                  f"{r['cupy_ms']:.3f} ms, direct at {r['direct_pct_bound']:.0f}% of its bound, "
                  f"{'ok' if r['ok'] else 'MISMATCH'}", flush=True)
            rows.append(r)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "conv_methods.json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    table = format_table(rows, meta)
    with open(os.path.join(args.out, "conv_methods.md"), "w") as f:
        f.write(table)
    print(table)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
