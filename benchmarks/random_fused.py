# SPDX-License-Identifier: Apache-2.0
"""``kernels.add_noise`` (normals drawn in registers, never stored) against the two-pass forms, same
data, same process.

    python benchmarks/random_fused.py --out bench_out [--mbytes 512] [--cases real32 complex64] [--reps 20]

Cases (CuPy arrays in; ``--mbytes`` is the size of the signal ``x``, default 512 MiB):

- ``real32``: float32 rows of 2**17 samples, 10 dB;
- ``complex64``: complex64 rows of 2**16 samples, 10 dB.

Rows of each case:

- ``ours (measured power)``: ``kernels.add_noise(x, snr)``, the per-row power measured in the same
  kernel (x is read twice: the second read mostly from L2);
- ``ours (signal_power given)``: ``kernels.add_noise(x, snr, signal_power=p)``, one read, one write;
- ``cupy two-pass``: ``p = mean(|x|**2, axis=1)``; ``z = cupy.random`` normals of x's shape (generated
  and stored: XORWOW, CuPy's default generator); ``y = x + sqrt(p / 10**(snr/10)) * z`` (reads x
  and z, writes y);
- ``nvmath-python device random``: the same fused kernel written with ``nvmath.device.random``
  (states in a global ``StatesPhilox4_32_10`` array, initialised once outside the timing, as its
  examples do), when ``nvmath`` is importable; otherwise a row saying why not.

Timing: CUDA events around each call on CuPy's current stream, median of ``--reps`` after 3 warm-up
calls. ratio = the row's ms / ``ours (measured power)`` ms. Memory floor: bytes the operation must
read + write (x once, y once) at 4.3e12 B/s (H200 device copy, measured). Each row's output is
checked: the measured SNR of its first rows within 0.1 dB of the target.

Writes random_fused.json and random_fused.md into --out. Exits with status 2 and a message (no
traceback) when no GPU is usable.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys

PEAK_BPS = 4.3e12
MIB = 2**20
CASES = {"real32": ("float32", 2**17), "complex64": ("complex64", 2**16)}
SNR_DB = 10.0
SEED = 1234
CHECK_ROWS = 4
SNR_TOL_DB = 0.1
OURS = "ours (measured power)"

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_out", help="folder for random_fused.json and random_fused.md")
    ap.add_argument("--mbytes", type=int, default=512, help="MiB of the signal x per case")
    ap.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES), metavar="CASE",
                    help=f"subset of {', '.join(CASES)} (default: all)")
    ap.add_argument("--reps", type=int, default=20, help="timed calls per row (median)")
    a = ap.parse_args(argv)
    if a.mbytes < 1:
        ap.error("--mbytes must be >= 1")
    if a.reps < 1:
        ap.error("--reps must be >= 1")
    return a


def shape_of(case: str, mbytes: int) -> tuple[int, int]:
    """(rows, samples per row) of the signal: ``mbytes`` MiB of rows of the case's length
    (fewer samples per row when even one row is larger)."""
    dtype, n = CASES[case]
    itemsize = {"float32": 4, "complex64": 8}[dtype]
    total = mbytes * MIB // itemsize
    n = min(n, total)
    return max(1, total // n), n


def floor_ms(nbytes: float) -> float:
    """The memory floor: ``nbytes`` at PEAK_BPS, in ms."""
    return nbytes / PEAK_BPS * 1e3


def io_bytes(case: str, shape) -> int:
    """Bytes the operation must read + write: x once, y once."""
    itemsize = {"float32": 4, "complex64": 8}[CASES[case][0]]
    return 2 * shape[0] * shape[1] * itemsize


def finish_row(case, impl, shape, nbytes, ms, ours_ms, snr_err=None, note=""):
    """One table row (ms None: the row did not run, ``note`` says why)."""
    row = dict(case=case, impl=impl, shape=f"{shape[0]} x {shape[1]}", bytes=nbytes, floor_ms=floor_ms(nbytes),
               ms=ms, note=note)
    if ms is not None:
        row["ratio"] = ms / ours_ms if ours_ms else None
        row["pct_floor"] = 100 * row["floor_ms"] / ms
        row["snr_err_db"] = snr_err
        row["ok"] = snr_err is not None and snr_err <= SNR_TOL_DB
    return row


def format_table(rows, meta):
    lines = [f"add_noise (`kernels/noise.py`, normals in registers) vs two-pass forms, {meta.get('device', '?')}, "
             f"x = {meta.get('mbytes')} MiB per case, {SNR_DB} dB; median ms of CUDA events; floor = x read + y "
             f"written / 4.3e12 B/s; ratio = ms / `{OURS}` ms", "",
             "| case | data | implementation | ms | ratio | % of floor | max SNR error dB | check |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        if r.get("ms") is None:
            note = str(r.get("note", "")).replace("|", "/").replace("\n", " ")[:200]
            lines.append(f"| {r['case']} | {r.get('shape', '')} | {r['impl']} | - | - | - | - | not run: {note} |")
            continue
        ratio = f"{r['ratio']:.2f}x" if r.get("ratio") is not None else "-"
        err = f"{r['snr_err_db']:.3f}" if r.get("snr_err_db") is not None else "-"
        verdict = "ok" if r["ok"] else "MISMATCH"
        lines.append(f"| {r['case']} | {r['shape']} | {r['impl']} | {r['ms']:.3f} | {ratio} | "
                     f"{r['pct_floor']:.0f}% | {err} | {verdict} |")
    return "\n".join(lines) + "\n"


def write_results(out, rows, meta):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "random_fused.json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    text = format_table(rows, meta)
    with open(os.path.join(out, "random_fused.md"), "w") as f:
        f.write(text)
    return text


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
    return None


def nvmath_reason():
    """None when nvmath-python's device random is importable; otherwise why not."""
    try:
        import nvmath.device.random  # noqa: F401
    except Exception as e:
        return f"nvmath-python's nvmath.device.random is not importable here ({type(e).__name__}: {e})"
    return None


