# SPDX-License-Identifier: Apache-2.0
"""float16 FFTs (cuFFTDx's complex<__half2>, two FFTs per value) and the shared-memory form of
real FFTs without a GPU: descriptor traits, argument errors, numba typing errors, and the sm_90
cubin link of the user-style kernels the simulator and GPU suites run."""

import numpy as np
import pytest
from numba import cuda, types
from numba.core.errors import TypingError

from nvmath_device import FFT, float16x2_type
from nvmath_device import types as nd_types
from nvmath_device._build.fft_codegen import TwiddleTables, prefetch_traits
from nvmath_device.aot import compile_kernel
from tests.sim.test_fft_fp16_sim import (
    FP16_BLOCK,
    FP16_THREAD,
    SHARED,
    is_real,
    make_block_kernel,
    make_shared_kernel,
    make_thread_kernel,
)

SM = 90
F16 = types.float16[:, ::1]


def fp16(execution="Block", **kw):
    return FFT(precision=np.float16, execution=execution, sm=SM, **kw)


ALL = [fp16(**kw) for _, kw in FP16_BLOCK] + [fp16("Thread", **kw) for _, kw in FP16_THREAD]


@pytest.fixture(scope="module", autouse=True)
def traits_in_one_run():
    prefetch_traits(ALL + [FFT(sm=SM, **kw) for _, kw in SHARED])


