# SPDX-License-Identifier: Apache-2.0
"""Matmul (cuBLASDx GEMM) in user-style kernels under numba-cuda's simulator, against numpy.

Run: NUMBA_ENABLE_CUDASIM=1 python -m pytest -q tests/sim/test_gemm_sim.py

The kernel factories here (``make_user_kernel``, ``make_fragment_kernel``, ``run_case``) are
also what tests/gpu/test_gemm_sim_crosscheck.py runs on the GPU and in the simulator.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from numba import cuda

from nvmath_device import Matmul
from tests.device_arrays import to_device, to_host
from tests.gemm_kernels import several_per_block_kernel, user_kernel
from tests.harness import launch_guarded

SM = 90
F16, F32, F64 = np.float16, np.float32, np.float64
BF16 = "bfloat16"  # value type numpy.dtype(ml_dtypes.bfloat16)
RCC = ("row_major", "col_major", "col_major")

# (id, Matmul arguments). Small GEMMs: the simulator runs one Python thread per CUDA thread.
CASES = [
    ("24x40x16-f32-ccc", dict(size=(24, 40, 16), precision=F32, arrangement=("col_major",) * 3)),
    ("24x40x16-f32-rrr", dict(size=(24, 40, 16), precision=F32, arrangement=("row_major",) * 3)),
    ("24x40x16-f32-rcc", dict(size=(24, 40, 16), precision=F32, arrangement=RCC)),
    ("24x40x16-f32-crr", dict(size=(24, 40, 16), precision=F32, arrangement=("col_major", "row_major", "row_major"))),
    ("16x48x8-f64-rrr", dict(size=(16, 48, 8), precision=F64, arrangement=("row_major",) * 3)),
    ("32x16x64-f16-f16-f32-crc", dict(size=(32, 16, 64), precision=(F16, F16, F32),
                                      arrangement=("col_major", "row_major", "col_major"))),
    ("32x32x32-c64-rcr", dict(size=(32, 32, 32), precision=F32, data_type="complex",
                              arrangement=("row_major", "col_major", "row_major"))),
    ("16x24x32-c128-crc", dict(size=(16, 24, 32), precision=F64, data_type="complex",
                               arrangement=("col_major", "row_major", "col_major"))),
    ("32x32x32-f32-ccr-ld40-36-48", dict(size=(32, 32, 32), precision=F32, leading_dimension=(40, 36, 48),
                                         arrangement=("col_major", "col_major", "row_major"))),
    ("20x12x28-f32-rcc-ld31-29-23", dict(size=(20, 12, 28), precision=F32, leading_dimension=(31, 29, 23),
                                         arrangement=RCC)),
    ("16x16x16-f64-ccc-ld-suggested", dict(size=(16, 16, 16), precision=F64, leading_dimension="suggested")),
    ("32x32x32-f32-bd32x2", dict(size=(32, 32, 32), precision=F32, block_dim=(32, 2))),
    ("33x17x9-f32-partial", dict(size=(33, 17, 9), precision=F32)),
    ("64x64x64-f64-rrr-al16-bd128", dict(size=(64, 64, 64), precision=F64, arrangement=("row_major",) * 3,
                                         alignment=(16, 16, 16), block_dim=128)),
    ("32x32x32-bf16-rcc", dict(size=(32, 32, 32), precision=BF16, arrangement=RCC)),
    ("32x16x64-bf16-bf16-f32-crc", dict(size=(32, 16, 64), precision=(BF16, BF16, F32),
                                        arrangement=("col_major", "row_major", "col_major"))),
]
TOL = {2: 2e-3, 4: 2e-6, 8: 1e-14}

MISC = {
    "f32": Matmul(size=(32, 32, 32), precision=F32, arrangement=RCC, block_dim=64, sm=SM),
    "f32-other": Matmul(size=(32, 32, 32), precision=F32, arrangement=("col_major",) * 3, block_dim=64, sm=SM),
    "several": Matmul(size=(16, 16, 16), precision=F32, block_dim=32, sm=SM),
}


def all_descriptors(cases=CASES):
    return [Matmul(sm=SM, **kw) for _, kw in cases]


@pytest.fixture(scope="module", autouse=True)
def _tables():
    """Traits and register-fragment tables of every descriptor: one NVRTC run each, then cached."""
    from nvmath_device._build.gemm_sim_tables import prefetch_fragment_tables

    prefetch_fragment_tables(all_descriptors() + list(MISC.values()))


# ------------------------------------------------------------------------------ kernels
def make_user_kernel(MM):
    """:func:`tests.gemm_kernels.user_kernel`, jitted."""
    return cuda.jit(user_kernel(MM))


def make_fragment_kernel(MM):
    """Every thread's raw register fragment: accumulators start from ``ACC0`` (random values),
    ``acc += A B``, then each thread stores its accumulator, rows and cols as they are."""
    a_size, b_size = MM.a_size, MM.b_size
    b_off = MM.b_shared_memory_offset // MM.b_value_type.itemsize
    nacc = MM.accumulator_size

    @cuda.jit
    def kernel(SA, SB, ACC0, ACC, ROWS, COLS):
        g = cuda.blockIdx.x
        t = cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y * cuda.threadIdx.z)
        sa = cuda.shared.array(0, dtype=MM.a_value_type)[:a_size]
        sb = cuda.shared.array(0, dtype=MM.b_value_type)[b_off:b_off + b_size]
        for i in range(t, a_size, MM.max_threads_per_block):
            sa[i] = SA[g, i]
        for i in range(t, b_size, MM.max_threads_per_block):
            sb[i] = SB[g, i]
        cuda.syncthreads()
        acc = cuda.local.array(nacc, dtype=MM.c_value_type)
        rows = cuda.local.array(nacc, dtype=np.int32)
        cols = cuda.local.array(nacc, dtype=np.int32)
        for i in range(nacc):
            acc[i] = ACC0[g, t, i]
        MM.execute(sa, sb, acc)
        MM.fragment_coordinates(rows, cols)
        for i in range(nacc):
            ACC[g, t, i] = acc[i]
            ROWS[g, t, i] = rows[i]
            COLS[g, t, i] = cols[i]

    return kernel


def rand(rng, shape, dt):
    x = rng.uniform(-1, 1, shape)
    if np.dtype(dt).kind == "c":
        x = x + 1j * rng.uniform(-1, 1, shape)
    return x.astype(dt)


def scalars(MM):
    if MM.c_value_type.kind == "c":
        return 1.5 - 0.25j, -0.75 + 0.5j
    return 1.5, -0.75


def case_inputs(MM, batch, rng):
    """Inputs of both kernels: A, B, C (C inside a NaN-poisoned larger buffer), flat tiles, ACC0."""
    m, n, k = MM.size
    A = rand(rng, (batch, m, k), MM.a_value_type)
    B = rand(rng, (batch, k, n), MM.b_value_type)
    C = np.full((batch, m + 3, n + 5), np.nan, dtype=MM.c_value_type)
    C[:, :m, :n] = rand(rng, (batch, m, n), MM.c_value_type)
    SA = rand(rng, (batch, MM.a_size), MM.a_value_type)
    SB = rand(rng, (batch, MM.b_size), MM.b_value_type)
    ACC0 = rand(rng, (batch, MM.max_threads_per_block, MM.accumulator_size), MM.c_value_type)
    return {"A": A, "B": B, "C": C, "SA": SA, "SB": SB, "ACC0": ACC0}


def run_case(MM, inputs):
    """Run both kernels on ``inputs`` with this process's CUDA (GPU or simulator)."""
    A, B, C, SA, SB, ACC0 = (inputs[k] for k in ("A", "B", "C", "SA", "SB", "ACC0"))
    batch = A.shape[0]
    m, n = MM.m, MM.n
    alpha, beta = scalars(MM)
    dC = to_device(C)
    dD = to_device(C.copy())
    args = (to_device(A), to_device(B), dC, dD[:, :m, :n], alpha, beta)
    kernel = make_user_kernel(MM)
    kernel[batch, MM.block_dim, 0, MM.shared_memory_size](*args)
    nt, nacc = MM.max_threads_per_block, MM.accumulator_size
    dACC = to_device(np.zeros((batch, nt, nacc), MM.c_value_type))
    dR = to_device(np.zeros((batch, nt, nacc), np.int32))
    dK = to_device(np.zeros((batch, nt, nacc), np.int32))
    args = (to_device(SA), to_device(SB), to_device(ACC0), dACC, dR, dK)
    kernel = make_fragment_kernel(MM)
    kernel[batch, MM.block_dim, 0, MM.shared_memory_size_ab](*args)
    cuda.synchronize()
    return {"C": to_host(dC), "D": to_host(dD), "ACC": to_host(dACC),
            "ROWS": to_host(dR), "COLS": to_host(dK)}