# ----------------------------------------------------------------------------------------------
# GPU side


def import_kernels():
    if _ROOT not in sys.path:  # run from a checkout without installing it
        sys.path.append(_ROOT)
    import kernels

    return kernels


def time_ms(fn, reps):
    """Median of ``reps`` CUDA-event timings of ``fn()`` on CuPy's current stream (3 warm-ups)."""
    import cupy as cp

    for _ in range(3):
        fn()
    stream = cp.cuda.get_current_stream()
    times = []
    for _ in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(stream)
        fn()
        b.record(stream)
        b.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, b))
    return statistics.median(times)


def snr_error(x, y):
    """Max |measured SNR - SNR_DB| over the first CHECK_ROWS rows."""
    import cupy as cp

    xs, d = x[:CHECK_ROWS], (y[:CHECK_ROWS] - x[:CHECK_ROWS])
    ps = cp.mean(cp.abs(xs) ** 2, axis=1)
    pn = cp.mean(cp.abs(d) ** 2, axis=1)
    return float(cp.max(cp.abs(10 * cp.log10(ps / pn) - SNR_DB)))


def _signal(case, shape):
    import cupy as cp

    rng = cp.random.default_rng(7)
    if CASES[case][0] == "float32":
        return rng.standard_normal(shape, dtype=cp.float32)
    return (rng.standard_normal(shape, dtype=cp.float32) + 1j * rng.standard_normal(shape, dtype=cp.float32)
            ).astype(cp.complex64)


def cupy_two_pass(x):
    """Power, stored normals, then the add (three kernels and a stored noise array)."""
    import cupy as cp

    real = x.real.dtype if x.dtype.kind == "c" else x.dtype
    p = cp.mean(cp.abs(x) ** 2, axis=1, keepdims=True)
    rng = cp.random.default_rng(SEED)
    if x.dtype.kind == "c":
        z = rng.standard_normal(x.shape + (2,), dtype=real).view(x.dtype)[..., 0]
        sigma = cp.sqrt(p * 10 ** (-SNR_DB / 10) / 2).astype(real)
    else:
        z = rng.standard_normal(x.shape, dtype=real)
        sigma = cp.sqrt(p * 10 ** (-SNR_DB / 10)).astype(real)
    return x + sigma * z


