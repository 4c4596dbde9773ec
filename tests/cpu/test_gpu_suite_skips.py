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
