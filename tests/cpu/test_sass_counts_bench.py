# SPDX-License-Identifier: Apache-2.0
"""benchmarks/sass_counts.py without a GPU: its arguments, the opcode count of nvdisasm's text,
the table, exit status 2 without nvdisasm, and real counts of the direct kernel's sm_90 code
(nvdisasm from the nvidia-cuda-nvdisasm wheel of the test extras): the multiply instructions
are the generated sums' own, and the fast FIR's nesting cuts them as counted."""

import os
import subprocess
import sys

import pytest

from tests.benchmark_script import load

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "sass_counts.py")


@pytest.fixture(scope="module")
def sc():
    return load("sass_counts")


def test_parse_args(sc):
    a = sc.parse_args([])
    assert a.cases == [(4096, 63, 0), (1024, 63, 0), (4096, 127, 256)] and a.levels is None
    a = sc.parse_args(["--cases", "64:7", "4096:127:256", "--levels", "1", "2"])
    assert (a.cases, a.levels, a.pipeline) == ([(64, 7, 0), (4096, 127, 256)], [1, 2], False)
    assert sc.parse_args(["--cases", "64:128:3"]).cases == [(64, 128, 3)]  # FIR segments: more taps than samples
    for bad in (["--cases", "64"], ["--cases", "64:x"], ["--cases", "100:7"], ["--cases", "64:129"],
                ["--cases", "64:65"], ["--cases", "16384:7:2"], ["--levels", "3"]):
        with pytest.raises(SystemExit):
            sc.parse_args(bad)


def test_parse_fft_cases(sc):
    a = sc.parse_args(["--cases", "--fft", "512:8", "4096:16"])
    assert a.cases == [] and a.fft == [(512, 8, False), (4096, 16, False)]
    assert sc.parse_args(["--fft", "4096:16:real"]).fft == [(4096, 16, True)]
    assert sc.parse_args([]).fft == []
    for bad in (["--fft", "512"], ["--fft", "500:8"], ["--fft", "512:64"], ["--fft", "64:8"], ["--fft", "512:8:x"],
                ["--fft", "64:4:real"]):
        with pytest.raises(SystemExit):
            sc.parse_args(bad)


def test_fft_table(sc):
    rows = [dict(n=512, real=False, engine="own", ept=8, threads_per_row=64, ffts_per_block=2, registers=43, local_bytes=0,
                 instructions=816, instructions_per_row=52224, shared_8_byte=64,
                 opcodes={"LDS": 32, "STS": 32, "FFMA": 192, "FMUL": 130, "FADD": 270})]
    t = sc.format_fft_table(rows).splitlines()
    assert t[4] == "| 512 | c2c | own | 8 | 64 | 2 | 43 | 0 | 816 | 52224 | 32 | 32 | 64 | 192 | 130 | 270 |"


def test_opcodes_of_nvdisasm_text(sc):
    text = """
        /*0160*/                   LDG.E.64 R6, desc[UR6][R40.64] ;
        /*0170*/                   STS.64 [R0], R6 ;
        /*04a0*/               @P1 IADD3 R9, P0, R9, 0x80, RZ ;
        /*04c0*/              @!PT FFMA R1, R2, UR4, R1 ;
        /*04d0*/                   FFMA R1, R2, c[0x0][0x210], R1 ;
        .text.kernel:
        /*0000*/ // comment
    """
    assert sc.opcodes(text) == {"LDG": 1, "STS": 1, "IADD3": 1, "FFMA": 2}


def test_table(sc):
    rows = [dict(n=4096, taps=63, levels=2, nseg=0, registers=127, local_bytes=0, instructions=1744,
                 opcodes={"FFMA": 1140, "FMUL": 76, "FADD": 237, "LDS": 64})]
    t = sc.format_table(rows).splitlines()
    assert t[4] == "| 4096 | 63 | - | 2 | no | 127 | 0 | 1744 | 1140 | 76 | 237 | 64 | 0 | 0 | 0 | 0 | 0 | 0 |"


def test_exits_2_without_nvdisasm(tmp_path):
    out = tmp_path / "o"
    p = subprocess.run([sys.executable, SCRIPT, "--out", str(out), "--cases", "64:7"], capture_output=True,
                       text=True, env={**os.environ, "NVDISASM": str(tmp_path / "none")}, timeout=300)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "needs nvdisasm" in p.stderr and "Traceback" not in p.stderr
    assert not out.exists()


def test_counts_of_the_direct_kernels_code(sc, monkeypatch):
    """4096 x 63 (one row per block) with the taps split once and twice, and a short-row kernel:
    ptxas keeps every generated multiply (products and multiply-adds: the counts of
    kernels._direct._sums), the nesting takes 1568 multiplies to 1216, and the shared-memory
    reads are 8-byte pairs (48 of the window + 16 of the store phase)."""
    from kernels import _direct

    monkeypatch.delenv("NVDISASM", raising=False)
    nvdisasm = sc.find_nvdisasm()
    assert nvdisasm, "nvdisasm not found: the test extras install nvidia-cuda-nvdisasm"
    total = {}
    for n, m, lev in [(4096, 63, 1), (4096, 63, 2), (64, 7, 0)]:
        r = sc.count(n, m, lev, 0, nvdisasm)
        total[n, lev] = r["instructions"]
        c = _direct._sums(_direct.padded_taps(m, lev), lev)[2]
        ops = r["opcodes"]
        assert ops["FFMA"] + ops["FMUL"] == c["fma"] + c["mul"], (n, m, lev, ops)
        assert ops.get("FADD", 0) == c["add"], (n, m, lev, ops)
        assert r["local_bytes"] == 0 and r["registers"] <= 128
        if n == 4096:
            assert ops["LDS"] == 64, ops
    assert total[4096, 2] < total[4096, 1]
