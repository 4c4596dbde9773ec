# SPDX-License-Identifier: Apache-2.0
"""Device/tile pipelines on the GPU: the kernels of tests/pipeline_kernels.py (out = alpha * A @ B
+ beta * C over many tiles, K through a ring of shared stages) against NumPy float64, out
poisoned with NaN before the launch (a tile the kernel does not write fails the test)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from nvmath_device.cublasdx_numba import pipeline_extensions
from tests import pipeline_kernels as pk

pytestmark = pytest.mark.gpu

ROW_COL = ("row_major", "col_major", "row_major")
COL_ROW = ("col_major", "row_major", "row_major")


def _launch(mm, dp, body, c, out, m, n):
    kern = cuda.jit(extensions=pipeline_extensions, launch_bounds=(mm.block_size, 1))(body)
    kern[(m // mm.size[0], n // mm.size[1]), dp.block_dim, 0, dp.buffer_size](2.0, 3.0, c, out, dp)
    cuda.synchronize()


@pytest.mark.parametrize("tile, precision, arrangement, depth, block", [
    ((64, 64, 32), (np.float16, np.float16, np.float32), ROW_COL, 2, 128),
    ((64, 64, 32), (np.float16, np.float16, np.float32), COL_ROW, 4, 128),
    ((32, 32, 16), (np.float16, np.float16, np.float32), ROW_COL, 1, 64),
    ((128, 128, 32), (np.float16, np.float16, np.float32), ROW_COL, 3, 256),
    ((32, 32, 16), (np.float64, np.float64, np.float64), COL_ROW, 3, 64),
    ((64, 64, 16), (np.float32, np.float32, np.float32), ROW_COL, 2, 128),
])
def test_pipeline_gemm_matches_numpy(tile, precision, arrangement, depth, block):
    mm = pk.descriptor(tile=tile, precision=precision, arrangement=arrangement, block_size=block)
    m, n, k = 4 * tile[0], 3 * tile[1], 8 * tile[2]
    a, b, c, out = pk.operands(mm, m, n, k)
    dp = mm.suggest_device_pipeline(depth, cuda.to_device(a), cuda.to_device(b))
    d_out = cuda.to_device(out)
    _launch(mm, dp, pk.pipeline_gemm(mm, n), cuda.to_device(c), d_out, m, n)
    got, ref = d_out.copy_to_host(), pk.reference(2.0, a, b, 3.0, c)
    tol = 1e-12 if precision[2] is np.float64 else 1e-5
    assert np.isfinite(got).all() and np.abs(got - ref).max() <= tol * np.abs(ref).max()


def test_pipeline_gemm_3d_with_reset_tile_on_cupy_arrays():
    """nvmath-python's 3-D example pattern with CuPy arrays (B a moveaxis view on the device)."""
    cupy = pytest.importorskip("cupy")
    mm = pk.descriptor(tile=(64, 64, 32), arrangement=COL_ROW, block_size=128)
    m, n, k, steps = 256, 128, 256, 2
    a, b, c, out = pk.operands(mm, m, n, k, steps)
    b0 = np.ascontiguousarray(np.moveaxis(b, -1, 0))
    db = cupy.moveaxis(cupy.asarray(b0), 0, -1)
    assert db.strides == b.strides
    dp = mm.suggest_device_pipeline(2, cupy.asarray(a, order="F"), db)
    d_out = cupy.asarray(out)
    _launch(mm, dp, pk.pipeline_gemm_3d(mm, n, steps), cupy.asarray(c), d_out, m, n)
    got, ref = d_out.get(), pk.reference(2.0, a, b, 3.0, c)
    assert np.isfinite(got).all() and np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()