def tile_matrix(MM, idx, flat):
    """(rows, cols) matrix held by the 1-D tile ``flat`` of operand ``idx`` (test-side layout)."""
    rows, cols = (MM.a_dim, MM.b_dim, MM.c_dim)[idx]
    ld = MM.leading_dimension[idx]
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    pos = r + c * ld if MM.arrangement[idx] == "col_major" else r * ld + c
    return flat[pos]


# ------------------------------------------------------------------------------ correctness
def _wide(x):
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


@pytest.mark.parametrize("kw", [kw for _, kw in CASES], ids=[i for i, _ in CASES])
def test_both_forms_against_numpy(kw):
    MM = Matmul(sm=SM, **kw)
    m, n, k = MM.size
    rng = np.random.default_rng(7)
    inputs = case_inputs(MM, 1, rng)  # one block per kernel: the simulator's cost is per thread
    out = run_case(MM, inputs)
    alpha, beta = scalars(MM)
    A, B, C0 = inputs["A"], inputs["B"], inputs["C"][:, :m, :n]
    ref = alpha * np.matmul(_wide(A), _wide(B)) + beta * _wide(C0)
    tol = TOL[min(np.dtype(p).itemsize for p in MM.precision)] * max(k, 8)
    scale = np.abs(ref).max()
    for name in ("C", "D"):
        got = out[name]
        assert np.isnan(got[:, m:, :]).all() and np.isnan(got[:, :, n:]).all(), f"{name}: wrote outside C"
        assert np.isfinite(got[:, :m, :n]).all(), f"{name}: not every C element was written"
        err = np.abs(_wide(got[:, :m, :n]) - ref).max() / scale
        assert err < tol, f"{name}: max relative error {err:.3g} >= {tol:.3g}"

    # the raw fragments: each C element in exactly one thread's accumulator, acc = ACC0 + A B there
    rows, cols, acc = out["ROWS"], out["COLS"], out["ACC"]
    assert ((rows == -1) == (cols == -1)).all()
    used = rows >= 0
    for g in range(rows.shape[0]):
        hits = np.zeros((m, n), int)
        np.add.at(hits, (rows[g][used[g]], cols[g][used[g]]), 1)
        assert (hits == 1).all(), "the fragments do not partition C"
        a = tile_matrix(MM, 0, inputs["SA"][g])
        b = tile_matrix(MM, 1, inputs["SB"][g])
        prod = _wide(a) @ _wide(b)
        want = _wide(inputs["ACC0"][g][used[g]]) + prod[rows[g][used[g]], cols[g][used[g]]]
        err = np.abs(_wide(acc[g][used[g]]) - want).max() / np.abs(want).max()
        assert err < tol, f"register fragment: max relative error {err:.3g}"
        assert np.isnan(acc[g][~used[g]]).all(), "unused accumulator values must read NaN (unspecified)"


