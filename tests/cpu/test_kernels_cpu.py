# SPDX-License-Identifier: Apache-2.0
"""The fused kernels type, lower and link to sm_90 cubins without a GPU (the real numba-cuda path)."""

import numpy as np
import pytest
from numba import types

from kernels._fused import _pair_descriptors, filter_kernel
from kernels.spectral import _matched_kernel, _stft_kernel
from nvmath_device._build.fft_codegen import TwiddleTables
from nvmath_device.aot import compile_kernel

R2C, C2R = _pair_descriptors(64, np.float32, True, "suggested", "suggested", sm=90)
FWD, INV = _pair_descriptors(64, np.float32, False, "suggested", "suggested", sm=90)
i64 = types.int64
TWIDDLES_90 = f"{TwiddleTables(90).symbol}.ltoir"  # every kernel with an FFT links cuFFTDx's tables


def _link(kernel, argtypes, expect):
    out = compile_kernel(kernel.py_func, argtypes, sm=90)
    assert out.cubin[:4] == b"\x7fELF"
    assert out.linked == tuple(sorted([f"{d.symbol}.ltoir" for d in expect] + [TWIDDLES_90]))


def test_real_filter_kernel_links():
    _link(filter_kernel(R2C, C2R, True, False),
          (types.float32[:, ::1], types.complex64[::1], types.float32[:, ::1], i64, i64, i64, i64), (R2C, C2R))


def test_folded_real_filter_kernel_links():
    r2c, c2r = _pair_descriptors(64, np.float32, True, "suggested", "suggested", sm=90, folded=True)
    _link(filter_kernel(r2c, c2r, True, False),
          (types.float32[:, ::1], types.complex64[::1], types.float32[:, ::1], i64, i64, i64, i64), (r2c, c2r))


def test_folded_real_pairs_filter_kernel_links():
    """Real rows viewed as complex sample pairs (pairs=True): complex x/y, same FFT units."""
    r2c, c2r = _pair_descriptors(64, np.float32, True, "suggested", "suggested", sm=90, folded=True)
    _link(filter_kernel(r2c, c2r, True, False, True),
          (types.complex64[:, ::1], types.complex64[::1], types.complex64[:, ::1], i64, i64, i64, i64), (r2c, c2r))


def test_complex_filter_kernel_links():
    _link(filter_kernel(FWD, INV, False, True),
          (types.complex64[:, ::1], types.complex64[::1], types.complex64[:, ::1], i64, i64, i64, i64), (FWD, INV))


def test_matched_filter_kernel_links():
    _link(_matched_kernel(FWD, INV, False),
          (types.complex64[:, ::1], types.complex64[::1], types.complex64[:, ::1], types.int32[::1],
           types.float32[::1], i64), (FWD, INV))


def test_stft_kernel_links():
    _link(_stft_kernel(R2C), (types.float32[:, ::1], types.float32[::1], types.float32[:, :, ::1], i64, i64, i64), (R2C,))


def test_folded_stft_kernels_link():
    """Folded real FFT: frames as complex sample pairs (complex x and window) or sample by sample."""
    r2c, _ = _pair_descriptors(64, np.float32, True, "suggested", "suggested", sm=90, folded=True)
    _link(_stft_kernel(r2c, True),
          (types.complex64[:, ::1], types.complex64[::1], types.float32[:, :, ::1], i64, i64, i64), (r2c,))
    _link(_stft_kernel(r2c),
          (types.float32[:, ::1], types.float32[::1], types.float32[:, :, ::1], i64, i64, i64), (r2c,))


def test_batched_gemm_kernel_links():
    from kernels.gemm import _batched_kernel, _gemm_descriptor

    mm = _gemm_descriptor(16, 16, 16, np.float32, sm=90)
    kern, _ = _batched_kernel(mm, 4, True)
    a3 = types.float32[:, :, ::1]
    out = compile_kernel(kern.py_func, (a3, a3, a3, a3, types.float32, types.float32, i64), sm=90)
    assert out.linked == (f"{mm.symbol}.ltoir",)


