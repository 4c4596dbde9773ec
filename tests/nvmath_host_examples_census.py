# SPDX-License-Identifier: Apache-2.0
"""Census: nvmath-python's host matmul examples run against nvmath_host.

``python -m tests.nvmath_host_examples_census <examples dir> [--out table.md] [--timeout S]
[--only SUBSTR ...] [--jobs N]``

``<examples dir>`` is nvmath-python's ``examples/linalg/advanced/matmul`` (a checkout or an
export of it; nothing of nvmath-python is stored in this repository). The examples call
``nvmath.linalg.advanced.matmul(...)`` after ``import nvmath``, so instead of editing them each
runs, unchanged, in a subprocess whose ``nvmath`` is an alias: ``nvmath.linalg.advanced`` is the
module ``nvmath_host`` and ``nvmath.CudaDataType`` is ``nvmath_host.CudaDataType``; nothing
else is there (the MXFP8 helpers ``nvmath.linalg.advanced.helpers`` and every other name fail
with AttributeError, which the table reports). The examples print rather than check their results: ``ok`` means the script ran
to its end. The table has one row per example (the result, or the error type and the first line
of its message, ``timeout`` past the limit) and the cause of each failure (:data:`CAUSES`); then
the counts. Exit status 0 (it is a census, not a test).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.nvmath_examples_census import (
    _cell,
    _clean_env,
    _first_error,
    cause_counts,
    first_cause,
    write_table,
)

# Run one example in the child with ``nvmath.linalg.advanced`` aliased to nvmath_host.
BOOTSTRAP = """\
import os, runpy, sys, types
import nvmath_host
root, linalg = types.ModuleType("nvmath"), types.ModuleType("nvmath.linalg")
root.linalg, linalg.advanced = linalg, nvmath_host
root.CudaDataType = nvmath_host.CudaDataType  # nvmath.CudaDataType: the same cudaDataType_t enum
root.__path__ = linalg.__path__ = []  # packages: `import nvmath.linalg.advanced` finds the aliases
sys.modules.update({"nvmath": root, "nvmath.linalg": linalg, "nvmath.linalg.advanced": nvmath_host})
script = sys.argv[1]
sys.argv = [script]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
runpy.run_path(script, run_name="__main__")
"""

# (test on the example's name and its result, cause): the first that matches names a failure.
CAUSES = (
    (lambda n, r: r.startswith("timeout"), "time limit"),
    (lambda n, r: "mxfp8" in n or "nvfp4" in n or "fp4" in n or "helpers" in r,
     "block-scaled FP8/FP4 (MXFP8, NVFP4: Blackwell) and their helpers"),
    (lambda n, r: "No module named" in r, "a package the example needs is not installed"),
    (lambda n, r: "torch tensor on cpu" in r, "torch CPU tensors (nvmath_host takes NumPy on the host)"),
    (lambda n, r: any(x in r.lower() for x in ("driver", "no cuda-capable device", "cudaerrornodevice")),
     "needs a GPU"),
)


def classify(name: str, result: str) -> str:
    """The cause of a failed example (see :data:`CAUSES`); "" for one that ran."""
    return first_cause(name, result, CAUSES, "nvmath_host compat")


def run_example(folder: Path, name: str, timeout: float) -> tuple[str, float]:
    """(result, seconds) of running ``name`` with the alias."""
    env = _clean_env(False, folder)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", BOOTSTRAP, str(folder / name)], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"timeout (> {timeout:.0f} s)", time.perf_counter() - t0
    secs = time.perf_counter() - t0
    return ("ok" if proc.returncode == 0 else _first_error(proc.stderr)), secs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", help="nvmath-python's examples/linalg/advanced/matmul folder")
    parser.add_argument("--out", help="also write the table (Markdown) to this file")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per example (default 120)")
    parser.add_argument("--only", nargs="*", default=[], help="run only examples whose name contains one of these")
    parser.add_argument("--jobs", type=int, default=1, help="examples run at once (default 1)")
    args = parser.parse_args(argv)
    src = Path(args.examples)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    if not src.is_dir():
        parser.error(f"examples: {src} is not a folder")
    with tempfile.TemporaryDirectory(prefix="nmdx-host-census-") as tmp:
        folder = Path(tmp) / "examples"
        shutil.copytree(src, folder)
        names = sorted(p.name for p in folder.glob("example*.py") if not p.name.endswith("_utils.py"))
        if args.only:
            names = [n for n in names if any(s in n for s in args.only)]

        def one(name):
            result, secs = run_example(folder, name, args.timeout)
            print(f"{name}: {result} [{secs:.0f} s]", flush=True)
            return name, result

        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            rows = list(pool.map(one, names))
    ok = sum(r == "ok" for _, r in rows)
    lines = ["| example | result | cause |", "|---|---|---|"]
    lines += [f"| {n} | {_cell(r)} | {classify(n, r)} |" for n, r in rows]
    lines += ["", f"{len(rows)} examples: {ok} ran to their end, {len(rows) - ok} failed"]
    lines += cause_counts(rows, classify)
    write_table(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
