# SPDX-License-Identifier: Apache-2.0
"""benchmarks/gemm_sass.py without a GPU: what it keeps of nvdisasm's text, how it compares two
snapshots, its arguments, and a real kernel's sm_90 code compiled twice in one process (numba
numbers the second compilation differently) giving the same file."""

import json
import os

import pytest

from tests.benchmark_script import load


@pytest.fixture(scope="module")
def gs():
    return load("gemm_sass")


def test_normalize_keeps_instructions_without_addresses_or_counters(gs):
    text = """
        .text._ZN7kernels4gemmB2v8B6kernel:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0a30*/               @!P0 BRA `(.L_x_3) ;
        /*0f10*/                   RET.REL.NODEC R8 `(_ZN7kernels4gemm6kernelB2v12B104cw51cEddx) ;
        /*0f20*/ // a comment
    """
    assert gs.normalize(text) == ["LDC R1, c[0x0][0x28] ;", "@!P0 BRA `(.L_x_3) ;",
                                  "RET.REL.NODEC R8 `(_ZN7kernels4gemm6kernelB104cw51cEddx) ;"]


def test_compare_names_what_differs(gs, tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir(), new.mkdir()
    (old / "a.sass").write_text("X ;\nY ;\n")
    (new / "a.sass").write_text("X ;\nY ;\n")
    (old / "b.sass").write_text("X ;\nY ;\nZ ;\n")
    (new / "b.sass").write_text("X ;\nW ;\n")
    (old / "c.sass").write_text("X ;\n")
    assert gs.compare(str(old), str(new), ["a"]) == []
    assert gs.compare(str(old), str(new), ["a", "b", "c"]) == [
        "b: 3 -> 2 instructions, first difference at instruction 1", f"c: missing from {new}"]


def test_parse_args(gs, tmp_path):
    a = gs.parse_args(["--out", str(tmp_path), "--only", "vec_16_float32_c0", "slice_128_kc64x1_ring_c1"])
    assert a.only == ["vec_16_float32_c0", "slice_128_kc64x1_ring_c1"] and a.against is None
    assert len(gs.NAMES) == 16 and gs.parse_args([]).only is None
    for bad in (["--only", "vec_16_float32"], ["--against", str(tmp_path / "none")]):
        with pytest.raises(SystemExit):
            gs.parse_args(bad)


def test_the_same_kernel_twice_gives_the_same_code(gs, tmp_path, monkeypatch):
    """16^3 fp32, four GEMMs per block, no C: a snapshot, a second one compared with it (exit
    0), then with one instruction of the first changed (exit 1)."""
    monkeypatch.delenv("NVDISASM", raising=False)
    assert gs.sass_counts.find_nvdisasm(), "nvdisasm not found: the test extras install nvidia-cuda-nvdisasm"
    first, second = tmp_path / "first", tmp_path / "second"
    assert gs.main(["--out", str(first), "--only", "vec_16_float32_c0"]) == 0
    summary = json.loads((first / "gemm_sass.json").read_text())["vec_16_float32_c0"]
    lines = (first / "vec_16_float32_c0.sass").read_text().splitlines()
    assert summary["instructions"] == len(lines) > 100 and summary["local_bytes"] == 0
    assert 0 < summary["registers"] <= 255
    assert any(line.startswith("HMMA") or line.startswith("FFMA") for line in lines)
    assert gs.main(["--out", str(second), "--only", "vec_16_float32_c0", "--against", str(first)]) == 0
    lines[len(lines) // 2] = "NOP ;"
    (first / "vec_16_float32_c0.sass").write_text("\n".join(lines) + "\n")
    assert gs.main(["--out", str(second), "--only", "vec_16_float32_c0", "--against", str(first)]) == 1
    assert os.path.isfile(second / "gemm_sass.json")
