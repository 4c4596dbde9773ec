# SPDX-License-Identifier: Apache-2.0
"""Test harness pieces that several suites share: a hang-guarded launch for the simulator, and
the GPU-vs-simulator cross-check that runs one side in a child process."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
from pathlib import Path

REPO = str(Path(__file__).resolve().parents[1])


def launch_guarded(kernel, grid, block, smem, *args, timeout=60):
    """Launch ``kernel[grid, block, 0, smem](*args)`` in a helper thread, so that a hang fails
    the test (after ``timeout`` s) instead of blocking the suite; its exception is re-raised."""
    result = {}

    def target():
        try:
            kernel[grid, block, 0, smem](*args)
        except BaseException as e:  # noqa: BLE001 - re-raised in the test thread
            result["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), f"the simulated kernel did not finish within {timeout} s (hang)"
    if "error" in result:
        raise result["error"]


def run_both_sides(out: Path, runner: str, run_here) -> None:
    """Run ``runner(out)`` (a ``module:function`` name) under the CUDA simulator in a child
    process while ``run_here(out)`` runs on the GPU in this one; fail with the child's log if
    it failed. The child writes to a file, not a pipe, so it never blocks on its output."""
    module, func = runner.split(":")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    with open(out / "sim.log", "w") as log_file:
        sim = subprocess.Popen(
            [sys.executable, "-c", f"import sys; from {module} import {func}; {func}(sys.argv[1])",
             str(out)],
            cwd=REPO, env=env, stdout=log_file, stderr=subprocess.STDOUT,
        )
        try:
            run_here(str(out))  # the GPU, while the simulator runs
        finally:
            sim.wait(timeout=1800)
    assert sim.returncode == 0, f"simulator subprocess failed:\n{(out / 'sim.log').read_text()}"


def rss_bytes() -> int:
    """Resident set size of this process in bytes (soak tests)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def device_used_bytes() -> int:
    """Bytes in use on the current device after a synchronize, a garbage collection and with
    CuPy's pools emptied (soak tests; needs CuPy and a GPU)."""
    import cupy as cp

    cp.cuda.Device().synchronize()
    gc.collect()
    cp.get_default_memory_pool().free_all_blocks()
    cp.get_default_pinned_memory_pool().free_all_blocks()
    free, total = cp.cuda.runtime.memGetInfo()
    return total - free
