# SPDX-License-Identifier: Apache-2.0
"""``Matmul.execute`` called by only part of the launched block, as cuBLASDx allows on the GPU
(nvmath-python's ``cublasdx_blockdim_gemm_fp16.py``, scenarios 2 and 3): a launch holds several
GEMMs' worth of threads (the dimensions past the rank of ``block_dim``), the threads of some of
those GEMMs call ``execute`` and the others wait at their next ``cuda.syncthreads()`` until the
callers are done. The simulator's GEMM threads meet at a barrier of their own, so the threads
that do not call are not released early: in these kernels the *non-calling* threads read C back
after the barrier, so an early release would store C as it was before the GEMM.

Misuse stays an error: some threads of one GEMM calling while others of the same GEMM do not
(whether those return or wait at a barrier), and a thread's bad argument still reaches the
caller. Expected values come from NumPy in float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from nvmath_device import Matmul
from tests.harness import launch_guarded

SM = 90
_KW = dict(
    size=(16, 16, 16),
    precision=np.float32,
    data_type="real",
    arrangement=("row_major", "col_major", "col_major"),
    sm=SM,
)
MM1 = Matmul(block_dim=(64, 1, 1), **_KW)  # rank 1: a (64, 2) launch holds two GEMMs (y = 0, 1)
MM2 = Matmul(block_dim=(32, 2, 1), **_KW)  # rank 2: a (32, 2, 2) launch holds two GEMMs (z = 0, 1)
MM3 = Matmul(block_dim=(64, 1, 1), **dict(_KW, size=(16, 16, 8)))  # another GEMM of MM1's threads
# rank 2: the one GEMM of a (64, 2) launch, spanning MM1's two
MM4 = Matmul(block_dim=(64, 2, 1), **_KW)
A1, B1, C1 = MM1.a_size, MM1.b_size, MM1.c_size
A2, B2, C2 = 2 * A1, 2 * B1, 2 * C1  # two GEMMs' tiles (a shared array's size must be a constant)
ACC = MM1.accumulator_size
A3_SIZE, B3_SIZE, C3_SIZE = MM3.a_size, MM3.b_size, MM3.c_size


@cuda.jit
def rank1_some_y_call(A, B, C, caller_y, out):
    """Only the threads with threadIdx.y == caller_y call execute (x past 64 too, idle); the
    threads of the other y store C after the barrier."""
    sa = cuda.shared.array(A1, dtype=np.float32)
    sb = cuda.shared.array(B1, dtype=np.float32)
    sc = cuda.shared.array(C1, dtype=np.float32)
    MM1.load_a(A, sa)
    MM1.load_b(B, sb)
    MM1.load_c(C, sc)
    cuda.syncthreads()
    if cuda.threadIdx.y == caller_y:
        MM1.execute(2.0, sa, sb, 0.5, sc)
    cuda.syncthreads()
    if cuda.threadIdx.y != caller_y:
        MM1.store_c(sc, out)


@cuda.jit
def rank2_z0_calls(A, B, C, out):
    """block_dim (32, 2) launched (32, 2, 2): only threadIdx.z == 0 calls; z == 1 stores C."""
    sa = cuda.shared.array(A1, dtype=np.float32)
    sb = cuda.shared.array(B1, dtype=np.float32)
    sc = cuda.shared.array(C1, dtype=np.float32)
    MM2.load_a(A, sa)
    MM2.load_b(B, sb)
    MM2.load_c(C, sc)
    cuda.syncthreads()
    if cuda.threadIdx.z == 0:
        MM2.execute(1.0, sa, sb, -1.0, sc)
    cuda.syncthreads()
    if cuda.threadIdx.z == 1:
        MM2.store_c(sc, out)


@cuda.jit
def rank1_groups_in_turn(A, B, C, out):
    """The two GEMMs of a (64, 2) launch, one after the other: y == 0 computes C0 = A0 B0 + C0,
    then y == 1 computes C1 = A1 C0 + C1 (C0's tile read as B: both 16 x 16 column-major)."""
    sa = cuda.shared.array(A2, dtype=np.float32)
    sb = cuda.shared.array(B2, dtype=np.float32)
    sc = cuda.shared.array(C2, dtype=np.float32)
    y = cuda.threadIdx.y
    a = sa[y * A1 : (y + 1) * A1]
    b = sb[y * B1 : (y + 1) * B1]
    c = sc[y * C1 : (y + 1) * C1]
    MM1.load_a(A[y], a)
    MM1.load_b(B[y], b)
    MM1.load_c(C[y], c)
    cuda.syncthreads()
    if y == 0:
        MM1.execute(1.0, a, b, 1.0, c)
    cuda.syncthreads()
    if y == 1:
        MM1.execute(1.0, a, sc[0:C1], 1.0, c)
    cuda.syncthreads()
    MM1.store_c(c, out[y])


@cuda.jit
def rank1_y1_register_form(A, B, out):
    """The register form, called by the threads with threadIdx.y == 1 only; each writes its
    fragment through fragment_coordinates."""
    sa = cuda.shared.array(A1, dtype=np.float32)
    sb = cuda.shared.array(B1, dtype=np.float32)
    MM1.load_a(A, sa)
    MM1.load_b(B, sb)
    cuda.syncthreads()
    if cuda.threadIdx.y == 1:
        acc = cuda.local.array(ACC, dtype=np.float32)
        rows = cuda.local.array(ACC, dtype=np.int32)
        cols = cuda.local.array(ACC, dtype=np.int32)
        for i in range(ACC):
            acc[i] = 0.0
        MM1.execute(sa, sb, acc)
        MM1.fragment_coordinates(rows, cols)
        for i in range(ACC):
            if rows[i] >= 0:
                out[rows[i], cols[i]] = acc[i]
    cuda.syncthreads()


@cuda.jit
def rank1_part_of_one_gemm(A, B, C, mode, out):
    """Misuse: of the GEMM at y == 0 only the threads x < 32 call execute; the threads x >= 32
    of that GEMM return (mode 0) or wait at the barrier (mode 1). Mode 2: both GEMMs call,
    but at y == 1 thread x == 40 does not. Mode 3: y == 0 calls, thread (5, 0, 0) with a complex
    alpha (its own argument error)."""
    sa = cuda.shared.array(A1, dtype=np.float32)
    sb = cuda.shared.array(B1, dtype=np.float32)
    sc = cuda.shared.array(C1, dtype=np.float32)
    MM1.load_a(A, sa)
    MM1.load_b(B, sb)
    MM1.load_c(C, sc)
    cuda.syncthreads()
    x = cuda.threadIdx.x
    y = cuda.threadIdx.y
    if mode == 0 and y == 0 and x >= 32:
        return
    if mode <= 1 and y == 0 and x < 32:
        MM1.execute(1.0, sa, sb, 0.0, sc)
    if mode == 2 and not (y == 1 and x == 40):
        MM1.execute(1.0, sa, sb, 0.0, sc)
    if mode == 3 and y == 0:
        MM1.execute(1j if x == 5 else 1.0, sa, sb, 0.0, sc)
    cuda.syncthreads()
    MM1.store_c(sc, out)


@cuda.jit
def rank1_two_descriptors(A, B, A3, B3, out, out3):
    """The GEMM at y == 0 is MM1 (16 x 16 x 16), the one at y == 1 is MM3 (16 x 16 x 8)."""
    sa = cuda.shared.array(A1, dtype=np.float32)
    sb = cuda.shared.array(B1, dtype=np.float32)
    sc = cuda.shared.array(C1, dtype=np.float32)
    sa3 = cuda.shared.array(A3_SIZE, dtype=np.float32)
    sb3 = cuda.shared.array(B3_SIZE, dtype=np.float32)
    sc3 = cuda.shared.array(C3_SIZE, dtype=np.float32)
    MM1.load_a(A, sa)
    MM1.load_b(B, sb)
    MM3.load_a(A3, sa3)
    MM3.load_b(B3, sb3)
    cuda.syncthreads()
    if cuda.threadIdx.y == 0:
        MM1.execute(1.0, sa, sb, 0.0, sc)
    else:
        MM3.execute(1.0, sa3, sb3, 0.0, sc3)
    cuda.syncthreads()
    MM1.store_c(sc, out)
    MM3.store_c(sc3, out3)


@cuda.jit
def rank1_and_rank2_gemm(A, B, out):
    """Misuse: y == 0 calls MM1 (its GEMM: the threads y == 0), y == 1 calls MM4, whose one GEMM
    needs all 128 threads of the launch."""
    sa = cuda.shared.array(A1, dtype=np.float32)
    sb = cuda.shared.array(B1, dtype=np.float32)
    sc = cuda.shared.array(C1, dtype=np.float32)
    MM1.load_a(A, sa)
    MM1.load_b(B, sb)
    cuda.syncthreads()
    if cuda.threadIdx.y == 0:
        MM1.execute(1.0, sa, sb, 0.0, sc)
    else:
        MM4.execute(1.0, sa, sb, 0.0, sc)
    cuda.syncthreads()
    MM1.store_c(sc, out)


def _data(seed, *shape):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(3)]


