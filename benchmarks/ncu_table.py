# SPDX-License-Identifier: Apache-2.0
"""Nsight Compute's figures for the fused kernels, as one compact table per run.

    python benchmarks/ncu_table.py --command [fused_kernels.py arguments]   # prints the ncu command
    ncu ... --log-file ncu.csv python benchmarks/fused_kernels.py --profile-window ...
    python benchmarks/ncu_table.py ncu.csv [--out table.md]                  # the table

The command asks ncu for the raw values (``--csv --page raw``) of the metrics of a few of its own
sections (:data:`SECTIONS`: names that exist on every architecture ncu supports, so no metric
name of ours can make the run fail) for exactly the kernels of one call of each of our functions
(``--profile-from-start off`` with ``fused_kernels.py --profile-window``); the table picks the
columns of :data:`METRICS` and :data:`STALLS` that are there ("-" where one is not). The table has one row per profiled kernel: its duration,
DRAM / SM / L1 throughput, issue-slot use, achieved occupancy, registers, shared-memory bank
conflicts per shared-memory instruction and the two largest warp stall reasons (cycles per
issued instruction), which together say what bounds a kernel: memory (DRAM near its peak),
shared memory / L1 (L1 near peak, bank conflicts, MIO throttle stalls), instruction issue
(issue slots near 100 %), or latency (low issue use, long/short scoreboard stalls at low
occupancy).
"""

from __future__ import annotations

import argparse
import csv
import io
import sys

SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "SchedulerStats", "WarpStateStats",
            "MemoryWorkloadAnalysis_Tables")
# column label -> its metric (the first of the names present in the log: ncu's names differ
# between versions and architectures, e.g. DRAM throughput)
METRICS = {
    "time us": ("gpu__time_duration.sum",),
    "DRAM %": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
               "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
    "SM %": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "L1 %": ("l1tex__throughput.avg.pct_of_peak_sustained_active",),
    "smem %": ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed",),
    "issue %": ("smsp__issue_active.avg.pct_of_peak_sustained_active",),
    "occupancy %": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "regs": ("launch__registers_per_thread",),
}
# shared-memory instructions (loads, stores), their bank conflicts and their wavefronts (the
# shared-memory pipe's passes: 1 per 128 bytes without conflicts); first name present, per kind
SHARED_INSTR = (("smsp__sass_inst_executed_op_shared_ld.sum", "smsp__inst_executed_op_shared_ld.sum"),
                ("smsp__sass_inst_executed_op_shared_st.sum", "smsp__inst_executed_op_shared_st.sum"))
CONFLICTS = (("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",),
             ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",))
WAVEFRONTS = (("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",),
              ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",))
# warp stall reasons (cycles per issued instruction); the two largest go in the table
STALLS = {
    f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio": r
    for r in ("barrier", "long_scoreboard", "short_scoreboard", "mio_throttle", "lg_throttle",
              "math_pipe_throttle", "wait", "not_selected", "dispatch_stall", "no_instruction", "membar")
}


def command(bench_args) -> str:
    """The ncu command line that profiles ``fused_kernels.py --profile-window <bench_args>``."""
    sections = " ".join(f"--section {s}" for s in SECTIONS)
    return (f"ncu --profile-from-start off --csv --page raw --log-file ncu.csv {sections}"
            " python3 benchmarks/fused_kernels.py --profile-window " + " ".join(bench_args))


def _number(text: str):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def rows(csv_text: str) -> list[dict]:
    """One dict per profiled kernel: ``kernel`` (its name, shortened), every metric of METRICS and
    STALLS found (floats), ``time us`` in microseconds whatever unit ncu reported."""
    lines = [ln for ln in csv_text.splitlines() if ln.startswith('"')]  # ncu's own lines start with ==
    table = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(table) < 2:
        return []
    header, units, body = table[0], table[1], table[2:]
    col = {name: i for i, name in enumerate(header)}
    if "Kernel Name" not in col:
        raise ValueError("not an ncu --csv --page raw log: no 'Kernel Name' column")
    wanted = [m for alts in (*METRICS.values(), *SHARED_INSTR, *CONFLICTS, *WAVEFRONTS) for m in alts] + list(STALLS)
    out = []
    for r in body:
        if len(r) != len(header):
            continue
        name = r[col["Kernel Name"]].split("(")[0]
        name = name.split("[")[0] if "::" in name else name  # numba's: module::function[mangled args]
        block = r[col["Block Size"]].replace(" ", "") if "Block Size" in col else ""
        row = {"kernel": name[-60:] + (f" {block}" if block else "")}
        for metric in wanted:
            if metric in col:
                v = _number(r[col[metric]])
                if metric == "gpu__time_duration.sum" and v is not None:
                    unit = units[col[metric]].strip().lower()
                    v *= {"ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "nsecond": 1e-3}.get(unit, 1.0)
                row[metric] = v
        out.append(row)
    return out


def _first(row, alts):
    """The value of the first of the metric names ``alts`` present in ``row`` (None: none)."""
    return next((row[m] for m in alts if row.get(m) is not None), None)


def _total(row, kinds):
    """The sum over ``kinds`` (one tuple of alternative names each) of their values in ``row``,
    or None when none is there."""
    vals = [v for v in (_first(row, alts) for alts in kinds) if v is not None]
    return sum(vals) if vals else None


def markdown(found: list[dict], labels=()) -> str:
    """The table (see the module); ``labels`` name the rows in order (the kernels' own names
    where there are fewer)."""
    head = ["kernel", *METRICS, "smem instr", "conflicts per smem instr", "wavefronts per smem instr",
            "top stalls (cycles per issue)"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 2) + "---|"]
    for i, r in enumerate(found):
        cells = [f"{labels[i]}: {r['kernel']}" if i < len(labels) else r["kernel"]]
        for label, alts in METRICS.items():
            v = _first(r, alts)
            cells.append("-" if v is None else f"{v:.0f}" if abs(v) >= 100 or label == "regs" else f"{v:.1f}")
        instr = _total(r, SHARED_INSTR)
        cells.append("-" if instr is None else f"{instr:.3g}")
        for kinds in (CONFLICTS, WAVEFRONTS):
            v = _total(r, kinds)
            cells.append(f"{v / instr:.2f}" if v is not None and instr else "-")
        stalls = sorted(((v, STALLS[m]) for m, v in r.items() if m in STALLS and v is not None), reverse=True)[:2]
        cells.append(", ".join(f"{name} {v:.1f}" for v, name in stalls) or "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", nargs="?", help="ncu's --csv --page raw log (omit with --command)")
    ap.add_argument("--out", help="also write the table here")
    ap.add_argument("--labels", nargs="+", default=(), metavar="NAME",
                    help="names of the rows in order (e.g. fused_kernels.py's cases: one kernel each)")
    ap.add_argument("--command", nargs=argparse.REMAINDER, metavar="BENCH_ARGS",
                    help="print the ncu command for fused_kernels.py with these arguments, and exit")
    a = ap.parse_args(argv)
    if a.command is not None:
        print(command(a.command))
        return 0
    if not a.log:
        ap.error("give ncu's log file, or --command")
    with open(a.log) as f:
        text = markdown(rows(f.read()), a.labels)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
