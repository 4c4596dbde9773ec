# SPDX-License-Identifier: Apache-2.0
"""Integer and complex float16 GEMMs, and the run-time leading-dimension form, in user kernels
under numba-cuda's simulator, against NumPy (exact for integers, complex128 / float64 otherwise).

Run: NUMBA_ENABLE_CUDASIM=1 python -m pytest -q tests/sim/test_gemm_types_sim.py

The kernels and runners are tests/gemm_kernels.py's, which tests/gpu/test_gemm_types_gpu.py
runs on the GPU and tests/cpu/test_gemm_types.py links for sm_90.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import nvmath_device as nd
from nvmath_device import Matmul
from tests.gemm_kernels import (
    RUNTIME_LD_CASES,
    TYPES_CASES,
    run_complex_half,
    run_integer,
    run_runtime_ld,
)
from tests.harness import launch_guarded

SM = 90
INTEGER = [n for n in TYPES_CASES if n[0] in "iu"]
COMPLEX_HALF = [n for n in TYPES_CASES if n.startswith("c16")]


@pytest.fixture(scope="module", autouse=True)
def _tables():
    """Register-fragment tables of the register-form descriptors: one NVRTC run, then cached."""
    from nvmath_device._build.gemm_sim_tables import prefetch_fragment_tables

    prefetch_fragment_tables([Matmul(sm=SM, **kw) for kw in TYPES_CASES.values()])


@pytest.mark.parametrize("name", INTEGER)
def test_integer_gemm_is_exact(name):
    MM = Matmul(sm=SM, **TYPES_CASES[name])
    m, n = MM.m, MM.n
    C, D, ref, sentinel = run_integer(MM, batch=1)
    for label, got in (("C", C), ("D", D)):
        assert (got[:, m:, :] == sentinel).all() and (got[:, :, n:] == sentinel).all(), f"{label}: wrote outside"
        np.testing.assert_array_equal(got[:, :m, :n].astype(np.int64), ref, err_msg=label)


@pytest.mark.parametrize("name", COMPLEX_HALF)
def test_complex_half_gemm_against_complex128(name):
    MM = Matmul(sm=SM, **TYPES_CASES[name])
    m, n, k = MM.size
    C, D, ref_c, ref_d = run_complex_half(MM, batch=1)
    for label, got, ref in (("C", C, ref_c), ("D", D, ref_d)):
        assert np.isnan(got[:, m:, :]).all() and np.isnan(got[:, :, n:]).all(), f"{label}: wrote outside"
        inner = got[:, :m, :n].astype(np.complex128)
        assert np.isfinite(inner).all(), f"{label}: not every element written"
        err = np.abs(inner - ref).max() / np.abs(ref).max()
        # the simulator rounds once to float16 (each part): relative error <= 2**-11 of the largest
        assert err < 2e-3, f"{label}: relative error {err:.3g}"
        assert err > 0 or k == 0  # the result went through float16 (not a float32 copy of the reference)


@pytest.mark.parametrize("name", sorted(RUNTIME_LD_CASES))
def test_runtime_leading_dimensions(name):
    kw, lds = RUNTIME_LD_CASES[name]
    MM = Matmul(sm=SM, **kw)
    assert tuple(MM.leading_dimension) != lds  # the run-time values differ from the descriptor's
    m, n, k = MM.size
    C, ref = run_runtime_ld(MM, lds)
    assert np.isnan(C[m:, :]).all() and np.isnan(C[:, n:]).all()
    tol = {8: 1e-13, 4: 1e-5}[np.dtype(MM.a_value_type).itemsize]
    np.testing.assert_allclose(C[:m, :n], ref, rtol=0, atol=tol * k)


# ---------------------------------------------------------------------------- misuse
def _kernel_error(kernel, smem, args, exc, match, block=32):
    with pytest.raises(exc, match=match):
        launch_guarded(cuda.jit(kernel), 1, block, smem, *args)


def test_runtime_ld_smaller_than_tight_is_refused():
    kw, lds = RUNTIME_LD_CASES["f64-rcc"]
    MM = Matmul(sm=SM, **kw)

    def k(lda):
        s = cuda.shared.array(0, dtype=np.float64)
        MM.execute(1.0, s[:200], lda, s[200:400], 15, 0.0, s[400:600], 12)

    _kernel_error(k, 8 * 600, (12,), ValueError, r"lda=12 is smaller than the 13 that A \(row_major")


def test_runtime_ld_tile_too_small_is_refused():
    kw, lds = RUNTIME_LD_CASES["f64-rcc"]
    MM = Matmul(sm=SM, **kw)

    def k(lda):
        s = cuda.shared.array(0, dtype=np.float64)
        MM.execute(1.0, s[:100], lda, s[200:400], 15, 0.0, s[400:600], 12)

    _kernel_error(k, 8 * 600, (14,), ValueError, r"has 100 elements but A with lda=14 .* needs 139")


def test_integer_tile_of_wrong_type_is_refused():
    MM = Matmul(sm=SM, **TYPES_CASES["i8-i8-i32-rcc"])

    def k(x):
        sa = cuda.shared.array(256, dtype=np.uint8)
        sc = cuda.shared.array(256, dtype=np.int32)
        MM.execute(1, sa, sa, 0, sc)

    _kernel_error(k, 0, (0,), TypeError, "must hold int8", block=64)


def test_complex_half_copy_refuses_float32_globals():
    MM = Matmul(sm=SM, **TYPES_CASES["c16-rcc"])

    def k(A):
        sa = cuda.shared.array(MM.a_size, dtype=MM.a_value_type)
        MM.load_a(A, sa)

    _kernel_error(k, 0, (np.zeros((16, 16), np.float32),), TypeError,
                  "or complex64/complex128, converted", block=64)


def test_complex_half_float16x2_alpha_and_record_globals():
    """alpha/beta as float16x2 values and global arrays of numpy.dtype(complex32) records."""
    MM = Matmul(sm=SM, **TYPES_CASES["c16-rcc"])
    m, n, k = MM.size
    rng = np.random.default_rng(3)
    rec = np.dtype(nd.types.complex32)

    def records(shape):
        x = np.zeros(shape, rec)
        x["x"] = rng.uniform(-1, 1, shape).astype(np.float16)
        x["y"] = rng.uniform(-1, 1, shape).astype(np.float16)
        return x

    def as_complex(x):
        return x["x"].astype(np.float64) + 1j * x["y"].astype(np.float64)

    A, B, C = records((m, k)), records((k, n)), records((m, n))
    expected = (0.5 - 1j) * (as_complex(A) @ as_complex(B)) + 2j * as_complex(C)

    def kern(A, B, C):
        sa = cuda.shared.array(MM.a_size, dtype=MM.a_value_type)
        sb = cuda.shared.array(MM.b_size, dtype=MM.b_value_type)
        sc = cuda.shared.array(MM.c_size, dtype=MM.c_value_type)
        MM.load_a(A, sa)
        MM.load_b(B, sb)
        MM.load_c(C, sc)
        cuda.syncthreads()
        MM.execute(nd.float16x2(0.5, -1.0), sa, sb, nd.float16x2(0.0, 2.0), sc)
        cuda.syncthreads()
        MM.store_c(sc, C)

    launch_guarded(cuda.jit(kern), 1, MM.block_dim, 0, A, B, C)
    err = np.abs(as_complex(C) - expected).max() / np.abs(expected).max()
    assert err < 2e-3


def test_unsigned_gemm_wraps_a_negative_beta_as_the_device():
    """-1 converts to 2**32 - 1 for a uint32 C, and the arithmetic wraps modulo 2**32."""
    MM = Matmul(sm=SM, **TYPES_CASES["u8-u8-u32-crr"])
    m, n, k = MM.size
    rng = np.random.default_rng(5)
    A = rng.integers(0, 4, (m, k)).astype(np.uint8)
    B = rng.integers(0, 4, (k, n)).astype(np.uint8)
    C = rng.integers(0, 1000, (m, n)).astype(np.uint32)  # some 2 A B - C below 0
    expected = (2 * (A.astype(np.int64) @ B.astype(np.int64)) - C.astype(np.int64)) % 2**32

    def kern(A, B, C, beta):
        sa = cuda.shared.array(MM.a_size, dtype=MM.a_value_type)
        sb = cuda.shared.array(MM.b_size, dtype=MM.b_value_type)
        sc = cuda.shared.array(MM.c_size, dtype=MM.c_value_type)
        MM.load_a(A, sa)
        MM.load_b(B, sb)
        MM.load_c(C, sc)
        cuda.syncthreads()
        MM.execute(2, sa, sb, beta, sc)
        cuda.syncthreads()
        MM.store_c(sc, C)

    launch_guarded(cuda.jit(kern), 1, MM.block_dim, 0, A, B, C, -1)
    assert (C.astype(np.int64) == expected).all()
    assert (C > 2**31).any()  # some results wrapped
