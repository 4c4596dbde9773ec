# SPDX-License-Identifier: Apache-2.0
"""Integer and complex float16 GEMMs, and the run-time leading-dimension form, on the GPU.

The same kernels and runners as tests/sim/test_gemm_types_sim.py (tests/gemm_kernels.py), for
the current GPU, several GEMMs per launch (one per block). Float outputs sit inside larger
NaN-poisoned buffers (integer ones: a sentinel): the poison must survive outside the results and
be gone inside them.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.xdist_group("test_gemm_types_gpu")]

from nvmath_device import Matmul  # noqa: E402
from nvmath_device._build import gemm_codegen  # noqa: E402
from tests.gemm_kernels import (  # noqa: E402
    RUNTIME_LD_CASES,
    TYPES_CASES,
    run_complex_half,
    run_integer,
    run_runtime_ld,
)

SM = None  # the current GPU
INTEGER = [n for n in TYPES_CASES if n[0] in "iu"]
COMPLEX_HALF = [n for n in TYPES_CASES if n.startswith("c16")]


@pytest.fixture(scope="module", autouse=True)
def _prefetch():
    gemm_codegen.prefetch_ltoir([Matmul(sm=SM, **kw) for kw in TYPES_CASES.values()])


@pytest.mark.parametrize("name", INTEGER)
def test_integer_gemm_is_exact(name):
    MM = Matmul(sm=SM, **TYPES_CASES[name])
    m, n = MM.m, MM.n
    C, D, ref, sentinel = run_integer(MM, batch=3, seed=11)
    for label, got in (("shared-memory form", C), ("register form", D)):
        assert (got[:, m:, :] == sentinel).all() and (got[:, :, n:] == sentinel).all(), f"{label}: wrote outside C"
        np.testing.assert_array_equal(got[:, :m, :n].astype(np.int64), ref, err_msg=label)


@pytest.mark.parametrize("name", COMPLEX_HALF)
def test_complex_half_gemm(name):
    MM = Matmul(sm=SM, **TYPES_CASES[name])
    m, n, k = MM.size
    C, D, ref_c, ref_d = run_complex_half(MM, batch=3, seed=12)
    # complex<__half> accumulates in float16: 5e-3 relative per k (as the real float16 cases)
    tol = 5e-3 * max(k, 8)
    for label, got, ref in (("shared-memory form", C, ref_c), ("register form", D, ref_d)):
        assert np.isnan(got[:, m:, :]).all() and np.isnan(got[:, :, n:]).all(), f"{label}: wrote outside C"
        inner = got[:, :m, :n].astype(np.complex128)
        assert np.isfinite(inner).all(), f"{label}: some C elements were not written"
        err = np.abs(inner - ref).max() / np.abs(ref).max()
        assert err < tol, f"{label}: max relative error {err:.3g} >= {tol:.3g}"


@pytest.mark.parametrize("name", sorted(RUNTIME_LD_CASES))
def test_runtime_leading_dimensions(name):
    kw, lds = RUNTIME_LD_CASES[name]
    MM = Matmul(sm=SM, **kw)
    m, n, k = MM.size
    C, ref = run_runtime_ld(MM, lds, seed=13)
    assert np.isnan(C[m:, :]).all() and np.isnan(C[:, n:]).all(), "wrote outside C"
    tol = {8: 1e-13, 4: 1e-5}[np.dtype(MM.a_value_type).itemsize]
    np.testing.assert_allclose(C[:m, :n], ref, rtol=0, atol=tol * k)
