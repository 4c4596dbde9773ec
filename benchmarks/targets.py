# SPDX-License-Identifier: Apache-2.0
"""The speed targets (README, "Benchmarks") checked against the JSON files of one benchmark run.

    python benchmarks/targets.py RUN_DIR [--bound peak|card] [--out FILE.md]

RUN_DIR (searched recursively; each file at most once) holds what these wrote in one session on
one GPU, peers in each process:

- ``kernels.json``: ``fused_kernels.py`` (every ``kernels`` function, the main job among them);
- ``fft_convolution.json``: ``fft_convolution.py --sizes 4096``;
- ``batched_gemm.json``: ``batched_gemm.py --sizes 64 ...`` (65536 GEMMs 64^3 fp64);
- ``call_overhead.json``: ``call_overhead.py``;
- ``host_matmul.json``: ``host_matmul.py --quick``.

The targets:

- each fused kernel at >= 80 % of its roofline bound (max of its memory floor and its FLOP count
  at the measured fp32 FMA rate, ``fused_kernels.py``), its check passed;
- the main job (65536 x 4096) at <= 0.62 ms: an H200's figure; on another card read at its own
  copy rate (``--bound card``), the same time scaled by the copy rates (0.62 ms x 4.3 TB/s / the
  card's measured rate: the main job is memory-bound), else not judged;
- the fused c2c FFT convolution at n = 4096 at >= 90 % of its floor (its best correct
  numba-mathdx row, relative error <= FFT_TOL);
- 65536 GEMMs 64^3 fp64 at >= 95 % of their floor (the best correct numba-mathdx row);
- a ``kernels.plan`` call, per function: enqueue and call + synchronize each <= 20 us and below
  CuPy's peer's;
- ``nvmath_host``: ``Matmul.execute`` + synchronize at 128^3 <= PyTorch's ``_addmm_activation``,
  ``matmul()`` <= 1.5 x that.

Floors: ``--bound peak`` puts them at 4.3e12 B/s (the H200's copy rate, the targets' own
definition), ``--bound card`` at the copy rate the benchmark measured on its card (the way to
read a run on another GPU); the default is peak for an H200's run, card otherwise. A target whose
file is missing from RUN_DIR is "not run". Prints the table (and writes it to ``--out``); exits 0
when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

FILES = ("kernels.json", "fft_convolution.json", "batched_gemm.json", "call_overhead.json", "host_matmul.json")
KERNEL_PCT, FC_PCT, BG_PCT = 80.0, 90.0, 95.0  # % of the bound / floor
MAIN_JOB_MS = 0.62  # the main job on an H200
H200_BPS = 4.3e12  # the H200's measured copy rate (read + written), the targets' floors
HOST_US = 20.0  # a plan call, enqueue and call + sync
MATMUL_FN_RATIO = 1.5  # matmul() against torch's _addmm_activation
FFT_TOL = 1e-5  # fft_convolution.py's rows: relative error of a correct result
HOST_CASE = "per call fp16 128^3 RELU_BIAS (execute + synchronize)"


def find_files(run_dir: str) -> dict:
    """{file name: path} of FILES under ``run_dir``; ValueError naming a file found twice."""
    if not os.path.isdir(run_dir):
        raise ValueError(f"RUN_DIR must be a directory, got {run_dir!r}")
    found = {}
    for root, _, names in os.walk(run_dir):
        for name in names:
            if name in FILES:
                path = os.path.join(root, name)
                if name in found:
                    raise ValueError(f"{name} is in RUN_DIR twice ({found[name]}, {path}): give the "
                                     "directory of one run")
                found[name] = path
    return found


def _row(target, figure, met, source):
    return dict(target=target, figure=figure, met=met, source=source)


def _is_h200(device) -> bool:
    return "H200" in str(device or "")


def kernel_rows(data, bound) -> list:
    """One row per fused_kernels.py case: its % of the bound (peak or card floor), and the main
    job's time on an H200."""
    rows = []
    for r in data["rows"]:
        case = r["case"]
        if "error" in r:  # run_cases' row of a case that raised
            rows.append(_row(f"{case} >= {KERNEL_PCT:.0f} % of its bound", f"failed: {r['error'][:100]}",
                             False, "kernels.json"))
            continue
        pct = r["pct_bound"] if bound == "peak" else r.get("pct_card_bound")
        if pct is None:
            rows.append(_row(f"{case} >= {KERNEL_PCT:.0f} % of its card bound", "no card copy rate in the run",
                             False, "kernels.json"))
            continue
        fig = f"{r['ms']:.3f} ms, {pct:.0f} % of the {bound} bound ({r['bound_by']})"
        if not r["ok"]:
            fig += f"; check FAILED (rel. err {r['rel_err']:.1e})"
        rows.append(_row(f"{case} >= {KERNEL_PCT:.0f} % of its bound", fig, bool(r["ok"] and pct >= KERNEL_PCT),
                         "kernels.json"))
        if case == "main_job":
            device = data["meta"].get("device")
            if _is_h200(device):
                rows.append(_row(f"main job <= {MAIN_JOB_MS} ms (H200)", f"{r['ms']:.3f} ms",
                                 bool(r["ok"] and r["ms"] <= MAIN_JOB_MS), "kernels.json"))
            elif bound == "card" and data["meta"].get("copy_bps"):
                # memory-bound: the H200's time scaled by the copy rates (4.3 TB/s there, measured here)
                limit = MAIN_JOB_MS * H200_BPS / data["meta"]["copy_bps"]
                rows.append(_row(f"main job <= {MAIN_JOB_MS} ms (H200), scaled to this card's copy rate",
                                 f"{r['ms']:.3f} ms on {device}, limit {limit:.3f} ms ({MAIN_JOB_MS} x {H200_BPS / 1e12:.1f} / "
                                 f"{data['meta']['copy_bps'] / 1e12:.2f} TB/s)",
                                 bool(r["ok"] and r["ms"] <= limit), "kernels.json"))
            else:
                rows.append(_row(f"main job <= {MAIN_JOB_MS} ms (H200)", f"{r['ms']:.3f} ms on {device}: an H200's "
                                 "target, not judged at the peak bound on another card", None, "kernels.json"))
    return rows