def _ref(alpha, a, b, beta, c):
    return alpha * (a.astype(np.float64) @ b) + beta * c.astype(np.float64)


@pytest.mark.parametrize("caller_y", [0, 1])
@pytest.mark.parametrize("threads_x", [64, 96])
def test_rank1_only_one_gemm_of_the_launch_calls(caller_y, threads_x):
    """nvmath-python's scenario 2 (BlockDim(128) launched as (196, 2), y == 0 calls), smaller:
    the other y's threads wait at their syncthreads for the GEMM and read the result."""
    A, B, C = _data(1, 16, 16)
    out = np.full((16, 16), np.nan, np.float32)
    launch_guarded(rank1_some_y_call, 1, (threads_x, 2, 1), 0, A, B, C, caller_y, out)
    np.testing.assert_allclose(out, _ref(2.0, A, B, 0.5, C), rtol=1e-5, atol=1e-5)


def test_rank1_no_gemm_calls():
    """No thread calls: no GEMM runs, nothing waits (caller_y 2 is no thread's y)."""
    A, B, C = _data(2, 16, 16)
    out = np.full((16, 16), np.nan, np.float32)
    launch_guarded(rank1_some_y_call, 1, (64, 2, 1), 0, A, B, C, 2, out)
    np.testing.assert_array_equal(out, C)


