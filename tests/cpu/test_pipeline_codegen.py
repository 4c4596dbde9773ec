# SPDX-License-Identifier: Apache-2.0
"""The pipelined K loop of one GEMM tile (nvmath_device._build.pipeline_codegen): the C++ unit that
the device/tile pipeline API will call, compiled by NVRTC for sm_90 without a GPU."""

from __future__ import annotations

import re

import numpy as np
import pytest

from nvmath_device import Matmul
from nvmath_device._build import pipeline_codegen as pc
from nvmath_device._build.gemm_codegen import _compile
from nvmath_device._errors import CompileError


def _round(n):
    return -(-n // pc.STAGE_ALIGNMENT) * pc.STAGE_ALIGNMENT


def _setup(precision, arrangement, tile=(64, 64, 32), depth=2, k_tiles=8, ld=None, shrink_a=0):
    mm = Matmul(size=tile, precision=precision, data_type="real", arrangement=arrangement + ("row_major",),
                alignment=16, block_size=128, sm=90)
    names = [np.dtype(p).name for p in mm.precision]
    a_sz, b_sz = (np.dtype(p).itemsize for p in mm.precision[:2])
    k = tile[2] * k_tiles
    lda = ld or (k if arrangement[0] == "row_major" else 1024)
    ldb = ld or (k if arrangement[1] == "col_major" else 1024)
    spec = pc.PipelineSpec(depth=depth, k_tiles=k_tiles, lda=lda, ldb=ldb, a_dtype=names[0], b_dtype=names[1],
                           c_dtype=names[2], suggested=True,
                           a_bytes=_round(mm.suggest_layout_smem_a().cosize * a_sz) - shrink_a,
                           b_bytes=_round(mm.suggest_layout_smem_b().cosize * b_sz))
    return mm, spec


def test_k_steps_follow_the_arrangements():
    """A K slice further is k elements along a row-major A's row (k * lda for column-major), and
    k * ldb rows down a row-major B (k elements for column-major)."""
    mm, _ = _setup((np.float16, np.float16, np.float32), ("row_major", "col_major"))
    assert pc.k_steps(mm, 256, 512) == (32, 32)
    mm, _ = _setup((np.float16, np.float16, np.float32), ("col_major", "row_major"))
    assert pc.k_steps(mm, 256, 512) == (32 * 256, 32 * 512)


def test_the_loop_keeps_depth_minus_one_slices_in_flight():
    """depth >= 2: a prologue of depth - 1 commit groups and a wait for <= depth - 2 pending groups
    per step; depth 1: load, wait for all, compute, barrier - no wait<-1>."""
    mm, spec = _setup((np.float16, np.float16, np.float32), ("row_major", "col_major"), depth=3)
    src = pc.render_pipeline_source(mm, spec)
    assert "constexpr int D = 3;" in src and "cp_async_wait<D - 2>()" in src and "kt < D - 1" in src
    one = pc.render_pipeline_source(mm, spec._replace(depth=1))
    assert "cp_async_wait<D - 2>" not in one and one.count("__syncthreads()") == 2
    assert pc.pipeline_symbol(mm, spec) != pc.pipeline_symbol(mm, spec._replace(depth=1))
    assert spec.buffer_bytes == 3 * (spec.a_bytes + spec.b_bytes)
    with pytest.raises(ValueError, match="depth and k_tiles must be >= 1"):
        pc.render_pipeline_source(mm, spec._replace(depth=0))


def test_pipeline_unit_compiles_for_sm90_with_async_copies_and_tensor_cores():
    """float16 inputs, float32 accumulator (the 4096^3 benchmark's types), row/col-major, depth 2:
    NVRTC compiles it; the PTX streams 16-byte cp.async copies in commit groups and multiplies
    with mma.sync (cuBLASDx 0.4 on sm_90) from ldmatrix loads."""
    mm, spec = _setup((np.float16, np.float16, np.float32), ("row_major", "col_major"))
    ptx = _compile(pc.render_pipeline_source(mm, spec), 90, "ptx", "pipeline_test.cu")
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    ops = set(re.findall(r"\b(cp\.async\.[\w.]+|mma\.sync\.[\w.]+|ldmatrix\.[\w.]+)", ptx))
    assert "cp.async.cg.shared.global.L2" in " ".join(ops) or any(o.startswith("cp.async.cg") for o in ops), ops
    assert "cp.async.commit_group" in ops and any(o.startswith("mma.sync") for o in ops), ops


def test_pipeline_ltoir_builds_and_caches(tmp_path, monkeypatch):
    """float64 column/row-major, depth 3: LTO-IR for sm_90, the second call a cache hit."""
    monkeypatch.setenv("NUMBA_MATHDX_CACHE_DIR", str(tmp_path))
    mm, spec = _setup((np.float64, np.float64, np.float64), ("col_major", "row_major"), tile=(32, 32, 16), depth=3,
                      k_tiles=4)
    calls = []
    real = pc._compile
    monkeypatch.setattr(pc, "_compile", lambda *a, **k: calls.append(1) or real(*a, **k))
    first = pc.pipeline_ltoir(mm, spec)
    assert first and pc.pipeline_ltoir(mm, spec) == first and len(calls) == 1


def test_too_small_stages_fail_to_compile_naming_the_operand():
    """The stage sizes come from Python (the ring's buffer_size); the C++ checks them against
    cuBLASDx's own suggested layouts."""
    mm, spec = _setup((np.float16, np.float16, np.float32), ("row_major", "col_major"), shrink_a=pc.STAGE_ALIGNMENT)
    with pytest.raises(CompileError, match="stage A bytes too small"):
        _compile(pc.render_pipeline_source(mm, spec), 90, "ptx", "pipeline_small.cu")