def nvmath_runner(x):
    """The fused kernel written with nvmath-python's device random: returns ``fn() -> y``."""
    import cupy as cp
    from numba import cuda, float64
    from nvmath.device import random as nr

    lanes = 256
    rows = x.shape[0]
    xr = x.view(x.real.dtype) if x.dtype.kind == "c" else x
    scale = math.sqrt(0.5) if x.dtype.kind == "c" else 1.0
    apis = nr.Compile(cc=None)
    states = nr.StatesPhilox4_32_10(rows * lanes)

    @cuda.jit(link=apis.files, extensions=apis.extension)
    def setup(states, seed, nstates):  # nvmath-python's States* arrays have no .size in kernels
        i = cuda.grid(1)
        if i < nstates:
            nr.init(seed, i, 0, states[i])

    @cuda.jit(link=apis.files, extensions=apis.extension)
    def add(x, y, states, inv_snr, scale, nsamples):
        r = cuda.blockIdx.x
        t = cuda.threadIdx.x
        n = x.shape[1]
        part = cuda.shared.array(256, float64)
        acc = 0.0
        for j in range(t, n, 256):
            v = float64(x[r, j])
            acc += v * v
        part[t] = acc
        cuda.syncthreads()
        s = 128
        while s > 0:
            if t < s:
                part[t] += part[t + s]
            cuda.syncthreads()
            s //= 2
        sigma = math.sqrt(part[0] / nsamples * inv_snr) * scale
        k = r * 256 + t
        for g in range(t, (n + 3) // 4, 256):
            v = nr.normal4(states[k])
            j = 4 * g
            y[r, j] = x[r, j] + sigma * v.x
            if j + 1 < n:
                y[r, j + 1] = x[r, j + 1] + sigma * v.y
            if j + 2 < n:
                y[r, j + 2] = x[r, j + 2] + sigma * v.z
            if j + 3 < n:
                y[r, j + 3] = x[r, j + 3] + sigma * v.w

    stream = cuda.external_stream(cp.cuda.get_current_stream().ptr)
    setup[(rows * lanes + 255) // 256, 256, stream](states, SEED, rows * lanes)
    y = cp.empty_like(x)
    yr = y.view(y.real.dtype) if y.dtype.kind == "c" else y

    def fn():
        add[rows, lanes, stream](xr, yr, states, 10 ** (-SNR_DB / 10), scale, float(x.shape[1]))
        return y

    return fn


def run_case(K, case, mbytes, reps, log=print):
    import cupy as cp

    shape = shape_of(case, mbytes)
    nbytes = io_bytes(case, shape)
    x = _signal(case, shape)
    p = float(cp.mean(cp.abs(x) ** 2))  # the rows share one distribution: their power ~ p
    impls = [(OURS, lambda: K.add_noise(x, SNR_DB, seed=SEED)),
             ("ours (signal_power given)", lambda: K.add_noise(x, SNR_DB, seed=SEED, signal_power=p)),
             ("cupy two-pass (cupy.random normals stored)", lambda: cupy_two_pass(x))]
    why = nvmath_reason()
    if why is None:
        try:
            impls.append(("nvmath-python device random (global states)", nvmath_runner(x)))
            why = None
        except Exception as e:
            why = f"nvmath-python kernel failed: {type(e).__name__}: {str(e)[:200]}"
    rows, ours_ms = [], None
    for name, fn in impls:
        try:
            err = snr_error(x, fn())
            ms = time_ms(fn, reps)
            if name == OURS:
                ours_ms = ms
            rows.append(finish_row(case, name, shape, nbytes, ms, ours_ms, err))
        except Exception as e:  # report, don't hide; go on with the next row
            rows.append(finish_row(case, name, shape, nbytes, None, ours_ms,
                                   note=f"{type(e).__name__}: {str(e)[:200]}"))
        log(json.dumps(rows[-1]))
        cp.get_default_memory_pool().free_all_blocks()
    if why is not None:
        rows.append(finish_row(case, "nvmath-python device random", shape, nbytes, None, ours_ms, note=why))
    return rows


def main(argv=None):
    args = parse_args(argv)
    why = no_gpu_reason()
    if why:
        print(f"benchmarks/random_fused.py needs a CUDA GPU (with CuPy): {why}", file=sys.stderr)
        return 2
    import cupy as cp

    K = import_kernels()
    meta = dict(device=cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode(),
                mbytes=args.mbytes, peak_bps=PEAK_BPS, snr_db=SNR_DB, reps=args.reps, cupy=cp.__version__,
                command="python benchmarks/random_fused.py " + " ".join(sys.argv[1:] if argv is None else argv))
    rows = []
    for case in args.cases:
        rows += run_case(K, case, args.mbytes, args.reps)
    print(write_results(args.out, rows, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
