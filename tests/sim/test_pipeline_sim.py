# SPDX-License-Identifier: Apache-2.0
"""Device/tile pipelines under the simulator: the kernels of tests/pipeline_kernels.py against
NumPy float64 (outputs NaN-poisoned first), and the errors a kernel meets at run time."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from nvmath_device.cublasdx_numba import pipeline_extensions
from tests import pipeline_kernels as pk

ROW_COL = ("row_major", "col_major", "row_major")
COL_ROW = ("col_major", "row_major", "row_major")


def _run(mm, depth, m=64, n=64, k=64, steps=None, device=True, smem=None):
    a, b, c, out = pk.operands(mm, m, n, k, steps)
    da, db = (cuda.to_device(a), cuda.to_device(b)) if device else (a, b)
    dp = mm.suggest_device_pipeline(depth, da, db)
    body = pk.pipeline_gemm(mm, n) if steps is None else pk.pipeline_gemm_3d(mm, n, steps)
    kern = cuda.jit(extensions=pipeline_extensions)(body)
    grid = (m // mm.size[0], n // mm.size[1])
    kern[grid, dp.block_dim, 0, dp.buffer_size if smem is None else smem](2.0, 3.0, c, out, dp)
    return out, pk.reference(2.0, a, b, 3.0, c)


@pytest.mark.parametrize("depth, arrangement, device", [(1, ROW_COL, True), (2, ROW_COL, False), (3, COL_ROW, True)])
def test_pipeline_gemm_matches_numpy(depth, arrangement, device):
    """K = 4 slices through 1, 2 or 3 stages; device arrays or NumPy arrays."""
    out, ref = _run(pk.descriptor(arrangement=arrangement), depth, device=device)
    assert np.isfinite(out).all()
    assert np.abs(out - ref).max() <= 1e-5 * np.abs(ref).max()


def test_pipeline_gemm_3d_with_reset_tile_matches_numpy():
    """nvmath-python's 3-D pattern: the sum over batches i, j of A_i @ B_j (4 executes per tile;
    B a moveaxis view, which the simulator's to_device does not take: NumPy arrays)."""
    out, ref = _run(pk.descriptor(arrangement=COL_ROW), 2, m=32, n=64, k=32, steps=2, device=False)
    assert np.abs(out - ref).max() <= 1e-5 * np.abs(ref).max()


def test_pipeline_gemm_float64():
    mm = pk.descriptor(precision=np.float64, tile=(16, 16, 8), block_size=32)
    out, ref = _run(mm, 2, m=32, n=32, k=32)
    assert np.abs(out - ref).max() <= 1e-12 * np.abs(ref).max()


def test_too_small_a_shared_buffer_is_named():
    mm = pk.descriptor()
    with pytest.raises(ValueError, match="smem holds 1024 bytes, the pipeline needs buffer_size = 4096"):
        _run(mm, 2, smem=1024)


def test_tiles_outside_the_arrays_are_named():
    mm = pk.descriptor()
    a, b, c, out = pk.operands(mm, 64, 64, 64)
    dp = mm.suggest_device_pipeline(2, a, b)

    @cuda.jit(extensions=pipeline_extensions)
    def kernel(p):
        smem = cuda.shared.array(shape=(0,), dtype=np.byte, alignment=p.buffer_alignment)
        p.get_tile(smem, 2, 0)

    with pytest.raises(IndexError, match=r"blockIdx_x = 2 is outside the arrays' 2 tiles"):
        kernel[1, dp.block_dim, 0, dp.buffer_size](dp)