def test_fragment_table_matches_partitioner_facts():
    """Independent checks of the compiled table: thread 0 holds C[0, 0] first; a partial tile
    (33x17) leaves -1 entries; the 64-thread table has 64 rows of accumulator_size pairs."""
    from nvmath_device._build.gemm_sim_tables import fragment_table

    for MM in all_descriptors():
        table, info = fragment_table(MM)
        assert table.shape == (MM.max_threads_per_block, MM.accumulator_size, 2)
        assert tuple(table[0, 0]) == (0, 0)
        assert info["mma_threads"] <= MM.max_threads_per_block
    MM = Matmul(sm=SM, size=(33, 17, 9), precision=F32)
    table, _ = fragment_table(MM)
    assert (table[..., 0] == -1).any() and (table[..., 0] >= 0).sum() == 33 * 17


def test_copy_helpers_keep_the_layout_and_padding():
    """load_a/load_b/load_c write element (r, c) at r + c*ld (col-major) or r*ld + c, never the
    padding; store_c reads it back from there."""
    MM = Matmul(sm=SM, size=(20, 12, 28), precision=F32, leading_dimension=(31, 29, 23), arrangement=RCC)
    m, n, k = MM.size

    @cuda.jit
    def kernel(A, B, C, OA, OB, OC, C2):
        sa = cuda.shared.array(MM.a_size, dtype=np.float32)
        sb = cuda.shared.array(MM.b_size, dtype=np.float32)
        sc = cuda.shared.array(MM.c_size, dtype=np.float32)
        t = cuda.threadIdx.x
        for i in range(t, MM.a_size, 64):
            sa[i] = -1.0
        for i in range(t, MM.b_size, 64):
            sb[i] = -1.0
        for i in range(t, MM.c_size, 64):
            sc[i] = -1.0
        cuda.syncthreads()
        MM.load_a(A, sa)
        MM.load_b(B, sb)
        MM.load_c(C, sc)
        cuda.syncthreads()
        for i in range(t, MM.a_size, 64):
            OA[i] = sa[i]
        for i in range(t, MM.b_size, 64):
            OB[i] = sb[i]
        for i in range(t, MM.c_size, 64):
            OC[i] = sc[i]
        MM.store_c(sc, C2)

    rng = np.random.default_rng(0)
    A, B, C = (rng.uniform(0, 1, s).astype(np.float32) for s in ((m, k), (k, n), (m, n)))
    OA, OB, OC = (np.zeros(s, np.float32) for s in (MM.a_size, MM.b_size, MM.c_size))
    C2 = np.zeros((m, n), np.float32)
    kernel[1, MM.block_dim](A, B, C, OA, OB, OC, C2)
    for idx, (mat, tile) in enumerate(((A, OA), (B, OB), (C, OC))):
        np.testing.assert_array_equal(tile_matrix(MM, idx, tile), mat)
        assert (tile == -1).sum() == tile.size - mat.size, "a copy helper wrote into the padding"
    assert OA[1 * 31 + 0] == A[1, 0] and OB[1 * 29 + 0] == B[0, 1]  # row-major A, col-major B
    np.testing.assert_array_equal(C2, C)