def test_rank2_only_z0_calls():
    """nvmath-python's scenario 3 (BlockDim(32, 4) launched as (32, 4, 2), z == 0 calls), smaller."""
    A, B, C = _data(3, 16, 16)
    out = np.full((16, 16), np.nan, np.float32)
    launch_guarded(rank2_z0_calls, 1, (32, 2, 2), 0, A, B, C, out)
    np.testing.assert_allclose(out, _ref(1.0, A, B, -1.0, C), rtol=1e-5, atol=1e-5)


def test_rank1_gemms_call_in_turn():
    """Two GEMMs of one launch calling one after the other (each its call #1) both run, in order."""
    assert tuple(MM1.leading_dimension) == (16, 16, 16)
    A, B, C = _data(4, 2, 16, 16)
    out = np.full((2, 16, 16), np.nan, np.float32)
    launch_guarded(rank1_groups_in_turn, 1, (64, 2, 1), 0, A, B, C, out)
    c0 = _ref(1.0, A[0], B[0], 1.0, C[0])
    c1 = _ref(1.0, A[1], c0.astype(np.float32), 1.0, C[1])
    np.testing.assert_allclose(out[0], c0, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[1], c1, rtol=1e-5, atol=1e-4)


def test_rank1_register_form_by_one_gemm():
    A, B, _ = _data(5, 16, 16)
    out = np.full((16, 16), np.nan, np.float32)
    launch_guarded(rank1_y1_register_form, 1, (64, 2, 1), 0, A, B, out)
    np.testing.assert_allclose(out, A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "mode,missing",
    [
        (0, r"32 of 64 thread\(s\) did not reach call #1: threadIdx \(32, 0, 0\), \(33, 0, 0\)"),
        (1, r"32 of 64 thread\(s\) did not reach call #1: threadIdx \(32, 0, 0\), \(33, 0, 0\)"),
        (2, r"1 of 64 thread\(s\) did not reach call #1: threadIdx \(40, 1, 0\) "),
    ],
    ids=["others-return", "others-wait-at-a-barrier", "one-missing-in-the-second-gemm"],
)
def test_part_of_one_gemm_calling_is_an_error(mode, missing):
    A, B, C = _data(6, 16, 16)
    out = np.zeros((16, 16), np.float32)
    for _ in range(2):  # the same error each time (no hang, no leftover state)
        with pytest.raises(
            RuntimeError,
            match=r"Matmul.execute is collective over a group of threads "
            r"\(the GEMM of block_dim \(64, 1, 1\) at threadIdx.y, threadIdx.z = \(\d, 0\)\).*"
            + missing,
        ):
            launch_guarded(rank1_part_of_one_gemm, 1, (64, 2, 1), 0, A, B, C, mode, out, timeout=60)


def test_a_bad_argument_in_a_partly_calling_launch_reaches_the_caller():
    A, B, C = _data(7, 16, 16)
    out = np.zeros((16, 16), np.float32)
    for _ in range(3):
        with pytest.raises(
            TypeError, match=r"alpha \(1st argument\) is complex.*this GEMM is real"
        ):
            launch_guarded(rank1_part_of_one_gemm, 1, (64, 2, 1), 0, A, B, C, 3, out, timeout=60)


def test_two_gemms_of_one_launch_may_be_different_descriptors():
    """Each GEMM of the launch is its own (as on the GPU, where execute has no block barrier)."""
    A, B, _ = _data(8, 16, 16)
    A3, B3 = _data(9, 16, 8)[0], _data(10, 8, 16)[0]
    out = np.full((16, 16), np.nan, np.float32)
    out3 = np.full((16, 16), np.nan, np.float32)
    launch_guarded(rank1_two_descriptors, 1, (64, 2, 1), 0, A, B, A3, B3, out, out3)
    np.testing.assert_allclose(out, A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out3, A3.astype(np.float64) @ B3, rtol=1e-5, atol=1e-5)


def test_a_gemm_whose_threads_called_another_gemm_is_an_error():
    A, B, _ = _data(11, 16, 16)
    out = np.zeros((16, 16), np.float32)
    with pytest.raises(
        RuntimeError,
        match=r"\(the GEMM of block_dim \(64, 2, 1\) at threadIdx.z = 0\).*64 of 128 thread\(s\) "
        r"did not reach call #1: threadIdx \(0, 0, 0\)",
    ):
        launch_guarded(rank1_and_rank2_gemm, 1, (64, 2, 1), 0, A, B, out, timeout=60)
