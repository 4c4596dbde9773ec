# SPDX-License-Identifier: Apache-2.0
"""cuBLASDx codegen without a GPU: traits read from NVRTC output, LTO-IR for sm_80 and sm_90, cache."""

from __future__ import annotations

import numpy as np
import pytest

from nvmath_device import Matmul
from nvmath_device._build import cache, gemm_codegen, toolchain

# One traits translation unit for all of these (one NVRTC run, then cached).
DESCS = [
    Matmul(size=(32, 32, 32), precision=np.float32, arrangement=("row_major", "col_major", "col_major"), sm=90),
    Matmul(size=(24, 40, 16), precision=np.float32, arrangement=("row_major", "col_major", "row_major"), sm=90),
    Matmul(size=(64, 64, 64), precision=np.float64, leading_dimension="suggested", sm=90),
    Matmul(size=(32, 16, 64), precision=(np.float16, np.float16, np.float32), arrangement=("col_major", "row_major", "col_major"), sm=90),
    Matmul(size=(32, 32, 32), precision=np.float32, data_type="complex", leading_dimension="suggested", sm=90),
    Matmul(size=(20, 12, 28), precision=np.float64, leading_dimension=(31, 29, 23), arrangement=("row_major", "col_major", "col_major"), sm=90),
    Matmul(size=(33, 17, 9), precision=np.float32, block_dim=(32, 2), alignment=(16, 16, 16), sm=90),
    Matmul(size=(32, 32, 32), precision="bfloat16", arrangement=("row_major", "col_major", "col_major"), sm=90),
    Matmul(size=(32, 16, 64), precision=("bfloat16", "bfloat16", np.float32), arrangement=("col_major", "row_major", "col_major"), sm=90),
]


@pytest.fixture(scope="module", autouse=True)
def _traits():
    gemm_codegen.prefetch_traits(DESCS)


@pytest.mark.parametrize("mm", DESCS, ids=lambda mm: gemm_codegen.gemm_symbol(mm))
def test_python_layout_matches_cublasdx(mm):
    t = mm._traits
    assert (t["lda"], t["ldb"], t["ldc"]) == mm.leading_dimension
    assert (t["a_size"], t["b_size"], t["c_size"]) == (mm.a_size, mm.b_size, mm.c_size)
    assert t["shared_memory_size"] == mm.shared_memory_size
    assert (t["a_alignment"], t["b_alignment"], t["c_alignment"]) == mm.alignment
    assert (t["a_itemsize"], t["b_itemsize"], t["c_itemsize"]) == (
        mm.a_value_type.itemsize, mm.b_value_type.itemsize, mm.c_value_type.itemsize)
    if mm._key[4] == "suggested":
        assert mm.suggested_leading_dimension == mm.leading_dimension


@pytest.mark.parametrize("mm", DESCS, ids=lambda mm: gemm_codegen.gemm_symbol(mm))
def test_block_dim_and_accumulator(mm):
    x, y, z = mm.block_dim
    assert 32 <= x * y * z <= 1024 and mm.max_threads_per_block == x * y * z
    if mm._key[5] != "suggested":
        assert mm.block_dim == mm._key[5]
    else:
        assert mm.block_dim == mm.suggested_block_dim
    # The accumulators of all threads cover C at least once (exactly once when the tiling divides C).
    assert mm.accumulator_size * mm.max_threads_per_block >= mm.m * mm.n


def test_known_values_32_cubed():
    mm = DESCS[0]
    assert mm.block_dim == (64, 1, 1)
    assert mm.accumulator_size == 16  # 64 threads x 16 = 32 x 32
    assert mm.suggested_leading_dimension == (36, 36, 36)


def test_traits_are_cached_no_second_compile():
    before = toolchain.stats["nvrtc_compiles"]
    gemm_codegen.prefetch_traits(DESCS)
    for mm in DESCS:
        assert mm.block_dim and mm.accumulator_size > 0
    assert toolchain.stats["nvrtc_compiles"] == before


@pytest.mark.parametrize("sm", [80, 90])
def test_ltoir_for_sm(sm):
    # explicit block_dim: the shim needs no traits run
    mm = Matmul(size=(32, 32, 32), precision=np.float32, arrangement=("row_major", "col_major", "col_major"),
                block_dim=64, sm=sm)
    src = gemm_codegen.render_shim_source(mm)
    assert f"cublasdx::SM<{sm * 10}>()" in src and "cublasdx::BlockDim<64, 1, 1>()" in src
    blob = mm.ltoir()
    assert len(blob) > 10000 and blob[:4] == b"\xedCN\x7f"  # NVVM LTO-IR (the kernel-link test resolves its symbols)
    before = toolchain.stats["nvrtc_compiles"]
    cache._memory.clear()  # the disk copy must be found and verified
    assert mm.ltoir() == blob
    assert toolchain.stats["nvrtc_compiles"] == before


BF16_LTOIR = [
    Matmul(size=(32, 32, 32), precision="bfloat16", arrangement=("row_major", "col_major", "col_major"),
           block_dim=64, sm=80),
    DESCS[-1],  # bfloat16 x bfloat16 -> float32, sm_90
]


@pytest.mark.parametrize("mm", BF16_LTOIR, ids=lambda mm: f"sm{mm.sm}-" + "-".join(np.dtype(p).name for p in mm.precision))
def test_bfloat16_ltoir(mm):
    src = gemm_codegen.render_shim_source(mm)
    c_type = "__nv_bfloat16" if mm.c_value_type.itemsize == 2 else "float"
    assert f"cublasdx::Precision<__nv_bfloat16, __nv_bfloat16, {c_type}>()" in src
    assert f"cublasdx::SM<{mm.sm * 10}>()" in src
    blob = mm.ltoir()
    assert len(blob) > 10000 and blob[:4] == b"\xedCN\x7f"


def test_cccl_for_cutlass_is_compatible():
    dirs = gemm_codegen.cccl_include_dir()
    default = [d for d in toolchain.include_dirs() if d.rstrip("/").endswith("cccl")]
    if dirs:
        v = gemm_codegen._cccl_version(dirs[0])
        assert v is not None and v[:2] <= gemm_codegen._CCCL_MAX_OK
    else:
        assert gemm_codegen._cccl_version(default[0])[:2] <= gemm_codegen._CCCL_MAX_OK


def test_compile_error_carries_log():
    from nvmath_device import CompileError

    with pytest.raises(CompileError, match="(?s)cuBLASDx shim failed.*no_such_header"):
        gemm_codegen._compile('#include <no_such_header.hpp>\n', 90, "ptx", "bad.cu")
