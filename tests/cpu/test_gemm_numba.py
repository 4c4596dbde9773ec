# SPDX-License-Identifier: Apache-2.0
"""Matmul inside Numba kernels without a GPU: typing, lowering, and a kernel linked to an sm_90 cubin."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, types
from numba.core.errors import TypingError
from numba.cuda import types as cuda_types

from nvmath_device import Matmul
from nvmath_device.aot import compile_kernel
from tests.gemm_kernels import user_kernel

MM = Matmul(size=(32, 32, 32), precision=np.float32, arrangement=("row_major", "col_major", "col_major"), sm=90)
f2 = types.float32[:, :]


def k_static(A, B, C, alpha, beta):
    """The shared-memory form with statically sized shared arrays."""
    sa = cuda.shared.array(MM.a_size, dtype=MM.a_value_type)
    sb = cuda.shared.array(MM.b_size, dtype=MM.b_value_type)
    sc = cuda.shared.array(MM.c_size, dtype=MM.c_value_type)
    MM.load_a(A, sa)
    MM.load_b(B, sb)
    MM.load_c(C, sc)
    cuda.syncthreads()
    MM.execute(alpha, sa, sb, beta, sc)
    cuda.syncthreads()
    MM.store_c(sc, C)


def test_kernel_links_to_sm90_cubin():
    ck = compile_kernel(k_static, (f2, f2, f2, types.float64, types.int32), sm=90)
    assert ck.cubin[:4] == b"\x7fELF"
    assert ck.linked == (f"{MM.symbol}.ltoir",)
    assert ck.entry.encode() in ck.cubin


def test_dynamic_shared_memory_slices_type_and_link():
    a_off = MM.a_shared_memory_offset // 4
    b_off = MM.b_shared_memory_offset // 4
    c_off = MM.c_shared_memory_offset // 4

    def k(A, B, C):
        smem = cuda.shared.array(0, dtype=np.float32)
        sa = smem[a_off:a_off + MM.a_size]
        sb = smem[b_off:b_off + MM.b_size]
        sc = smem[c_off:c_off + MM.c_size]
        MM.load_a(A, sa)
        MM.load_b(B, sb)
        cuda.syncthreads()
        MM.execute(1.0, sa, sb, 0.0, sc)
        cuda.syncthreads()
        MM.store_c(sc, C)

    ck = compile_kernel(k, (f2, f2, f2), sm=90)
    assert ck.cubin[:4] == b"\x7fELF"


def _typing_error(body_src, argtypes=(f2, f2, f2), match=""):
    ns = {"cuda": cuda, "np": np, "MM": MM, "CM": CM}
    exec(body_src, ns)
    with pytest.raises(TypingError, match=match):
        compile_kernel(ns["k"], argtypes, sm=90)


CM = Matmul(size=(8, 8, 8), precision=np.float64, data_type="complex", block_dim=32, sm=90)

TYPING_ERRORS = [
    ("""
def k(A, B, C):
    sa = cuda.shared.array(MM.a_size, dtype=np.float64)
    MM.execute(1.0, sa, sa, 0.0, sa)
""", "a \\(2nd argument\\) must hold float32"),
    ("""
def k(A, B, C):
    sa = cuda.shared.array(MM.a_size, dtype=np.float32)
    MM.execute(1.0, sa, sa, 0.0)
""", "takes \\(alpha, a, b, beta, c\\).*got 4"),
    ("""
def k(A, B, C):
    sa = cuda.shared.array(MM.a_size, dtype=np.float32)
    MM.execute(1j, sa, sa, 0.0, sa)
""", "alpha.*complex.*real"),
    ("""
def k(A, B, C):
    sa = cuda.shared.array(MM.a_size, dtype=np.float32)
    MM.execute(sa, sa, 0.0, sa, sa)
""", "alpha \\(1st argument\\) must be a scalar"),
    ("""
def k(A, B, C):
    sa = cuda.shared.array(MM.a_size, dtype=np.float32)
    acc = cuda.local.array((4, 4), dtype=np.float32)
    MM.execute(sa, sa, acc)
""", "accumulator.*1 dimension"),
    ("""
def k(A, B, C):
    r = cuda.local.array(MM.accumulator_size, dtype=np.int64)
    MM.fragment_coordinates(r, r)
""", "rows must hold int32"),
    ("""
def k(A, B, C):
    sa = cuda.shared.array(MM.a_size, dtype=np.float32)
    MM.load_a(A[0], sa)
""", "load_a: the global array.*2-D"),
    ("""
def k(A, B, C):
    sa = cuda.shared.array((32, 32), dtype=np.float32)
    MM.store_c(sa, C)
""", "store_c: the shared array.*1 dimension"),
    ("""
def k(A, B, C):
    sa = cuda.shared.array(MM.a_size, dtype=np.float32)
    MM.execute(1.0, sa[::2], sa, 0.0, sa)
""", "C-contiguous"),
    ("""
def k(A, B, C):
    sa = cuda.shared.array(CM.a_size, dtype=np.complex64)
    CM.execute(1.0, sa, sa, 0.0, sa)
