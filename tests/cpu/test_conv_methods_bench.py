# SPDX-License-Identifier: Apache-2.0
"""benchmarks/conv_methods.py without a GPU: its arguments, the table from (fake) rows, and exit
status 2 with a message when no GPU is usable."""

import os
import subprocess
import sys

import pytest

from tests.benchmark_script import load

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "conv_methods.py")


@pytest.fixture(scope="module")
def cm():
    return load("conv_methods")


def test_parse_args(cm):
    a = cm.parse_args([])
    assert (a.out, a.mbytes, a.sizes, a.taps) == ("bench_out", 1024, [512, 1024, 2048, 4096], [7, 15, 31, 63, 64])
    a = cm.parse_args(["--sizes", "64", "4096", "--taps", "1", "64", "--mbytes", "8"])
    assert (a.sizes, a.taps, a.mbytes, a.levels) == ([64, 4096], [1, 64], 8, [])
    a = cm.parse_args(["--taps", "128", "--levels", "1", "2", "--pipeline"])
    assert (a.levels, a.pipeline, a.min_blocks) == ([1, 2], True, [])
    assert cm.parse_args(["--min-blocks", "4", "8"]).min_blocks == [4, 8]
    for bad in (["--sizes", "100"], ["--sizes", "8192"], ["--taps", "129"], ["--taps", "0"], ["--mbytes", "0"],
                ["--levels", "3"], ["--min-blocks", "0"], ["--min-blocks", "17"]):
        with pytest.raises(SystemExit):
            cm.parse_args(bad)


def test_table_has_one_row_per_case_with_its_numbers(cm):
    rows = [dict(n=4096, taps=63, rows=65536, direct_ms=0.714, fft_ms=0.948, cupy_ms=3.595, faster="direct",
                 floor_ms=0.499, direct_arith_ms=0.443, direct_pct_bound=69.9, direct_rel_err=1.5e-7,
                 fft_rel_err=2.8e-7, ok=True, levels={"1": dict(ms=0.6, rel_err=1e-7), "2": dict(ms=0.55, rel_err=1e-7)}),
            dict(n=512, taps=63, rows=524288, direct_ms=0.797, fft_ms=0.766, cupy_ms=3.942, faster="fft",
                 floor_ms=0.499, direct_arith_ms=0.449, direct_pct_bound=62.6, direct_rel_err=1.5e-7,
                 fft_rel_err=2.0e-7, ok=False)]
    t = cm.format_table(rows, dict(device="GPU", fp32_flops=60.3e12, mbytes=1024)).splitlines()
    assert "60.3 TFLOP/s" in t[0] and len(t) == 6
    assert t[4].startswith("| 4096 | 63 | 65536 | 0.714 | 0.948 | 3.595 | direct | 0.75 | 0.499 | 0.443 | 70% |")
    assert t[4].endswith("| 1: 0.600, 2: 0.550 | ok |")
    assert t[5].endswith("| MISMATCH |") and "| fft | 1.04 |" in t[5]


@pytest.mark.parametrize("env", [{"NUMBA_ENABLE_CUDASIM": "1"},
                                 {"NUMBA_ENABLE_CUDASIM": "0", "CUDA_VISIBLE_DEVICES": ""}])
def test_exits_2_without_a_gpu(env, tmp_path):
    out = tmp_path / "o"
    p = subprocess.run([sys.executable, SCRIPT, "--out", str(out)], capture_output=True, text=True,
                       env={**os.environ, **env}, timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "needs a CUDA GPU" in p.stderr and "Traceback" not in p.stderr
    assert not out.exists()
