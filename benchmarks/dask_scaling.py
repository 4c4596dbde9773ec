# SPDX-License-Identifier: Apache-2.0
"""kernels on Dask arrays of CuPy blocks across GPUs: throughput at 1, 2, 4 ... GPUs against the
plain call on one GPU.

    python benchmarks/dask_scaling.py --out bench_out [--gpus 1 2 4] [--cases conv fir fir_time]
                                      [--gib 4] [--passes 20] [--repeats 3] [--tasks]

Cases (float32 signals: two tones plus noise, made on the workers, ``--gib`` GiB of input per GPU):

- ``conv``: the main job (``python -m kernels``): ``kernels.fft_convolve``, rows of 4096 samples,
  63-tap low-pass, blocks of 65536 rows (1 GiB);
- ``fir``: ``kernels.fir_filter``, rows of 2**22 samples, 127 taps, blocks of 64 rows (1 GiB);
- ``fir_time``: the same signals in blocks of 128 rows x 2**21 samples (1 GiB): every time block after a
  row's first is filtered on its own, plus the contribution of the 126 samples before it (a
  second filter call of 126 samples + zeros per row: no copy of the block).

Per GPU count N (each N gets a fresh ``dask_cuda.LocalCUDACluster(n_workers=N)``): ``--gib`` GiB
per GPU is made and persisted on the workers (blocks rebalanced), a sample of rows checked against
NumPy (float64), then ``--passes`` chained calls (each pass filters the previous pass's output) are
submitted as one graph; the time runs until every worker's GPU is idle, so the scheduler's fixed
cost is included, shared by the passes; the median of ``--repeats`` such graphs, each filtering with its
own copy of the taps scaled by 1 + r * 2**-20 (fresh graph keys: no repeat reuses a result the
scheduler still holds). Throughput: samples filtered per second (passes x rows x
length / time). "plain": the same call on one GPU in this process on a CuPy array of one GPU's
rows, median time per call with CUDA events (``kernels.__main__.median_ms``); "vs plain" is the
Dask throughput over (plain throughput x N): the fraction of N independent GPUs' plain speed, the
"one GPU through Dask >= 0.9 x plain" figure at N = 1.

Writes dask_scaling.json and dask_scaling.md into --out. Exits with status 2 and a message when no
GPU is usable or dask / distributed / dask-cuda are missing (pip install "numba-mathdx[dask]").
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time

import numpy as np

CASES = ("conv", "fir", "fir_time")
GIB = 2**30
CHECK_ROWS = 4
TOL = 1e-5

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_out", help="folder for dask_scaling.json and dask_scaling.md")
    ap.add_argument("--gpus", type=int, nargs="+", default=None, metavar="N",
                    help="GPU counts (default: 1 2 4 ... up to the GPUs visible)")
    ap.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES), metavar="CASE",
                    help=f"subset of {', '.join(CASES)} (default: all)")
    ap.add_argument("--gib", type=float, default=4.0, help="GiB of float32 input per GPU (default 4)")
    ap.add_argument("--passes", type=int, default=20, help="chained calls timed as one graph (default 20)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="timed graphs per GPU count, the median reported (default 3)")
    ap.add_argument("--tasks", action="store_true",
                    help="record the timed graph's task stream: per kind of task (dask's key prefix) the "
                         "count and the seconds spent computing and transferring, in the JSON and after the table")
    a = ap.parse_args(argv)
    if a.gib <= 0:
        ap.error("--gib must be > 0")
    if a.passes < 1:
        ap.error("--passes must be >= 1")
    if a.repeats < 1:
        ap.error("--repeats must be >= 1")
    if a.gpus is not None and any(g < 1 for g in a.gpus):
        ap.error("--gpus counts must be >= 1")
    return a


def default_counts(visible: int) -> list[int]:
    """1, 2, 4, ... up to ``visible`` (and ``visible`` itself)."""
    out, g = [], 1
    while g <= visible:
        out.append(g)
        g *= 2
    if visible and out[-1] != visible:
        out.append(visible)
    return out


def shapes(case: str, gib: float) -> dict:
    """Rows per GPU, samples per row, taps and block shape of a case at ``gib`` GiB per GPU."""
    if case == "conv":
        n, block = 4096, (65536, 4096)
        return dict(n=n, rows=max(1, int(gib * GIB) // (4 * n)), taps=63, block=block)
    n = 1 << 22
    block = (64, n) if case == "fir" else (128, 1 << 21)
    return dict(n=n, rows=max(1, int(gib * GIB) // (4 * n)), taps=127, block=block)


def no_run_reason():
    """None when GPUs, CuPy, dask, distributed and dask-cuda are usable; otherwise why not."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        return "needs a CUDA GPU: NUMBA_ENABLE_CUDASIM is set (the CUDA simulator runs on the CPU)"
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "needs a CUDA GPU: CuPy sees none"
    except Exception as e:
        return f"needs a CUDA GPU: CuPy unusable ({type(e).__name__}: {e})"
    import_kernels()
    from kernels import _gpus

    missing = _gpus.missing_dask()
    if missing:
        return f'needs dask[array], distributed and dask-cuda: {missing}; pip install "numba-mathdx[dask]"'
    return None