def test_vector_batched_gemm_kernel_links():
    """The vector kernel of batched_gemm, with and without the beta * C term, on cuBLASDx's
    padded tiles: A, B, C and D as 16-byte (complex128) vectors; a slot holds A and B, and
    then the result at the padded ldc."""
    from kernels.gemm import _gemm_descriptor, _vector_kernel

    v16 = types.complex128[:, ::1]
    for size, dt, scal in (((16, 16, 16), np.float32, types.float32), ((32, 32, 32), np.float32, types.float32),
                           ((8, 8, 8), np.complex128, types.complex128)):
        mm = _gemm_descriptor(*size, dt, sm=90, alignment=(16, 16, 16), leading_dimension="suggested")
        m, n, _ = size
        ldc = mm.leading_dimension[2]
        for use_c in (False, True):
            kern, smem = _vector_kernel(mm, 2, use_c)
            slot = smem // 2
            assert slot % 16 == 0 and slot >= mm.shared_memory_size_ab
            assert slot >= ((m - 1) * ldc + n) * np.dtype(dt).itemsize
            out = compile_kernel(kern.py_func, (v16, v16, v16, v16, scal, scal, i64), sm=90)
            assert out.cubin[:4] == b"\x7fELF"
            assert out.linked == (f"{mm.symbol}.ltoir",)
    mm = _gemm_descriptor(32, 32, 32, np.float32, sm=90, alignment=(16, 16, 16), leading_dimension="suggested")
    assert mm.leading_dimension == (36, 36, 36)  # padded: what the vector kernel was measured with


def test_vector_kernel_launch_bounds_hold_its_registers():
    """``_vector_kernel(..., min_blocks)`` (the benchmark's ``libb2``) compiles with launch bounds:
    the 32^3 float32 one-warp kernel takes more than 128 registers without them and at most
    65536 / (32 threads x 16 blocks) = 128 with ``min_blocks=16``."""
    from kernels.gemm import _batched_descriptor, _vector_kernel

    mm = _batched_descriptor(32, 32, 32, np.float32, sm=90)
    v16 = types.complex128[:, ::1]
    args = (v16, v16, v16, v16, types.float32, types.float32, i64)
    free = compile_kernel(_vector_kernel(mm, 1, False)[0], args, sm=90)
    bound = compile_kernel(_vector_kernel(mm, 1, False, 16)[0], args, sm=90)
    assert free.registers > 128 >= bound.registers


def test_place_offsets_hold_for_every_thread():
    """``_place_offsets``: every thread's value i sits at its value 0's place plus o[i] in cuBLASDx's
    partition (host table, NVRTC) for the whole tiles batched_gemm runs; None where a tile has
    unused values (20^3 fp32) or the places differ per thread."""
    from kernels.gemm import _batched_descriptor, _place_offsets

    for size, dtype in (((16, 16, 16), np.float32), ((32, 32, 32), np.float32), ((64, 64, 64), np.float64),
                        ((16, 16, 16), np.complex64), ((20, 20, 20), np.float32)):
        mm = _batched_descriptor(*size, np.dtype(dtype), sm=90)
        ld = mm.leading_dimension[2]
        table = mm.fragment_coordinates_table().astype(np.int64)
        o = _place_offsets(mm, ld)
        if size == (20, 20, 20):
            assert o is None and (table[..., 0] < 0).any()
            continue
        places = table[..., 0] * ld + table[..., 1]
        assert o.dtype == np.int32 and o.shape == (mm.accumulator_size,) and o[0] == 0
        np.testing.assert_array_equal(places, places[:, :1] + o)
        assert len(set(places.ravel())) == places.size  # every value of the tile exactly once


def test_vector_kernel_with_place_offsets_keeps_fewer_registers():
    """The vector kernel with offsets (``_VECTOR_OFFSETS``, the benchmark's ``libo``) holds one
    register for its result's places instead of one per value: fewer registers and fewer
    instructions in the sm_90 code, nothing in local memory (32^3 fp32, one warp: 242 -> 210;
    16^3 fp32, four slots: 48 -> 40)."""
    import os
    import sys

    from kernels.gemm import _batched_descriptor, _vector_kernel

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    import sass_counts as sc

    nvd = sc.find_nvdisasm()
    assert nvd, "nvdisasm not found: the test extras install nvidia-cuda-nvdisasm"
    v16 = types.complex128[:, ::1]
    for size, G in (((32, 32, 32), 1), ((16, 16, 16), 4)):
        mm = _batched_descriptor(*size, np.float32, sm=90)
        args = (v16, v16, v16, v16, types.float32, types.float32, i64)
        table = compile_kernel(_vector_kernel(mm, G, True)[0], args, sm=90)
        offsets = compile_kernel(_vector_kernel(mm, G, True, offsets=True)[0], args, sm=90)
        assert offsets.registers < table.registers and offsets.frame_bytes == 0
        count = [sum(sc.opcodes(sc._disassemble(ck, nvd)).values()) for ck in (offsets, table)]
        assert count[0] < count[1], (size, count)