def fc_rows(data, bound) -> list:
    """The c2c convolution at n = 4096: the best correct numba-mathdx row against the floor."""
    key = "fraction_of_floor" if bound == "peak" else "fraction_of_card_floor"
    ours = [r for r in data["rows"] if r.get("size") == 4096 and r["impl"].startswith("numba-mathdx")
            and r.get("ms") and r["rel_err"] <= FFT_TOL]
    target = f"c2c FFT convolution n=4096 >= {FC_PCT:.0f} % of its floor"
    if not ours:
        return [_row(target, "no correct numba-mathdx row at n=4096", False, "fft_convolution.json")]
    best = min(ours, key=lambda r: r["ms"])
    pct = 100 * best[key]
    peer = next((r["ms"] for r in data["rows"] if r.get("size") == 4096 and r["impl"].startswith("cupy")
                 and r.get("ms")), None)
    fig = f"{best['ms']:.3f} ms, {pct:.0f} % ({best['impl']}, {best['config']})" + (
        f"; cuFFT {peer:.3f} ms" if peer else "")
    return [_row(target, fig, pct >= FC_PCT, "fft_convolution.json")]


def bg_rows(data, bound) -> list:
    """65536 GEMMs 64^3 fp64: the best correct numba-mathdx row against the floor."""
    scale = 1.0 if bound == "peak" else data["peak_bw"] / data["copy_bps"]
    ours = [r for r in data["rows"] if r["case"] == "64x64x64 float64" and r.get("ms") and r.get("correct")
            and (r["impl"].startswith("ours") or r["impl"].startswith("numba-mathdx"))]
    target = f"65536 GEMMs 64^3 fp64 >= {BG_PCT:.0f} % of their floor"
    if not ours:
        return [_row(target, "no correct numba-mathdx row for 64x64x64 float64", False, "batched_gemm.json")]
    best = min(ours, key=lambda r: r["ms"])
    pct = 100 * best["frac_floor"] * scale
    peer = next((r for r in data["rows"] if r["case"] == "64x64x64 float64" and r["impl"].startswith("cupy")
                 and r.get("ms")), None)
    fig = f"{best['ms']:.3f} ms, {pct:.0f} % ({best['impl'].removeprefix('numba-mathdx best: ')})" + (
        f"; cuBLAS {peer['ms']:.3f} ms, {100 * peer['frac_floor'] * scale:.0f} %" if peer else "")
    return [_row(target, fig, pct >= BG_PCT, "batched_gemm.json")]


def co_rows(data) -> list:
    """Per kernels function: a plan call's enqueue and call + sync against HOST_US and CuPy's."""
    rows = []
    for r in data["rows"]:
        enq, cs = r["plan_enqueue_us"], r["plan_sync_us"]
        penq, pcs = r.get("peer_enqueue_us"), r.get("peer_sync_us")
        beats = penq is not None and pcs is not None and enq < penq and cs < pcs
        same = r.get("plan_equals_fast", False)
        fig = f"{enq:.1f} / {cs:.1f} us" + (f" (CuPy {penq:.1f} / {pcs:.1f})" if penq is not None else " (no peer)")
        if not same:
            fig += "; the plan's result differs from the function's"
        rows.append(_row(f"{r['case']} plan call <= {HOST_US:.0f} us and below CuPy", fig,
                         bool(same and beats and enq <= HOST_US and cs <= HOST_US), "call_overhead.json"))
    return rows


