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
