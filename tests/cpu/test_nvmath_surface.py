# SPDX-License-Identifier: Apache-2.0
"""nvmath-python 1.0's descriptor surface, without a GPU: Dim3, resolved traits, the Matmul
helpers (block_size, get_shared_storage_size, named tuples, transpose_mode, valid, files), the
FFT helpers (valid, files), calling a descriptor (``fft(...)``, ``MM(...)``), the simulator's
default architecture, and kernels of each new form typed and linked to sm_90 cubins."""

from __future__ import annotations

import logging
import pickle
import warnings

import numpy as np
import pytest
from numba import cuda, types
from numba.core.errors import TypingError

import nvmath_device
from nvmath_device import FFT, Dim3, Matmul, common_cuda
from nvmath_device.aot import compile_kernel
from nvmath_device.gemm import Alignment, Arrangement, LeadingDimension, TransposeMode

pytestmark = pytest.mark.filterwarnings("ignore:Matmul\\(transpose_mode:DeprecationWarning")

# the descriptors of tests/cpu/test_fft_cpu.py and test_gemm_numba.py: their LTO-IR is cached
FWD = FFT(size=512, precision=np.float32, direction="forward", elements_per_thread=8, ffts_per_block=2, sm=90)
SUG = FFT(size=64, precision=np.float32, direction="forward", sm=90)
THR = FFT(size=16, precision=np.float64, direction="forward", execution="Thread", sm=90)
MM = Matmul(size=(32, 32, 32), precision=np.float32, arrangement=("row_major", "col_major", "col_major"), sm=90)


# ---------------------------------------------------------------------------- Dim3, common_cuda
def test_dim3_is_a_named_tuple_with_defaults():
    assert nvmath_device.Dim3 is common_cuda.Dim3
    d = Dim3(128)
    assert d == (128, 1, 1) and isinstance(d, tuple)
    assert (d.x, d.y, d.z) == (128, 1, 1)
    x, y, z = Dim3(4, 2)
    assert (x, y, z) == (4, 2, 1)
    assert "Dim3" in nvmath_device.__all__ and "current_device_sm" in nvmath_device.__all__


def test_current_device_sm_is_the_current_gpu(monkeypatch):
    monkeypatch.setattr(common_cuda, "get_current_device_cc", lambda: common_cuda.ComputeCapability(9, 0))
    assert nvmath_device.current_device_sm() == (9, 0, "")
    assert FFT(size=64, direction="forward", sm=common_cuda.current_device_sm()) == SUG


def test_current_device_sm_without_a_gpu_is_a_driver_error(monkeypatch):
    def no_gpu():
        raise nvmath_device.DriverError("no GPU")

    monkeypatch.setattr(common_cuda, "get_current_device_cc", no_gpu)
    with pytest.raises(nvmath_device.DriverError):
        common_cuda.current_device_sm()


