# SPDX-License-Identifier: Apache-2.0
"""Count what compute-sanitizer reported in its log files (used by ``sanitize.sh``; runs without a GPU).

    python3 tests/gpu/sanitizer_counts.py TOOL LOG [LOG ...]

Prints one line per kind of report and a last line ``TOOL: N errors ...``; exit status 1 when N > 0.

The count is the tools' own summaries when they finished: ``ERROR SUMMARY: N errors`` (memcheck,
synccheck, initcheck) and ``RACECHECK SUMMARY: ... (N errors, M warnings)`` (racecheck, whose
``ERROR SUMMARY`` line is absent). A process the tool did not see finish (the run was cut by a time
limit) has no summary; its printed records are counted instead and the line says so. The line
``ERROR SUMMARY: N errors were not printed`` is a remark about ``--print-limit``, not more errors.

Each printed record is classified by its first line: ``Program hit <error> ... on CUDA API call to
<function>`` (an API call that returned an error), ``Invalid __global__ write ...`` and the other
memory-access records, ``Error: Race reported ...`` (racecheck), barrier and synchronisation
errors (synccheck), ``Uninitialized ...`` (initcheck); with the deepest Python frame of its host
backtrace that is not in a library (where in the tests or the package it happened).
"""
from __future__ import annotations

import re
import sys
from collections import Counter
from dataclasses import dataclass, field

_PREFIX = "========= "
_ERROR_SUMMARY = re.compile(r"^========= ERROR SUMMARY: (\d+) errors?$")
_RACE_SUMMARY = re.compile(r"^========= RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
_API = re.compile(r"^Program hit (\S+) .* on CUDA API call to (\S+?)\.?$")
_FRAME = re.compile(r"Host Frame: (\S+) in ([^/\s:]+\.py):(\d+)$")
# Frames of the machinery between a user's line and the driver: not where an error "happened".
_LIBRARY_FILES = {
    "driver.py", "devices.py", "contextlib.py", "dispatcher.py", "cudadrv.py", "python.py",
    "_callers.py", "_manager.py", "_hooks.py", "runner.py", "main.py", "threading.py",
}
_NOT_RECORDS = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "Target application",
                "LEAK SUMMARY", "Saved host backtrace", "No ")


@dataclass
class Counts:
    """What one tool's logs hold."""

    summarised: int = 0          # errors in the tools' summaries
    summaries: int = 0           # processes that printed a summary
    warnings: int = 0            # racecheck warnings (not errors)
    kinds: Counter = field(default_factory=Counter)   # (kind, detail) -> printed records
    where: dict = field(default_factory=dict)         # (kind, detail) -> first place seen

    @property
    def printed(self) -> int:
        return sum(self.kinds.values())

    @property
    def errors(self) -> int:
        """The summaries' total; the printed records when no process finished."""
        return self.summarised if self.summaries else self.printed


def _kind(head: str) -> tuple[str, str] | None:
    m = _API.match(head)
    if m:
        return "API error", f"{m.group(1)} from {m.group(2)}"
    if head.startswith("Invalid "):
        return "memory access", re.sub(r" of size \d+ bytes?$", "", head)
    if head.startswith("Error: Race reported"):
        m = re.search(r" access at ([^\[(\s]+)", head)
        return "race", f"in {m.group(1)}" if m else "shared-memory race"
    if head.startswith(("Barrier error", "Divergent", "Illegal")) or "syncwarp" in head or "barrier" in head.lower():
        return "synchronisation", head
    if head.startswith("Uninitialized"):
        return "uninitialized", re.sub(r" of size \d+ bytes?$", "", head)
    if head.startswith("Leaked"):
        return "leak", "device memory leak"
    if head.startswith(_NOT_RECORDS):
        return None
    return "other", head


def count(lines) -> Counts:
    """Counts of the records and summaries in the lines of one or more logs."""
    c = Counts()
    current = None
    for raw in lines:
        line = raw.rstrip("\n")
        m = _ERROR_SUMMARY.match(line)
        if m:
            c.summarised += int(m.group(1))
            c.summaries += 1
            current = None
            continue
        m = _RACE_SUMMARY.match(line)
        if m:
            c.summarised += int(m.group(1))
            c.warnings += int(m.group(2))
            c.summaries += 1
            current = None
            continue
        if not line.startswith(_PREFIX):
            continue
        body = line[len(_PREFIX):]
        if body and not body.startswith(" "):          # a record's first line
            current = _kind(body)
            if current is not None:
                c.kinds[current] += 1
            continue
        if current is not None and current not in c.where:
            f = _FRAME.search(body)
            if f and f.group(2) not in _LIBRARY_FILES:
                c.where[current] = f"{f.group(1)} ({f.group(2)}:{f.group(3)})"
    return c


def report(tool: str, c: Counts) -> str:
    out = [f"  {n:6d}  {kind}: {detail}" + (f"  first at {c.where[(kind, detail)]}" if (kind, detail) in c.where else "")
           for (kind, detail), n in c.kinds.most_common()]
    if c.summaries:
        tail = f"{c.errors} errors in {c.summaries} summar{'y' if c.summaries == 1 else 'ies'}"
    else:
        tail = f"{c.errors} errors printed, no summary (the tool did not finish: cut by a time limit?)"
    if c.warnings:
        tail += f", {c.warnings} warnings"
    by_kind = Counter()
    for (kind, _), n in c.kinds.items():
        by_kind[kind] += n
    if by_kind:
        tail += "; printed: " + ", ".join(f"{n} {k}" for k, n in by_kind.most_common())
    out.append(f"{tool}: {tail}")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    tool, paths = argv[0], argv[1:]
    lines = []
    for p in paths:
        try:
            with open(p, errors="replace") as f:
                lines.extend(f)
        except FileNotFoundError:
            print(f"{tool}: no log {p!r} (did the tool start?)")
            return 1
    c = count(lines)
    print(report(tool, c))
    return 1 if c.errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
