# SPDX-License-Identifier: Apache-2.0
"""Test harness pieces that several suites share: a hang-guarded launch for the simulator, the
GPU-vs-simulator cross-check that runs one side in a child process, and the soak tests' memory
meter."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
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


def soak_rounds(label: str, run_round, rss_limit: int, device_limit: int, rounds: int = 3) -> list[int]:
    """Run ``run_round()`` up to ``rounds`` times, reading this process's resident set and the
    device's used bytes (:func:`device_used_bytes`) around each; returns the device growths.

    Host growth is this process's own and must stay under ``rss_limit`` bytes over the first
    round. The device figure is the whole GPU's: under pytest-xdist, other workers' allocations
    land in it too. A leak grows in every round, another process's allocation is a step that the
    next round does not repeat, so the device growth must stay under ``device_limit`` in one of
    the rounds (AssertionError naming ``label`` and every round's growth otherwise). Each round's
    figures are printed with the tag ``SOAK`` (``pytest -s``).
    """
    growths = []
    for r in range(rounds):
        gc.collect()  # garbage of the warm-up or the last round is not growth
        rss0, dev0 = rss_bytes(), device_used_bytes()
        t0 = time.perf_counter()
        run_round()
        secs = time.perf_counter() - t0
        gc.collect()
        rss1, dev1 = rss_bytes(), device_used_bytes()
        growths.append(dev1 - dev0)
        print(f"\nSOAK {label} (round {r + 1}): {secs:.2f} s; host RSS {rss0 / 2**20:.1f} -> "
              f"{rss1 / 2**20:.1f} MiB; device used {dev0 / 2**20:.1f} -> {dev1 / 2**20:.1f} MiB", flush=True)
        if r == 0:
            assert rss1 - rss0 < rss_limit, f"{label}: host RSS grew {(rss1 - rss0) / 2**20:.2f} MiB"
        if dev1 - dev0 < device_limit:
            return growths
    raise AssertionError(f"{label}: device memory grew in each of {rounds} rounds: "
                         + ", ".join(f"{g / 2**20:.2f}" for g in growths) + " MiB")