def import_kernels():
    if _ROOT not in sys.path:  # run from a checkout without installing it
        sys.path.append(_ROOT)
    import kernels

    return kernels


def _taps(case, ntaps):
    from kernels.__main__ import lowpass_taps

    return lowpass_taps(ntaps, 0.06)


def _step(K, case, taps):
    if case == "conv":
        return lambda y: K.fft_convolve(y, taps)
    return lambda y: K.fir_filter(y, taps)


def _reference(case, x, taps):
    from scipy.signal import lfilter

    from kernels import _gpus

    if case == "conv":
        return _gpus.reference(x, taps)
    return lfilter(taps, 1, x.astype(np.float64), axis=-1)


def _signals(case, rows, sh):
    from kernels import _gpus

    x = _gpus.make_signals(rows, sh["n"], sh["block"][0])
    return x.rechunk({1: sh["block"][1]}) if sh["block"][1] < sh["n"] else x


def _check(client, K, case, x, taps):
    """Relative error of CHECK_ROWS rows (first, last, random) of one pass against NumPy."""
    import dask

    from kernels import _gpus

    total = x.shape[0]
    rows = sorted({0, total - 1, *map(int, np.random.default_rng(0).choice(total, min(CHECK_ROWS, total), False))})
    xs, ys = dask.compute(x[rows], _step(K, case, taps)(x)[rows])
    xs, ys = _gpus._host(xs), _gpus._host(ys)
    ref = _reference(case, xs, taps)
    return float(np.linalg.norm(ys - ref) / np.linalg.norm(ref))


def task_summary(records) -> list[dict]:
    """Per kind of task in ``records`` (``distributed``'s task-stream records: ``key`` and
    ``startstops``, each with ``action``, ``start``, ``stop``): the count and the seconds of its
    ``compute`` and ``transfer`` actions, most compute first. The kind is dask's key prefix
    (``dask.utils.key_split``: ``"rechunk-merge-<token>"`` -> ``"rechunk-merge"``)."""
    from dask.utils import key_split

    agg: dict = {}
    for r in records:
        kind = key_split(r["key"])
        row = agg.setdefault(kind, dict(kind=kind, tasks=0, compute_s=0.0, transfer_s=0.0))
        row["tasks"] += 1
        for ss in r.get("startstops", ()):
            if ss["action"] in ("compute", "transfer"):
                row[f"{ss['action']}_s"] += ss["stop"] - ss["start"]
    return sorted(agg.values(), key=lambda row: (-row["compute_s"], row["kind"]))


def format_tasks(rows) -> str:
    """The ``--tasks`` lines after the table: one block per Dask row that recorded them."""
    out = []
    for r in rows:
        if not r.get("tasks"):
            continue
        out += ["", f"Task stream, {r['case']} on {r['gpus']} GPU(s), {r['passes']} passes, "
                f"{r['seconds']:.3f} s timed: kind | tasks | compute s | transfer s"]
        out += [f"- {t['kind']} | {t['tasks']} | {t['compute_s']:.4f} | {t['transfer_s']:.4f}" for t in r["tasks"]]
    return "\n".join(out) + ("\n" if out else "")


def run_case(K, case, counts, gib, passes, log=print, tasks=False, repeats=1):
    """The plain row and one Dask row per GPU count for ``case``."""
    import cupy as cp
    from distributed import Client

    from kernels import _gpus
    from kernels.__main__ import median_ms

    sh = shapes(case, gib)
    taps = _taps(case, sh["taps"])
    step = _step(K, case, taps)
    out = []
    x = _signals(case, sh["rows"], dict(sh, block=(sh["rows"], sh["n"]))).compute(scheduler="sync")
    call = functools.partial(step, x)
    call()  # code generation or cache load
    ms = median_ms(call, warmup=1, repeat=5, inner=2)
    del call, x
    cp.get_default_memory_pool().free_all_blocks()
    samples = sh["rows"] * sh["n"]
    plain = dict(case=case, gpus=1, mode="plain", rows=sh["rows"], n=sh["n"], taps=sh["taps"], ms=ms,
                 gsamples_per_s=samples / ms / 1e6)
    log(json.dumps(plain))
    out.append(plain)
    for g in counts:
        try:
            with _gpus.local_cuda_cluster(g) as cluster, Client(cluster) as client:
                x = _gpus.persisted(client, _signals(case, sh["rows"] * g, sh), log)
                spread = _gpus.blocks_per_worker(client, x)
                t0 = time.perf_counter()
                err = _check(client, K, case, x, taps)
                first = time.perf_counter() - t0
                runs = []
                for r in range(repeats):  # own taps per repeat: fresh keys
                    step_r = _step(K, case, taps * (1 + r * 2.0**-20))
                    if tasks and r == repeats - 1:
                        from distributed import get_task_stream

                        with get_task_stream(client) as stream:
                            runs.append(_gpus.timed_passes(client, x, step_r, passes))
                        recorded = task_summary(stream.data)
                    else:
                        runs.append(_gpus.timed_passes(client, x, step_r, passes))
                seconds = statistics.median(runs)
                del x
            total = passes * samples * g
            row = dict(case=case, gpus=g, mode="dask", rows=sh["rows"] * g, n=sh["n"], taps=sh["taps"],
                       block=list(sh["block"]), blocks_per_worker=spread, passes=passes, seconds=seconds, runs=runs,
                       check_s=first, gsamples_per_s=total / seconds / 1e9, rel_err=err, ok=bool(err < TOL))
            row["vs_plain"] = row["gsamples_per_s"] / (plain["gsamples_per_s"] * g)
            if tasks:
                row["tasks"] = recorded
        except Exception as e:  # report, go on with the next count
            row = dict(case=case, gpus=g, mode="dask", error=f"{type(e).__name__}: {str(e)[:300]}")
        log(json.dumps(row))
        out.append(row)
    return out


