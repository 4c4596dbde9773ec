# SPDX-License-Identifier: Apache-2.0
"""The import contracts in pyproject.toml hold: packages in layers, nvmath_device a one-way
pipeline, no numba below the numba layer, private modules private, no circles."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11+")


def _lint_imports():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(exe).exists():
        pytest.fail("lint-imports (import-linter, in the test extra) is not installed")
    return subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_contracts_hold():
    p = _lint_imports()
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-2000:]
    assert "BROKEN" not in p.stdout


def test_every_package_is_under_contract():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    roots = set(cfg["tool"]["importlinter"]["root_packages"])
    packages = {p.split(".")[0] for p in cfg["tool"]["setuptools"]["packages"]}
    assert packages == roots, f"packages without import contracts: {packages - roots}"
    kinds = {c["type"] for c in cfg["tool"]["importlinter"]["contracts"]}
    assert {"layers", "private_modules", "acyclic_siblings", "forbidden"} <= kinds
