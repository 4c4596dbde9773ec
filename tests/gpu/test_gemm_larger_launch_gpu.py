# SPDX-License-Identifier: Apache-2.0
"""On the GPU, what the simulator assumes of cuBLASDx (tests/sim/test_gemm_larger_launch_sim.py):
a 1-D block_dim launched with more threads in x computes the same GEMM, and the extra threads'
fragment coordinates are -1. Outputs poisoned with NaN first."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from tests.sim.test_gemm_larger_launch_sim import MM, N, _data, coords, smem_gemm

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("threads", [64, 96, 255])
def test_larger_1d_launch_gives_the_same_gemm(threads):
    A, B, C = _data()
    d_c = cuda.to_device(C)
    smem_gemm[1, (threads, 1, 1), 0, MM.shared_memory_size](cuda.to_device(A), cuda.to_device(B), d_c)
    np.testing.assert_allclose(d_c.copy_to_host(), 2.0 * A @ B + 0.5 * C, rtol=1e-5, atol=1e-5)


def test_idle_threads_hold_no_fragment():
    d_rows = cuda.to_device(np.full((96, N), 12345, np.int32))
    coords[1, (96, 1, 1)](d_rows)
    rows = d_rows.copy_to_host()
    assert (rows[64:] == -1).all()
    assert (rows[:64] >= 0).any() and (rows[:64] < 16).all()
