# SPDX-License-Identifier: Apache-2.0
"""cuda.cg.this_grid().sync() under the simulator: numba-cuda's simulator runs blocks one after the
other, so a grid of several blocks cannot be synchronised there. It used to sync only the calling
block (a kernel reading another block's results got stale values, silently); nvmath_device's
simulator patches make that a RuntimeError, and keep a one-block grid working."""

import numpy as np
import pytest
from numba import cuda

import nvmath_device  # noqa: F401  (installs the simulator patches)


@cuda.jit
def rotate_through_grid(x, out):
    """out[i] = x[i] + 1 read back from the *next* thread's slot after a grid sync."""
    i = cuda.grid(1)
    n = x.size
    if i < n:
        x[i] += 1.0
    cuda.cg.this_grid().sync()
    if i < n:
        out[i] = x[(i + 1) % n]


def test_one_block_grid_syncs():
    x = cuda.to_device(np.arange(32, dtype=np.float64))
    out = cuda.device_array(32, np.float64)
    rotate_through_grid[1, 32](x, out)
    np.testing.assert_array_equal(out.copy_to_host(), np.roll(np.arange(32.0) + 1, -1))


def test_several_blocks_are_refused_not_silently_wrong():
    x = cuda.to_device(np.arange(64, dtype=np.float64))
    out = cuda.device_array(64, np.float64)
    with pytest.raises(RuntimeError, match=r"grid of \(2, 1, 1\) blocks.*cannot synchronise"):
        rotate_through_grid[2, 32](x, out)
