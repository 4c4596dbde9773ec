# SPDX-License-Identifier: Apache-2.0
"""Matmul descriptor: validation (before any NVRTC run) and the traits computed in Python."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from nvmath_device import Matmul
from nvmath_device._build import toolchain


@pytest.fixture(autouse=True)
def _no_nvrtc():
    before = toolchain.stats["nvrtc_compiles"]
    yield
    assert toolchain.stats["nvrtc_compiles"] == before, "descriptor validation must not run NVRTC"


def test_python_traits_row_col():
    mm = Matmul(size=(24, 40, 16), precision=np.float32, arrangement=("row_major", "col_major", "row_major"), sm=90)
    assert (mm.m, mm.n, mm.k) == (24, 40, 16)
    assert (mm.a_dim, mm.b_dim, mm.c_dim) == ((24, 16), (16, 40), (24, 40))
    # tight leading dimensions: row-major A -> k, col-major B -> k, row-major C -> n
    assert mm.leading_dimension == (16, 16, 40) and (mm.lda, mm.ldb, mm.ldc) == (16, 16, 40)
    assert (mm.a_size, mm.b_size, mm.c_size) == (24 * 16, 16 * 40, 24 * 40)
    assert mm.a_value_type == np.dtype(np.float32) and mm.c_value_type == np.dtype(np.float32)
    assert (mm.a_shared_memory_offset, mm.b_shared_memory_offset, mm.c_shared_memory_offset) == (0, 1536, 1536 + 2560)
    assert mm.shared_memory_size == 4 * (24 * 16 + 16 * 40 + 24 * 40)
    assert mm.shared_memory_size_ab == 4 * (24 * 16 + 16 * 40)
    assert mm.alignment == (4, 4, 4)


def test_custom_leading_dimension_sizes_are_cosizes():
    mm = Matmul(size=(20, 12, 28), precision=np.float64, leading_dimension=(31, 29, 23),
                arrangement=("row_major", "col_major", "col_major"), sm=90)
    assert mm.leading_dimension == (31, 29, 23)
    assert mm.a_size == 31 * (20 - 1) + 28  # row-major A: m rows of k, stride lda
    assert mm.b_size == 29 * (12 - 1) + 28  # col-major B: n columns of k
    assert mm.c_size == 23 * (12 - 1) + 20


def test_mixed_precision_offsets_respect_alignment():
    mm = Matmul(size=(17, 8, 3), precision=(np.float16, np.float16, np.float64), sm=80)
    assert mm.a_value_type == np.dtype(np.float16) and mm.c_value_type == np.dtype(np.float64)
    assert mm.b_shared_memory_offset == 17 * 3 * 2
    assert mm.c_shared_memory_offset % 8 == 0 and mm.c_shared_memory_offset >= mm.b_shared_memory_offset + 3 * 8 * 2


def test_bfloat16_traits():
    import ml_dtypes

    bf16 = np.dtype(ml_dtypes.bfloat16)
    mm = Matmul(size=(24, 40, 16), precision="bfloat16", arrangement=("row_major", "col_major", "row_major"), sm=90)
    assert mm.precision == (ml_dtypes.bfloat16,) * 3
    assert mm.a_value_type == mm.b_value_type == mm.c_value_type == bf16
    assert mm.a_value_type.itemsize == 2 and mm.alignment == (2, 2, 2)
    assert (mm.b_shared_memory_offset, mm.c_shared_memory_offset) == (2 * 24 * 16, 2 * (24 * 16 + 16 * 40))
    assert mm.shared_memory_size == 2 * (24 * 16 + 16 * 40 + 24 * 40)
    assert "bfloat16" in repr(mm)
    # suggested leading dimensions pad 128-byte rows by 16 bytes = 8 bfloat16 values
    assert Matmul(size=(64, 64, 64), precision="bfloat16", leading_dimension="suggested",
                  sm=90).leading_dimension == (72, 72, 72)


def test_bfloat16_spellings_are_one_descriptor():
    import ml_dtypes
    from numba.cuda import types as cuda_types

    ref = Matmul(size=(16, 16, 16), precision="bfloat16", sm=90)
    for p in (ml_dtypes.bfloat16, np.dtype(ml_dtypes.bfloat16), cuda_types.bfloat16,
              ("bfloat16", ml_dtypes.bfloat16, cuda_types.bfloat16)):
        mm = Matmul(size=(16, 16, 16), precision=p, sm=90)
        assert mm == ref and hash(mm) == hash(ref)
    assert pickle.loads(pickle.dumps(ref)) == ref
    # numba's other scalar types name their precisions too
    assert Matmul(size=(16, 16, 16), precision=cuda_types.float16, sm=90) == Matmul(
        size=(16, 16, 16), precision=np.float16, sm=90)


def test_mixed_bfloat16_float32():
    import ml_dtypes

    mm = Matmul(size=(17, 8, 3), precision=("bfloat16", "bfloat16", np.float32), sm=80)
    assert mm.a_value_type == mm.b_value_type == np.dtype(ml_dtypes.bfloat16)
    assert mm.c_value_type == np.dtype(np.float32)
    assert mm.alignment == (2, 2, 4)
    assert mm.b_shared_memory_offset == 17 * 3 * 2
    assert mm.c_shared_memory_offset == 152  # 102 + 48 = 150, rounded up to C's 4-byte alignment
    assert mm.c_shared_memory_offset % 4 == 0
    assert pickle.loads(pickle.dumps(mm)) == mm


def test_one_int_alignment_applies_to_all_three():
    mm = Matmul(size=(8, 8, 8), precision=np.float32, alignment=16, sm=90)  # nvmath-python's MAX_ALIGNMENT use
    assert mm.alignment == (16, 16, 16) and mm == Matmul(size=(8, 8, 8), precision=np.float32,
                                                         alignment=(16, 16, 16), sm=90)


def test_complex_value_types():
    mm = Matmul(size=(8, 8, 8), precision=np.float64, data_type="complex", sm=90)
    assert mm.a_value_type == np.dtype(np.complex128)
    assert mm.alignment == (16, 16, 16)
    assert mm.shared_memory_size == 3 * 64 * 16


def test_suggested_leading_dimension_pads_128_byte_rows():
    mm = Matmul(size=(32, 32, 32), precision=np.float32, leading_dimension="suggested", sm=90)
    assert mm.leading_dimension == (36, 36, 36)
    small = Matmul(size=(8, 8, 8), precision=np.float32, leading_dimension="suggested", sm=90)
    assert small.leading_dimension == (8, 8, 8)  # 32-byte columns: no padding


def test_equality_hash_pickle_immutability():
    a = Matmul(size=(16, 16, 16), precision=np.float64, sm=(9, 0))
    b = Matmul(size=[16, 16, 16], precision="float64", sm="sm_90")
    assert a == b and hash(a) == hash(b)
    assert pickle.loads(pickle.dumps(a)) == a
    assert a != Matmul(size=(16, 16, 16), precision=np.float32, sm=90)
    with pytest.raises(AttributeError, match="immutable"):
        a.size = (1, 2, 3)
    assert Matmul(size=(8, 8, 8), block_size=64, sm=90).block_dim == (64, 1, 1)
    assert Matmul(size=(8, 8, 8), block_dim=(32, 2), sm=90).block_dim == (32, 2, 1)


BAD = [
    (dict(size=(32, 32)), TypeError, "size"),
    (dict(size=(32, 0, 32)), ValueError, "size.*n=0"),
    (dict(size=(32, 32.0, 32)), TypeError, "size"),
    (dict(size=(8, 8, 8), precision=(np.int8, np.int8, np.float32)), ValueError, "precision.*cannot mix integer"),
    (dict(size=(8, 8, 8), precision=(np.float32, np.float32)), ValueError, "precision"),
    (dict(size=(8, 8, 8), precision=(np.float32, "bogus", np.float32)), ValueError, r"precision\[1\]"),
    (dict(size=(8, 8, 8), data_type="quaternion"), ValueError, "data_type"),
    (dict(size=(8, 8, 8), precision=np.int8, data_type="complex"), ValueError, "complex integer"),
    (dict(size=(8, 8, 8), precision="bfloat16", data_type="complex"), ValueError, "complex.*bfloat16"),
    (dict(size=(8, 8, 8), precision=(np.float32, np.float32, "bfloat16"), data_type="complex"), ValueError,
     "complex"),
    (dict(size=(8, 8, 8), precision="bfloat16", sm=75), ValueError, "bfloat16 needs sm_80"),
    (dict(size=(8, 8, 8), precision="bf16"), ValueError, "precision must be one of.*'bfloat16'"),
    # cuBLASDx 0.4 fails to compile these (CUTLASS's bfloat16_t = float): refused up front
    (dict(size=(8, 8, 8), precision=(np.float32, np.float32, "bfloat16")), ValueError, "bfloat16 C needs bfloat16 A and B"),
    (dict(size=(8, 8, 8), precision=(np.float16, "bfloat16", "bfloat16")), ValueError, "bfloat16 C needs bfloat16 A and B"),
    (dict(size=(8, 8, 8), arrangement="diagonal"), ValueError, "arrangement of A"),
    (dict(size=(8, 8, 8), arrangement=("row_major", "col_major", "colmajor")), ValueError, "arrangement of C"),
    (dict(size=(8, 8, 8), arrangement=("row_major", "col_major")), ValueError, "arrangement"),
    (dict(size=(8, 8, 8), leading_dimension=(7, 8, 8)), ValueError, "lda=7"),
    (dict(size=(8, 8, 8), arrangement="row_major", leading_dimension=(8, 8, 4)), ValueError, "ldc=4"),
    (dict(size=(8, 8, 8), leading_dimension="padded"), TypeError, "leading_dimension"),
    (dict(size=(8, 8, 8), block_dim=16), ValueError, "block_dim.*32 to 1024"),
    (dict(size=(8, 8, 8), block_dim=(1025,)), ValueError, "block_dim.*limits"),
    (dict(size=(8, 8, 8), block_dim=(32, 32, 2)), ValueError, "block_dim.*2048 threads"),
    (dict(size=(8, 8, 8), block_dim=(32, 1, 65)), ValueError, "block_dim.*limits"),
    (dict(size=(8, 8, 8), block_dim=64, block_size=64), ValueError, "block_dim or block_size"),
    (dict(size=(8, 8, 8), block_size=2048), ValueError, "block_size"),
    (dict(size=(8, 8, 8), block_size=64.0), TypeError, "block_size"),
    (dict(size=(8, 8, 8), alignment=(2, 4, 4)), ValueError, "alignment of A"),
    (dict(size=(8, 8, 8), alignment=(4, 12, 4)), ValueError, "alignment of B"),
    (dict(size=(8, 8, 8), alignment=(4, 4, 32)), ValueError, "alignment of C"),
    (dict(size=(8, 8, 8), alignment=2), ValueError, "alignment of A"),  # one int: all three
    (dict(size=(8, 8, 8), alignment=16.0), TypeError, "alignment must be None, an int or a tuple of 3 ints"),
    (dict(size=(8, 8, 8), execution="Thread"), ValueError, "execution"),
    (dict(size=(8, 8, 8), sm=91), ValueError, "sm"),
    (dict(size=(128, 128, 128), precision=np.float64), ValueError, "shared memory.*sm_90 allows at most 232448"),
    (dict(size=(128, 128, 128), precision=np.float32, sm=80), ValueError, "sm_80 allows at most 166912"),
    (dict(size=(72, 72, 72), precision=np.float64, sm=86), ValueError, "sm_86 allows at most 101376"),
]


@pytest.mark.parametrize("kwargs,exc,match", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input_names_the_argument(kwargs, exc, match):
    kwargs.setdefault("sm", 90)
    with pytest.raises(exc, match=match):
        Matmul(**kwargs)


def test_execute_outside_kernel():
    mm = Matmul(size=(8, 8, 8), sm=90)
    with pytest.raises(RuntimeError, match="@cuda.jit"):
        mm.execute(1.0, None, None, 0.0, None)
    with pytest.raises(RuntimeError, match="@cuda.jit"):
        mm.fragment_coordinates(None, None)