# ---------------------------------------------------------------------------- FFT traits
def test_fft_knobs_resolve_on_the_host():
    assert type(SUG.elements_per_thread) is int and type(SUG.ffts_per_block) is int
    assert SUG.elements_per_thread == SUG.elements_per_thread_value
    assert SUG.ffts_per_block == SUG.ffts_per_block_value
    assert SUG.block_dim == (SUG.size // SUG.elements_per_thread, SUG.ffts_per_block, 1)
    assert (FWD.elements_per_thread, FWD.ffts_per_block) == (8, 2)
    assert (THR.elements_per_thread, THR.ffts_per_block) == (16, 1)
    # nvmath-style host code
    data = np.ones((SUG.ffts_per_block, SUG.size), dtype=np.complex64)
    assert data.shape == (SUG.ffts_per_block, 64)


def test_fft_keeps_the_users_choice_for_the_code_and_cache_keys():
    assert SUG._key[4:6] == ("suggested", "suggested")
    assert "elements_per_thread='suggested'" in repr(SUG)
    resolved = FFT(size=64, direction="forward", elements_per_thread=SUG.elements_per_thread,
                   ffts_per_block=SUG.ffts_per_block, sm=90)
    assert resolved != SUG and resolved.symbol != SUG.symbol  # different generated code, as before
    assert pickle.loads(pickle.dumps(SUG)) == SUG


def test_fft_block_dim_is_dim3():
    assert isinstance(FWD.block_dim, Dim3) and FWD.block_dim.x == 64 and FWD.block_dim.y == 2
    with pytest.raises(AttributeError, match="execution='Block' only"):
        THR.block_dim  # noqa: B018


def test_fft_valid():
    combos = SUG.valid("elements_per_thread", "ffts_per_block")
    assert combos and all(isinstance(e, int) and isinstance(f, int) for e, f in combos)
    assert {e for e, _ in combos} == set(FFT.valid_elements_per_thread(64, np.float32, sm=90))
    assert (SUG.elements_per_thread, SUG.ffts_per_block) in combos
    for e, f in combos[:3]:
        fft = FFT(size=64, direction="forward", elements_per_thread=e, ffts_per_block=f, sm=90)
        assert (fft.elements_per_thread, fft.ffts_per_block) == (e, f)
    assert SUG.valid("elements_per_thread") == [(e,) for e in FFT.valid_elements_per_thread(64, sm=90)]
    assert FWD.valid("ffts_per_block", "elements_per_thread") == [(2, 8)]
    assert THR.valid("elements_per_thread", "ffts_per_block") == [(16, 1)]


@pytest.mark.parametrize("knobs, exc", [((), ValueError), (("block_dim",), ValueError), ((3,), TypeError)])
def test_fft_valid_bad_knobs(knobs, exc):
    with pytest.raises(exc, match="knob"):
        SUG.valid(*knobs)


def test_files_are_empty_lists():
    assert FWD.files == [] and THR.files == [] and MM.files == []


def test_calling_a_descriptor_outside_a_kernel_is_a_clear_error():
    with pytest.raises(RuntimeError, match="only be called inside a @cuda.jit kernel"):
        FWD(np.zeros(8, np.complex64), np.zeros(8, np.complex64))
    with pytest.raises(RuntimeError, match="only be called inside a @cuda.jit kernel"):
        MM(1.0, np.zeros(4), np.zeros(4), 0.0, np.zeros(4))


# ---------------------------------------------------------------------------- Matmul
def test_matmul_named_tuples_and_block_size():
    mm = Matmul(size=(16, 24, 8), block_dim=Dim3(32, 2), sm=90, leading_dimension=(20, 8, 16),
                arrangement=("col_major", "col_major", "col_major"))
    assert isinstance(mm.block_dim, Dim3) and mm.block_dim == (32, 2, 1) and mm.block_dim.y == 2
    assert mm.block_size == 64 == mm.max_threads_per_block
    assert isinstance(mm.leading_dimension, LeadingDimension)
    assert (mm.leading_dimension.a, mm.leading_dimension.b, mm.leading_dimension.c) == (20, 8, 16)
    lda, ldb, ldc = mm.leading_dimension
    assert (lda, ldb, ldc) == (mm.lda, mm.ldb, mm.ldc)
    assert isinstance(mm.arrangement, Arrangement) and mm.arrangement.c == "col_major"
    assert isinstance(mm.alignment, Alignment) and mm.alignment.a == 4
    assert Matmul(size=(16, 16, 16), block_size=128, sm=90).block_dim == Dim3(128)
    assert isinstance(MM.suggested_block_dim, Dim3)
    assert isinstance(MM.suggested_leading_dimension, LeadingDimension)
    assert isinstance(MM.block_dim, Dim3) and MM.block_size == MM.block_dim.x * MM.block_dim.y * MM.block_dim.z


def test_get_shared_storage_size():
    assert MM.get_shared_storage_size() == MM.shared_memory_size
    assert MM.get_shared_storage_size_ab() == MM.shared_memory_size_ab
    padded = Matmul(size=(32, 32, 32), precision=np.float32, arrangement=("row_major", "col_major", "col_major"),
                    leading_dimension=(40, 36, 33), sm=90)
    assert MM.get_shared_storage_size(40, 36, 33) == padded.shared_memory_size
    assert MM.get_shared_storage_size_ab(40, 36) == padded.shared_memory_size_ab
    assert MM.get_shared_storage_size(*MM.leading_dimension) == MM.shared_memory_size
    # mixed precision: each tile aligned to its own alignment
    mixed = Matmul(size=(30, 31, 33), precision=(np.float16, np.float16, np.float64), sm=90)
    other = Matmul(size=(30, 31, 33), precision=(np.float16, np.float16, np.float64),
                   leading_dimension=(31, 35, 30), sm=90)
    assert mixed.get_shared_storage_size(31, 35, 30) == other.shared_memory_size


@pytest.mark.parametrize("call, exc, match", [
    (lambda: MM.get_shared_storage_size(32, 32), TypeError, r"\(lda, ldb, ldc\), got 2"),
    (lambda: MM.get_shared_storage_size(32.0, 32, 32), TypeError, "lda must be an int"),
    (lambda: MM.get_shared_storage_size(32, 31, 32), ValueError, "ldb=31 is smaller than the 32"),
    (lambda: MM.get_shared_storage_size_ab(32, 32, 32), TypeError, r"\(lda, ldb\), got 3"),
    (lambda: MM.get_shared_storage_size_ab(32, "32"), TypeError, "ldb must be an int"),
    (lambda: MM.get_shared_storage_size_ab(8, 32), ValueError, "lda=8 is smaller"),
])
def test_get_shared_storage_size_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_transpose_mode_maps_to_arrangement():
    t = Matmul(size=(32, 16, 64), transpose_mode=("non_transposed", "transposed"), block_size=256, sm=90)
    a = Matmul(size=(32, 16, 64), arrangement=("col_major", "row_major", "col_major"), block_size=256, sm=90)
    assert t.arrangement == a.arrangement == ("col_major", "row_major", "col_major")
    assert t.transpose_mode == TransposeMode("non_transposed", "transposed") and a.transpose_mode is None
    assert t.a_dim == (32, 64) and t.b_dim == (16, 64) and t.c_dim == (32, 16)  # as nvmath-python
    assert a.b_dim == (64, 16)
    assert t.symbol == a.symbol and t.leading_dimension == a.leading_dimension  # the same code
    assert t != a  # but the copy helpers' global B is n x k
    assert t._copy_layout(1) == (16, 64, True) and a._copy_layout(1) == (64, 16, False)
    assert pickle.loads(pickle.dumps(t)) == t
    assert "transpose_mode=('non_transposed', 'transposed')" in repr(t)
    real_conj = Matmul(size=(8, 8, 8), transpose_mode=TransposeMode("conj_transposed", "non_transposed"), sm=90)
    assert real_conj.arrangement == ("row_major", "col_major", "col_major") and real_conj.a_dim == (8, 8)


@pytest.mark.parametrize("kw, exc, match", [
    (dict(transpose_mode=("transposed",)), ValueError, "transpose_mode must be"),
    (dict(transpose_mode="transposed"), ValueError, "transpose_mode must be"),
    (dict(transpose_mode=("transposed", "flipped")), ValueError, r"transpose_mode.b must be one of"),
    (dict(transpose_mode=("transposed", 1)), TypeError, r"transpose_mode.b must be one of"),
    (dict(transpose_mode=("transposed", "transposed"), arrangement=("row_major",) * 3), ValueError,
     "arrangement or transpose_mode, not both"),
    (dict(transpose_mode=("conj_transposed", "transposed"), data_type="complex"), ValueError,
     "'conj_transposed' is not supported for data_type='complex'"),
])
def test_transpose_mode_bad_arguments(kw, exc, match):
    with pytest.raises(exc, match=match):
        Matmul(size=(8, 8, 8), sm=90, **kw)


def test_transpose_mode_is_deprecated_as_in_nvmath_python():
    with pytest.warns(DeprecationWarning, match="use arrangement"):
        t = Matmul(size=(8, 8, 8), transpose_mode=("transposed", "transposed"), sm=90)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pickle.loads(pickle.dumps(t)) == t  # unpickling does not warn again
        Matmul(size=(8, 8, 8), arrangement=("row_major", "row_major", "col_major"), sm=90)


def test_matmul_valid():
    assert list(MM.valid("block_dim")) == [(MM.suggested_block_dim,)]
    with pytest.raises(ValueError, match="knob"):
        MM.valid("leading_dimension")
    with pytest.raises(ValueError, match="knob"):
        MM.valid()


# ---------------------------------------------------------------------------- simulator default sm
def test_simulator_without_gpu_defaults_to_sm90_and_says_so_once(monkeypatch, caplog):
    from nvmath_device import _descriptor, _dispatch

    monkeypatch.setattr(common_cuda, "current_device_cc", lambda: None)
    monkeypatch.setattr(_dispatch, "links_device_code", lambda: False)
    monkeypatch.setattr(_descriptor, "_said_default_sm", False)
    with caplog.at_level(logging.INFO, logger="nvmath_device"):
        assert FFT(size=64, direction="forward") == SUG
        assert Matmul(size=(32, 32, 32), arrangement=("row_major", "col_major", "col_major")) == MM
    said = [r for r in caplog.records if "sm_90" in r.getMessage()]
    assert len(said) == 1 and said[0].name == "nvmath_device"


def test_simulator_with_a_gpu_targets_it(monkeypatch):
    from nvmath_device import _dispatch

    monkeypatch.setattr(common_cuda, "current_device_cc", lambda: (8, 0))
    monkeypatch.setattr(_dispatch, "links_device_code", lambda: False)
    assert FFT(size=64, direction="forward").sm == 80


def test_numba_layer_without_gpu_still_needs_sm(monkeypatch):
    monkeypatch.setattr(common_cuda, "current_device_cc", lambda: None)
    with pytest.raises(ValueError, match="pass sm explicitly"):
        Matmul(size=(8, 8, 8))


# ---------------------------------------------------------------------------- kernels (sm_90)
def _fft_call_kernel(x):
    td = cuda.local.array(FWD.storage_size, dtype=FWD.value_type)
    smem = cuda.shared.array(0, dtype=FWD.value_type)
    base = (cuda.blockIdx.x * FWD.ffts_per_block + cuda.threadIdx.y) * FWD.size
    for i in range(FWD.elements_per_thread):
        td[i] = x[base + cuda.threadIdx.x + i * FWD.stride]
    FWD(td, smem)
    for i in range(FWD.elements_per_thread):
        x[base + cuda.threadIdx.x + i * FWD.stride] = td[i]


def test_fft_call_form_links():
    out = compile_kernel(_fft_call_kernel, (types.complex64[::1],), sm=90)
    assert out.cubin[:4] == b"\x7fELF"
    assert f"{FWD.symbol}.ltoir" in out.linked


def _thread_call_kernel(x):
    td = cuda.local.array(THR.storage_size, dtype=THR.value_type)
    for i in range(THR.size):
        td[i] = x[cuda.threadIdx.x, i]
    THR(td)
    for i in range(THR.size):
        x[cuda.threadIdx.x, i] = td[i]


def test_thread_fft_call_form_links():
    out = compile_kernel(_thread_call_kernel, (types.complex128[:, ::1],), sm=90)
    assert f"{THR.symbol}.ltoir" in out.linked


def test_named_tuple_attributes_in_kernels():
    def k(x):
        a = cuda.local.array(FWD.elements_per_thread, dtype=np.int64)
        a[0] = FWD.block_dim.x + FWD.block_dim.y * 1000 + FWD.ffts_per_block * 100000
        bx, by, bz = FWD.block_dim
        a[1] = bx + by + bz + MM.block_size
        a[2] = MM.block_dim.x + MM.leading_dimension.a + MM.leading_dimension.c + MM.alignment.b
        x[0] = a[0] + a[1] + a[2]

    out = compile_kernel(k, (types.int64[::1],), sm=90)
    assert out.linked == ()


def test_fft_call_form_typing_errors():
    def k(x):
        td = cuda.local.array(FWD.storage_size, dtype=FWD.value_type)
        FWD(td, td, td)

    with pytest.raises(TypingError, match=r"takes \(thread_data, shared_memory\) or \(shared_memory,\)"):
        compile_kernel(k, (types.complex64[::1],), sm=90)


def test_fft_shared_memory_form_always_checks_the_address_space(monkeypatch):
    """``fft(td)`` with a local array types as the shared-memory form (numba's arrays carry no
    address space), so that form always checks at run time that its array is shared memory
    (a register form missing its shared-memory argument traps with a message instead of running
    on registers as if they were shared)."""
    from nvmath_device._numba._compat import compile_kernel_library

    def k(x):
        td = cuda.local.array(FWD.storage_size, dtype=FWD.value_type)
        FWD(td)
        x[0] = td[0]

    argtypes = (types.complex64[::1],)
    monkeypatch.delenv("NUMBA_MATHDX_CHECK_ADDRESS_SPACES", raising=False)
    llvm = compile_kernel_library(k, argtypes, (9, 0))[0].get_llvm_str()
    assert "isspacep.shared" in llvm and "the register form is execute(thread_data" in llvm


def _mm_call_kernel(A, B, C, alpha, beta):
    sa = cuda.shared.array(MM.a_size, dtype=MM.a_value_type)
    sb = cuda.shared.array(MM.b_size, dtype=MM.b_value_type)
    sc = cuda.shared.array(MM.c_size, dtype=MM.c_value_type)
    MM.load_a(A, sa)
    MM.load_b(B, sb)
    MM.load_c(C, sc)
    cuda.syncthreads()
    MM(alpha, sa, sb, beta, sc)
    cuda.syncthreads()
    MM.store_c(sc, C)


def test_matmul_call_form_links():
    f2 = types.float32[:, :]
    out = compile_kernel(_mm_call_kernel, (f2, f2, f2, types.float64, types.float32), sm=90)
    assert out.cubin[:4] == b"\x7fELF"
    assert out.linked == (f"{MM.symbol}.ltoir",)


def test_matmul_register_call_form_links():
    def k(A, B, C):
        sa = cuda.shared.array(MM.a_size, dtype=MM.a_value_type)
        sb = cuda.shared.array(MM.b_size, dtype=MM.b_value_type)
        acc = cuda.local.array(MM.accumulator_size, dtype=MM.c_value_type)
        for i in range(MM.accumulator_size):
            acc[i] = 0
        MM.load_a(A, sa)
        MM.load_b(B, sb)
        cuda.syncthreads()
        MM(sa, sb, acc)
        C[0, 0] = acc[0]

    f2 = types.float32[:, :]
    out = compile_kernel(k, (f2, f2, f2), sm=90)
    assert out.linked == (f"{MM.symbol}.ltoir",)


def test_matmul_call_form_typing_errors():
    def k(A):
        sa = cuda.shared.array(MM.a_size, dtype=MM.a_value_type)
        MM(sa)

    with pytest.raises(TypingError, match="Matmul.execute takes"):
        compile_kernel(k, (types.float32[:, :],), sm=90)


with warnings.catch_warnings():  # transpose_mode is deprecated (as in nvmath-python)
    warnings.simplefilter("ignore", DeprecationWarning)
    TM = Matmul(size=(32, 32, 32), precision=np.float32, transpose_mode=("transposed", "non_transposed"), sm=90)
    TMB = Matmul(size=(16, 8, 24), precision=np.float32, transpose_mode=("non_transposed", "transposed"),
                 block_size=64, sm=90)


def test_transpose_mode_kernel_copies_the_transposed_global_array():
    """TM's A is row-major m x k in shared memory (MM's code); its global A is a_dim = (k, m)."""
    assert TM.symbol == MM.symbol and TM.a_dim == (32, 32)

    def k(A, B, C):
        sa = cuda.shared.array(TM.a_size, dtype=TM.a_value_type)
        sb = cuda.shared.array(TM.b_size, dtype=TM.b_value_type)
        sc = cuda.shared.array(TM.c_size, dtype=TM.c_value_type)
        TM.load_a(A, sa)
        TM.load_b(B, sb)
        cuda.syncthreads()
        TM(1.0, sa, sb, 0.0, sc)
        cuda.syncthreads()
        TM.store_c(sc, C)

    f2 = types.float32[:, :]
    out = compile_kernel(k, (f2, f2, f2), sm=90)
    assert out.linked == (f"{MM.symbol}.ltoir",)



def test_nvmath_transpose_mode_kernel_with_2d_shared_arrays_links():
    """nvmath-python's transpose_mode example: 2-D shared arrays shaped ``MM.a_dim[::-1]`` (the dims
    are tuples of literals in kernels), ``MM.block_dim.x`` strides, ``MM(...)``."""
    def k(a, b, c, alpha, beta, output):
        smem_a = cuda.shared.array(shape=TMB.a_dim[::-1], dtype=TMB.a_value_type)
        smem_b = cuda.shared.array(shape=TMB.b_dim[::-1], dtype=TMB.b_value_type)
        smem_c = cuda.shared.array(shape=TMB.c_dim[::-1], dtype=TMB.c_value_type)
        t = cuda.threadIdx.x
        for i in range(t, TMB.a_dim[0] * TMB.a_dim[1], TMB.block_dim.x):
            smem_a[i // TMB.a_dim[0], i % TMB.a_dim[0]] = a[i % TMB.a_dim[0], i // TMB.a_dim[0]]
        for i in range(t, TMB.b_dim[0] * TMB.b_dim[1], TMB.block_dim.x):
            smem_b[i // TMB.b_dim[0], i % TMB.b_dim[0]] = b[i % TMB.b_dim[0], i // TMB.b_dim[0]]
        for i in range(2):
            smem_c[0, i] = c[i, 0]
        cuda.syncthreads()
        TMB(alpha, smem_a, smem_b, beta, smem_c)
        cuda.syncthreads()
        for i in range(t, TMB.c_dim[0] * TMB.c_dim[1], TMB.block_size):
            output[i % TMB.c_dim[0], i // TMB.c_dim[0]] = smem_c[i // TMB.c_dim[0], i % TMB.c_dim[0]]

    f2 = types.float32[:, :]
    out = compile_kernel(k, (f2, f2, f2, types.float64, types.float64, f2), sm=90)
    assert out.linked == (f"{TMB.symbol}.ltoir",)


def test_nvmath_leading_dimension_unpacking_and_dynamic_shared_memory_link():
    """``[lda, ldb, ldc] = MM.leading_dimension`` and slices of one dynamic buffer."""
    a_size, b_size = MM.a_size, MM.b_size

    def k(a, output):
        [lda, ldb, ldc] = MM.leading_dimension
        smem = cuda.shared.array(shape=(0,), dtype=MM.a_value_type)
        smem_a = smem[0:]
        smem_b = smem[a_size:]
        smem_c = smem[a_size + b_size:]
        for i in range(cuda.threadIdx.x, MM.m * MM.k, MM.block_size):
            smem_a[(i // MM.k) * lda + i % MM.k] = a[i // MM.k, i % MM.k]
            smem_b[i % MM.k + (i // MM.k) * ldb] = a[i % MM.k, i // MM.k]
        cuda.syncthreads()
        MM(1.0, smem_a, smem_b, 0.0, smem_c)
        cuda.syncthreads()
        output[0, 0] = smem_c[ldc]

    out = compile_kernel(k, (types.float32[:, :], types.float32[:, :]), sm=90)
    assert out.linked == (f"{MM.symbol}.ltoir",)


SHM = FFT(fft_type="c2c", size=128, precision=np.float32, direction="forward", elements_per_thread=8,
          ffts_per_block=2, sm=90)


def _shared_memory_fft_kernel(data):
    shared_mem = cuda.shared.array(shape=(0,), dtype=SHM.value_type)
    index = cuda.threadIdx.x
    for _ in range(SHM.elements_per_thread):
        shared_mem[cuda.threadIdx.y * SHM.size + index] = data[cuda.threadIdx.y, index]
        index += SHM.stride
    cuda.syncthreads()
    SHM(shared_mem)
    SHM.execute(shared_mem)
    cuda.syncthreads()
    index = cuda.threadIdx.x
    for _ in range(SHM.elements_per_thread):
        data[cuda.threadIdx.y, index] = shared_mem[cuda.threadIdx.y * SHM.size + index]
        index += SHM.stride


def test_fft_shared_memory_form_links():
    out = compile_kernel(_shared_memory_fft_kernel, (types.complex64[:, ::1],), sm=90)
    assert out.cubin[:4] == b"\x7fELF"
    assert f"{SHM.symbol}.ltoir" in out.linked


@pytest.mark.parametrize("fft, dtype, match", [
    (SHM, np.float32, "1-D contiguous shared array of complex64"),
    (FFT(fft_type="r2c", size=128, precision=np.float32, elements_per_thread=8, ffts_per_block=2, sm=90),
     np.float64, "1-D contiguous shared array of complex64"),  # r2c in shared memory: its value type
])
def test_fft_shared_memory_form_typing_errors(fft, dtype, match):
    def k(x):
        smem = cuda.shared.array(shape=(0,), dtype=dtype)
        fft(smem)

    with pytest.raises(TypingError, match=match):
        compile_kernel(k, (types.complex64[::1],), sm=90)
