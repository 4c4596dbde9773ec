# SPDX-License-Identifier: Apache-2.0
"""cuBLASDx Layouts (``MM.get_layout_*`` / ``MM.suggest_layout_*``) in kernels under the simulator:
shared buffers sliced and register fragments sized by ``layout.cosize``, as nvmath-python 1.0's
tensor examples do, around the register-accumulator GEMM, against numpy.

Run: NUMBA_ENABLE_CUDASIM=1 python -m pytest -q tests/sim/test_gemm_layouts_sim.py

The kernels are module-level (CI records them and links them for sm_90 without the simulator).
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from nvmath_device import Matmul
from tests.harness import launch_guarded

MM = Matmul(size=(32, 32, 32), precision=np.float32, arrangement=("row_major", "col_major", "col_major"),
            block_dim=64, sm=90)
A_LAYOUT = MM.get_layout_smem_a()  # the shared layouts the register GEMM reads
B_LAYOUT = MM.get_layout_smem_b()
C_LAYOUT = MM.get_layout_rmem_c()  # this thread's accumulator
LD_C = 40  # a padded global C
G_LAYOUT = MM.get_layout_gmem_c(LD_C)


@cuda.jit
def layout_gemm_kernel(A, B, C, SIZES):
    """C = A @ B with the tiles in one dynamic shared buffer sliced by the layouts' cosize and the
    accumulator a local array of the register layout's cosize; thread 0 reports sizes seen in
    the kernel (some from layouts made there)."""
    smem = cuda.shared.array(0, dtype=np.float32)
    sa, smem = smem[: A_LAYOUT.cosize], smem[A_LAYOUT.cosize :]
    sb = smem[: B_LAYOUT.cosize]
    MM.load_a(A, sa)
    MM.load_b(B, sb)
    cuda.syncthreads()
    acc = cuda.local.array(C_LAYOUT.cosize, dtype=MM.c_value_type)
    rows = cuda.local.array(C_LAYOUT.size, dtype=np.int32)
    cols = cuda.local.array(C_LAYOUT.size, dtype=np.int32)
    for i in range(C_LAYOUT.size):
        acc[i] = 0
    MM.execute(sa, sb, acc)
    MM.fragment_coordinates(rows, cols)
    for i in range(C_LAYOUT.size):
        if rows[i] >= 0:
            C[rows[i] * LD_C + cols[i]] = acc[i]  # C is row-major with ld LD_C: G_LAYOUT's cosize
    if cuda.threadIdx.x == 0:
        SIZES[0] = A_LAYOUT.cosize
        SIZES[1] = C_LAYOUT.size
        SIZES[2] = G_LAYOUT.cosize
        SIZES[3] = MM.suggest_layout_smem_a().cosize
        SIZES[4] = MM.get_layout_gmem_c(LD_C).cosize
        SIZES[5] = MM.suggest_layout_rmem_c().size


def test_gemm_with_layout_sized_buffers():
    assert C_LAYOUT.cosize == C_LAYOUT.size == MM.accumulator_size  # what the register GEMM takes
    rng = np.random.default_rng(7)
    A = rng.standard_normal((MM.m, MM.k)).astype(np.float32)
    B = rng.standard_normal((MM.k, MM.n)).astype(np.float32)
    C = np.full(G_LAYOUT.cosize, np.nan, np.float32)
    sizes = np.zeros(6, np.int64)
    smem = MM.get_shared_storage_size_ab(A_LAYOUT, B_LAYOUT)
    assert smem == MM.shared_memory_size_ab
    launch_guarded(layout_gemm_kernel, 1, MM.block_dim, smem, A, B, C, sizes)
    got = np.lib.stride_tricks.as_strided(C, shape=(MM.m, MM.n), strides=(LD_C * 4, 4))
    np.testing.assert_allclose(got, A @ B, rtol=2e-5, atol=2e-5)
    assert G_LAYOUT.cosize == LD_C * (MM.m - 1) + MM.n
    assert np.isnan(C.reshape(-1)[MM.n:LD_C]).all()  # the padding between rows stays untouched
    assert list(sizes) == [A_LAYOUT.cosize, C_LAYOUT.size, G_LAYOUT.cosize,
                           MM.suggest_layout_smem_a().cosize, G_LAYOUT.cosize, MM.suggest_layout_rmem_c().size]


def test_bad_leading_dimension_in_a_simulated_kernel():
    @cuda.jit
    def bad(out):
        out[0] = MM.get_layout_gmem_a(MM.k - 1).cosize

    with pytest.raises(ValueError, match=r"get_layout_gmem_a: leading_dimension=31 is smaller than the 32"):
        launch_guarded(bad, 1, 1, 0, np.zeros(1, np.int64))