def test_batched_gemm_threads_per_gemm():
    """One warp per GEMM from 32^3 multiply-adds while the result fits 32 registers per thread
    of a warp; cuBLASDx's suggested block otherwise (links for sm_90 with one warp)."""
    from kernels.gemm import _batched_descriptor, _block_threads, _vector_kernel

    assert _block_threads(32, 32, 32, np.float32) == 32
    assert _block_threads(32, 32, 64, np.float32) == 32
    assert _block_threads(16, 16, 16, np.float32) == "suggested"  # too little work per GEMM
    assert _block_threads(32, 32, 32, np.float64) == "suggested"  # 64 registers of result
    assert _block_threads(32, 32, 32, np.complex64) == "suggested"
    assert _block_threads(64, 64, 64, np.float64) == "suggested"
    mm = _batched_descriptor(32, 32, 32, np.float32, sm=90)
    assert mm.block_dim == (32, 1, 1) and mm.leading_dimension == (36, 36, 36)
    v16 = types.complex128[:, ::1]
    kern, _ = _vector_kernel(mm, 1, True)
    out = compile_kernel(kern.py_func, (v16, v16, v16, v16, types.float32, types.float32, i64), sm=90)
    assert out.linked == (f"{mm.symbol}.ltoir",)


def test_batched_gemm_block_grows_until_the_result_fits_32_registers():
    """Where cuBLASDx's suggested block leaves more than 32 registers of result per thread, the
    batched GEMM's block doubles until it does not (64^3 fp64: 128 -> 256 threads, measured
    faster; 64^3 complex128: 256 -> 512), and the vector kernel at 64^3 fp64 then keeps
    nothing in local memory (at the suggested 128 threads it spilled)."""
    from kernels.gemm import (
        _batched_descriptor,
        _gemm_descriptor,
        _result_registers,
        _vector_kernel,
    )

    for size, dtype, threads in (((64, 64, 64), np.float64, 256), ((64, 64, 64), np.complex128, 512),
                                 ((64, 64, 64), np.float32, 128), ((32, 32, 32), np.float64, 64),
                                 ((16, 16, 16), np.float32, 64)):
        mm = _batched_descriptor(*size, np.dtype(dtype), sm=90)
        assert mm.block_dim == (threads, 1, 1), (size, dtype, mm.block_dim)
        assert _result_registers(size[0], size[1], dtype, threads) <= 32
        suggested = _gemm_descriptor(*size, np.dtype(dtype), sm=90, alignment=(16, 16, 16),
                                     leading_dimension="suggested").block_dim[0]
        assert threads == suggested or _result_registers(size[0], size[1], dtype, threads // 2) > 32
    mm = _batched_descriptor(64, 64, 64, np.dtype(np.float64), sm=90)
    v16 = types.complex128[:, ::1]
    kern, _ = _vector_kernel(mm, 1, False)
    out = compile_kernel(kern.py_func, (v16, v16, v16, v16, types.float64, types.float64, i64), sm=90)
    assert out.frame_bytes == 0


def test_vector_batched_gemm_moves_whole_16_byte_vectors():
    """Every global access of the vector kernel is one 16-byte vector (ld/st.global.v2.f64 of
    the complex128 views, through load_complex/store_complex), not two 8-byte halves."""
    from numba import cuda

    from kernels.gemm import _gemm_descriptor, _vector_kernel
    from tests.sim_kernels_compile import device_functions_without_gpu

    v16 = types.complex128[:, ::1]
    mm = _gemm_descriptor(32, 32, 32, np.float32, sm=90, alignment=(16, 16, 16), leading_dimension="suggested")
    for use_c in (False, True):
        kern, _ = _vector_kernel(mm, 2, use_c)
        with device_functions_without_gpu():  # its device functions: no driver asked (alone, first)
            ptx, _ = cuda.compile_ptx(kern.py_func, (v16, v16, v16, v16, types.float32, types.float32, i64),
                                      cc=(9, 0))
        ops = [ln.split()[0] for ln in map(str.strip, ptx.splitlines()) if ln.startswith(("ld.global", "st.global"))]
        assert set(ops) == {"ld.global.v2.f64", "st.global.v2.f64"}, sorted(set(ops))


def test_vector_batched_gemm_needs_aligned_operands():
    """The vector kernel loads 16-byte vectors: operands at an address that is not a multiple
    of 16 (e.g. a CuPy slice a[1:] of 4-byte values) take the shared-memory kernel."""
    from kernels._arrays import DevArray
    from kernels._fused import vectors_ok

    def dev(address):  # metadata only: no GPU needed; as batched_gemm views it: 16-byte vectors
        return DevArray(address, (2, 4, 4), np.float32, None).reshape(2, 16).view(np.complex128)

    assert vectors_ok(dev(256)) and vectors_ok(dev(272))
    assert not vectors_ok(dev(260)) and not vectors_ok(dev(264))


class _CAI:
    """A third-party device array: only __cuda_array_interface__ (no memory behind it)."""

    def __init__(self, shape, typestr, strides=None, ptr=1 << 20):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "strides": strides,
                                         "data": (ptr, False), "version": 3}


