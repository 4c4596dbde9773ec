# SPDX-License-Identifier: Apache-2.0
"""Every notebook in notebooks/ runs top to bottom, headless, each in a fresh kernel process.

Without a GPU the notebooks use the CUDA simulator (01, 02), link sm_90 cubins (03) or compute
on the CPU (04); they share the tests' disk cache (tests/conftest.py), so with a warm cache the
four take about a minute on a 2-core machine.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))


def test_the_notebooks_are_there():
    names = [p.name for p in PATHS]
    assert names == [
        "01_first_device_fft.ipynb",
        "02_fused_pipeline.ipynb",
        "03_device_gemm.ipynb",
        "04_host_matmul_mlp.ipynb",
    ]


def _runner():
    spec = importlib.util.spec_from_file_location("notebooks_execute", NOTEBOOKS / "execute.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


RUNNER = _runner()


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_stored_executed(path):
    """Stored with outputs (readable where the repository is browsed), from the current code."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    stored = nb.metadata.get("numba_mathdx", {}).get("source_sha256")
    assert stored == RUNNER.source_hash(nb), (
        f"{path.name}: its code changed after it was executed; run python notebooks/execute.py"
    )
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), (
        f"{path.name}: cells not executed once, in order; run python notebooks/execute.py"
    )
    outputs = [o for c in code for o in c.outputs]
    assert outputs, f"{path.name} holds no outputs"
    assert not [o for o in outputs if o.output_type == "error"], f"{path.name} stores an error"
    if any("plt." in c.source for c in code):
        assert any("image/png" in o.get("data", {}) for o in outputs), f"{path.name}: no plot stored"


@pytest.fixture
def kernel_env(tmp_path, monkeypatch):
    """A kernel spec running this interpreter, and the environment the kernel inherits."""
    RUNNER.kernel_spec(tmp_path)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    # the tests' disk cache (set by tests/conftest.py), so descriptors compile once per test run
    monkeypatch.setenv("NUMBA_MATHDX_CACHE_DIR", os.environ["NUMBA_MATHDX_CACHE_DIR"])
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)  # each notebook decides
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_notebook_runs(path, kernel_env):
    nb = RUNNER.execute(path)  # raises CellExecutionError (with the cell and traceback) on any error
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors
