# SPDX-License-Identifier: Apache-2.0
"""The GPU suite needs a CUDA GPU: on a machine without one every test here is skipped, with the
reason, instead of failing (run it on a GPU machine: ``python -m pytest -m gpu tests/gpu``)."""

from __future__ import annotations

import functools
import os

import pytest


@functools.cache
def no_gpu_reason() -> str | None:
    """Why the GPU suite cannot run here, or None when a CUDA GPU is usable.

    Asks the driver directly (no numba context is created): cuInit, then the device count.
    """
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        return "NUMBA_ENABLE_CUDASIM is set: the GPU suite runs on a real GPU (unset it)"
    try:
        from cuda.bindings import driver
    except ImportError as e:  # pragma: no cover - cuda-bindings is a dependency
        return f"cuda-bindings cannot be imported ({e})"
    try:
        (err,) = driver.cuInit(0)
    except Exception as e:  # no libcuda.so at all: cuda-bindings raises on the first call
        return f"no NVIDIA driver on this machine ({type(e).__name__}: {e})"
    if err != driver.CUresult.CUDA_SUCCESS:
        return f"no usable CUDA driver/GPU on this machine (cuInit: {err.name})"
    err, count = driver.cuDeviceGetCount()
    if err != driver.CUresult.CUDA_SUCCESS or count == 0:
        return "no CUDA GPU on this machine (cuDeviceGetCount: 0)"
    return None


def pytest_collection_modifyitems(config, items):
    """No GPU: every test here skipped with the reason. A GPU: the modules that one xdist worker
    runs whole (``xdist_group``: a module fixture that simulates every case in a child process)
    moved to the front, in their order, so that under ``--dist loadgroup``, which hands work out
    in collection order, these longest units start first instead of last."""
    reason = no_gpu_reason()
    if reason is None:
        items.sort(key=lambda item: item.get_closest_marker("xdist_group") is None)
        return
    skip = pytest.mark.skip(reason=f"GPU suite: {reason}")
    for item in items:
        if "tests/gpu/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(skip)


def pytest_runtest_logreport(report):
    """With ``NMDX_TEST_LOG=FILE`` set, append ``OUTCOME nodeid seconds`` for each test as it ends
    (in the controller only under pytest-xdist, whose workers inherit the variable): a run stopped
    at a time limit (``sanitize.sh -T``) still names what passed and what failed. Failures add
    their short error line, and their whole report goes to ``FILE.failures``."""
    path = os.environ.get("NMDX_TEST_LOG")
    if not path or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if not (report.when == "call" or report.failed or report.skipped):
        return
    outcome = "ERROR" if report.failed and report.when != "call" else report.outcome.upper()
    line = f"{outcome} {report.nodeid} {report.duration:.1f}s"
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        line += f" :: {crash.message.splitlines()[0] if crash else str(report.longrepr).splitlines()[-1]}"
        with open(path + ".failures", "a") as f:
            f.write(f"=== {line}\n{report.longrepr}\n\n")
    with open(path, "a") as f:
        f.write(line + "\n")