def test_devarray_reads_the_interface_and_refuses_non_contiguous_arrays():
    """kernels take device arrays through __cuda_array_interface__ without numba's DeviceNDArray:
    pointer, shape, dtype and C strides as the interface says; strided arrays are refused
    naming the argument (axes of extent 1 may carry any stride, as in NumPy); reshape and
    dtype views keep the pointer; the numba type is the one numba-cuda gives the same array."""
    from numba.cuda.typing.typeof import typeof  # numba-cuda's: types __cuda_array_interface__

    from kernels._arrays import DevArray

    a = DevArray.of(_CAI((8, 4096), "<f4"), "x")
    assert (a.ptr, a.shape, a.dtype, a.size, a.strides) == (1 << 20, (8, 4096), np.float32, 8 * 4096, (16384, 4))
    assert DevArray.of(_CAI((8, 4096), "<f4", (16384, 4))).shape == (8, 4096)  # explicit C strides
    assert DevArray.of(_CAI((1, 4096), "<f4", (0, 4))).shape == (1, 4096)  # x[None, :]
    with pytest.raises(ValueError, match=r"x must be C-contiguous \(got strides \(4, 32\)\)"):
        DevArray.of(_CAI((8, 4096), "<f4", (4, 32)), "x")
    with pytest.raises(ValueError, match="C-contiguous"):
        DevArray.of(_CAI((8, 2048), "<f4", (16384, 4)), "x")  # every other row
    v = a.view(np.complex64).reshape(8 * 2048)
    assert (v.ptr, v.shape, v.dtype, v.strides) == (a.ptr, (16384,), np.complex64, (8,))
    assert a.reshape((4, 8192)).shape == (4, 8192)
    with pytest.raises(ValueError, match="cannot reshape"):
        a.reshape(3, 4096)
    with pytest.raises(ValueError, match="cannot be viewed as complex128"):
        DevArray(0, (3,), np.float32, None).view(np.complex128)
    for arr in (a, v, DevArray.of(_CAI((2, 3, 4), "<c16"))):
        assert arr._numba_type_ == typeof(_CAI(arr.shape, arr.dtype.str))


def test_beamform_kernel_links():
    from kernels.gemm import _beamform_kernel
    from nvmath_device import FFT, Matmul

    fft = FFT(size=256, precision=np.float32, direction="forward", elements_per_thread=8, ffts_per_block=8, sm=90)
    mm = Matmul(size=(8, 256, 16), precision=np.float32, data_type="complex",
                arrangement=("row_major",) * 3, block_dim=fft.block_dim, sm=90)
    kern, smem = _beamform_kernel(mm, fft)
    # the FFT's workspace lies over the GEMM's A and B tiles (dead after the GEMM), before C
    assert fft.shared_memory_size <= mm.c_shared_memory_offset and smem == mm.shared_memory_size
    out = compile_kernel(kern, (types.complex64[:, ::1], types.complex64[:, :, ::1], types.complex64[:, :, ::1]), sm=90)
    assert out.linked == tuple(sorted([f"{mm.symbol}.ltoir", f"{fft.symbol}.ltoir", TWIDDLES_90]))
    assert out.frame_bytes == 0


