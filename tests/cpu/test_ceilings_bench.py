# SPDX-License-Identifier: Apache-2.0
"""benchmarks/ceilings.py and device_gemm.py's table without a GPU: the mma.sync ceiling kernel is
the instruction cuBLASDx uses (it compiles and links for sm_90), bad kinds are named, and each
result is reported as a fraction of its case's measured ceiling."""

from __future__ import annotations

import re

import numpy as np
import pytest

from nvmath_device._build import toolchain
from tests.benchmark_script import load as _load


@pytest.mark.parametrize("kind, chains", [("f16", 4), ("bf16", 4), ("bf16", 8)])
def test_mma_kernel_links_for_sm90_with_one_mma_per_chain_and_step(kind, chains):
    src = _load("ceilings").mma_source(kind, chains)
    ptx = toolchain.compile_source(src, 90, "ptx", name=f"mma_{kind}.cu").decode()
    mmas = re.findall(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.(\w+)\.(\w+)\.f32", ptx)
    # the independent chains of each step (NVRTC may unroll the step loop a few times as well)
    assert mmas and len(mmas) % chains == 0 and set(mmas) == {(kind, kind)}, mmas
    ltoir = toolchain.compile_source(src, 90, "ltoir", name=f"mma_{kind}.cu")
    cubin = toolchain.link_cubin([("ltoir", ltoir, f"mma_{kind}.ltoir")], 90)
    assert cubin[:4] == b"\x7fELF"


def test_fma_kernel_is_fmas_with_no_loop_work_between_them():
    """The fp32 FMA ceiling's loop body is 8 chains x FMA_UNROLL steps of fma.rn.f32 and nothing
    else but the loop's own counter (the Numba version it replaces spent 5 integer instructions
    per 8 FMAs and measured half the H200's FMA rate)."""
    c = _load("ceilings")
    ptx = toolchain.compile_source(c.fma_source(), 90, "ptx", name="fma.cu").decode()
    body = ptx[ptx.index("$L__BB0_"):]
    fmas = re.findall(r"fma\.rn\.f32", body)
    assert len(fmas) >= 8 * c.FMA_UNROLL, len(fmas)
    loop = re.search(r"(\$L__BB0_\d+):\n(.*?)@%p\d+ bra\s+\1;", ptx, re.S)
    assert loop is not None, ptx
    ops = [ln.split()[0] for ln in loop.group(2).splitlines() if ln.strip() and not ln.strip().startswith("//")]
    others = [op for op in ops if op not in ("fma.rn.f32", "mov.f32")]  # (the constants: ptxas hoists them)
    assert ops.count("fma.rn.f32") == 8 * c.FMA_UNROLL and len(others) <= 3, others
    cubin = toolchain.link_cubin([("ltoir", toolchain.compile_source(c.fma_source(), 90, "ltoir", name="fma.cu"),
                                   "fma.ltoir")], 90)
    assert cubin[:4] == b"\x7fELF"


def test_copy_kernel_moves_16_bytes_per_thread():
    """The copy ceiling's kernel is one 16-byte load and one 16-byte store per thread (the widest
    access there is: the copy rate it measures is the card's, not the kernel's), and links for sm_90."""
    c = _load("ceilings")
    ptx = toolchain.compile_source(c.copy_source(), 90, "ptx", name="copy.cu").decode()
    loads = re.findall(r"ld\.global(?:\.nc)?\.v4\.(?:f32|u32|b32)", ptx)
    stores = re.findall(r"st\.global\.v4\.(?:f32|u32|b32)", ptx)
    assert len(loads) == 1 and len(stores) == 1, ptx
    assert not re.findall(r"(?:ld|st)\.global(?:\.nc)?\.(?:f32|u32|b32|u8|u16)\b", ptx), ptx
    cubin = toolchain.link_cubin([("ltoir", toolchain.compile_source(c.copy_source(), 90, "ltoir", name="copy.cu"),
                                   "copy.ltoir")], 90)
    assert cubin[:4] == b"\x7fELF"
    for bad in (0, -16, 24, 16.0, True):
        with pytest.raises(ValueError, match="nbytes must be a positive multiple of 16"):
            c.measure_copy_rate(bad)


def test_mma_source_names_a_bad_kind_or_chain_count():
    c = _load("ceilings")
    with pytest.raises(ValueError, match="kind must be one of \\['bf16', 'f16'\\], got 'tf32'"):
        c.mma_source("tf32")
    for bad in (0, 17, 2.0, True):
        with pytest.raises(ValueError, match="chains must be an int from 1 to 16"):
            c.mma_source("f16", bad)


def test_device_gemm_table_gives_each_case_its_ceiling():
    dg = _load("device_gemm")
    res = [dict(case="bf16", ours_ms=0.5, ours_config="cfg", ours_tflops=275.0, ours_rel_err=1e-3,
                peers=[dict(name="torch.matmul (cuBLAS)", ms=0.2, tflops=687.0, rel_err=1e-3)],
                pct_of_best_cublas_peer=40.0),
           dict(case="fp32", ours_ms=None, ours_tried=[dict(error="CompileError: x")], peers=[])]
    md = dg.render(res, 4096, "GPU", {"fp32_fma": 50e12, "mma_sync_f16": 500e12, "mma_sync_bf16": 550e12})
    assert "| bf16 | ours (DevicePipeline) | cfg | 0.500 | 275 | 50 % of mma_sync_bf16 | 1.0e-03 |" in md
    assert "| bf16 | torch.matmul (cuBLAS) |  | 0.200 | 687 | 125 % of mma_sync_bf16 | 1.0e-03 |" in md
    assert "**40 %**" in md and "| fp32 | ours | - | - | - | - | CompileError: x |" in md
    assert "mma_sync_bf16 550 TFLOP/s" in md
    md = dg.render(res[:1], 4096, "GPU", {"mma_sync_bf16": "ImportError: no cupy"})
    assert "| 275 | - |" in md and "mma_sync_bf16: ImportError: no cupy" in md


@pytest.mark.parametrize("n, real, pair", [(4096, True, True), (512, False, True), (512, True, False)])
def test_fft_chain_kernels_link_for_sm90(n, real, pair):
    """The FFT-throughput kernels of the fused kernels' own descriptor pairs link for sm_90 with no
    local-memory frame (a spill would make the ceiling the spills')."""
    from numba import types

    from kernels._fused import _pair_descriptors, can_fold
    from nvmath_device import aot

    fwd, inv = _pair_descriptors(n, np.float32, real, "suggested", "suggested", sm=90, folded=real and can_fold(n))
    kern = _load("ceilings").fft_chain_kernel(fwd, inv if pair else None)
    out = aot.compile_kernel(kern.py_func, (types.float32[::1], types.int64), sm=90)
    assert out.frame_bytes == 0, out.frame_bytes


def test_the_fft_chain_fills_the_gpu_at_the_kernels_own_occupancy():
    """One full wave of the blocks that fit at once (a 64-thread block: 32 per SM on the H200's
    132 SMs), not a fixed 8 per SM; 8 per SM only where the occupancy is unknown."""
    c = _load("ceilings")
    assert c.chain_blocks(32 * 132, 132) == 4224
    assert c.chain_blocks(2 * 132, 132) == 264  # 1024-thread blocks: 2 fit per SM
    assert c.chain_blocks(None, 132) == 8 * 132