# ---------------------------------------------------------------------------------- traits
@pytest.mark.parametrize("fft", ALL, ids=[i for i, _ in FP16_BLOCK] + [f"thread-{i}" for i, _ in FP16_THREAD])
def test_fp16_traits(fft):
    n = fft.size
    assert fft.implicit_type_batching == 2
    assert fft.value_type is nd_types.half4
    assert fft.precision_type == np.dtype(np.float16)
    opts = fft.real_fft_options
    if fft.fft_type != "c2c" and opts["real_mode"] == "folded":  # real data as complex pairs
        assert fft.input_type is fft.output_type is nd_types.half4
    elif fft.fft_type != "c2c" and opts["complex_layout"] != "natural":
        complex_length = {"packed": n // 2, "full": n}[opts["complex_layout"]]
        lengths = (n, complex_length) if fft.fft_type == "r2c" else (complex_length, n)
        assert (fft.input_length, fft.output_length) == lengths
    elif fft.fft_type == "r2c":
        assert fft.input_type is nd_types.half2 and fft.output_type is nd_types.half4
        assert (fft.input_length, fft.output_length) == (n, n // 2 + 1)
    elif fft.fft_type == "c2r":
        assert fft.input_type is nd_types.half4 and fft.output_type is nd_types.half2
        assert (fft.input_length, fft.output_length) == (n // 2 + 1, n)
    else:
        assert fft.input_type is fft.output_type is nd_types.half4
    if fft.execution == "Thread":
        assert fft.elements_per_thread == n and fft.stride == 1
        assert fft.storage_size >= (n // 2 if opts["real_mode"] == "folded" else n)
        assert fft.ffts_per_block == 1
        return
    # nvmath-python / cuFFTDx count FFTs per block: even, two per threadIdx.y
    fpb = fft.ffts_per_block
    assert fpb % 2 == 0 and fft.block_dim == (fft.stride, fpb // 2, 1)
    assert fft.stride * fft.elements_per_thread >= n
    assert fft.elements_per_thread in FFT.valid_elements_per_thread(n, np.float16, sm=SM)


def test_fp16_suggested_ffts_per_block_is_even():
    fft = fp16(size=64, fft_type="c2c", direction="forward")
    assert fft.ffts_per_block % 2 == 0 and fft.block_dim[1] == fft.ffts_per_block // 2
    assert all(f % 2 == 0 for _, f in fft.valid("elements_per_thread", "ffts_per_block"))


# ---------------------------------------------------------------------------------- bad arguments
BAD = [
    (dict(size=64, ffts_per_block=3), ValueError, r"ffts_per_block must be even for float16"),
    (dict(size=128, elements_per_thread=64), ValueError,
     r"elements_per_thread=64 is not implemented for size=128 \(precision=float16, sm=90\); allowed: \[2, 4, 8, 16, 32\]"),
    (dict(size=65, execution="Thread"), ValueError,
     r"size=65 is too large for Thread execution with precision=float16; at most 64"),
    (dict(size=16, execution="Thread", elements_per_thread=8), ValueError,
     r"elements_per_thread must equal size \(16\) for Thread execution"),
    (dict(size=16, execution="Thread", ffts_per_block=2), ValueError, r"ffts_per_block applies to Block execution only"),
]


@pytest.mark.parametrize("kw,exc,match", BAD, ids=[m[:40] for _, _, m in BAD])
def test_fp16_bad_arguments_before_nvrtc(kw, exc, match, monkeypatch):
    from nvmath_device._build import toolchain

    def no_compiler(*a, **k):
        raise AssertionError("NVRTC ran for an invalid descriptor")

    monkeypatch.setattr(toolchain, "compile_source", no_compiler)
    kw = {"fft_type": "c2c", "direction": "forward", "precision": np.float16, "sm": SM, **kw}
    with pytest.raises(exc, match=match):
        FFT(**kw)


def _typing_error(fn, argtypes=()):
    with pytest.raises(TypingError) as e:
        compile_kernel(fn, argtypes, sm=SM)
    return str(e.value)


FWD = fp16(size=16, fft_type="c2c", direction="forward", elements_per_thread=4, ffts_per_block=2)


@pytest.mark.parametrize("dtype,name", [(np.float16, "float16"), (np.complex64, "complex64"), (np.float32, "float32")])
def test_fp16_wrong_register_type_is_a_typing_error(dtype, name):
    def k():
        td = cuda.local.array(FWD.storage_size, dtype=dtype)
        smem = cuda.shared.array(0, dtype=FWD.value_type)
        FWD.execute(td, smem)

    msg = _typing_error(k)
    assert ("thread_data (1st argument) must hold float16x4 (fft.value_type) or float16x2 "
            f"(the real view, fft.input_type of r2c) values, got an array of {name}") in msg


def test_fp16_shared_form_wrong_type_is_a_typing_error():
    def k():
        smem = cuda.shared.array(0, dtype=float16x2_type)
        FWD.execute(smem)

    assert "the one argument must be a 1-D contiguous shared array of float16x4 (fft.value_type)" in _typing_error(k)


def test_fp16_thread_takes_one_argument():
    thr = fp16("Thread", size=8, fft_type="c2c", direction="forward")

    def k():
        td = cuda.local.array(thr.storage_size, dtype=thr.value_type)
        thr.execute(td, td)

    assert "execution='Thread' takes (thread_data,)" in _typing_error(k)


# ---------------------------------------------------------------------------------- sm_90 links
def _linked(out, *ffts):
    assert out.cubin[:4] == b"\x7fELF"
    assert set(out.linked) == {f"{f.symbol}.ltoir" for f in ffts} | {f"{TwiddleTables(SM).symbol}.ltoir"}


@pytest.mark.parametrize("case", FP16_BLOCK, ids=[i for i, _ in FP16_BLOCK])
def test_fp16_block_kernel_links_sm90(case):
    fft = fp16(**case[1])
    _linked(compile_kernel(make_block_kernel(fft), (F16, F16), sm=SM), fft)


@pytest.mark.parametrize("case", FP16_THREAD, ids=[i for i, _ in FP16_THREAD])
def test_fp16_thread_kernel_links_sm90(case):
    fft = fp16("Thread", **case[1])
    _linked(compile_kernel(make_thread_kernel(fft), (F16, F16), sm=SM), fft)


def _shared_argtypes(fft):
    prec = np.dtype(fft.precision)
    if prec == np.float16:
        return (F16, F16)
    real = types.float32 if prec == np.float32 else types.float64
    cplx = types.complex64 if prec == np.float32 else types.complex128
    return ((real if is_real(fft.input_type) else cplx)[:, ::1], (real if is_real(fft.output_type) else cplx)[:, ::1])


@pytest.mark.parametrize("case", SHARED, ids=[i for i, _ in SHARED])
def test_shared_form_kernel_links_sm90(case):
    fft = FFT(sm=SM, **case[1])
    _linked(compile_kernel(make_shared_kernel(fft), _shared_argtypes(fft), sm=SM), fft)
