# SPDX-License-Identifier: Apache-2.0
"""The main job across GPUs with Dask (``python -m kernels --gpus N ...``): signals made on the
workers, the fused convolution per block, a NumPy check of sampled rows, throughput per GPU count.

Each GPU count gets its own cluster (``dask_cuda.LocalCUDACluster(n_workers=N)``: one worker per
GPU, the first N of ``CUDA_VISIBLE_DEVICES``). The signals (``rows_per_gpu * N`` rows of ``n``
float32 samples, the main job's two tones plus white noise, made by CuPy on the workers, a seed
per block) are persisted on the workers first; then ``passes`` chained ``kernels.fft_convolve``
calls (each pass filters the previous one's output) run as one graph, so that the scheduler's
fixed cost is shared by many kernels; the time runs from submitting the graph until every worker's
GPU is idle. The check compares a sample of rows of one pass with NumPy (float64).
"""

from __future__ import annotations

import functools
import importlib
import time

import numpy as np

from . import _dask

SEED = 0
CHECK_ROWS = 16  # rows compared with NumPy per GPU count
TOL = 1e-5


def missing_dask() -> str | None:
    """None when dask.array, distributed and dask_cuda import; else which one does not, and why."""
    for mod in ("dask.array", "distributed", "dask_cuda"):
        try:
            importlib.import_module(mod)
        except Exception as e:  # ImportError, or dask_cuda failing on a machine without NVML
            return f"{mod} cannot be imported ({type(e).__name__}: {e})"
    return None


def _signal_block(block_info=None, *, n, seed, kind):
    """Rows ``[r0, r1)`` of the job's signals (float32, NumPy or CuPy after ``kind``): per row two
    low tones of random frequency and phase plus white noise of std 0.8, from a generator seeded
    by ``seed`` and the block's first row."""
    xp = importlib.import_module(kind)
    r0, r1 = block_info[None]["array-location"][0]
    rows = r1 - r0
    rng = xp.random.default_rng(seed * 2**32 + r0)
    f32 = np.float32
    f1 = rng.uniform(0.005, 0.02, (rows, 1)).astype(f32)
    f2 = rng.uniform(0.02, 0.04, (rows, 1)).astype(f32)
    ph = rng.uniform(0, 6, (rows, 1)).astype(f32)
    t = xp.arange(n, dtype=f32)
    two_pi = f32(2 * np.pi)
    x = xp.sin(two_pi * f1 * t) + f32(0.5) * xp.sin(two_pi * f2 * t + ph)
    x += f32(0.8) * rng.standard_normal((rows, n), dtype=f32)
    return x


def make_signals(rows: int, n: int, chunk_rows: int, seed: int = SEED, kind: str = "cupy"):
    """A lazy Dask array of the job's signals, ``chunk_rows`` rows per block (made where computed)."""
    da = _dask.import_dask()
    xp = importlib.import_module(kind)
    chunks = (tuple(min(chunk_rows, rows - r) for r in range(0, rows, chunk_rows)), (n,))
    return da.map_blocks(_signal_block, chunks=chunks, dtype=np.float32, meta=xp.empty((0, 0), np.float32),
                         n=n, seed=seed, kind=kind)


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def reference(x: np.ndarray, taps: np.ndarray) -> np.ndarray:
    """The main job's NumPy reference (float64): circular convolution of every row with ``taps``."""
    n = x.shape[-1]
    return np.fft.irfft(np.fft.rfft(x.astype(np.float64), axis=-1) * np.fft.rfft(taps, n), n=n, axis=-1)


def check_rows(x, taps, nrows: int = CHECK_ROWS, seed: int = SEED) -> tuple[float, list]:
    """(relative error, rows): ``kernels.fft_convolve`` of the Dask array ``x`` against
    :func:`reference` on ``nrows`` rows drawn at random (always the first and the last)."""
    import dask

    from . import fft_convolve

    total = x.shape[0]
    pick = np.random.default_rng(seed).choice(total, size=min(nrows, total), replace=False)
    rows = sorted({0, total - 1, *map(int, pick)})
    y = fft_convolve(x, taps)
    xs, ys = dask.compute(x[rows], y[rows])
    xs, ys = _host(xs), _host(ys)
    ref = reference(xs, taps)
    return float(np.linalg.norm(ys - ref) / np.linalg.norm(ref)), rows


def _device_sync():
    """Wait for this process's GPU (a worker's: every stream of its device)."""
    import sys

    cp = sys.modules.get("cupy")
    if cp is not None:
        cp.cuda.runtime.deviceSynchronize()


def timed_passes(client, x, step, passes: int, kind: str = "cupy") -> float:
    """Seconds for ``passes`` chained ``y = step(y)`` (e.g. ``lambda y: fft_convolve(y, taps)``)
    from the persisted ``x``, from submitting the graph until every worker's GPU is idle (CuPy
    blocks: a task ends when its kernel is queued, so the end is a device synchronisation on every
    worker)."""
    from distributed import wait

    y = x
    for _ in range(passes):
        y = step(y)
    t0 = time.perf_counter()
    y = client.persist(y)
    wait(y)
    if kind == "cupy":
        client.run(_device_sync)
    seconds = time.perf_counter() - t0
    del y
    return seconds


