# SPDX-License-Identifier: Apache-2.0
"""The README's simulator example runs as written, in a fresh process, with no GPU."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _simulator_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Simulator"):]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block, "README: no python example under '## Simulator'"
    code = block.group(1)
    assert code.startswith("# NUMBA_ENABLE_CUDASIM=1"), code[:80]
    return code


def test_readme_simulator_example(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(_simulator_example())
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout + p.stderr


def _block(heading: str, after: str = "") -> str:
    """The first python block under ``heading`` (and after the text ``after``, if given)."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index(heading):]
    if after:
        section = section[section.index(after):]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block, f"README: no python example under {heading!r}"
    return block.group(1)


def _run(tmp_path, code: str, **env_extra) -> subprocess.CompletedProcess:
    script = tmp_path / "example.py"
    script.write_text(code)
    env = dict(os.environ, **env_extra,
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)


def test_readme_gemm_example(tmp_path):
    """The GEMM example, whole, under the simulator. It asks the current GPU for its architecture;
    the simulator has none to ask, so this run names sm=90 (the one change made to the text)."""
    code = _block("## A GEMM inside your kernel")
    marker = 'block_dim="suggested")'
    assert code.count(marker) == 1, "README GEMM example: descriptor line changed; update this test"
    code = code.replace(marker, 'block_dim="suggested", sm=90)')
    p = _run(tmp_path, code + '\nprint("ok")\n', NUMBA_ENABLE_CUDASIM="1")
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout + p.stderr


def test_readme_host_numpy_example(tmp_path):
    """The host matmul's NumPy example runs as written (on a CPU: the CPU path, one warning)."""
    code = _block("## Host matmul with a fused epilog", after="The same call on NumPy arrays")
    p = _run(tmp_path, code + '\nprint("ok")\n')
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout + p.stderr


def test_readme_random_example(tmp_path):
    """The random example, whole, under the simulator: the noise it adds has the asked spread."""
    code = _block("## Random numbers inside your kernel")
    p = _run(tmp_path, code, NUMBA_ENABLE_CUDASIM="1")
    assert p.returncode == 0, p.stdout + p.stderr
    std = float(p.stdout.strip().splitlines()[-1])
    assert abs(std - 0.5) < 0.02, std


def test_readme_tensor_api_example(tmp_path):
    """The README's tensor-API program (a GEMM through make_tensor / copy / an accumulator) runs as
    written under the simulator, in a fresh process."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### The tensor API"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert "make_tensor" in code and "assert_allclose" in code
    script = tmp_path / "tensor_example.py"
    script.write_text(code)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]


def test_readme_pipeline_example(tmp_path):
    """The README's device-pipeline program (a whole GEMM + ReLU through DevicePipeline) runs as
    written under the simulator, in a fresh process, and checks its own result."""
    code = _block("### Device and tile pipelines")
    assert "suggest_device_pipeline" in code and "assert_allclose" in code
    p = _run(tmp_path, code + '\nprint("ok")\n', NUMBA_ENABLE_CUDASIM="1")
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout[-2000:] + p.stderr[-4000:]