def test_beta_zero_does_not_read_c():
    MM = MISC["f32"]

    @cuda.jit
    def kernel(A, B, C):
        sa = cuda.shared.array(MM.a_size, dtype=np.float32)
        sb = cuda.shared.array(MM.b_size, dtype=np.float32)
        sc = cuda.shared.array(MM.c_size, dtype=np.float32)
        MM.load_a(A, sa)
        MM.load_b(B, sb)
        MM.load_c(C, sc)  # NaN
        cuda.syncthreads()
        MM.execute(2.0, sa, sb, 0.0, sc)
        cuda.syncthreads()
        MM.store_c(sc, C)

    rng = np.random.default_rng(1)
    A, B = (rng.uniform(-1, 1, (32, 32)).astype(np.float32) for _ in range(2))
    C = np.full((32, 32), np.nan, np.float32)
    kernel[1, MM.block_dim](A, B, C)
    np.testing.assert_allclose(C, 2.0 * (A.astype(np.float64) @ B), rtol=1e-5, atol=1e-5)


def test_several_gemms_per_block():
    """A (32, 3) launch of a block_dim=(32, 1, 1) GEMM: threadIdx.y picks one of 3 GEMMs."""
    MM = MISC["several"]
    G = 3
    kernel = cuda.jit(several_per_block_kernel(MM))

    rng = np.random.default_rng(2)
    A = rng.uniform(-1, 1, (2 * G, 16, 16)).astype(np.float32)
    B = rng.uniform(-1, 1, (2 * G, 16, 16)).astype(np.float32)
    C = np.full((2 * G, 16, 16), np.nan, np.float32)
    kernel[2, (32, G), 0, MM.shared_memory_size * G](A, B, C)
    np.testing.assert_allclose(C, np.matmul(A.astype(np.float64), B), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------ misuse


def _smem_kernel(MM, variant="ok", other=None):
    """Shared-memory form on static shared tiles, with one deliberate mistake per variant."""
    other = other or MM

    @cuda.jit
    def kernel(x):
        sa = cuda.shared.array(MM.a_size, dtype=MM.a_value_type)
        sb = cuda.shared.array(MM.b_size, dtype=MM.b_value_type)
        sc = cuda.shared.array(MM.c_size, dtype=MM.c_value_type)
        t = cuda.threadIdx.x
        if variant == "return" and t == 5:
            return
        if variant == "barrier" and t == 5:
            cuda.syncthreads()  # a different barrier than execute's: the simulator pairs them
            cuda.syncthreads()
            return
        if variant == "f64-a":
            MM.execute(1.0, cuda.shared.array(MM.a_size, dtype=np.float64), sb, 0.0, sc)
        elif variant == "short-c":
            MM.execute(1.0, sa, sb, 0.0, sc[: MM.c_size - 1])
        elif variant == "local-b":
            MM.execute(1.0, sa, cuda.local.array(MM.b_size, dtype=MM.b_value_type), 0.0, sc)
        elif variant == "complex-alpha":
            MM.execute(1j, sa, sb, 0.0, sc)
        elif variant == "complex-alpha-thread-5":
            MM.execute(1j if t == 5 else 1.0, sa, sb, 0.0, sc)
        elif variant == "four-args":
            MM.execute(sa, sb, 0.0, sc)
        elif variant == "other-mm" and t >= 32:
            other.execute(1.0, sa, sb, 0.0, sc)
        elif variant == "other-form" and t >= 32:
            acc = cuda.local.array(MM.accumulator_size, dtype=MM.c_value_type)
            MM.execute(sa, sb, acc)
        elif variant == "alpha-per-thread":
            MM.execute(1.0 + t, sa, sb, 0.0, sc)
        else:
            MM.execute(1.0, sa, sb, 0.0, sc)
        if variant == "twice" and t != 5:
            MM.execute(1.0, sa, sb, 0.0, sc)

    return kernel


@pytest.mark.parametrize(
    "variant,exc,match",
    [
        ("f64-a", TypeError, r"a \(2nd argument\) must hold float32 values.*got an array of float64"),
        ("short-c", ValueError, r"c \(5th argument\) has 1023 elements but MM.c_size = 1024"),
        ("local-b", TypeError, r"b \(3rd argument\) is not shared memory"),
        ("complex-alpha", TypeError, r"alpha \(1st argument\) is complex.*this GEMM is real"),
        ("four-args", TypeError, r"takes \(alpha, a, b, beta, c\).*or \(a, b, accumulator\).*got 4"),
        ("return", RuntimeError, r"1 of 64 thread\(s\) did not reach call #1: threadIdx \(5, 0, 0\)"),
        ("barrier", RuntimeError, r"1 of 64 thread\(s\) did not reach call #1: threadIdx \(5, 0, 0\)"),
        ("twice", RuntimeError, r"1 of 64 thread\(s\) did not reach call #2: threadIdx \(5, 0, 0\)"),
        ("other-mm", RuntimeError, r"different GEMM descriptors"),
        ("other-form", RuntimeError, r"called both execute\(alpha, a, b, beta, c\) \(thread \(0, 0, 0\)\) and execute\(a, b, accumulator\) \(thread \(32, 0, 0\)\)"),
        ("alpha-per-thread", RuntimeError, r"different alpha/beta"),
    ],
)
def test_misuse_of_execute(variant, exc, match):
    MM = MISC["f32"]
    assert MM.c_size == 1024 and MM.block_dim == (64, 1, 1)
    with pytest.raises(exc, match=match):
        launch_guarded(_smem_kernel(MM, variant, MISC["f32-other"]), 2, MM.block_dim, 0, np.zeros(1))


def test_correct_kernel_of_the_misuse_tests_runs():
    """The misuse kernel without a mistake passes (so the failures above are the mistakes)."""
    MM = MISC["f32"]
    launch_guarded(_smem_kernel(MM, "ok"), 2, MM.block_dim, 0, np.zeros(1))


@pytest.mark.parametrize("block", [(32, 1, 1), (128, 1, 1), (64, 2, 1), 48],
                         ids=["fewer", "more-x-stay-idle", "extra-y-is-ok", "48"])
def test_block_shape_must_match_block_dim(block):
    MM = MISC["f32"]
    if block in ((64, 2, 1), (128, 1, 1)):
        # a second GEMM per block along y, or more threads in x (idle in the GEMM): allowed, as by
        # cuBLASDx, for a block_dim of rank 1 (tests/sim/test_gemm_larger_launch_sim.py)
        launch_guarded(_smem_kernel(MM), 1, block, 0, np.zeros(1))
        return
    with pytest.raises(ValueError, match=r"MM.block_dim = \(64, 1, 1\).*blockDim = "):
        launch_guarded(_smem_kernel(MM), 1, block, 0, np.zeros(1))


def test_rank2_block_dim_needs_its_y():
    MM = Matmul(sm=SM, size=(32, 32, 32), precision=F32, block_dim=(32, 2))
    kernel = make_user_kernel(MM)
    x = np.zeros((1, 32, 32), np.float32)
    with pytest.raises(ValueError, match=r"MM.block_dim = \(32, 2, 1\).*blockDim = \(64, 1, 1\)"):
        launch_guarded(kernel, 1, 64, MM.shared_memory_size, x, x, x, x, 1.0, 0.0)


def test_too_little_dynamic_shared_memory():
    MM = Matmul(sm=SM, **dict(CASES)["24x40x16-f32-rcc"])
    kernel = make_user_kernel(MM)
    m, n, k = MM.size
    A, B = np.zeros((1, m, k), np.float32), np.zeros((1, k, n), np.float32)
    C = np.zeros((1, m + 3, n + 5), np.float32)
    with pytest.raises(ValueError, match=r"MM.shared_memory_size = \d+ bytes.*this launch has \d+ bytes"):
        launch_guarded(kernel, 1, MM.block_dim, MM.shared_memory_size - 64, A, B, C, C[:, :m, :n].copy(), 1.0, 0.0)


def _rmem_kernel(MM, make_acc, make_rows=None):
    @cuda.jit
    def kernel(x):
        sa = cuda.shared.array(MM.a_size, dtype=MM.a_value_type)
        sb = cuda.shared.array(MM.b_size, dtype=MM.b_value_type)
        acc = make_acc()
        if make_rows is None:
            MM.execute(sa, sb, acc)
        else:
            MM.fragment_coordinates(make_rows(), make_rows())

    return kernel


@pytest.mark.parametrize(
    "make_acc,make_rows,exc,match",
    [
        (lambda: np.zeros(16, np.float64), None, TypeError, r"accumulator.*must hold float32.*float64"),
        (lambda: np.zeros(15, np.float32), None, ValueError, r"accumulator.*has 15 values.*accumulator_size = 16"),
        (lambda: np.zeros((4, 4), np.float32), None, TypeError, r"accumulator.*1-D"),
        (lambda: 0.0, None, TypeError, r"accumulator.*must be a local array"),
        (lambda: None, lambda: np.zeros(16, np.int64), TypeError, r"fragment_coordinates: rows must hold int32"),
        (lambda: None, lambda: np.zeros(8, np.int32), ValueError, r"fragment_coordinates: rows has 8 values"),
    ],
    ids=["f64-acc", "short-acc", "2d-acc", "scalar-acc", "int64-rows", "short-rows"],
)
def test_misuse_of_register_form(make_acc, make_rows, exc, match):
    MM = MISC["f32"]
    assert MM.accumulator_size == 16
    with pytest.raises(exc, match=match):
        launch_guarded(_rmem_kernel(MM, make_acc, make_rows), 1, MM.block_dim, 0, np.zeros(1))


def test_misuse_of_copy_helpers():
    MM = MISC["f32"]

    @cuda.jit
    def wrong_dtype(A):
        MM.load_a(A, cuda.shared.array(MM.a_size, dtype=np.float32))

    @cuda.jit
    def small_global(A):
        MM.load_b(A, cuda.shared.array(MM.b_size, dtype=np.float32))

    @cuda.jit
    def small_tile(A):
        MM.load_c(A, cuda.shared.array(MM.c_size - 1, dtype=np.float32))

    with pytest.raises(TypeError, match=r"load_a: the global array \(1st argument\) must hold float32, got float64"):
        launch_guarded(wrong_dtype, 1, 64, 0, np.zeros((32, 32)))
    with pytest.raises(ValueError, match=r"load_b: the global array.*shape \(16, 32\); B is 32 x 32"):
        launch_guarded(small_global, 1, 64, 0, np.zeros((16, 32), np.float32))
    with pytest.raises(ValueError, match=r"load_c: the shared array \(2nd argument\) has 1023 elements but MM.c_size = 1024"):
        launch_guarded(small_tile, 1, 64, 0, np.zeros((32, 32), np.float32))


def test_outside_a_kernel():
    MM = MISC["f32"]
    with pytest.raises(RuntimeError, match="only be called inside a @cuda.jit kernel"):
        MM.execute(1.0, np.zeros(MM.a_size, np.float32), np.zeros(MM.b_size, np.float32), 0.0,
                   np.zeros(MM.c_size, np.float32))
    with pytest.raises(RuntimeError, match="only be called inside a @cuda.jit kernel"):
        MM.fragment_coordinates(np.zeros(16, np.int32), np.zeros(16, np.int32))
    with pytest.raises(RuntimeError, match="only be called inside a @cuda.jit kernel"):
        MM.load_a(np.zeros((32, 32), np.float32), np.zeros(MM.a_size, np.float32))


def test_bfloat16_user_spellings():
    """bfloat16 as a user writes it: shared arrays of ml_dtypes.bfloat16 (also the scalar class in
    dynamic shared memory) or numba's bfloat16, a bfloat16 alpha, numpy bfloat16 global arrays;
    a float32 global array for a bfloat16 tile is refused (the copy does not convert)."""
    import ml_dtypes
    from numba.cuda import types as cuda_types

    MM = Matmul(sm=SM, **dict(CASES)["32x32x32-bf16-rcc"])
    bf16 = ml_dtypes.bfloat16
    assert MM.c_value_type == np.dtype(bf16)

    @cuda.jit
    def kernel(A, B, C, alpha):
        sa = cuda.shared.array(MM.a_size, dtype=bf16)
        sb = cuda.shared.array(MM.b_size, dtype=cuda_types.bfloat16)
        sc = cuda.shared.array(0, dtype=bf16)
        MM.load_a(A, sa)
        MM.load_b(B, sb)
        cuda.syncthreads()
        MM.execute(alpha, sa, sb, 0, sc)
        cuda.syncthreads()
        MM.store_c(sc, C)

    rng = np.random.default_rng(3)
    A, B = rand(rng, MM.a_dim, bf16), rand(rng, MM.b_dim, bf16)
    C = np.full(MM.c_dim, np.nan, bf16)
    launch_guarded(kernel, 1, MM.block_dim, MM.c_size * 2, A, B, C, bf16(2.0))
    ref = 2.0 * (A.astype(np.float64) @ B.astype(np.float64))
    np.testing.assert_allclose(C.astype(np.float64), ref, rtol=2**-8, atol=2**-8 * np.abs(ref).max())
    with pytest.raises(TypeError, match=r"load_a: the global array \(1st argument\) must hold bfloat16, got float32"):
        launch_guarded(kernel, 1, MM.block_dim, MM.c_size * 2, A.astype(np.float32), B, C, 1.0)


def test_fragment_table_is_compiled_once_for_all_simulated_threads(monkeypatch):
    """Every simulated thread of a block asks for the register-fragment table at once; one of
    them compiles it (NVRTC, seconds), the others wait. Without that, each of the block's threads
    compiled the same table, one after another (more than 10 minutes for a 64-thread block)."""
    import time

    from nvmath_device._build import gemm_sim_tables
    from nvmath_device._sim.gemm import _Plan

    calls = []

    def slow_table(mm):
        calls.append(mm)
        time.sleep(0.2)  # long enough for every thread to arrive while the first one compiles
        return np.zeros((4, 1, 2), dtype=np.int32), {}

    monkeypatch.setattr(gemm_sim_tables, "fragment_table", slow_table)
    plan = _Plan(Matmul(size=(8, 8, 8), precision=np.float32, data_type="real", sm=90))
    got = []
    threads = [threading.Thread(target=lambda: got.append(plan.table)) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(got) == 16 and all(g is got[0] for g in got)


def test_an_error_inside_the_block_round_reaches_the_caller(monkeypatch):
    """An exception while the block's GEMMs are computed reaches the caller as itself (type,
    message, traceback), from whichever thread the simulator reports: before, every thread
    raised RuntimeError('Matmul.execute failed: IndexError: ...') without the traceback."""
    import traceback

    import nvmath_device._sim.gemm as sim_gemm

    def failing_compute(p, work):
        raise IndexError("index 99 is out of bounds for the C tile")

    monkeypatch.setattr(sim_gemm, "_compute", failing_compute)
    MM = MISC["f32"]
    for _ in range(3):
        with pytest.raises(IndexError, match="index 99 is out of bounds for the C tile") as info:
            launch_guarded(_smem_kernel(MM), 1, MM.block_dim, 0, np.zeros(1), timeout=60)
        assert "failing_compute" in "".join(traceback.format_exception(info.value))


def test_one_thread_with_a_bad_argument_reaches_the_caller():
    MM = MISC["f32"]
    for _ in range(3):
        with pytest.raises(TypeError, match=r"alpha \(1st argument\) is complex"):
            launch_guarded(_smem_kernel(MM, "complex-alpha-thread-5"), 1, MM.block_dim, 0, np.zeros(1),
                    timeout=60)