@pytest.mark.parametrize("beams, nsamp, channels, prec", [
    (8, 256, 16, np.float32), (16, 256, 16, np.float32), (4, 1024, 16, np.float32), (1, 32, 20, np.float32),
    (4, 128, 8, np.float64),
])
def test_beamform_direct_kernel_links_with_only_the_fft(beams, nsamp, channels, prec):
    """The direct beamforming kernel (weighted sums in registers, no GEMM tiles) links for sm_90
    with the FFT's code only, keeps nothing in local memory, and asks for the larger of the
    beams x samples tile plus W and the FFT's workspace (which lies over the tile)."""
    from kernels.gemm import _beamform_direct_kernel, _beamform_fft

    fft = _beamform_fft(beams, nsamp, prec, 90)
    kern, smem = _beamform_direct_kernel(channels, fft)
    isz = 8 if prec is np.float32 else 16
    assert smem == max((beams * nsamp + beams * channels) * isz, fft.shared_memory_size)
    t = types.complex64 if prec is np.float32 else types.complex128
    out = compile_kernel(kern, (t[:, ::1], t[:, :, ::1], t[:, :, ::1]), sm=90)
    assert out.linked == tuple(sorted([f"{fft.symbol}.ltoir", TWIDDLES_90]))
    assert out.frame_bytes == 0


@pytest.mark.parametrize("beams, nsamp, channels, over_ab", [
    (16, 256, 16, True), (8, 512, 16, True), (4, 1024, 16, True), (32, 128, 32, True),
    (8, 64, 3, False),  # 3 channels: A and B (1.7 KiB) end before the FFT's 4 KiB would
])
def test_beamform_fft_workspace_reuses_the_gemm_tiles_only_when_it_ends_before_c(beams, nsamp, channels, over_ab):
    """The beamforming kernel's shared memory: the FFT workspace at 0 when it ends before C's
    tile, else after the GEMM's buffer; never overlapping C. The main shape: 66 KiB (was 98)."""
    from kernels.gemm import _beamform_fft_offset
    from nvmath_device import FFT, Matmul

    fft = FFT(size=nsamp, precision=np.float32, direction="forward", elements_per_thread=8 if nsamp >= 256 else 4,
              ffts_per_block=beams, sm=90)
    mm = Matmul(size=(beams, nsamp, channels), precision=np.float32, data_type="complex",
                arrangement=("row_major",) * 3, block_dim=fft.block_dim, sm=90)
    off = _beamform_fft_offset(mm, fft)
    c_lo, c_hi = mm.c_shared_memory_offset, mm.c_shared_memory_offset + mm.c_size * 8
    assert off + fft.shared_memory_size <= c_lo or off >= c_hi  # never over C
    assert (off == 0) == over_ab and off % 16 == 0
    if (beams, nsamp, channels) == (16, 256, 16):
        assert max(mm.shared_memory_size, off + fft.shared_memory_size) == 67584


def _f64_instructions(kernel, argtypes):
    from numba import cuda

    ptx, _ = cuda.compile_ptx(kernel.py_func, argtypes, cc=(9, 0))
    return [ln for ln in ptx.splitlines() if ".f64" in ln]


def test_float32_kernels_do_no_float64_math():
    """A bare ``0``/``0j``/``1j`` in a float32 kernel promotes loads and stores to float64
    (f32<->f64 conversions run at 1/4 or less of the float32 rate on the GPU): none may remain."""
    r2c, c2r = _pair_descriptors(64, np.float32, True, "suggested", "suggested", sm=90, folded=True)
    C, R, H = types.complex64[:, ::1], types.float32[:, ::1], types.complex64[::1]
    C1, R1 = types.complex64[::1], types.float32[::1]
    cases = {
        "pairs": (filter_kernel(r2c, c2r, True, False, True), (C, H, C, i64, i64, i64, i64)),
        "folded": (filter_kernel(r2c, c2r, True, False), (R, H, R, i64, i64, i64, i64)),
        "real": (filter_kernel(R2C, C2R, True, False), (R, H, R, i64, i64, i64, i64)),
        "c2c": (filter_kernel(FWD, INV, False, True), (C, H, C, i64, i64, i64, i64)),
        "matched": (_matched_kernel(FWD, INV, True), (C, H, C, types.int32[::1], types.float32[::1], i64)),
        "stft": (_stft_kernel(R2C), (R, types.float32[::1], types.float32[:, :, ::1], i64, i64, i64)),
        "stft folded": (_stft_kernel(r2c), (R, types.float32[::1], types.float32[:, :, ::1], i64, i64, i64)),
        "stft pairs": (_stft_kernel(r2c, True), (C, H, types.float32[:, :, ::1], i64, i64, i64)),
        "flat pairs": (filter_kernel(r2c, c2r, True, False, True, True), (C1, H, C1, i64, i64, i64, i64)),
        "flat real": (filter_kernel(R2C, C2R, True, False, False, True), (R1, H, R1, i64, i64, i64, i64)),
        "flat c2c": (filter_kernel(FWD, INV, False, False, False, True), (C1, H, C1, i64, i64, i64, i64)),
    }
    found = {name: _f64_instructions(k, sig)[:3] for name, (k, sig) in cases.items()}
    assert not any(found.values()), found


