# SPDX-License-Identifier: Apache-2.0
"""Census: nvmath-python's device examples run with only their imports changed.

``python -m tests.nvmath_examples_census <examples dir> [--out table.md] [--timeout S]
[--only SUBSTR ...] [--no-link] [--jobs N] [--gpu]``

``<examples dir>`` is nvmath-python's ``examples/device`` (a checkout or an export of it; nothing
of nvmath-python is stored in this repository). For each example:

1. the folder is copied to a temporary directory and, in every ``.py`` file, only the import
   statements change: ``nvmath.device`` becomes ``nvmath_device`` on lines that start with
   ``from``/``import`` (``from nvmath.device import FFT`` -> ``from nvmath_device import FFT``,
   ``from nvmath.device.common_cuda import Dim3`` -> ``from nvmath_device.common_cuda import
   Dim3``). Nothing else is edited: an example that needs a module nvmath_device lacks fails
   with ModuleNotFoundError, which the table reports;
2. it runs in a subprocess under ``NUMBA_ENABLE_CUDASIM=1`` (the example's folder as the working
   directory and first on ``sys.path``, as ``python example.py`` would have it), with the
   kernel recorder of :mod:`tests.sim_kernels_compile` installed, so every kernel launch that
   completed is recorded, and with a time limit;
3. the kernels it ran (also those before a failure) are linked to an sm_90 cubin without the
   simulator (``python -m tests.sim_kernels_compile <records> --jobs 1``).

The table has one row per example: the simulator's result (``ok`` or the error type and the
first line of its message, ``timeout`` past the limit), the sm_90 link result (``k/n``
kernels linked, the first link error) and, for a failure, its cause (:data:`CAUSES`); then
the counts. Exit status 0 (it is a census, not a test).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# ``from nvmath.device...`` / ``import nvmath.device...`` at the start of a line (any indent)
_IMPORT_LINE = re.compile(r"^(\s*(?:from|import)\s+)nvmath\.device(?=[\s.,]|$)")

# Run one example in the child: the recorder first, then the script as __main__.
_BOOTSTRAP = """\
import os, runpy, sys
script = sys.argv[1]
sys.argv = [script]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
from tests.sim_kernels_compile import install_recorder
install_recorder(os.environ["NMDX_RECORD_SIM_KERNELS"])
runpy.run_path(script, run_name="__main__")
"""


def rewrite_imports(text: str) -> tuple[str, int]:
    """``text`` with ``nvmath.device`` -> ``nvmath_device`` on import lines only; (new text,
    number of lines changed)."""
    lines = text.splitlines(keepends=True)
    changed = 0
    for i, line in enumerate(lines):
        new = _IMPORT_LINE.sub(r"\1nvmath_device", line)
        if new != line:
            lines[i] = new
            changed += 1
    return "".join(lines), changed


def copy_examples(src: Path, dst: Path) -> list[str]:
    """Copy ``src``'s files into ``dst`` rewriting the imports; the example scripts' names."""
    for path in sorted(src.iterdir()):
        if path.is_file():
            if path.suffix == ".py":
                (dst / path.name).write_text(rewrite_imports(path.read_text())[0])
            else:
                shutil.copy2(path, dst / path.name)
    return sorted(p.name for p in dst.glob("*.py") if not p.name.startswith("common"))


def _first_error(stderr: str) -> str:
    """``ErrorType: first line`` of the last exception in a traceback (or the last line)."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Traceback (most recent call last)"):
            for ln in lines[i + 1:]:
                if not ln.startswith((" ", "\t")) and re.match(r"^[\w.]+(Error|Exception|Exit|Warning)?\b.*", ln):
                    return ln.strip()
    return lines[-1].strip() if lines else "(no output)"


def _clean_env(sim: bool, extra_path: Path) -> dict:
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env.pop("NMDX_RECORD_SIM_KERNELS", None)
    if sim:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(extra_path), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("NUMBA_MATHDX_CACHE_DIR", str(REPO / ".nmdx-test-cache"))
    return env


