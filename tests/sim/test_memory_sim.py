# SPDX-License-Identifier: Apache-2.0
"""load_complex / store_complex and copy_async in kernels under the simulator (plain indexing;
copies that land at the wait for their group, so that a kernel missing its wait fails here too)."""

import numpy as np
import pytest
from numba import cuda

from nvmath_device import copy_async, copy_async_commit, copy_async_wait
from tests.memory_kernels import run, run_async


@pytest.mark.parametrize("ctype", [np.complex64, np.complex128])
def test_load_store_complex_move_values_exactly(ctype):
    got, want = run(ctype)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_copy_async_stages_rows_in_shared_memory(dtype):
    got, want = run_async(dtype)
    np.testing.assert_array_equal(got, want)


def test_a_copy_lands_at_the_wait_for_its_group_not_before():
    """Under the simulator as on the GPU (at worst): before copy_async_wait the destination may
    still hold its old value; wait(1) lands all committed groups but the newest, wait(0) all;
    copies not yet committed stay in flight."""
    @cuda.jit
    def kernel(x, y):
        t = cuda.threadIdx.x
        s = cuda.shared.array((3, 4), np.float32)
        for r in range(3):
            s[r, t] = -1.0
        cuda.syncthreads()
        copy_async(s, (0, t), x, (0, t))
        copy_async_commit()
        copy_async(s, (1, t), x, (1, t))
        copy_async_commit()
        copy_async(s, (2, t), x, (2, t))  # not committed
        y[0, t] = s[0, t]  # nothing waited for: old values
        copy_async_wait(1)  # the first group
        y[1, t] = s[0, t]
        y[2, t] = s[1, t]
        copy_async_wait(0)  # every committed group, not the open one
        y[3, t] = s[1, t]
        y[4, t] = s[2, t]

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.zeros((5, 4), np.float32)
    kernel[1, 4](x, y)
    np.testing.assert_array_equal(y, [[-1] * 4, x[0], [-1] * 4, x[1], [-1] * 4])
