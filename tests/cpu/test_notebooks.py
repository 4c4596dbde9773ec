# SPDX-License-Identifier: Apache-2.0
"""Every notebook in notebooks/ runs top to bottom, headless, each in a fresh kernel process.

Without a GPU the notebooks use the CUDA simulator (01, 02), link sm_90 cubins (03) or compute
on the CPU (04); they share the tests' disk cache (tests/conftest.py), so with a warm cache the
four take about a minute on a 2-core machine.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))
KERNEL = "numba-mathdx-tests"


def test_the_notebooks_are_there():
    names = [p.name for p in PATHS]
    assert names == [
        "01_first_device_fft.ipynb",
        "02_fused_pipeline.ipynb",
        "03_device_gemm.ipynb",
        "04_host_matmul_mlp.ipynb",
    ]


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, (
                f"{path.name} cell {i} holds outputs; clear them before committing"
            )


@pytest.fixture
def kernel_env(tmp_path, monkeypatch):
    """A kernel spec running this interpreter, and the environment the kernel inherits."""
    spec = tmp_path / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": KERNEL, "language": "python"})
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    # the tests' disk cache (set by tests/conftest.py), so descriptors compile once per test run
    monkeypatch.setenv("NUMBA_MATHDX_CACHE_DIR", os.environ["NUMBA_MATHDX_CACHE_DIR"])
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)  # each notebook decides
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_notebook_runs(path, kernel_env):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name=KERNEL,
        timeout=600,  # per cell: a cold cache compiles a descriptor in ~10 s, a GEMM link in ~30 s
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    client.execute()  # raises CellExecutionError (with the cell and traceback) on any error
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors
