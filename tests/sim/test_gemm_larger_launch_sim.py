# SPDX-License-Identifier: Apache-2.0
"""A 1-D block_dim launched with more threads in x (cuBLASDx allows it: the extra threads call
execute with the others and stay idle), as nvmath-python's blockdim example does: the same
results as a launch of exactly block_dim, idle threads' fragment coordinates -1; a smaller launch
is still refused by name. tests/gpu/test_gemm_larger_launch_gpu.py runs the same kernels on the GPU."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from nvmath_device import Matmul
from tests.harness import launch_guarded

SM = 90
MM = Matmul(size=(16, 16, 16), precision=np.float32, data_type="real",
            arrangement=("row_major", "col_major", "col_major"), block_dim=(64, 1, 1), sm=SM)
A_OFF, B_OFF, C_OFF = (MM.a_shared_memory_offset // 4, MM.b_shared_memory_offset // 4,
                       MM.c_shared_memory_offset // 4)
N = MM.accumulator_size


@cuda.jit
def smem_gemm(A, B, C):
    smem = cuda.shared.array(0, dtype=np.float32)
    a = smem[A_OFF:A_OFF + MM.a_size]
    b = smem[B_OFF:B_OFF + MM.b_size]
    c = smem[C_OFF:C_OFF + MM.c_size]
    MM.load_a(A, a)
    MM.load_b(B, b)
    MM.load_c(C, c)
    cuda.syncthreads()
    MM.execute(2.0, a, b, 0.5, c)
    cuda.syncthreads()
    MM.store_c(c, C)


@cuda.jit
def coords(rows_out):
    rows = cuda.local.array(N, dtype=np.int32)
    cols = cuda.local.array(N, dtype=np.int32)
    MM.fragment_coordinates(rows, cols)
    t = cuda.threadIdx.x
    for i in range(N):
        rows_out[t, i] = rows[i]


def _data():
    rng = np.random.default_rng(5)
    return (rng.standard_normal((16, 16)).astype(np.float32) for _ in range(3))


@pytest.mark.parametrize("threads", [64, 96, 255])
def test_larger_1d_launch_gives_the_same_gemm(threads):
    A, B, C = _data()
    out = C.copy()
    launch_guarded(smem_gemm, 1, (threads, 1, 1), MM.shared_memory_size, A, B, out)
    np.testing.assert_allclose(out, 2.0 * A @ B + 0.5 * C, rtol=1e-5, atol=1e-5)


def test_idle_threads_hold_no_fragment():
    rows = np.zeros((96, N), np.int32)
    launch_guarded(coords, 1, (96, 1, 1), 0, rows)
    assert (rows[64:] == -1).all()
    assert (rows[:64] >= 0).any() and (rows[:64] < 16).all()


def test_a_smaller_or_other_dimension_launch_is_refused():
    A, B, C = _data()
    with pytest.raises(ValueError, match=r"MM.block_dim = \(64, 1, 1\).*blockDim = \(32, 1, 1\)"):
        launch_guarded(smem_gemm, 1, (32, 1, 1), MM.shared_memory_size, A, B, C.copy())
