# SPDX-License-Identifier: Apache-2.0
"""benchmarks/batched_gemm.py's cp.async kernels (``pasync1`` / ``2`` / ``3``, ``kc``) under the simulator:
a persistent grid smaller than the batch, so each block walks several GEMMs through its ring of
stages (its prologue, the wrap-around of the ring and the GEMMs past the batch's end), against
NumPy float64; the recorded kernels are linked for sm_90 with the rest of the simulator suite."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from nvmath_device import Matmul
from tests.benchmark_script import load

bg = load("batched_gemm")


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("size, dtype, bd", [((16, 16, 16), np.float64, 64), ((8, 16, 8), np.float32, 32)])
def test_pasync_kernel_matches_numpy(size, dtype, bd, depth):
    MM = Matmul(size=size, precision=dtype, arrangement=("row_major",) * 3, leading_dimension="suggested",
                block_dim=bd, alignment=(16, 16, 16), sm=90)
    made = bg.make_pasync_kernel(MM, 1, depth)
    assert made is not None
    kernel, smem = made
    assert smem % 16 == 0 and smem >= depth * MM.shared_memory_size_ab
    _check(kernel, smem, MM, 2, depth, c_as_vectors=True)  # block 0 runs GEMMs 0, 2, 4, 6; block 1 1, 3, 5


def _check(kernel, smem, MM, blocks, seed, c_as_vectors):
    """Run ``kernel`` on ``blocks`` persistent blocks over a batch of 7 GEMMs of ``MM``'s size and
    compare with NumPy float64; C is (batch, m*n) complex128 vectors or values."""
    (m, n, k), dtype, batch = MM.size, MM.a_value_type, 7
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (batch, m, k)).astype(dtype)
    b = rng.uniform(-1, 1, (batch, k, n)).astype(dtype)
    c = np.full((batch, m * n), np.nan, dtype)
    dc = cuda.to_device(c.view(np.complex128) if c_as_vectors else c)
    kernel[blocks, MM.block_dim, 0, smem](cuda.to_device(a.reshape(batch, -1).view(np.complex128)),
                                          cuda.to_device(b.reshape(batch, -1).view(np.complex128)), dc, batch)
    got = dc.copy_to_host().view(dtype).reshape(batch, m, n)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * k)


def test_pasync_refuses_what_it_cannot_run():
    MM = Matmul(size=(16, 16, 16), precision=np.float64, arrangement=("row_major",) * 3,
                leading_dimension="suggested", block_dim=64, alignment=(16, 16, 16), sm=90)
    assert bg.make_pasync_kernel(MM, 2) is None  # one GEMM per block only
    assert bg.make_pasync_kernel(MM, 1, depth=0) is None
    assert bg.make_pasync_kernel(MM, 1, depth=9) is None
    col = Matmul(size=(16, 16, 16), precision=np.float64, arrangement=("col_major", "row_major", "row_major"),
                 block_dim=64, alignment=(16, 16, 16), sm=90)
    assert bg.make_pasync_kernel(col, 1) is None



@pytest.mark.parametrize("epilogue,vt", [("stage", np.complex128), ("ring", np.complex128), ("pairs", np.complex128)])
def test_kchunk_variant_runs_the_library_kernel(epilogue, vt):
    """The ``kc`` variants time ``kernels.gemm._slice_kernel`` (its own tests: tests/sim/
    test_kernels_sim.py) with the arguments the benchmark passes: C and D as (batch, m*n/2)
    complex128 views of float64, 16-byte vectors ("stage") or pairs of row neighbours ("pairs":
    this descriptor's fragments hold them)."""
    MM = Matmul(size=(16, 16, 16), precision=np.float64, arrangement=("row_major",) * 3,
                leading_dimension="suggested", block_dim=64, alignment=(16, 16, 16), sm=90)
    assert bg.make_kchunk_kernel(MM, 2) is None  # one GEMM per block only
    assert bg.make_kchunk_kernel(MM, 1, depth=2, kc=6) is None  # k = 16 is not whole slices of 6
    kernel, smem = bg.make_kchunk_kernel(MM, 1, depth=3, kc=4, epilogue=epilogue)
    assert smem % 16 == 0 and smem < 3 * MM.shared_memory_size_ab + 16 * MM.leading_dimension.c * 8
    batch = 5
    rng = np.random.default_rng(1)
    a, b = rng.uniform(-1, 1, (batch, 16, 16)), rng.uniform(-1, 1, (batch, 16, 16))
    dc = cuda.to_device(np.full((batch, 128), np.nan, vt))
    kernel[2, MM.block_dim, 0, smem](cuda.to_device(a.reshape(batch, -1).view(np.complex128)),
                                     cuda.to_device(b.reshape(batch, -1).view(np.complex128)), dc, dc, 1.0, 0.0, batch)
    np.testing.assert_allclose(dc.copy_to_host().view(np.float64).reshape(batch, 16, 16), a @ b,
                               rtol=1e-12, atol=1e-11)


def test_slice_descriptors_are_the_kc_variants_own():
    """The descriptors whose LTO-IR the benchmark compiles up front for its ``kc`` variants: one
    ``(m, n, kc)`` descriptor per slice width at the block's threads, each once; none for other
    variants or a width that does not divide k; and the same descriptor the variant's kernel runs."""
    from kernels.gemm import _slice_descriptor

    def mm(size, bd):
        return Matmul(size=size, precision=np.float64, arrangement=("row_major",) * 3,
                      leading_dimension="suggested", block_dim=bd, alignment=(16, 16, 16), sm=90)

    descs = {"a": mm((64, 64, 64), 128), "b": mm((16, 16, 24), 64)}
    choices = {("a", None): (("lib", 1), ("kc16x4b2", 1), ("kc16x2b3", 1), ("kc32x2b3p", 1), ("pasync1", 1)),
               ("b", None): (("kc16x4", 1), ("kc8x8", 1))}
    keyed = {(None, None, name, None, None): d for name, d in descs.items()}
    got = bg._slice_descriptors(keyed, choices)
    want = [_slice_descriptor(64, 64, 16, np.float64, 128, sm=90), _slice_descriptor(64, 64, 32, np.float64, 128, sm=90),
            _slice_descriptor(16, 16, 8, np.float64, 64, sm=90)]
    assert got == want
    assert [d.size for d in got] == [(64, 64, 16), (64, 64, 32), (16, 16, 8)]
