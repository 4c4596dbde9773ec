# SPDX-License-Identifier: Apache-2.0
"""Every notebook's code on the GPU: the code cells, in order, as one script in a fresh process.

tests/cpu/test_notebooks.py executes the notebooks through Jupyter without a GPU (simulator,
linked cubins, CPU matmul); this runs the same cells where a GPU is present, so the GPU
branches (timing against CuPy, kernel launches, cuBLASLt) run too. No Jupyter is needed: the
cells hold no magics (checked below), and plots go to matplotlib's Agg backend.

    python -m pytest -m gpu tests/gpu/test_notebooks_gpu.py -v
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))


def _script(path: Path) -> str:
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    parts = []
    for i, cell in enumerate(cells):
        src = "".join(cell["source"])
        assert not any(ln.lstrip().startswith(("%", "!")) for ln in src.splitlines()), (
            f"{path.name} code cell {i} uses IPython syntax; this runner executes plain Python"
        )
        parts.append(f"# --- cell {i} ---\n{src}\n")
    return "\n".join(parts)


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_notebook_runs_on_the_gpu(path, tmp_path):
    script = tmp_path / f"{path.stem}.py"
    script.write_text(_script(path))
    env = dict(os.environ, MPLBACKEND="Agg")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=900)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-6000:]
    assert "no GPU" not in out, out[-3000:]  # the notebooks print this when they fall back
    print(out[-3000:])
