# SPDX-License-Identifier: Apache-2.0
"""Device/tile pipelines in the simulator: the GPU unit's K loop, stage by stage, through the
simulated tensor API (each K slice copied into a stage of the kernel's shared buffer in
cuBLASDx's suggested shared layouts, then ``MM.execute(stage_a, stage_b, accumulator)``).

The ring is the kernel's own shared array (``buffer_size`` bytes), so a buffer that is too small
fails here as it would corrupt memory on the GPU. The asynchronous copies' overlap is a timing
matter: here every copy lands before the barrier that the GPU's wait also ends with.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .._pipeline import DevicePipeline, TilePipeline, tile_steps
from ._compat import unwrap
from .tensor import SimTensor, _extent, _sync, copy, sim_tensor_execute


class SimTilePipeline(TilePipeline):
    """A tile pipeline in a simulated kernel: its tile's origins in A and B and the shared ring."""

    __slots__ = ("_a0", "_b0", "_ring")

    def __init__(self, device_pipeline, ring):  # noqa: D107
        super().__init__(device_pipeline)
        self._ring = ring
        self._a0 = self._b0 = None


def _index(fn, what, v, ndim):
    if isinstance(v, tuple):
        if len(v) != 2 or ndim != 3:
            raise TypeError(f"{fn}: {what} is a (tile, batch) pair only with 3-D arrays, got {v!r}")
        return int(v[0]), int(v[1])
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{fn}: {what} must be an integer tile index (or a (tile, batch) pair), got {v!r}")
    return int(v), 0


def _origins(dp: DevicePipeline, fn, idx, idy):
    """(A's, B's) 1-D views from the tiles' first elements (the addresses the GPU unit gets)."""
    out = []
    for op, v, what, axis in ((dp._ops[0], idx, "blockIdx_x" if fn.endswith("get_tile") else "idx", 0),
                              (dp._ops[1], idy, "blockIdx_y" if fn.endswith("get_tile") else "idy", 1)):
        tile, batch = _index(fn, what, v, len(op.shape))
        ntiles = op.shape[axis] // dp.mm.size[axis]
        nbatch = op.shape[2] if len(op.shape) == 3 else 1
        if not (0 <= tile < ntiles and 0 <= batch < nbatch):
            raise IndexError(f"{fn}: {what} = {v!r} is outside the arrays' {ntiles} tiles"
                             + (f" x {nbatch} batches" if len(op.shape) == 3 else ""))
        tile_step, batch_step = tile_steps(dp.mm, op.strides, axis)
        base = as_strided(op.host, shape=(_extent(op.host),), strides=(op.host.itemsize,))  # its memory, element by element
        out.append(base[tile * tile_step + batch * batch_step:])
    return out


def _get_tile(dp: DevicePipeline, smem, blockIdx_x, blockIdx_y):
    ring = unwrap(smem)
    if not isinstance(ring, np.ndarray) or ring.ndim != 1:
        raise TypeError(f"DevicePipeline.get_tile: smem must be a 1-D shared array, got {type(smem).__name__}")
    if ring.nbytes < dp.buffer_size:
        raise ValueError(f"DevicePipeline.get_tile: smem holds {ring.nbytes} bytes, the pipeline needs buffer_size = "
                         f"{dp.buffer_size}")
    tp = SimTilePipeline(dp, ring)
    tp._a0, tp._b0 = _origins(dp, "DevicePipeline.get_tile", blockIdx_x, blockIdx_y)
    return tp


def _reset_tile(dp: DevicePipeline, tile_pipeline, idx, idy):
    if not isinstance(tile_pipeline, SimTilePipeline) or tile_pipeline.device_pipeline is not dp:
        raise TypeError("DevicePipeline.reset_tile: tile_pipeline must be a TilePipeline of this DevicePipeline "
                        "(device_pipeline.get_tile(...))")
    tile_pipeline._a0, tile_pipeline._b0 = _origins(dp, "DevicePipeline.reset_tile", idx, idy)


def _execute(tp, accumulator):
    if not isinstance(tp, SimTilePipeline):
        raise TypeError("TilePipeline.execute: a tile pipeline made outside the kernel has no tile "
                        "(device_pipeline.get_tile(...) in the kernel)")
    dp = tp.device_pipeline
    mm, spec = dp.mm, dp._spec
    if getattr(accumulator, "descriptor", None) != mm:
        raise TypeError("TilePipeline.execute: accumulator must be an accumulator of the pipeline's Matmul "
                        "(MM.get_accumulator() / MM.suggest_accumulator())")
    from .._build.pipeline_codegen import k_steps

    a_step, b_step = k_steps(mm, spec.lda, spec.ldb)
    la, lb = mm.get_layout_gmem_a(spec.lda), mm.get_layout_gmem_b(spec.ldb)
    sla, slb = mm.suggest_layout_smem_a(), mm.suggest_layout_smem_b()
    at, bt = dp._ops[0].dtype, dp._ops[1].dtype
    for kt in range(spec.k_tiles):
        st = kt % spec.depth
        sa = tp._ring[st * spec.stage_bytes:st * spec.stage_bytes + spec.a_bytes].view(at)
        sb = tp._ring[st * spec.stage_bytes + spec.a_bytes:(st + 1) * spec.stage_bytes].view(bt)
        stage_a, stage_b = SimTensor(sa, sla), SimTensor(sb, slb)
        copy(SimTensor(tp._a0[kt * a_step:], la), stage_a)
        copy(SimTensor(tp._b0[kt * b_step:], lb), stage_b)
        _sync()  # the GPU: wait for the slice, __syncthreads
        sim_tensor_execute(mm, stage_a, stage_b, accumulator)
        _sync()  # the stage is consumed before it is refilled


IMPLEMENTATIONS = {
    "DevicePipeline.get_tile": _get_tile,
    "DevicePipeline.reset_tile": _reset_tile,
    "TilePipeline.execute": _execute,
}
