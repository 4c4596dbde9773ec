# SPDX-License-Identifier: Apache-2.0
"""benchmarks/dask_scaling.py without a GPU: arguments, GPU counts, case shapes, the table it
writes from (fake) rows, and its exit status 2 with a message when no GPU is usable."""

import json
import os
import re
import subprocess
import sys

import pytest

from tests.benchmark_script import load

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "dask_scaling.py")


@pytest.fixture(scope="module")
def bd():
    return load("dask_scaling")


def test_arguments_and_counts(bd):
    a = bd.parse_args([])
    assert a.gpus is None and a.cases == ["conv", "fir", "fir_time"] and a.gib == 4.0 and a.passes == 20 and a.repeats == 3
    a = bd.parse_args(["--gpus", "1", "2", "4", "--cases", "fir", "--gib", "0.5", "--passes", "3"])
    assert (a.gpus, a.cases, a.gib, a.passes) == ([1, 2, 4], ["fir"], 0.5, 3)
    for bad in (["--gpus", "0"], ["--gib", "0"], ["--passes", "0"], ["--repeats", "0"], ["--cases", "nope"]):
        with pytest.raises(SystemExit):
            bd.parse_args(bad)
    assert bd.default_counts(1) == [1] and bd.default_counts(4) == [1, 2, 4] and bd.default_counts(6) == [1, 2, 4, 6]


def test_case_shapes_fill_the_gpu(bd):
    conv = bd.shapes("conv", 4)
    assert conv == dict(n=4096, rows=262144, taps=63, block=(65536, 4096))
    fir, fir_time = bd.shapes("fir", 4), bd.shapes("fir_time", 4)
    assert fir["rows"] * fir["n"] * 4 == 4 * 2**30 and fir["block"] == (64, 1 << 22)
    assert fir_time["block"] == (128, 1 << 21) and fir_time["taps"] == 127


def test_table(bd, tmp_path):
    rows = [dict(case="fir", gpus=1, mode="plain", rows=256, n=4096, taps=127, ms=2.0, gsamples_per_s=0.5),
            dict(case="fir", gpus=1, mode="dask", rows=256, n=4096, taps=127, block=[64, 4096],
                 blocks_per_worker=[4], passes=20, seconds=1.0, gsamples_per_s=0.45, rel_err=1e-7, ok=True,
                 vs_plain=0.9),
            dict(case="fir", gpus=2, mode="dask", rows=512, n=4096, taps=127, block=[64, 4096],
                 blocks_per_worker=[4, 4], passes=20, seconds=1.0, gsamples_per_s=0.9, rel_err=2e-3, ok=False,
                 vs_plain=0.9),
            dict(case="conv", gpus=4, mode="dask", error="RuntimeError: worker | died")]
    text = bd.write_results(str(tmp_path), rows, dict(device="D", visible=2, gib=4, passes=20))
    assert "| fir | 1 (plain) | 256 x 4096, 127 taps | one array | 0.0020 (one call) | 0.5 | 0.5 | | 1.00 | |" in text
    assert "| fir | 1 | 256 x 4096, 127 taps | 64 x 4096, per worker [4] | 1.000 | 0.5 | 0.5 | 1.00x | 0.90 | ok" in text
    assert "| fir | 2 | 256 x 4096, 127 taps | 64 x 4096, per worker [4, 4] | 1.000 | 0.9 | 0.5 | 2.00x | 0.90 | " \
           "MISMATCH (2.0e-03) |" in text
    assert "| conv | 4 | | failed: RuntimeError: worker / died |" in text
    assert json.loads((tmp_path / "dask_scaling.json").read_text())["rows"] == rows
    assert (tmp_path / "dask_scaling.md").read_text() == text


@pytest.mark.parametrize("env", [{"NUMBA_ENABLE_CUDASIM": "1"},
                                 {"NUMBA_ENABLE_CUDASIM": "0", "CUDA_VISIBLE_DEVICES": ""}])
def test_exits_2_without_a_gpu(env, tmp_path):
    out = tmp_path / "o"
    p = subprocess.run([sys.executable, SCRIPT, "--out", str(out)], capture_output=True, text=True,
                       env={**os.environ, **env}, timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "needs a CUDA GPU" in p.stderr and "Traceback" not in p.stderr
    assert not out.exists()


def test_task_summary_groups_by_kind(bd):
    recs = [dict(key=("rechunk-merge-0123456789abcdef0123456789abcdef", 0, 1),
                 startstops=[dict(action="transfer", start=0.0, stop=0.25), dict(action="compute", start=1.0, stop=1.5)]),
            dict(key=("rechunk-merge-0123456789abcdef0123456789abcdef", 0, 2),
                 startstops=[dict(action="compute", start=2.0, stop=2.25), dict(action="deserialize", start=0, stop=9)]),
            dict(key=("_fir_block-fedcba9876543210fedcba9876543210", 0, 0),
                 startstops=[dict(action="compute", start=0.0, stop=2.0)])]
    out = bd.task_summary(recs)
    assert out == [dict(kind="fir_block", tasks=1, compute_s=2.0, transfer_s=0.0),
                   dict(kind="rechunk-merge", tasks=2, compute_s=0.75, transfer_s=0.25)]
    rows = [dict(case="fir_time", gpus=1, mode="dask", passes=5, seconds=0.5, tasks=out), dict(case="conv", gpus=1)]
    text = bd.format_tasks(rows)
    assert "Task stream, fir_time on 1 GPU(s), 5 passes, 0.500 s timed" in text
    assert "- fir_block | 1 | 2.0000 | 0.0000" in text and "- rechunk-merge | 2 | 0.7500 | 0.2500" in text
    assert bd.format_tasks(rows[1:]) == ""


def test_task_summary_reads_a_real_task_stream(bd):
    """The records of distributed's own task stream (an in-process cluster, NumPy blocks)."""
    da = pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as client:
        x = da.ones((8, 8), chunks=(4, 8))
        with distributed.get_task_stream(client) as stream:
            (x + 1).sum().compute()
        out = bd.task_summary(stream.data)
    kinds = {t["kind"]: t for t in out}
    assert sum(t["tasks"] for t in out) == len(stream.data) > 0
    assert not any(re.search(r"[0-9a-f]{16}", k) for k in kinds), kinds  # kinds, not keys with tokens
    assert all(t["compute_s"] >= 0 and t["transfer_s"] >= 0 for t in out)
