# SPDX-License-Identifier: Apache-2.0
"""A tile's pipelined K loop (cuBLASDx's device/tile pipeline, built from cuBLASDx 0.4's parts) ->
C++ shim text -> NVRTC -> LTO-IR, one unit per descriptor and :class:`PipelineSpec`.

mathdx 25.6's cuBLASDx has no pipeline API (nvmath-python 1.0 gets one from libmathdx's newer
cuBLASDx, with TMA on sm_90). This unit is the same computation written with what 0.4 has: the
tile's A and B K-slices stream from global memory into a ring of ``depth`` shared-memory stages
with ``cublasdx::copy`` (``cp.async`` where the alignment allows), ``cp.async`` commit groups
keep ``depth - 1`` slices in flight, and ``MM().execute(smem_a, smem_b, accumulator)`` consumes
one stage per step into the register fragment:

    prologue: slices 0 .. depth-2 -> stages, one commit group each
    step kt:  wait until slice kt landed (<= depth-2 groups pending), __syncthreads,
              slice kt+depth-1 -> stage (kt-1) % depth (consumed at step kt-1), commit,
              accumulator += A(stage kt % depth) * B(stage kt % depth)
    end:      wait for all groups, __syncthreads (the ring is free again)

The unit's ``extern "C"`` function takes ``void*`` pointers: A's and B's tile origins in global
memory (element (0, 0) of the tile, K slice 0), the ring (shared memory, ``buffer_size`` bytes)
and the accumulator fragment. Everything else is compile-time: leading dimensions, the K step of
each operand, the number of K slices, the stages' shared layouts (cuBLASDx's suggested ones) and
byte offsets.
"""

from __future__ import annotations

import hashlib
import logging
from typing import NamedTuple

from . import cache
from .gemm_codegen import _compile, _include_id
from .tensor_codegen import cpp_type, preamble
from .toolchain import toolchain_id

log = logging.getLogger("nvmath_device")

__all__ = ["PipelineSpec", "pipeline_symbol", "render_pipeline_source", "pipeline_ltoir", "pipeline_key",
           "STAGE_ALIGNMENT"]

STAGE_ALIGNMENT = 128  # bytes: each stage's A and B start on a 128-byte boundary (swizzle atoms)


class PipelineSpec(NamedTuple):
    """What one pipeline unit is compiled for (besides its Matmul).

    Attributes
    ----------
    depth : int
        Shared-memory stages (1: no overlap; 2: double buffering; ...).
    k_tiles : int
        K slices of ``mm.k`` each tile loops over (the problem's k / mm.k).
    lda, ldb : int
        Leading dimensions (elements) of A and B in global memory.
    a_dtype, b_dtype, c_dtype : str
        Element dtype names of the global A and B and of the accumulator fragment.
    suggested : bool
        The accumulator's fragment layout: the suggested partitioner's (True) or the default one.
    a_bytes, b_bytes : int
        Bytes of one stage's A and B tiles (multiples of :data:`STAGE_ALIGNMENT`).
    """

    depth: int
    k_tiles: int
    lda: int
    ldb: int
    a_dtype: str
    b_dtype: str
    c_dtype: str
    suggested: bool
    a_bytes: int
    b_bytes: int

    @property
    def stage_bytes(self) -> int:
        """Bytes of one stage (its A then its B)."""
        return self.a_bytes + self.b_bytes

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the whole ring."""
        return self.depth * self.stage_bytes


def k_steps(mm, lda: int, ldb: int) -> tuple[int, int]:
    """Elements between consecutive K slices of A and of B in global memory."""
    k = mm.size[2]
    a_step = k if mm.arrangement[0] == "row_major" else k * lda  # A is m x k
    b_step = k * ldb if mm.arrangement[1] == "row_major" else k  # B is k x n
    return a_step, b_step


def pipeline_symbol(mm, spec: PipelineSpec) -> str:
    """Name of the unit's ``extern "C"`` function (a hash of everything it depends on)."""
    text = repr((mm._key, "pipeline", tuple(spec)))
    return f"nvmathdx_pipeline_{hashlib.sha256(text.encode()).hexdigest()[:20]}"


