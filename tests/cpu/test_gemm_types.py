# SPDX-License-Identifier: Apache-2.0
"""Matmul value types beyond the real floats, and the run-time leading-dimension form, without a GPU.

- complex float16 (``types.complex32``: cuBLASDx's ``complex<__half>``, float16x2_type in kernels),
- integer GEMMs (cuBLASDx 25.6: int8 ... uint64, its precision rules),
- ``MM.execute(alpha, a, lda, b, ldb, beta, c, ldc)`` (nvmath-python's dynamic leading dimensions).

Each: the descriptor and its refusals (before any compiler runs), the generated C++ (NVRTC),
numba typing, and the shared test kernels linked to an sm_90 cubin.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, types
from numba.core.errors import TypingError

import nvmath_device as nd
from nvmath_device import Matmul
from nvmath_device._build import gemm_codegen
from nvmath_device.aot import compile_kernel
from nvmath_device.types import complex32
from tests.gemm_kernels import (
    RUNTIME_LD_CASES,
    TYPES_CASES,
    complex_half_kernel,
    runtime_ld_kernel,
    user_kernel,
)

SM = 90


def mm(name) -> Matmul:
    return Matmul(sm=SM, **TYPES_CASES[name])


# ---------------------------------------------------------------------------- descriptors
def test_complex_half_value_types_are_complex32():
    M = mm("c16-rcc")
    assert M.a_value_type is complex32 and M.b_value_type is complex32 and M.c_value_type is complex32
    assert np.dtype(M.c_value_type).itemsize == 4  # complex<__half>
    assert M.precision == (np.float16,) * 3 and M.data_type == "complex"
    # A 16x16 row-major, B and C col-major, 4-byte values, tight leading dimensions
    assert M.leading_dimension == (16, 16, 16)
    assert M.shared_memory_size == 3 * 16 * 16 * 4
    assert M.alignment == (4, 4, 4)


@pytest.mark.parametrize("prec, itemsizes", [
    ((np.int8, np.int8, np.int32), (1, 1, 4)),
    ((np.uint8, np.int8, np.int32), (1, 1, 4)),
    ((np.uint8, np.uint8, np.uint32), (1, 1, 4)),
    ((np.int16, np.int16, np.int64), (2, 2, 8)),
    ((np.int32, np.int32, np.int32), (4, 4, 4)),
    ((np.uint64, np.uint64, np.uint64), (8, 8, 8)),
    (np.int8, (1, 1, 1)),
])
def test_integer_precisions(prec, itemsizes):
    M = Matmul(size=(8, 8, 8), precision=prec, block_dim=32, sm=SM)
    types_ = prec if isinstance(prec, tuple) else (prec,) * 3
    assert M.precision == types_
    assert tuple(np.dtype(v).itemsize for v in (M.a_value_type, M.b_value_type, M.c_value_type)) == itemsizes
    assert M.a_value_type == np.dtype(types_[0]) and M.c_value_type == np.dtype(types_[2])
    assert M.alignment == itemsizes
    assert M.shared_memory_size == sum(64 * s for s in itemsizes)


def test_integer_precision_by_name_and_numba_type():
    from numba import int8, int32

    a = Matmul(size=(8, 8, 8), precision=("int8", "int8", "int32"), block_dim=32, sm=SM)
    b = Matmul(size=(8, 8, 8), precision=(int8, int8, int32), block_dim=32, sm=SM)
    assert a == b and a.precision == (np.int8, np.int8, np.int32)


BAD = [
    (dict(precision=(np.int8, np.int8, np.float32)), ValueError, "cannot mix integer and floating-point"),
    (dict(precision=(np.float16, np.int8, np.int32)), ValueError, "cannot mix integer and floating-point"),
    (dict(precision=(np.int8, np.int8, np.int32), data_type="complex"), ValueError,
     "complex integer GEMMs are not offered.*data_type='real'"),
    (dict(precision=(np.int64, np.int64, np.int8)), ValueError, "C's integer type at least a quarter as wide"),
    (dict(precision=(np.int8, np.int8, np.uint32)), ValueError, "signed integer type, cuBLASDx needs a signed C"),
    (dict(precision=(np.uint8, np.int8, np.uint16)), ValueError, "signed C"),
    (dict(precision="bfloat16", data_type="complex"), ValueError, "complex bfloat16 is not offered"),
    (dict(precision=(np.float16, np.float16, np.float64), data_type="complex"), ValueError,
     r"complex float16 \(complex32\) takes A and B in numpy.float16 and C in numpy.float16 or numpy.float32"),
    (dict(precision=(np.float16, np.float32, np.float32), data_type="complex"), ValueError,
     "complex float16 .* takes A and B in numpy.float16"),
    (dict(precision=np.complex64), ValueError, "precision must be one of.*numpy.int8"),
    (dict(precision=np.bool_), ValueError, "precision must be one of"),
]


@pytest.mark.parametrize("kw, exc, match", BAD)
def test_bad_precisions_name_the_argument(kw, exc, match, monkeypatch):
    from nvmath_device._build import toolchain

    def no_compiler(*a, **k):
        raise AssertionError("a compiler ran for a refused descriptor")

    monkeypatch.setattr(toolchain, "compile_source", no_compiler)
    with pytest.raises(exc, match=match):
        Matmul(size=(8, 8, 8), block_dim=32, sm=SM, **kw)


def test_runtime_ld_helpers_check_each_leading_dimension():
    from nvmath_device.gemm import check_runtime_lds, runtime_tile_sizes

    kw, lds = RUNTIME_LD_CASES["f64-rcc"]
    M = Matmul(sm=SM, **kw)  # 10 x 11 x 13: A row-major (ld >= k = 13), B, C col-major (>= k, >= m)
    assert check_runtime_lds(M, lds) == lds
    assert runtime_tile_sizes(M, lds) == (14 * 9 + 13, 15 * 10 + 13, 12 * 10 + 10)
    assert M.get_shared_storage_size(*lds) == 8 * sum(runtime_tile_sizes(M, lds))
    with pytest.raises(ValueError, match=r"lda=12 is smaller than the 13 that A \(row_major"):
        check_runtime_lds(M, (12, 13, 10))
    with pytest.raises(ValueError, match="ldc=9 is smaller than the 10"):
        check_runtime_lds(M, (13, 13, 9))
    with pytest.raises(TypeError, match="ldb must be an int"):
        check_runtime_lds(M, (13, 13.0, 10))


# ---------------------------------------------------------------------------- generated code
def test_shim_spells_the_cublasdx_types():
    src = gemm_codegen.render_shim_source(mm("i8-i8-i32-rcc"))
    assert "cublasdx::Precision<int8_t, int8_t, int32_t>()" in src
    assert "cublasdx::Type<cublasdx::type::real>()" in src
    src = gemm_codegen.render_shim_source(mm("c16-rcc"))
    assert "cublasdx::Precision<__half, __half, __half>()" in src
    assert "cublasdx::Type<cublasdx::type::complex>()" in src
    src = gemm_codegen.render_shim_source(mm("c16-c16-c32-crc"))
    assert "cublasdx::Precision<__half, __half, float>()" in src


def test_mixed_complex_half_value_types():
    M = mm("c16-c16-c32-crc")
    assert M.a_value_type is complex32 and M.b_value_type is complex32
    assert M.c_value_type == np.dtype(np.complex64)
    assert M._layout["itemsizes"] == (4, 4, 8)


def test_runtime_ld_unit_is_separate_and_compiles():
    kw, _ = RUNTIME_LD_CASES["f64-rcc"]
    M = Matmul(sm=SM, **kw)
    src = gemm_codegen.render_runtime_ld_source(M)
    assert f"{M.symbol}_ld_smem(" in src and f"{M.symbol}_smem(" not in src
    assert "_ld_smem" not in gemm_codegen.render_shim_source(M)  # the static unit is unchanged
    blob = gemm_codegen.gemm_runtime_ld_ltoir(M)
    assert isinstance(blob, bytes) and len(blob) > 1000
    assert gemm_codegen.gemm_runtime_ld_ltoir(M) == blob  # cached


def test_traits_of_the_new_types_come_from_cublasdx():
    for name in ("i8-i8-i32-rcc", "c16-rcc"):
        M = mm(name)
        t = gemm_codegen.gemm_traits(M)
        assert (t["a_itemsize"], t["b_itemsize"], t["c_itemsize"]) == M._layout["itemsizes"]
        assert (t["a_size"], t["b_size"], t["c_size"]) == (M.a_size, M.b_size, M.c_size)
        assert t["shared_memory_size"] == M.shared_memory_size
        assert M.accumulator_size * M.block_size >= M.m * M.n


# ---------------------------------------------------------------------------- kernels link for sm_90
def _linked(kernel, argtypes):
    ck = compile_kernel(kernel, argtypes, sm=SM)
    assert ck.cubin[:4] == b"\x7fELF" and ck.entry.encode() in ck.cubin
    return ck


@pytest.mark.parametrize("name", ["i8-i8-i32-rcc", "u8-u8-u32-crr"])
def test_integer_user_kernel_links(name):
    M = mm(name)
    a, b, c = (getattr(types, np.dtype(p).name) for p in M.precision)
    ck = _linked(user_kernel(M), (a[:, :, ::1], b[:, :, ::1], c[:, :, ::1], c[:, :, ::1], types.int64,
                                  types.int64))
    assert ck.linked == (f"{M.symbol}.ltoir",)


@pytest.mark.parametrize("name", ["c16-rcc", "c16-c16-c32-crc"])
def test_complex_half_kernel_links(name):
    M = mm(name)
    c3 = types.complex64[:, :, ::1]
    ck = _linked(complex_half_kernel(M), (c3, c3, c3, c3, types.complex128, types.float64))
    assert ck.linked == (f"{M.symbol}.ltoir",)


def test_complex_half_float16x2_scalars_and_global_arrays():
    """alpha/beta as float16x2 values, global arrays of float16x2_type (no conversion)."""
    M = mm("c16-rcc")
    v2 = nd.float16x2_type[:, ::1]

    def k(A, B, C):
        sa = cuda.shared.array(M.a_size, dtype=complex32)
        sb = cuda.shared.array(M.b_size, dtype=complex32)
        sc = cuda.shared.array(M.c_size, dtype=M.c_value_type)
        M.load_a(A, sa)
        M.load_b(B, sb)
        M.load_c(C, sc)
        cuda.syncthreads()
        M.execute(nd.float16x2(1.0, 0.5), sa, sb, nd.float16x2(0.0, 0.0), sc)
        cuda.syncthreads()
        M.store_c(sc, C)

    _linked(k, (v2, v2, v2))


@pytest.mark.parametrize("name", sorted(RUNTIME_LD_CASES))
def test_runtime_ld_kernel_links_only_the_runtime_unit(name):
    kw, lds = RUNTIME_LD_CASES[name]
    M = Matmul(sm=SM, **kw)
    dt = getattr(types, np.dtype(M.precision[0]).name)
    ck = _linked(runtime_ld_kernel(M, lds),
                 (types.float64, dt[:, ::1], types.int32, dt[:, ::1], types.int64, types.float64, dt[:, ::1],
                  types.uint32))
    assert ck.linked == (f"{M.symbol}_ld.ltoir",)


def test_runtime_ld_and_static_forms_in_one_kernel_link_both_units():
    kw, lds = RUNTIME_LD_CASES["f64-rcc"]
    M = Matmul(sm=SM, **kw)

    def k(x):
        sa = cuda.shared.array(512, dtype=np.float64)
        sb = cuda.shared.array(512, dtype=np.float64)
        sc = cuda.shared.array(512, dtype=np.float64)
        M.execute(1.0, sa, sb, 0.0, sc)
        M.execute(1.0, sa, 14, sb, 15, 0.0, sc, x[0])
        M(2.0, sa, x[1], sb, 15, 1.0, sc, 12)  # calling the descriptor is execute (nvmath-python)

    ck = _linked(k, (types.int32[::1],))
    assert sorted(ck.linked) == sorted((f"{M.symbol}.ltoir", f"{M.symbol}_ld.ltoir"))


# ---------------------------------------------------------------------------- typing errors
def _typing_error(kernel, argtypes, match):
    with pytest.raises(TypingError, match=match):
        compile_kernel(kernel, argtypes, sm=SM)


def test_runtime_ld_must_be_integers():
    kw, _ = RUNTIME_LD_CASES["f64-rcc"]
    M = Matmul(sm=SM, **kw)

    def k(x):
        sa = cuda.shared.array(512, dtype=np.float64)
        M.execute(1.0, sa, x[0], sa, 15, 0.0, sa, 12)

    _typing_error(k, (types.float64[::1],), r"lda \(3rd argument\) must be an integer")


def test_runtime_ld_arrays_must_hold_the_value_types():
    kw, _ = RUNTIME_LD_CASES["f64-rcc"]
    M = Matmul(sm=SM, **kw)

    def k(x):
        sa = cuda.shared.array(512, dtype=np.float64)
        sb = cuda.shared.array(512, dtype=np.float32)
        M.execute(1.0, sa, 14, sb, 15, 0.0, sa, 12)

    _typing_error(k, (types.float64[::1],), r"b \(4th argument\) must hold float64")


def test_wrong_argument_count_lists_the_forms():
    kw, _ = RUNTIME_LD_CASES["f64-rcc"]
    M = Matmul(sm=SM, **kw)

    def k(x):
        sa = cuda.shared.array(512, dtype=np.float64)
        M.execute(1.0, sa, 14, sa, 15, 0.0, sa)

    _typing_error(k, (types.float64[::1],), r"\(alpha, a, lda, b, ldb, beta, c, ldc\) with run-time")


def test_integer_gemm_refuses_complex_alpha():
    M = mm("i8-i8-i32-rcc")

    def k(x):
        sa = cuda.shared.array(256, dtype=np.int8)
        sc = cuda.shared.array(256, dtype=np.int32)
        M.execute(1j, sa, sa, 0, sc)

    _typing_error(k, (types.int32[::1],), "alpha.*is complex.*real")


def test_integer_gemm_tiles_must_hold_the_value_types():
    M = mm("i8-i8-i32-rcc")

    def k(x):
        sa = cuda.shared.array(256, dtype=np.uint8)
        sc = cuda.shared.array(256, dtype=np.int32)
        M.execute(1, sa, sa, 0, sc)

    _typing_error(k, (types.int32[::1],), r"a \(2nd argument\) must hold int8")


def test_complex_half_tiles_must_be_float16x2():
    M = mm("c16-rcc")

    def k(x):
        sa = cuda.shared.array(256, dtype=np.complex64)
        M.execute(1.0, sa, sa, 0.0, sa)

    _typing_error(k, (types.int32[::1],), r"a \(2nd argument\) must hold float16x2_type")


def test_complex_half_copy_refuses_float32_globals():
    M = mm("c16-rcc")

    def k(A):
        sa = cuda.shared.array(256, dtype=M.a_value_type)
        M.load_a(A, sa)

    _typing_error(k, (types.float32[:, ::1],), r"must hold float16x2_type.*or complex64/complex128, converted")


def test_complex_half_copies_take_complex32_host_records():
    """Global arrays of numpy.dtype(types.complex32) (records x, y of float16: what such host
    arrays type as) load into and store from float16x2 tiles."""
    from numba.cuda.typing.typeof import typeof

    M = mm("c16-rcc")
    rec2 = typeof(np.zeros((2, 2), np.dtype(complex32)))

    def k(A, B, C):
        sa = cuda.shared.array(M.a_size, dtype=M.a_value_type)
        sb = cuda.shared.array(M.b_size, dtype=M.b_value_type)
        sc = cuda.shared.array(M.c_size, dtype=M.c_value_type)
        M.load_a(A, sa)
        M.load_b(B, sb)
        M.load_c(C, sc)
        cuda.syncthreads()
        M.execute(1.0, sa, sb, 0.5, sc)
        cuda.syncthreads()
        M.store_c(sc, C)

    ck = _linked(k, (rec2, rec2, rec2))
    assert ck.linked == (f"{M.symbol}.ltoir",)


def test_suggested_leading_dimensions_of_int8_match_cublasdx():
    """The Python-side padding (cuBLASDx's pad_if_needed) for 1-byte A/B and a 4-byte C equals
    what cuBLASDx's suggested_leading_dimension_of reports."""
    M = Matmul(size=(128, 64, 128), precision=(np.int8, np.int8, np.int32), leading_dimension="suggested",
               arrangement=("row_major", "col_major", "col_major"), block_dim=128, sm=SM)
    assert tuple(M.leading_dimension) == (144, 144, 132)  # 128 + 16/1, 128 + 16/1, 128 + 16/4
    assert tuple(M.leading_dimension) == tuple(M.suggested_leading_dimension)


def test_new_descriptors_and_the_runtime_ld_code_pickle():
    import pickle

    from nvmath_device.gemm import runtime_ld_code

    for name in ("i8-i8-i32-rcc", "c16-c16-c32-crc"):
        M = mm(name)
        back = pickle.loads(pickle.dumps(M))
        assert back == M and hash(back) == hash(M) and back.c_value_type == M.c_value_type
    kw, _ = RUNTIME_LD_CASES["f64-rcc"]
    code = runtime_ld_code(Matmul(sm=SM, **kw))
    back = pickle.loads(pickle.dumps(code))
    assert back == code and hash(back) == hash(code)
    assert back.symbol == code.symbol == f"{code.mm.symbol}_ld"