def test_rows_with_odd_strides_become_pairs_and_pairs_need_alignment():
    """``x[None, :]`` has strides (0, 4): NumPy calls it C-contiguous, numba device arrays with
    those strides did not and refused views as complex pairs (found on the H200 with a (1, L)
    signal). Host copies get canonical strides, and the DevArray kernels get of such an array
    views as pairs; pairs_ok wants each array aligned to a pair."""
    from kernels._arrays import DevArray, canonical
    from kernels._fused import pairs_ok

    odd = np.ascontiguousarray(np.arange(8, dtype=np.float32)[None, :])
    assert odd.strides == (0, 4) and odd.flags.c_contiguous
    fixed = canonical(odd)
    assert fixed.strides == (32, 4) and np.array_equal(fixed, odd)
    dev = DevArray.of(_CAI(odd.shape, "<f4", odd.strides))
    assert dev.view(np.complex64).shape == (1, 4)  # what the pairs path does

    assert pairs_ok(True, True, 8, 8, 8, 0, dev, DevArray(256, (1, 8), np.float32, None))
    assert not pairs_ok(True, True, 8, 8, 8, 0, dev, DevArray(260, (1, 8), np.float32, None))  # 4 bytes off
    assert not pairs_ok(True, True, 8, 8, 7, 0, dev, dev)  # odd step: segments start on odd samples


def test_flat_kernels_do_no_64bit_division():
    """Whole-row (flat) kernels skip the segment arithmetic (``row // nseg``, a 64-bit division
    of ~100 instructions per thread); segmented kernels need it."""
    from numba import cuda

    C, C1, H = types.complex64[:, ::1], types.complex64[::1], types.complex64[::1]

    def divisions(flat, x):
        k = filter_kernel(FWD, INV, False, False, False, flat)
        ptx, _ = cuda.compile_ptx(k.py_func, (x, H, x, i64, i64, i64, i64), cc=(9, 0))
        return sum(1 for ln in ptx.splitlines() if "div.s64" in ln or "div.u64" in ln)

    assert divisions(True, C1) == 0
    assert divisions(False, C) >= 1


@pytest.mark.parametrize("real, pairs, flat", [(False, False, True), (False, False, False), (True, True, True),
                                               (True, True, False)])
def test_filter_kernels_move_complex_values_as_one_access(real, pairs, flat):
    """Complex loads and stores of the convolution/FIR kernels are single 8-byte accesses
    (ld/st.global.v2.f32 through nvmath_device.load_complex/store_complex), never a real and an
    imaginary part apart (what numba's indexing makes: two LDG.E per value on sm_90)."""
    from numba import cuda

    fwd, inv = _pair_descriptors(512, np.float32, real, "suggested", "suggested", sm=90, folded=real)
    x = types.complex64[::1] if flat else types.complex64[:, ::1]
    ptx, _ = cuda.compile_ptx(filter_kernel(fwd, inv, real, False, pairs, flat).py_func,
                              (x, types.complex64[::1], x, i64, i64, i64, i64), cc=(9, 0))
    ops = [ln.split()[0] for ln in map(str.strip, ptx.splitlines()) if ln.startswith(("ld.global", "st.global"))]
    assert ops and set(ops) == {"ld.global.v2.f32", "st.global.v2.f32"}, sorted(set(ops))


