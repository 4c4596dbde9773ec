# SPDX-License-Identifier: Apache-2.0
"""FFT descriptor, traits, NVRTC codegen, numba typing and the sm_90 cubin link — no GPU needed."""

import itertools

import numpy as np
import pytest
from numba import cuda, types
from numba.core.errors import TypingError

from nvmath_device import FFT, CompileError
from nvmath_device._build import toolchain
from nvmath_device._build.fft_codegen import TwiddleTables, prefetch_traits
from nvmath_device.aot import compile_kernel

TWIDDLES_90 = f"{TwiddleTables(90).symbol}.ltoir"  # every kernel with an FFT links cuFFTDx's tables

GRID = [
    dict(size=s, precision=p, fft_type=t, direction=d, elements_per_thread=e, ffts_per_block=f, sm=90)
    for (s, e), p, (t, d), f in itertools.product(
        [(8, 2), (16, "suggested"), (64, 8), (128, 16), (512, 8), (512, "suggested"), (1000, 10), (4096, 16), (17, 17)],
        [np.float32, np.float64],
        [("c2c", "forward"), ("c2c", "inverse"), ("r2c", None), ("c2r", None)],
        [1, "suggested"],
    )
] + [
    dict(size=s, precision=p, fft_type=t, direction=d, execution="Thread", sm=90)
    for s, p, (t, d) in itertools.product([2, 7, 16, 32], [np.float32, np.float64], [("c2c", "forward"), ("r2c", None), ("c2r", None)])
]


@pytest.fixture(scope="module", autouse=True)
def traits_of_the_grid():
    """All the grid's traits in one NVRTC run (cached on disk for later runs)."""
    prefetch_traits([FFT(**kw) for kw in GRID])