def blocks_per_worker(client, x) -> list[int]:
    """How many of ``x``'s (persisted) blocks each worker holds."""
    held: dict = {}
    for addrs in client.who_has(x).values():
        for a in addrs:
            held[a] = held.get(a, 0) + 1
    workers = client.scheduler_info()["workers"]
    return sorted((held.get(w, 0) for w in workers), reverse=True)


def persisted(client, x, log=print):
    """``x`` computed and kept on the workers, its blocks spread evenly when rebalancing works."""
    from distributed import wait

    x = client.persist(x)
    wait(x)
    try:
        client.rebalance(x)
    except Exception as e:  # keep going: the blocks per worker are reported
        log(f"  (rebalance failed: {type(e).__name__}: {e})")
    return x


def run_on(client, ngpus: int, rows_per_gpu: int, n: int, taps: np.ndarray, passes: int,
           chunk_rows: int, kind: str = "cupy", log=print) -> dict:
    """The job on ``client``'s workers: signals persisted (and balanced), the check, the timing."""
    rows = rows_per_gpu * ngpus
    x = persisted(client, make_signals(rows, n, chunk_rows, kind=kind), log)
    spread = blocks_per_worker(client, x)
    t0 = time.perf_counter()
    err, checked = check_rows(x, taps)
    first = time.perf_counter() - t0
    from . import fft_convolve

    seconds = timed_passes(client, x, lambda y: fft_convolve(y, taps), passes, kind)
    samples = passes * rows * n
    row = dict(gpus=ngpus, rows=rows, n=n, chunk_rows=chunk_rows, blocks_per_worker=spread, passes=passes,
               seconds=seconds, gsamples_per_s=samples / seconds / 1e9,
               gsamples_per_s_per_gpu=samples / seconds / 1e9 / ngpus, check_rel_err=err,
               checked_rows=len(checked), check_s=first, ok=bool(err < TOL))
    del x
    return row


def local_cuda_cluster(ngpus: int):
    """A ``LocalCUDACluster`` of ``ngpus`` workers (one per GPU), without its dashboard."""
    from dask_cuda import LocalCUDACluster

    return LocalCUDACluster(n_workers=ngpus, dashboard_address=None)


def scaling(gpu_counts, rows_per_gpu: int, n: int, taps: np.ndarray, passes: int, chunk_rows: int,
            cluster=local_cuda_cluster, kind: str = "cupy", log=print) -> list[dict]:
    """:func:`run_on` on a fresh ``cluster(N)`` for every N of ``gpu_counts``; one row each."""
    from distributed import Client

    out = []
    for g in gpu_counts:
        with cluster(g) as c, Client(c) as client:
            row = run_on(client, g, rows_per_gpu, n, taps, passes, chunk_rows, kind=kind, log=log)
        log(format_row(row))
        out.append(row)
    return out


def plain_one_gpu(rows: int, n: int, taps: np.ndarray, median_ms) -> dict:
    """The plain call on one GPU (CuPy array, this process): ``median_ms(fn)`` per call (e.g.
    :func:`kernels.__main__.median_ms`, CUDA events)."""
    import cupy as cp

    from . import fft_convolve

    x = make_signals(rows, n, rows, kind="cupy").compute(scheduler="sync")
    call = functools.partial(fft_convolve, x, taps)
    call()  # code generation or cache load
    ms = median_ms(call)
    del call, x
    cp.get_default_memory_pool().free_all_blocks()
    return dict(gpus=1, rows=rows, n=n, ms=ms, gsamples_per_s=rows * n / ms / 1e6)


def format_row(r: dict) -> str:
    return (f"{r['gpus']} GPU(s), {r['rows']} x {r['n']} float32 in blocks of {r['chunk_rows']} rows "
            f"(blocks per worker {r['blocks_per_worker']}), {r['passes']} passes: {r['seconds']:.3f} s, "
            f"{r['gsamples_per_s']:.1f} Gsamples/s ({r['gsamples_per_s_per_gpu']:.1f} per GPU); check of "
            f"{r['checked_rows']} rows against NumPy: relative error {r['check_rel_err']:.2e} -> "
            f"{'OK' if r['ok'] else 'MISMATCH'}")


def summary(rows: list[dict], plain: dict | None) -> str:
    """A markdown table of :func:`scaling`'s rows (and the plain call's, when measured)."""
    lines = ["| GPUs | rows | passes | s | Gsamples/s | per GPU | vs 1 GPU | vs plain x GPUs | check |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    one = next((r["gsamples_per_s"] for r in rows if r["gpus"] == 1), None)
    for r in rows:
        vs1 = f"{r['gsamples_per_s'] / one:.2f}x" if one else "-"
        vsp = f"{r['gsamples_per_s'] / (plain['gsamples_per_s'] * r['gpus']):.2f}" if plain else "-"
        lines.append(f"| {r['gpus']} | {r['rows']} | {r['passes']} | {r['seconds']:.3f} | "
                     f"{r['gsamples_per_s']:.1f} | {r['gsamples_per_s_per_gpu']:.1f} | {vs1} | {vsp} | "
                     f"{'ok' if r['ok'] else 'MISMATCH'} ({r['check_rel_err']:.1e}) |")
    if plain:
        lines.append(f"\nPlain call on one GPU (CuPy array, {plain['rows']} x {plain['n']}): {plain['ms']:.3f} ms, "
                     f"{plain['gsamples_per_s']:.1f} Gsamples/s.")
    return "\n".join(lines) + "\n"