def test_vector_accesses_need_element_aligned_complex_arrays():
    """vectors_ok: a complex array qualifies when its address is a multiple of its element size
    (a complex64 view of float32 data starting at an odd element does not); real arrays are not
    accessed as vectors and always qualify."""
    from kernels._arrays import DevArray
    from kernels._fused import vectors_ok

    assert vectors_ok(DevArray(1 << 20, (4, 8), np.complex64, None), DevArray(8, (3,), np.complex64, None))
    assert not vectors_ok(DevArray(4, (3,), np.complex64, None))
    assert not vectors_ok(DevArray(8, (3,), np.complex128, None)) and vectors_ok(DevArray(16, (3,), np.complex128, None))
    assert vectors_ok(DevArray(4, (3,), np.float32, None))


def test_fast_launch_packs_arguments_like_numba():
    """kernels._launch packs kernel parameters itself (the default launch on a GPU): for the
    argument kinds the fused kernels take (DevArrays: C-contiguous 1-D/2-D device arrays and
    dtype views of them; int64, float32/float64 and complex scalars), the types and values equal
    what numba-cuda's own typeof and _prepare_args give the same arguments as numba device
    arrays; the packed buffer reads back through the pointer array cuLaunchKernel gets.
    Metadata-only arrays: no GPU needed."""
    import ctypes
    import struct
    from types import SimpleNamespace

    from numba import typeof
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    from numba.cuda.dispatcher import _Kernel

    from kernels._arrays import DevArray
    from kernels._launch import Params, _argtype, param_formats, param_values

    def dev(shape, dtype, address):
        class _NoMemory:
            device_ctypes_pointer = ctypes.c_void_p(address)

        dt = np.dtype(dtype)
        strides = tuple(int(np.prod(shape[i + 1:])) * dt.itemsize for i in range(len(shape)))
        return DeviceNDArray(shape, strides, dt, gpu_data=_NoMemory())

    x, xa = dev((64, 4096), np.float32, 1 << 20), DevArray(1 << 20, (64, 4096), np.float32, None)
    scalars = (123456789012, np.float32(1.5), 2.25, np.complex64(0.5 - 2j), complex(-1.0, 3.0), np.int64(-7))
    args = (x, x.view(np.complex64), x.reshape(x.size), dev((7,), np.complex128, 4096),
            x.view(np.complex64).reshape(64 * 2048)) + scalars
    ours = (xa, xa.view(np.complex64), xa.reshape(xa.size), DevArray(4096, (7,), np.complex128, None),
            xa.view(np.complex64).reshape(64 * 2048)) + scalars
    argtypes = tuple(_argtype(a) for a in ours)
    assert argtypes == tuple(typeof(a) for a in args)
    want = []
    for t, a in zip(argtypes, args):
        _Kernel._prepare_args(SimpleNamespace(extensions=[]), t, a, 0, [], want)
    fmts = param_formats(argtypes)
    got = param_values(argtypes, ours)
    assert len(fmts) == len(got) == len(want)
    for f, g, w in zip(fmts, got, want):
        size = ctypes.sizeof(w) if isinstance(w, ctypes._SimpleCData) else 8  # numba: ints are intptr
        w = w.value if isinstance(w, ctypes._SimpleCData) else w
        assert struct.calcsize(f) == size and g == w, (f, g, w)
    p = Params(fmts)
    p.pack(got)
    ptrs = ctypes.cast(p.params, ctypes.POINTER(ctypes.c_void_p))
    for i, (f, g) in enumerate(zip(fmts, got)):
        raw = ctypes.string_at(ptrs[i], struct.calcsize(f))
        assert struct.unpack("=" + f, raw)[0] == g, i  # values exact in their formats


@pytest.mark.parametrize("kind", ["real", "folded", "complex"])
def test_spectrum_kernel_links(kind):
    """The device-taps spectrum kernel (``kernels._fused.spectrum_kernel``), which the simulator
    suite runs, also compiles and links for sm_90, for every taps dtype the functions accept."""
    from kernels._fused import spectrum_kernel

    if kind == "complex":
        fwd, taps = FWD, (types.float32, types.float64, types.complex64, types.complex128)
    else:
        fwd = R2C if kind == "real" else _pair_descriptors(
            64, np.float32, True, "suggested", "suggested", sm=90, folded=True)[0]
        taps = (types.float32, types.float64)
    for dt in taps:
        _link(spectrum_kernel(fwd), (types.Array(dt, 1, "C"), types.complex64[::1]), [fwd])


def _compiled(kernel, argtypes):
    out = compile_kernel(kernel, argtypes, sm=90)  # the dispatcher: its launch bounds come along
    return out.registers, out.frame_bytes