def format_table(rows, meta):
    lines = [f"kernels on Dask arrays of CuPy blocks, {meta.get('device', '?')} x {meta.get('visible', '?')}; "
             f"{meta.get('gib')} GiB float32 input per GPU; {meta.get('passes')} chained passes per graph, "
             f"median of {meta.get('repeats', 1)} graphs "
             "(time until every GPU is idle, scheduler included); plain = one call on one GPU, median "
             "(CUDA events); vs plain = Dask throughput / (plain x GPUs)", "",
             "| case | GPUs | data per GPU | blocks | s (all passes) | Gsamples/s | per GPU | vs 1 GPU | "
             "vs plain | check |",
             "|---|---:|---|---|---:|---:|---:|---:|---:|---|"]
    one = {r["case"]: r["gsamples_per_s"] for r in rows if r.get("mode") == "dask" and r.get("gpus") == 1
           and "error" not in r}
    for r in rows:
        if "error" in r:
            err = r["error"].replace("|", "/").replace("\n", " ")[:200]
            lines.append(f"| {r['case']} | {r['gpus']} | | failed: {err} | | | | | | FAILED |")
            continue
        data = f"{r['rows'] // r['gpus']} x {r['n']}, {r['taps']} taps"
        if r["mode"] == "plain":
            lines.append(f"| {r['case']} | 1 (plain) | {data} | one array | {r['ms'] / 1e3:.4f} (one call) | "
                         f"{r['gsamples_per_s']:.1f} | {r['gsamples_per_s']:.1f} | | 1.00 | |")
            continue
        vs1 = f"{r['gsamples_per_s'] / one[r['case']]:.2f}x" if r["case"] in one else "-"
        blocks = f"{r['block'][0]} x {r['block'][1]}, per worker {r['blocks_per_worker']}"
        lines.append(f"| {r['case']} | {r['gpus']} | {data} | {blocks} | {r['seconds']:.3f} | "
                     f"{r['gsamples_per_s']:.1f} | {r['gsamples_per_s'] / r['gpus']:.1f} | {vs1} | "
                     f"{r['vs_plain']:.2f} | {'ok' if r['ok'] else 'MISMATCH'} ({r['rel_err']:.1e}) |")
    return "\n".join(lines) + "\n"


def write_results(out, rows, meta):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "dask_scaling.json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    text = format_table(rows, meta) + format_tasks(rows)
    with open(os.path.join(out, "dask_scaling.md"), "w") as f:
        f.write(text)
    return text


def main(argv=None):
    args = parse_args(argv)
    why = no_run_reason()
    if why:
        print(f"benchmarks/dask_scaling.py {why}", file=sys.stderr)
        return 2
    import cupy as cp

    K = import_kernels()
    visible = cp.cuda.runtime.getDeviceCount()
    counts = args.gpus or default_counts(visible)
    if max(counts) > visible:
        print(f"benchmarks/dask_scaling.py: --gpus {max(counts)}: only {visible} GPU(s) visible", file=sys.stderr)
        return 2
    import dask
    import dask_cuda
    import distributed

    meta = dict(device=cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), visible=visible, gpus=counts,
                gib=args.gib, passes=args.passes, repeats=args.repeats, cupy=cp.__version__, dask=dask.__version__,
                distributed=distributed.__version__, dask_cuda=dask_cuda.__version__,
                command="python benchmarks/dask_scaling.py " + " ".join(sys.argv[1:] if argv is None else argv))
    rows = []
    for case in args.cases:
        rows += run_case(K, case, counts, args.gib, args.passes, tasks=args.tasks, repeats=args.repeats)
    print(write_results(args.out, rows, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