def run_example(folder: Path, name: str, records: Path, timeout: float, gpu: bool = False) -> tuple[str, float]:
    """(result, seconds) of running ``name`` under the simulator (on the GPU, no recorder, with ``gpu``)."""
    env = _clean_env(not gpu, folder)
    if gpu:
        cmd = [sys.executable, str(folder / name)]
    else:
        env["NMDX_RECORD_SIM_KERNELS"] = str(records)
        cmd = [sys.executable, "-c", _BOOTSTRAP, str(folder / name)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"timeout (> {timeout:.0f} s)", time.perf_counter() - t0
    secs = time.perf_counter() - t0
    if proc.returncode == 0:
        return "ok", secs
    return _first_error(proc.stderr), secs


def link_records(folder: Path, records: Path, timeout: float) -> str:
    """``k/n linked`` for the kernels recorded in ``records`` (and the first error)."""
    if not any(records.glob("*.kernel")):
        skips = list(records.glob("*.skip.json"))
        return f"no kernel recorded{f' ({len(skips)} not recordable)' if skips else ''}"
    env = _clean_env(False, folder)
    try:
        proc = subprocess.run([sys.executable, "-m", "tests.sim_kernels_compile", str(records), "--jobs", "1"],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"link timeout (> {timeout:.0f} s)"
    m = re.search(r"sm_90: (\d+) passed, (\d+) failed", proc.stdout)
    if not m:
        return "link step: " + _first_error(proc.stderr or proc.stdout)
    ok, bad = int(m.group(1)), int(m.group(2))
    result = f"{ok}/{ok + bad} linked"
    if bad:
        err = re.search(r"failed to compile for sm_90:\n(.*)", proc.stdout)
        result += f"; {err.group(1).strip()[:160] if err else 'failed'}"
    skips = len(list(records.glob("*.skip.json")))
    if skips:
        result += f" ({skips} not recordable)"
    return result


# (test on the example's name and its simulator result, cause): the first that matches names
# whose work a failure is; "compat" (this census' owner: vector types, common_cuda, simulator
# patches) is what is left.
CAUSES = (
    (lambda n, r: r.startswith("timeout"), "simulator time limit (a problem size for the GPU)"),
    (lambda n, r: n.startswith("curand_"), "cuRAND device API (random)"),
    (lambda n, r: "cuda.coop" in r or "'coop' from 'cuda'" in r, "cuda.coop (CCCL), not nvmath.device"),
    (lambda n, r: "No module named 'nvmath'" in r, "imports nvmath-python itself (nvmath.linalg host matmul as a peer)"),
    (lambda n, r: re.search(r"DevicePipeline|TilePipeline|suggest_device_pipeline|pipeline", r) is not None
     or "pipeline" in n, "cuBLASDx device/tile pipelines (this project's K loop on cuBLASDx 0.4)"),
    (lambda n, r: re.search(r"nvmath_device\.(common|cublasdx\w*)'|cannot import name", r) is not None,
     "cuBLASDx tensor API: a missing name"),
    (lambda n, r: "cupy" in r or "CUDArt" in r or "has no attribute 'compile'" in r
     or "multiProcessorCount" in r or "DriverError" in r or "cudaError" in r,
     "needs a GPU/driver: cupy, kernel.compile()+cuFuncSetAttribute, cudart, occupancy"),
    (lambda n, r: "Matmul" in r and "blockDim" in r, "GEMM simulator: launch blockDim larger than block_dim"),
    (lambda n, r: "this_grid().sync()" in r, "simulator: a grid sync across blocks (it runs blocks one by one)"),
    (lambda n, r: "fp16" in n and "fft" in n, "FFT float16"),
    (lambda n, r: "gemm" in n or "Matmul" in r, "GEMM"),
)


def first_cause(name: str, result: str, causes, rest: str) -> str:
    """The first of ``causes`` (``(test(name, result), cause)`` pairs) that a failed example's
    ``result`` matches, else ``rest``; "" for one that ran."""
    if result == "ok":
        return ""
    return next((cause for test, cause in causes if test(name, result)), rest)


def classify(name: str, result: str) -> str:
    """The cause of a failed example (see :data:`CAUSES`); "" for one that ran."""
    return first_cause(name, result, CAUSES, "compat (vector types / common_cuda / simulator patches)")


def _cell(text: str, width: int = 160) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", help="nvmath-python's examples/device folder")
    parser.add_argument("--out", help="also write the table (Markdown) to this file")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per example (default 300)")
    parser.add_argument("--link-timeout", type=float, default=600, help="seconds per link step (default 600)")
    parser.add_argument("--only", nargs="*", default=[], help="run only examples whose name contains one of these")
    parser.add_argument("--no-link", action="store_true", help="skip linking the recorded kernels for sm_90")
    parser.add_argument("--jobs", type=int, default=1, help="examples run at once (default 1)")
    parser.add_argument("--gpu", action="store_true",
                        help="run the examples on the GPU instead of the simulator (no recording, no link step)")
    args = parser.parse_args(argv)
    src = Path(args.examples)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    if not src.is_dir():
        parser.error(f"examples: {src} is not a folder")
    with tempfile.TemporaryDirectory(prefix="nmdx-census-") as tmp:
        folder = Path(tmp) / "examples"
        folder.mkdir()
        names = copy_examples(src, folder)
        if args.only:
            names = [n for n in names if any(s in n for s in args.only)]

        def one(name):
            records = Path(tmp) / "records" / name[:-3]
            records.mkdir(parents=True)
            result, secs = run_example(folder, name, records, args.timeout, gpu=args.gpu)
            link = "(not linked)" if args.no_link or args.gpu else link_records(folder, records, args.link_timeout)
            print(f"{name}: {result} [{secs:.0f} s] | sm_90: {link}", flush=True)
            return name, result, secs, link

        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            rows = list(pool.map(one, names))  # each example is its own subprocess; rows in name order
    ok = sum(r[1] == "ok" for r in rows)
    linked_all = sum(bool(re.match(r"(\d+)/\1 linked", r[3])) for r in rows)
    where = "GPU" if args.gpu else "simulator"
    lines = [f"| example | {where} | sm_90 link | cause |", "|---|---|---|---|"]
    lines += [f"| {n} | {_cell(r)} | {_cell(k)} | {classify(n, r)} |" for n, r, _, k in rows]
    lines.append("")
    lines.append(f"{len(rows)} examples: {ok} ran ok {'on the GPU' if args.gpu else 'under the simulator'}, "
                 f"{len(rows) - ok} failed; "
                 f"{linked_all} with every recorded kernel linked for sm_90")
    lines += cause_counts([(n, r) for n, r, _, _ in rows], classify)
    write_table(lines, args.out)
    return 0


def cause_counts(rows, classify) -> list[str]:
    """``- failed, <cause>: <count>`` lines for the failed ``(name, result)`` rows, most first."""
    causes: dict = {}
    for n, r in rows:
        if r != "ok":
            causes[classify(n, r)] = causes.get(classify(n, r), 0) + 1
    return [f"- failed, {cause}: {count}" for cause, count in sorted(causes.items(), key=lambda c: -c[1])]


def write_table(lines, out) -> None:
    """Print the table's ``lines``, and write them to ``out`` (a path) unless it is None."""
    table = "\n".join(lines)
    print("\n" + table)
    if out:
        Path(out).write_text(table + "\n")


if __name__ == "__main__":
    sys.exit(main())