""", "must hold complex128"),
]


@pytest.mark.parametrize("src,match", TYPING_ERRORS, ids=[str(i) for i in range(len(TYPING_ERRORS))])
def test_typing_errors_say_what_is_expected(src, match):
    _typing_error(src, match=match)


def test_attributes_are_constants():
    def k(out):
        out[0] = MM.m
        out[1] = MM.accumulator_size
        out[2] = MM.block_dim[0]
        out[3] = MM.shared_memory_size
        out[4] = MM.lda
        x = cuda.local.array(MM.accumulator_size, dtype=MM.c_value_type)
        x[0] = 1
        out[5] = x.size

    ck = compile_kernel(k, (types.int64[::1],), sm=90)
    assert ck.linked == ()  # no Dx code needed for attributes only


# ---------------------------------------------------------------------------- bfloat16
# Value types are numpy.dtype(ml_dtypes.bfloat16), which numba-cuda types as its bfloat16.
BF = Matmul(size=(32, 32, 32), precision="bfloat16", arrangement=("row_major", "col_major", "col_major"), sm=90)
BFX = Matmul(size=(32, 16, 64), precision=("bfloat16", "bfloat16", np.float32),
             arrangement=("col_major", "row_major", "col_major"), sm=90)
bf2 = types.Array(cuda_types.bfloat16, 2, "A")
bf3 = types.Array(cuda_types.bfloat16, 3, "C")


@pytest.mark.parametrize("MM", [BF, BFX], ids=["bf16", "bf16-bf16-f32"])
def test_bfloat16_kernel_links_to_sm90_cubin(MM):
    import ml_dtypes
    from numba.cuda.typing.typeof import typeof

    a3 = typeof(np.zeros((2, 2, 2), ml_dtypes.bfloat16))  # what cuda.to_device(bfloat16 array) types as
    assert a3 == bf3
    c3 = bf3 if MM.c_value_type.itemsize == 2 else types.float32[:, :, ::1]
    d3 = types.Array(c3.dtype, 3, "A")
    ck = compile_kernel(user_kernel(MM), (a3, a3, c3, d3, types.float64, types.float64), sm=90)
    assert ck.cubin[:4] == b"\x7fELF"
    assert f"{MM.symbol}.ltoir" in ck.linked  # (numba-cuda links its bfloat16 conversions as CUDA C++)
    assert ck.entry.encode() in ck.cubin


def test_bfloat16_static_shared_local_arrays_and_scalars():
    """cuda.shared.array / cuda.local.array of bfloat16 (MM.*_value_type, ml_dtypes.bfloat16 or
    numba's bfloat16) and alpha/beta of any real type, including bfloat16 and bool."""
    import ml_dtypes

    def k(A, C, alpha, beta, x):
        sa = cuda.shared.array(BF.a_size, dtype=BF.a_value_type)
        sb = cuda.shared.array(BF.b_size, dtype=ml_dtypes.bfloat16)
        sc = cuda.shared.array(BF.c_size, dtype=cuda_types.bfloat16)
        MM_ = BF
        MM_.load_a(A, sa)
        MM_.load_b(A, sb)
        MM_.load_c(C, sc)
        cuda.syncthreads()
        MM_.execute(alpha, sa, sb, beta, sc)
        MM_.execute(x, sa, sb, 1, sc)
        cuda.syncthreads()
        MM_.store_c(sc, C)

    for alpha, beta in ((types.int8, types.boolean), (types.float32, types.int64)):
        ck = compile_kernel(k, (bf2, bf2, alpha, beta, cuda_types.bfloat16), sm=90)
        assert ck.cubin[:4] == b"\x7fELF"


BF_TYPING_ERRORS = [
    ("""
def k(A, B, C):
    sa = cuda.shared.array(BF.a_size, dtype=np.float16)
    BF.execute(1.0, sa, sa, 0.0, sa)
""", "a \\(2nd argument\\) must hold bfloat16 .*got an array of float16"),
    ("""
def k(A, B, C):
    sa = cuda.shared.array(BF.a_size, dtype=BF.a_value_type)
    BF.load_a(A, sa)
""", "load_a: the global array.*must hold bfloat16.*got float32.*does not convert"),
    ("""
def k(A, B, C):
    sa = cuda.shared.array(BF.a_size, dtype=BF.a_value_type)
    acc = cuda.local.array(BF.accumulator_size, dtype=np.float32)
    BF.execute(sa, sa, acc)
""", "accumulator.*must hold bfloat16.*got an array of float32"),
    ("""
def k(A, B, C):
    sa = cuda.shared.array(BFX.a_size, dtype=BFX.a_value_type)
    sc = cuda.shared.array(BFX.c_size, dtype=BFX.a_value_type)
    BFX.execute(1.0, sa, sa, 0.0, sc)
""", "c \\(5th argument\\) must hold float32.*got an array of bfloat16"),
]


@pytest.mark.parametrize("src,match", BF_TYPING_ERRORS, ids=[str(i) for i in range(len(BF_TYPING_ERRORS))])
def test_bfloat16_typing_errors_say_what_is_expected(src, match):
    ns = {"cuda": cuda, "np": np, "BF": BF, "BFX": BFX}
    exec(src, ns)
    with pytest.raises(TypingError, match=match):
        compile_kernel(ns["k"], (f2, f2, f2), sm=90)