C2 = types.complex64[:, ::1]
C1 = types.complex64[::1]


@pytest.mark.parametrize("n, flat, cap", [(4096, True, 64), (512, False, 80)])
def test_real_filter_kernels_fit_their_register_cap(n, flat, cap):
    """The folded float32 convolution (whole rows) and FIR (segments) kernels ask for 8 / 6
    resident blocks of 128 threads (launch bounds' minimum blocks): sm_90 cubins of the
    benchmark's shapes get <= 64 / <= 80 registers (72 / 85 without) and spill nothing."""
    fwd, inv = _pair_descriptors(n, np.float32, True, "suggested", "suggested", sm=90, folded=True)
    x = C1 if flat else C2
    kern = filter_kernel(fwd, inv, True, False, True, flat)
    nthreads = fwd.block_dim[0] * fwd.block_dim[1]
    assert kern.targetoptions["launch_bounds"] == (nthreads, 65536 // (nthreads * cap))
    regs, frame = _compiled(kern, (x, C1, x, i64, i64, i64, i64))
    assert regs <= cap and frame == 0, (regs, frame)


def test_complex_and_double_filter_kernels_have_no_register_cap():
    """The cap is only where it was measured to help: complex (a minimum of 5 blocks of 192
    threads made the 512-point kernel take 48 registers, not 40) and large-data kernels."""
    fwd, inv = _pair_descriptors(512, np.float32, False, "suggested", "suggested", sm=90)
    assert isinstance(filter_kernel(fwd, inv, False, False, False, True).targetoptions["launch_bounds"], int)
    fwd, inv = _pair_descriptors(4096, np.float64, True, "suggested", "suggested", sm=90, folded=True)
    assert isinstance(filter_kernel(fwd, inv, True, False, True, True).targetoptions["launch_bounds"], int)


def test_matched_filter_kernel_keeps_the_template_out_of_the_fft():
    """The template spectrum is loaded after the forward FFT: only the signal is live through it.
    1024 points, 32 values per thread (the benchmark's shape): 99 registers on sm_90 (163 when
    the template was loaded before the FFT: 12 instead of 18 warps per SM), no spills; launch
    bounds = the block."""
    fwd, inv = _pair_descriptors(1024, np.float32, False, "suggested", "suggested", sm=90)
    kern = _matched_kernel(fwd, inv, False)
    assert kern.targetoptions["launch_bounds"] == fwd.block_dim[0] * fwd.block_dim[1]
    regs, frame = _compiled(kern, (C2, C1, C2, types.int32[::1], types.float32[::1], i64))
    assert regs <= 112 and frame == 0, (regs, frame)


@pytest.mark.parametrize("nfft,capped", [(512, True), (2048, True), (256, False), (4096, False)])
def test_stft_pair_kernels_fit_their_register_cap(nfft, capped):
    """The float32 STFT kernels that move frames as sample pairs at 32 values per thread (nfft
    512-2048) ask for 64 registers (launch bounds' minimum blocks) and spill nothing on sm_90;
    elsewhere (16 values per thread; 4096 points, which spilled 8 bytes under the cap) the
    compiler picks."""
    from kernels._fused import can_fold
    from kernels.spectral import _fft_pair

    fft, _ = _fft_pair("window", nfft, np.float32, True, can_fold(nfft), kernel="stft_power")
    kern = _stft_kernel(fft, True)
    nthreads = fft.block_dim[0] * fft.block_dim[1] * fft.block_dim[2]
    bounds = kern.targetoptions["launch_bounds"]
    assert bounds == ((nthreads, 65536 // (nthreads * 64)) if capped else nthreads)
    if capped:
        regs, frame = _compiled(kern, (C2, C1, types.float32[:, :, ::1], i64, i64, i64))
        assert regs <= 64 and frame == 0, (regs, frame)


def test_cufftdx_stft_pair_kernels_have_no_register_cap():
    """The cap is measured on our FFT's kernels only: with cuFFTDx's FFT (where ours declines),
    at 32 values per thread as well, the compiler picks."""
    for ept in ("suggested", 32):
        fwd, _ = _pair_descriptors(1024, np.float32, True, ept, "suggested", sm=90, folded=True)
        assert isinstance(_stft_kernel(fwd, True).targetoptions["launch_bounds"], int)
