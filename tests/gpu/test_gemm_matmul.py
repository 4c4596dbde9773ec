# SPDX-License-Identifier: Apache-2.0
"""cuBLASDx GEMMs inside @cuda.jit kernels on the GPU, checked against numpy float64.

Every case runs one kernel that computes, for a batch of GEMMs (one per block):
- the shared-memory form ``C = alpha * A @ B + beta * C`` (``MM.execute(alpha, a, b, beta, c)``),
- the register form ``D = alpha * (A @ B) + beta * D`` (``MM.execute(a, b, acc)`` +
  ``MM.fragment_coordinates``), written straight from registers to global memory.
Outputs live inside larger NaN-poisoned buffers: the poison must survive outside the tiles and
be gone inside them.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

# one xdist worker runs this module (its module fixture compiles/simulates every case): run
# the GPU suite with `-n N --dist loadgroup`
pytestmark = [pytest.mark.gpu, pytest.mark.xdist_group("test_gemm_matmul")]

from numba import cuda  # noqa: E402  (a GPU is required: these tests fail, not skip, without one)

from nvmath_device import Matmul  # noqa: E402
from nvmath_device._build import gemm_codegen  # noqa: E402
from tests.device_arrays import to_device, to_host  # noqa: E402
from tests.gemm_kernels import several_per_block_kernel, user_kernel  # noqa: E402

ARR = ("row_major", "col_major")
SM = None  # the current GPU
BF16 = ml_dtypes.bfloat16  # value type numpy.dtype(ml_dtypes.bfloat16): numba-cuda's bfloat16


def _cases():
    cases = []
    # every arrangement, real fp32, non-square
    for a in ARR:
        for b in ARR:
            for c in ARR:
                cases.append(dict(size=(24, 40, 16), precision=np.float32, arrangement=(a, b, c)))
    cases += [
        dict(size=(32, 32, 32), precision=np.float16, arrangement=("row_major", "col_major", "col_major")),
        dict(size=(32, 16, 64), precision=(np.float16, np.float16, np.float32), arrangement=("col_major", "row_major", "col_major")),
        # bfloat16: C in bfloat16 accumulates with bfloat16 FMAs (no tensor-core MMA for it);
        # bf16 x bf16 -> fp32 runs the sm_80 tensor-core MMA
        dict(size=(32, 32, 32), precision=BF16, arrangement=("row_major", "col_major", "col_major")),
        dict(size=(32, 16, 64), precision=(BF16, BF16, np.float32), arrangement=("col_major", "row_major", "col_major")),
        dict(size=(16, 24, 40), precision=BF16, arrangement=("col_major", "row_major", "row_major"), block_dim=64),
        dict(size=(64, 64, 64), precision=np.float64, leading_dimension="suggested"),
        dict(size=(16, 48, 8), precision=np.float64, arrangement=("row_major", "row_major", "row_major")),
        dict(size=(32, 32, 32), precision=np.float32, data_type="complex", arrangement=("row_major", "col_major", "row_major")),
        dict(size=(16, 24, 32), precision=np.float64, data_type="complex", arrangement=("col_major", "row_major", "col_major")),
        dict(size=(32, 32, 32), precision=np.float32, leading_dimension=(40, 36, 48), arrangement=("col_major", "col_major", "row_major")),
        dict(size=(20, 12, 28), precision=np.float32, leading_dimension=(31, 29, 23), arrangement=("row_major", "col_major", "col_major")),
        dict(size=(32, 32, 32), precision=np.float32, block_dim=128),
        dict(size=(32, 32, 32), precision=np.float32, block_dim=(32, 2)),
        dict(size=(33, 17, 9), precision=np.float32),
        # tensor_gemm runs the swizzled MMA here (accumulator layouts of both partitioners equal):
        # the register form's coordinates must follow it (wrong results before that was handled)
        dict(size=(64, 64, 64), precision=np.float64, arrangement=("row_major",) * 3,
             alignment=(16, 16, 16), block_dim=128),
    ]
    return cases


CASES = _cases()


def _id(c):
    p = c["precision"]
    p = "-".join(np.dtype(x).name for x in p) if isinstance(p, tuple) else np.dtype(p).name
    arr = "".join(x[0] for x in c.get("arrangement", ("c", "c", "c")))
    extra = "".join(f"-{k}={v}" for k, v in c.items() if k not in ("size", "precision", "arrangement"))
    return f"{'x'.join(map(str, c['size']))}-{p}-{arr}{extra}"


@pytest.fixture(scope="module", autouse=True)
def _prefetch():
    # compile every descriptor's LTO-IR up front, in parallel processes (NVRTC is per process)
    gemm_codegen.prefetch_ltoir([Matmul(sm=SM, **c) for c in CASES])


def _make_kernel(MM):
    return cuda.jit(user_kernel(MM))


def _rand(rng, shape, dt):
    x = rng.uniform(-1, 1, shape)
    if np.dtype(dt).kind == "c":
        x = x + 1j * rng.uniform(-1, 1, shape)
    return x.astype(dt)


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_matmul_correct(case):
    MM = Matmul(sm=SM, **case)
    m, n, k = MM.size
    batch = 3
    rng = np.random.default_rng(hash(_id(case)) % 2**32)
    A = _rand(rng, (batch, m, k), MM.a_value_type)
    B = _rand(rng, (batch, k, n), MM.b_value_type)
    C0 = _rand(rng, (batch, m, n), MM.c_value_type)
    cplx = MM.c_value_type.kind == "c"
    alpha = (1.5 - 0.25j) if cplx else 1.5
    beta = (-0.75 + 0.5j) if cplx else -0.75
    # outputs inside larger NaN-poisoned buffers
    C = np.full((batch, m + 3, n + 5), np.nan, dtype=MM.c_value_type)
    C[:, :m, :n] = C0
    D = C.copy()
    dA, dB, dC, dD = (to_device(x) for x in (A, B, C, D))
    kernel = _make_kernel(MM)
    bx, by, bz = MM.block_dim
    args = (dA, dB, dC, dD[:, :m, :n], alpha, beta)
    kernel[batch, (bx, by, bz), 0, MM.shared_memory_size](*args)
    cuda.synchronize()
    C, D = to_host(dC), to_host(dD)

    ref = alpha * np.matmul(A.astype(np.complex128 if cplx else np.float64), B.astype(np.complex128 if cplx else np.float64))
    ref = ref + beta * C0.astype(ref.dtype)
    # by the least precise operand; bfloat16: 2**-8 per k (bfloat16 accumulation, measured by
    # emulating it in numpy: ~0.015 relative for k = 32..64, with two roundings per FMA)
    eps = {"float16": 5e-3, "bfloat16": 2**-8, "float32": 1e-6, "float64": 1e-14}
    tol = max(eps[np.dtype(p).name] for p in MM.precision) * max(k, 8)
    scale = np.abs(ref).max()
    for name, out in (("shared-memory form", C), ("register form", D)):
        assert np.isnan(out[:, m:, :]).all() and np.isnan(out[:, :, n:]).all(), f"{name}: wrote outside C"
        got = out[:, :m, :n]
        assert np.isfinite(got).all(), f"{name}: some C elements were not written"
        err = np.abs(got.astype(ref.dtype) - ref).max() / scale
        assert err < tol, f"{name}: max relative error {err:.3g} >= {tol:.3g}"


def test_beta_zero_ignores_poisoned_c():
    """beta == 0 must not read C (NaN * 0 would poison the result)."""
    MM = Matmul(size=(32, 32, 32), precision=np.float32, arrangement=("row_major", "col_major", "col_major"), sm=SM)
    m, n, k = MM.size
    rng = np.random.default_rng(1)
    A = _rand(rng, (2, m, k), np.float32)
    B = _rand(rng, (2, k, n), np.float32)
    C = np.full((2, m, n), np.nan, np.float32)
    D = np.zeros((2, m, n), np.float32)
    dC = cuda.to_device(C)
    kernel = _make_kernel(MM)
    kernel[2, MM.block_dim, 0, MM.shared_memory_size](cuda.to_device(A), cuda.to_device(B), dC, cuda.to_device(D), 2.0, 0.0)
    got = dC.copy_to_host()
    np.testing.assert_allclose(got, 2.0 * np.matmul(A.astype(np.float64), B), rtol=1e-4, atol=1e-4)


def test_several_gemms_per_block():
    """A (64, 4) launch of a (64, 1, 1) GEMM: threadIdx.y picks one of 4 GEMMs (cuBLASDx uses threadIdx.x only)."""
    MM = Matmul(size=(32, 32, 32), precision=np.float32, block_dim=64, sm=SM)
    m, n, k = MM.size
    G = 4
    per = MM.shared_memory_size

    kernel = cuda.jit(several_per_block_kernel(MM))
    rng = np.random.default_rng(2)
    A = _rand(rng, (3 * G, m, k), np.float32)
    B = _rand(rng, (3 * G, k, n), np.float32)
    dC = cuda.to_device(np.full((3 * G, m, n), np.nan, np.float32))
    kernel[3, (64, G), 0, per * G](cuda.to_device(A), cuda.to_device(B), dC)
    np.testing.assert_allclose(dC.copy_to_host(), np.matmul(A.astype(np.float64), B), rtol=1e-4, atol=1e-4)
