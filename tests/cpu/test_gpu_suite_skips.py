# SPDX-License-Identifier: Apache-2.0
"""On a machine without a GPU, ``pytest tests/gpu`` skips every test with its reason (no failures)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _gpu_conftest():
    spec = importlib.util.spec_from_file_location("gpu_conftest", ROOT / "tests" / "gpu" / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gpu_suite_skips_without_a_gpu():
    if _gpu_conftest().no_gpu_reason() is None:
        pytest.skip("this machine has a GPU: the GPU suite runs here instead of skipping")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests/gpu"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    last = out.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ skipped in [\d.]+s(?: \(.*\))?", last), last
    assert "GPU suite: no" in out, out[-2000:]


def test_gpu_suite_skips_under_the_simulator(monkeypatch):
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    reason = _gpu_conftest().no_gpu_reason()
    assert reason and "NUMBA_ENABLE_CUDASIM" in reason


def _report(when, outcome, nodeid="tests/gpu/test_x.py::test_a", message=None):
    from types import SimpleNamespace

    crash = SimpleNamespace(message=message) if message else None
    return SimpleNamespace(when=when, outcome=outcome, nodeid=nodeid, duration=1.25,
                           passed=outcome == "passed", failed=outcome == "failed", skipped=outcome == "skipped",
                           longrepr=SimpleNamespace(reprcrash=crash) if crash else None)


def test_live_test_log_names_each_outcome(tmp_path, monkeypatch):
    """NMDX_TEST_LOG gets one line per test as it ends (what a time-limited sanitizer run keeps)."""
    hook = _gpu_conftest().pytest_runtest_logreport
    log = tmp_path / "tests.txt"
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this suite may itself run under xdist
    hook(_report("call", "passed"))  # no NMDX_TEST_LOG: nothing written
    assert not log.exists()
    monkeypatch.setenv("NMDX_TEST_LOG", str(log))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    hook(_report("call", "passed"))  # an xdist worker: its controller writes the line, not it
    assert not log.exists()
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    hook(_report("setup", "passed"))
    hook(_report("call", "passed"))
    hook(_report("teardown", "passed"))
    hook(_report("call", "failed", "tests/gpu/test_x.py::test_b", "AssertionError: 3 != 4\nmore"))
    hook(_report("setup", "failed", "tests/gpu/test_x.py::test_c", "RuntimeError: no context"))
    hook(_report("setup", "skipped", "tests/gpu/test_x.py::test_d"))
    assert log.read_text().splitlines() == [
        "PASSED tests/gpu/test_x.py::test_a 1.2s",
        "FAILED tests/gpu/test_x.py::test_b 1.2s :: AssertionError: 3 != 4",
        "ERROR tests/gpu/test_x.py::test_c 1.2s :: RuntimeError: no context",
        "SKIPPED tests/gpu/test_x.py::test_d 1.2s",
    ]
    details = (tmp_path / "tests.txt.failures").read_text()  # each failure's whole report
    assert details.count("=== ") == 2
    assert "=== FAILED tests/gpu/test_x.py::test_b" in details and "=== ERROR tests/gpu/test_x.py::test_c" in details