def render_pipeline_source(mm, spec: PipelineSpec) -> str:
    """C++ source of the pipelined K loop of one tile (see the module's docstring)."""
    if spec.depth < 1 or spec.k_tiles < 1:
        raise ValueError(f"depth and k_tiles must be >= 1, got {spec.depth}, {spec.k_tiles}")
    sym = pipeline_symbol(mm, spec)
    a_step, b_step = k_steps(mm, spec.lda, spec.ldb)
    at, bt, ct = cpp_type(spec.a_dtype), cpp_type(spec.b_dtype), cpp_type(spec.c_dtype)
    frag = "LS" if spec.suggested else "LG"
    d = spec.depth
    if d == 1:  # one stage: load, wait, compute, and wait for every thread before the next load
        loop = ("  for (int kt = 0; kt < KT; ++kt) {\n"
                "    nmdx_load(kt);\n"
                "    cute::cp_async_fence();\n"
                "    cute::cp_async_wait<0>();\n"
                "    __syncthreads();\n"
                "    MM().execute(nmdx_stage_a(0), nmdx_stage_b(0), tc);\n"
                "    __syncthreads();\n"
                "  }\n")
    else:
        loop = ("  for (int kt = 0; kt < D - 1; ++kt) {\n"
                "    if (kt < KT) nmdx_load(kt);\n"
                "    cute::cp_async_fence();  // one group per slice, empty past KT: the count stays exact\n"
                "  }\n"
                "  for (int kt = 0; kt < KT; ++kt) {\n"
                "    cute::cp_async_wait<D - 2>();  // slice kt has landed\n"
                "    __syncthreads();               // ... for every thread; stage (kt-1)%D is consumed\n"
                "    if (kt + D - 1 < KT) nmdx_load(kt + D - 1);\n"
                "    cute::cp_async_fence();\n"
                "    MM().execute(nmdx_stage_a(kt % D), nmdx_stage_b(kt % D), tc);\n"
                "  }\n"
                "  cute::cp_async_wait<0>();\n"
                "  __syncthreads();\n")
    return (
        preamble(mm)
        + f"using AT = {at};\nusing BT = {bt};\n"
        f"constexpr int D = {d};\nconstexpr int KT = {spec.k_tiles};\n"
        f"constexpr long long A_STEP = {a_step};\nconstexpr long long B_STEP = {b_step};\n"
        f"constexpr int A_BYTES = {spec.a_bytes};\nconstexpr int STAGE = {spec.stage_bytes};\n"
        "static_assert(cute::cosize(MM::suggest_layout_smem_a().layout) * sizeof(AT) <= A_BYTES,\n"
        "              \"stage A bytes too small for cuBLASDx's suggested shared layout of A\");\n"
        "static_assert(cute::cosize(MM::suggest_layout_smem_b().layout) * sizeof(BT) <= STAGE - A_BYTES,\n"
        "              \"stage B bytes too small for cuBLASDx's suggested shared layout of B\");\n"
        f'extern "C" __device__ void {sym}(void* a, void* b, void* smem, void* c) {{\n'
        "  const AT* pa = reinterpret_cast<const AT*>(a);\n"
        "  const BT* pb = reinterpret_cast<const BT*>(b);\n"
        "  char* ring = reinterpret_cast<char*>(smem);\n"
        f"  auto tc = cute::make_tensor(cute::make_rmem_ptr(reinterpret_cast<{ct}*>(c)), {frag}{{}});\n"
        "  auto nmdx_stage_a = [&](int st) {\n"
        "    return cublasdx::make_tensor(reinterpret_cast<AT*>(ring + st * STAGE), MM::suggest_layout_smem_a());\n"
        "  };\n"
        "  auto nmdx_stage_b = [&](int st) {\n"
        "    return cublasdx::make_tensor(reinterpret_cast<BT*>(ring + st * STAGE + A_BYTES), MM::suggest_layout_smem_b());\n"
        "  };\n"
        "  auto nmdx_load = [&](int kt) {\n"
        f"    const auto ga = cublasdx::make_tensor(pa + kt * A_STEP, MM::get_layout_gmem_a(cute::Int<{spec.lda}>{{}}));\n"
        f"    const auto gb = cublasdx::make_tensor(pb + kt * B_STEP, MM::get_layout_gmem_b(cute::Int<{spec.ldb}>{{}}));\n"
        "    auto sa = nmdx_stage_a(kt % D);\n"
        "    auto sb = nmdx_stage_b(kt % D);\n"
        "    cublasdx::copy<MM, cublasdx::alignment_of<MM>::a>(ga, sa);\n"
        "    cublasdx::copy<MM, cublasdx::alignment_of<MM>::b>(gb, sb);\n"
        "  };\n"
        + loop
        + "}\n"
    )


def pipeline_key(mm, spec: PipelineSpec) -> str:
    """The disk-cache key of one pipeline unit's LTO-IR."""
    return cache.make_key("gemm-pipeline", render_pipeline_source(mm, spec), toolchain_id(), _include_id(), mm.sm)


def pipeline_ltoir(mm, spec: PipelineSpec) -> bytes:
    """LTO-IR of one pipeline unit for ``mm.sm`` (disk-cached; NVRTC on a miss)."""
    src = render_pipeline_source(mm, spec)

    def build():
        sym = pipeline_symbol(mm, spec)
        log.info("numba-mathdx: compiling %s (cuBLASDx pipeline, depth %d, of GEMM %s) with NVRTC (~15 s; "
                 "cached afterwards)", sym, spec.depth, mm.size)
        return _compile(src, mm.sm, "ltoir", f"{sym}.cu")

    return cache.get_or_build(pipeline_key(mm, spec), build)