def hm_rows(data) -> list:
    """Matmul.execute + sync <= torch's _addmm_activation at 128^3; matmul() <= 1.5 x that."""
    us = {r["impl"]: r["host_us_per_call"] for r in data["results"] if r["case"] == HOST_CASE}
    torch_us = us.get("torch _addmm_activation")
    rows = []
    for impl, limit, label in (("nvmath_host Matmul.execute", 1.0, "Matmul.execute + sync <= torch _addmm_activation"),
                               ("nvmath_host matmul()", MATMUL_FN_RATIO,
                                f"matmul() <= {MATMUL_FN_RATIO} x torch _addmm_activation")):
        mine = us.get(impl)
        if mine is None or torch_us is None:
            rows.append(_row(label + " (128^3)", f"missing row: {impl if mine is None else 'torch _addmm_activation'}",
                             False, "host_matmul.json"))
            continue
        rows.append(_row(label + " (128^3)", f"{mine:.1f} us vs torch {torch_us:.1f} us",
                         mine <= limit * torch_us, "host_matmul.json"))
    return rows


def _device(data, name, *keys):
    """The device a file names (None where it names none)."""
    d = data.get(name)
    for k in keys:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def check_run(run_dir: str, bound: str | None = None) -> tuple[list, dict]:
    """(rows, meta): every target's row, and the run's device and the bound used."""
    if bound not in (None, "peak", "card"):
        raise ValueError(f"bound must be 'peak', 'card' or None (peak on an H200), got {bound!r}")
    paths = find_files(run_dir)
    data, unreadable = {}, {}
    for name, path in paths.items():
        try:
            with open(path) as f:
                data[name] = json.load(f)
        except (OSError, ValueError) as e:  # not JSON: its targets say so
            unreadable[name] = f"unreadable: {type(e).__name__}: {e}"
    devices = sorted({str(d) for d in (_device(data, "kernels.json", "meta", "device"),
                                       _device(data, "fft_convolution.json", "meta", "device"),
                                       _device(data, "batched_gemm.json", "gpu"),
                                       _device(data, "call_overhead.json", "meta", "device"),
                                       _device(data, "host_matmul.json", "meta", "gpu")) if d})
    if bound is None:
        bound = "peak" if devices and all(_is_h200(d) for d in devices) else "card"
    rows = []
    makers = {"kernels.json": lambda d: kernel_rows(d, bound), "fft_convolution.json": lambda d: fc_rows(d, bound),
              "batched_gemm.json": lambda d: bg_rows(d, bound), "call_overhead.json": co_rows,
              "host_matmul.json": hm_rows}
    for name in FILES:
        if name not in data:
            rows.append(_row(f"(the targets from {name})", unreadable.get(name, "not run"), False, name))
            continue
        try:
            rows += makers[name](data[name])
        except (KeyError, TypeError, AttributeError) as e:  # not the layout its script writes
            rows.append(_row(f"(the targets from {name})", f"not the layout its benchmark writes: "
                             f"{type(e).__name__}: {e}", False, name))
    return rows, dict(devices=devices, bound=bound, files=paths)


def format_table(rows, meta) -> str:
    met = sum(r["met"] is True for r in rows)
    judged = sum(r["met"] is not None for r in rows)
    head = (f"Targets against one run on {', '.join(meta['devices']) or 'an unnamed device'}; floors at the "
            f"{'4.3e12 B/s (H200) rate' if meta['bound'] == 'peak' else 'copy rate measured on the card'}: "
            f"{met} of {judged} met")
    lines = [head, "", "| target | figure | met | from |", "|---|---|---|---|"]
    word = {True: "yes", False: "**no**", None: "-"}
    lines += [f"| {r['target']} | {r['figure']} | {word[r['met']]} | {r['source']} |" for r in rows]
    if len(meta["devices"]) > 1:
        lines += ["", f"The files come from {len(meta['devices'])} different devices: not one run."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", metavar="RUN_DIR")
    ap.add_argument("--bound", choices=("peak", "card"), default=None,
                    help="floors at 4.3e12 B/s (peak) or at the card's measured copy rate (default: peak on an H200)")
    ap.add_argument("--out", metavar="FILE.md", help="also write the table here")
    args = ap.parse_args(argv)
    try:
        rows, meta = check_run(args.run_dir, args.bound)
    except ValueError as e:
        ap.error(str(e))
    table = format_table(rows, meta)
    print(table, end="")
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)
    return 0 if all(r["met"] is not False for r in rows) and len(meta["devices"]) <= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