@pytest.mark.parametrize("kw", GRID, ids=lambda kw: "-".join(str(v if not isinstance(v, type) else np.dtype(v).name) for v in kw.values()))
def test_traits_of_a_grid(kw):
    fft = FFT(**kw)
    n = fft.size
    ept = fft.elements_per_thread_value
    assert fft.requires_workspace is False and fft.workspace_size == 0
    assert fft.value_type == np.dtype(np.complex64 if kw["precision"] is np.float32 else np.complex128)
    if fft.fft_type == "r2c":
        assert (fft.input_length, fft.output_length) == (n, n // 2 + 1)
        assert fft.input_type == np.dtype(kw["precision"]) and fft.output_type == fft.value_type
    elif fft.fft_type == "c2r":
        assert (fft.input_length, fft.output_length) == (n // 2 + 1, n)
        assert fft.output_type == np.dtype(kw["precision"]) and fft.input_type == fft.value_type
    else:
        assert fft.input_length == fft.output_length == n
    if fft.execution == "Thread":
        assert ept == n and fft.stride == 1 and fft.storage_size >= n
        with pytest.raises(AttributeError, match="execution='Block' only"):
            _ = fft.block_dim
        return
    if kw["elements_per_thread"] != "suggested":
        assert ept == kw["elements_per_thread"]
    assert ept in FFT.valid_elements_per_thread(n, kw["precision"], sm=90)
    bx, by, bz = fft.block_dim
    assert bx == fft.stride == -(-n // ept) and bz == 1
    assert by == fft.ffts_per_block_value
    if kw["ffts_per_block"] == 1:
        assert by == 1
    assert fft.storage_size >= ept
    assert fft.input_ept * bx >= fft.input_length and fft.output_ept * bx >= fft.output_length
    # Threads exchange data through shared memory unless one thread holds the whole FFT.
    assert (fft.shared_memory_size > 0) == (bx > 1)
    assert fft.max_threads_per_block == bx * by


BAD = [
    (dict(size=1), ValueError, "size must be >= 2"),
    (dict(size=64.0), TypeError, "size must be an int"),
    (dict(size=True), TypeError, "size must be an int"),
    (dict(size=1 << 20), ValueError, "too large for Block"),
    (dict(size=4099), NotImplementedError, "size=4099 .*workspace"),
    (dict(size=64, precision=np.int32), ValueError, "precision must be one of"),
    (dict(size=64, precision="complex64"), ValueError, "precision must be one of"),
    (dict(size=64, fft_type="c2x"), ValueError, "fft_type must be one of"),
    (dict(size=64, direction="sideways"), ValueError, "direction must be one of"),
    (dict(size=64, fft_type="c2c", direction=None), ValueError, "direction is required"),
    (dict(size=64, fft_type="r2c", direction="inverse"), ValueError, "contradicts fft_type='r2c'"),
    (dict(size=64, fft_type="c2r", direction="forward"), ValueError, "contradicts fft_type='c2r'"),
    (dict(size=64, elements_per_thread=3), ValueError, r"elements_per_thread=3 .*allowed: \[2, 4, 8, 16, 32, 64\]"),
    (dict(size=64, elements_per_thread=0), ValueError, "elements_per_thread must be a positive int"),
    (dict(size=64, elements_per_thread="many"), TypeError, "elements_per_thread must be a positive int or 'suggested'"),
    (dict(size=64, ffts_per_block=-1), ValueError, "ffts_per_block must be a positive int"),
    (dict(size=64, ffts_per_block=2.5), TypeError, "ffts_per_block must be"),
    (dict(size=64, execution="Warp"), ValueError, "execution must be one of"),
    (dict(size=65, execution="Thread"), ValueError, "too large for Thread"),
    (dict(size=48, precision=np.float64, execution="Thread"), ValueError, "too large for Thread"),
    (dict(size=16, execution="Thread", elements_per_thread=8), ValueError, "must equal size"),
    (dict(size=16, execution="Thread", ffts_per_block=4), ValueError, "Block execution only"),
    (dict(size=64, sm=55), ValueError, "sm=55 is not supported; allowed"),
    (dict(size=64, sm="sm_nine"), ValueError, "not an architecture string"),
    (dict(size=64, sm=9.0), TypeError, "sm must be an int"),
    (dict(size=64, fft_type="r2c", real_fft_options={"layout": "packed"}), ValueError, "unknown keys"),
    (dict(size=64, fft_type="r2c", real_fft_options={"complex_layout": "tight"}), ValueError, "complex_layout"),
    (dict(size=63, fft_type="r2c", real_fft_options={"complex_layout": "packed"}), ValueError, "even size"),
    (dict(size=96, fft_type="r2c", real_fft_options={"real_mode": "folded"}), ValueError, "power-of-2"),
    (dict(size=64, real_fft_options={"real_mode": "folded"}), ValueError, "r2c/c2r only"),
    (dict(size=64, precision=np.float16, ffts_per_block=3), ValueError, "must be even for float16"),
]


@pytest.mark.parametrize("prec", ["fp16", "fp32", "fp64"])
def test_record_scan_matches_the_json(prec):
    """fftdb reads cuFFTDx's records by scanning the text; it must agree with a JSON parse of
    every architecture's file."""
    import json
    import os

    from nvmath_device._build import fftdb
    from nvmath_device._types import FFT_RECORD_ARCH

    for sm, arch in FFT_RECORD_ARCH.items():
        fftdb.records.cache_clear()
        path = os.path.join(toolchain.mathdx_root(), "include", "cufftdx", "database", "records",
                            str(arch), f"database_{prec}_fwd.json")
        with open(path) as f:
            data = json.load(f)["database"]
        want = {int(r["size"]): tuple(sorted({int(b["ept"]) for b in r["blobs"]})) for r in data}
        assert len(want) > 50 and fftdb.records(sm, prec) == want, (sm, prec)


@pytest.mark.parametrize("kw,exc,match", BAD, ids=[m for _, _, m in BAD])
def test_bad_arguments_fail_before_nvrtc(kw, exc, match):
    kw = {"direction": "forward", "sm": 90, **kw}
    before = toolchain.stats["nvrtc_compiles"]
    with pytest.raises(exc, match=match):
        FFT(**kw)
    assert toolchain.stats["nvrtc_compiles"] == before


def test_sm_spellings_are_one_descriptor():
    a = FFT(size=64, direction="forward", sm=90)
    assert a == FFT(size=64, direction="forward", sm=(9, 0)) == FFT(size=64, direction="forward", sm="sm_90")
    assert hash(a) == hash(FFT(size=64, direction="forward", sm="90"))
    assert a != FFT(size=64, direction="inverse", sm=90)
    with pytest.raises(AttributeError):
        a.size = 3


def test_sm_required_without_gpu(monkeypatch):
    from nvmath_device import common_cuda

    monkeypatch.setattr(common_cuda, "current_device_cc", lambda: None)
    with pytest.raises(ValueError, match="no CUDA GPU/driver is available here; pass sm explicitly"):
        FFT(size=64, direction="forward")


def test_execute_outside_a_kernel_is_a_clear_error():
    fft = FFT(size=64, direction="forward", sm=90)
    with pytest.raises(RuntimeError, match="only be called inside a @cuda.jit kernel"):
        fft.execute(np.zeros(8, np.complex64), np.zeros(8, np.complex64))


@pytest.mark.parametrize("sm", [80, 90])
def test_ltoir_for_sm80_and_sm90(sm):
    fft = FFT(size=64, precision=np.float32, direction="forward", elements_per_thread=8, ffts_per_block=1, sm=sm)
    code = fft.ltoir()
    assert len(code) > 10_000
    n = toolchain.stats["nvrtc_compiles"]
    assert fft.ltoir() == code  # second request: cache, no NVRTC
    assert toolchain.stats["nvrtc_compiles"] == n
    assert fft.block_dim == (8, 1, 1)


def test_compile_error_carries_the_nvrtc_log():
    with pytest.raises(CompileError, match=r"(?s)NVRTC .* failed .*--- NVRTC log ---.*not_a_type"):
        toolchain.compile_source("not_a_type x;", 90, "ptx")


FWD = FFT(size=512, precision=np.float32, direction="forward", elements_per_thread=8, ffts_per_block=2, sm=90)
INV = FFT(size=512, precision=np.float32, direction="inverse", elements_per_thread=8, ffts_per_block=2, sm=90)
THR = FFT(size=16, precision=np.float64, direction="forward", execution="Thread", sm=90)


def _roundtrip(x):
    td = cuda.local.array(FWD.storage_size, dtype=FWD.value_type)
    smem = cuda.shared.array(0, dtype=FWD.value_type)
    base = (cuda.blockIdx.x * FWD.ffts_per_block + cuda.threadIdx.y) * FWD.size
    for i in range(FWD.elements_per_thread):
        td[i] = x[base + cuda.threadIdx.x + i * FWD.stride]
    FWD.execute(td, smem)
    INV.execute(td, smem)
    for i in range(FWD.elements_per_thread):
        x[base + cuda.threadIdx.x + i * FWD.stride] = td[i]


def test_user_kernel_links_to_a_sm90_cubin_without_gpu():
    out = compile_kernel(_roundtrip, (types.complex64[::1],), sm=90)
    assert out.cubin[:4] == b"\x7fELF"
    assert out.entry.encode() in out.cubin
    assert out.linked == tuple(sorted([f"{FWD.symbol}.ltoir", f"{INV.symbol}.ltoir", TWIDDLES_90]))


def _thread_kernel(x):
    td = cuda.local.array(THR.storage_size, dtype=THR.value_type)
    for i in range(THR.size):
        td[i] = x[cuda.threadIdx.x, i]
    THR.execute(td)
    for i in range(THR.size):
        x[cuda.threadIdx.x, i] = td[i]


def test_thread_fft_kernel_links():
    out = compile_kernel(_thread_kernel, (types.complex128[:, ::1],), sm=90)
    assert out.cubin[:4] == b"\x7fELF"


def _typing_error(fn, argtypes):
    with pytest.raises(TypingError) as e:
        compile_kernel(fn, argtypes, sm=90)
    return str(e.value)


def test_typing_wrong_dtype():
    def k(x):
        td = cuda.local.array(FWD.storage_size, dtype=np.float64)
        smem = cuda.shared.array(0, dtype=FWD.value_type)
        FWD.execute(td, smem)

    msg = _typing_error(k, (types.complex64[::1],))
    assert "must hold complex64 (fft.value_type) or float32 (fft.precision_type) values, got an array of float64" in msg


def test_typing_not_an_array():
    def k(x):
        smem = cuda.shared.array(0, dtype=FWD.value_type)
        FWD.execute(x[0], smem)

    msg = _typing_error(k, (types.complex64[::1],))
    assert "thread_data (1st argument) must be a local array" in msg


def test_typing_missing_shared_memory():
    def k(x):
        td = cuda.local.array(FWD.storage_size, dtype=FWD.precision_type)  # 1 complex arg: shared form
        FWD.execute(td)

    assert "takes (thread_data, shared_memory)" in _typing_error(k, (types.complex64[::1],))


def test_typing_thread_fft_with_shared_memory():
    def k(x):
        td = cuda.local.array(THR.storage_size, dtype=THR.value_type)
        THR.execute(td, td)

    assert "execution='Thread' takes (thread_data,)" in _typing_error(k, (types.complex128[::1],))


def test_typing_2d_register_array():
    def k(x):
        smem = cuda.shared.array(0, dtype=FWD.value_type)
        FWD.execute(x, smem)

    assert "must be a 1-D contiguous local array" in _typing_error(k, (types.complex64[:, ::1],))


def test_attributes_are_compile_time_constants():
    """Traits used as local-array shapes and loop bounds type-check (they are literals)."""
    def k(x):
        a = cuda.local.array(FWD.storage_size, dtype=FWD.value_type)
        b = cuda.local.array((FWD.elements_per_thread, 2), dtype=FWD.precision_type)
        for i in range(FWD.storage_size):
            a[i] = x[i]
        b[0, 0] = FWD.block_dim[0] + FWD.shared_memory_size
        x[0] = a[1] + b[0, 0]

    out = compile_kernel(k, (types.complex64[::1],), sm=90)
    assert out.linked == ()  # no execute call: nothing to link


def _global_as_registers(x):
    smem = cuda.shared.array(0, dtype=FWD.value_type)
    FWD.execute(x, smem)


def test_address_space_checks_are_opt_in(monkeypatch):
    """A global array passed as registers passes typing (numba types carry no address space);
    NUMBA_MATHDX_CHECK_ADDRESS_SPACES=1 compiles a run-time check that traps with a message."""
    from nvmath_device._numba._compat import compile_kernel_library

    argtypes = (types.complex64[::1],)
    plain = compile_kernel_library(_global_as_registers, argtypes, (9, 0))[0].get_llvm_str()
    assert "isspacep" not in plain
    monkeypatch.setenv("NUMBA_MATHDX_CHECK_ADDRESS_SPACES", "1")
    checked = compile_kernel_library(_global_as_registers, argtypes, (9, 0))[0].get_llvm_str()
    assert "llvm.nvvm.isspacep.local" in checked and "llvm.nvvm.isspacep.shared" in checked
    assert "thread_data must be a local array" in checked


def _execute_kernel(fft):
    """A kernel whose only job is fft.execute on registers loaded from and stored to x."""
    ST, VT = fft.storage_size, fft.value_type
    if fft.execution == "Block":
        def kernel(x):
            td = cuda.local.array(ST, dtype=VT)
            smem = cuda.shared.array(0, dtype=VT)
            for i in range(ST):
                td[i] = x[cuda.threadIdx.x * ST + i]
            fft.execute(td, smem)
            for i in range(ST):
                x[cuda.threadIdx.x * ST + i] = td[i]
    else:
        def kernel(x):
            td = cuda.local.array(ST, dtype=VT)
            for i in range(ST):
                td[i] = x[cuda.threadIdx.x * ST + i]
            fft.execute(td)
            for i in range(ST):
                x[cuda.threadIdx.x * ST + i] = td[i]
    return kernel


CODELET_CASES = [
    dict(size=4096, precision=np.float32, fft_type="c2c", direction="inverse", elements_per_thread=16),
    dict(size=1000, precision=np.float64, fft_type="r2c", elements_per_thread=10),
    dict(size=256, precision=np.float32, fft_type="c2r", real_fft_options={"complex_layout": "natural", "real_mode": "folded"}),
    dict(size=7, precision=np.float64, fft_type="c2c", direction="forward", execution="Thread"),
    dict(size=16, precision=np.float32, fft_type="r2c", execution="Thread",
         real_fft_options={"complex_layout": "packed", "real_mode": "folded"}),
]


@pytest.mark.parametrize("kw", CODELET_CASES, ids=lambda kw: f"{kw['size']}-{kw['fft_type']}-{kw.get('execution', 'Block')}")
def test_a_unit_includes_only_its_codelets_and_links(kw):
    # Each unit includes one cuFFTDx codelet file (fft_codegen.CODELET_FILTER); linking a kernel
    # to a cubin proves nothing it calls is missing (the primary template is only declared).
    from numba import from_dtype

    from nvmath_device._build.fft_codegen import codelet_includes

    fft = FFT(sm=90, **kw)
    folded = kw.get("real_fft_options", {}).get("real_mode") == "folded"
    n = fft.size // 2 if folded else fft.size
    tag = {np.float32: "fp32", np.float64: "fp64"}[kw["precision"]]
    assert codelet_includes(fft).count("#include") == 1
    assert f'"cufftdx/database/fft_{n}_{tag}_fwd.hpp.inc"' in codelet_includes(fft)
    out = compile_kernel(_execute_kernel(fft), (from_dtype(np.dtype(fft.value_type))[::1],), sm=90)
    assert out.cubin[:4] == b"\x7fELF" and out.linked == tuple(sorted([f"{fft.symbol}.ltoir", TWIDDLES_90]))


def test_kernels_with_our_code_drop_unused_device_variables():
    # cuFFTDx's ~2.3 MB of twiddle tables stay out of the cubin: only the ones the kernel uses
    # are linked (nvJitLink -optimize-unused-variables, turned on by nvmath_device._compat).
    out = compile_kernel(_roundtrip, (types.complex64[::1],), sm=90)
    assert len(out.cubin) < 200_000, len(out.cubin)


def test_other_links_keep_numba_default_options():
    from numba.cuda.cudadrv import driver
    from numba.cuda.cudadrv.linkable_code import LTOIR

    from nvmath_device._numba.common import linkable_ltoir

    plain = driver._Linker(cc=(9, 0), lto=True)
    plain.add_file_guess_ext(LTOIR(b"x", name="foreign.ltoir"))
    assert not plain._get_linker_options(ptx=False).optimize_unused_variables
    ours = driver._Linker(cc=(9, 0), lto=True)
    ours.add_file_guess_ext(linkable_ltoir(FWD))
    assert ours._get_linker_options(ptx=False).optimize_unused_variables
