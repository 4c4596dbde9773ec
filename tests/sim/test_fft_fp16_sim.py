# SPDX-License-Identifier: Apache-2.0
"""float16 FFTs (cuFFTDx's complex<__half2>: two FFTs per value) in user-style kernels under the
simulator, against numpy.fft in float64; and the shared-memory form ``fft.execute(smem)`` of
real FFTs (r2c / c2r) in every precision.

The kernels are written as nvmath-python 1.0's float16 examples are (float16x4 registers in RRII
order, ``thread_data.view(float16x2_type)`` for real data); the CPU suite links every one of them
to an sm_90 cubin (tests/cpu/test_fft_fp16_cpu.py), the GPU suite runs them on a GPU.

Run: NUMBA_ENABLE_CUDASIM=1 python -m pytest -q tests/sim/test_fft_fp16_sim.py
"""

import numpy as np
import pytest
from numba import cuda

from nvmath_device import FFT, float16x2, float16x2_type, float16x4
from nvmath_device import types as nd_types

SM = 90
# Relative error (2-norm over the whole output) against float64 NumPy of the float16 input:
# the simulator rounds once (~5e-4); the GPU rounds at every butterfly.
TOL_SIM = 3e-3
TOL_GPU = 1e-2

# ---------------------------------------------------------------------------------- descriptors
# (id, FFT arguments); sizes and blocks small: the simulator runs one Python thread per thread.
FP16_BLOCK = [
    ("c2c-fwd-128-ept8-fpb4", dict(size=128, fft_type="c2c", direction="forward", elements_per_thread=8, ffts_per_block=4)),
    ("c2c-inv-64-ept8-fpb2", dict(size=64, fft_type="c2c", direction="inverse", elements_per_thread=8, ffts_per_block=2)),
    ("c2c-fwd-12-suggested-fpb2", dict(size=12, fft_type="c2c", direction="forward", ffts_per_block=2)),
    ("r2c-128-ept8-fpb4", dict(size=128, fft_type="r2c", elements_per_thread=8, ffts_per_block=4)),
    ("r2c-64-ept4-fpb2", dict(size=64, fft_type="r2c", elements_per_thread=4, ffts_per_block=2)),
    ("c2r-128-ept8-fpb4", dict(size=128, fft_type="c2r", elements_per_thread=8, ffts_per_block=4)),
    ("c2r-100-fpb2", dict(size=100, fft_type="c2r", ffts_per_block=2)),
    ("r2c-128-ept8-fpb2-packed", dict(size=128, fft_type="r2c", elements_per_thread=8, ffts_per_block=2,
                                      real_fft_options={"complex_layout": "packed"})),
    ("c2r-64-ept4-fpb2-full", dict(size=64, fft_type="c2r", elements_per_thread=4, ffts_per_block=2,
                                   real_fft_options={"complex_layout": "full"})),
    ("r2c-128-ept8-fpb2-folded", dict(size=128, fft_type="r2c", elements_per_thread=8, ffts_per_block=2,
                                      real_fft_options={"real_mode": "folded"})),
    ("c2r-64-ept8-fpb2-packed-folded", dict(size=64, fft_type="c2r", elements_per_thread=8, ffts_per_block=2,
                                            real_fft_options={"complex_layout": "packed", "real_mode": "folded"})),
]
FP16_THREAD = [
    ("c2c-fwd-8", dict(size=8, fft_type="c2c", direction="forward")),
    ("c2c-inv-16", dict(size=16, fft_type="c2c", direction="inverse")),
    ("c2c-fwd-7", dict(size=7, fft_type="c2c", direction="forward")),
    ("r2c-8", dict(size=8, fft_type="r2c")),
    ("r2c-12", dict(size=12, fft_type="r2c")),
    ("c2r-16", dict(size=16, fft_type="c2r")),
    ("r2c-16-full", dict(size=16, fft_type="r2c", real_fft_options={"complex_layout": "full"})),
    ("c2r-16-folded", dict(size=16, fft_type="c2r", real_fft_options={"real_mode": "folded"})),
]
# shared-memory form: every fft_type in float16, real FFTs in float32 / float64 too
SHARED = [
    ("f16-c2c-fwd-64-ept8-fpb2", dict(size=64, precision=np.float16, fft_type="c2c", direction="forward", elements_per_thread=8, ffts_per_block=2)),
    ("f16-r2c-128-ept8-fpb4", dict(size=128, precision=np.float16, fft_type="r2c", elements_per_thread=8, ffts_per_block=4)),
    ("f16-c2r-128-ept8-fpb4", dict(size=128, precision=np.float16, fft_type="c2r", elements_per_thread=8, ffts_per_block=4)),
    ("f32-r2c-64-ept8-fpb2", dict(size=64, precision=np.float32, fft_type="r2c", elements_per_thread=8, ffts_per_block=2)),
    ("f32-c2r-100-fpb3", dict(size=100, precision=np.float32, fft_type="c2r", ffts_per_block=3)),
    ("f64-r2c-17-fpb2", dict(size=17, precision=np.float64, fft_type="r2c", ffts_per_block=2)),
    ("f64-c2r-64-ept4-fpb1", dict(size=64, precision=np.float64, fft_type="c2r", elements_per_thread=4, ffts_per_block=1)),
    ("f16-r2c-64-ept8-fpb2-folded", dict(size=64, precision=np.float16, fft_type="r2c", elements_per_thread=8, ffts_per_block=2, real_fft_options={"real_mode": "folded"})),
    ("f32-c2r-64-ept4-fpb2-packed", dict(size=64, precision=np.float32, fft_type="c2r", elements_per_thread=4, ffts_per_block=2, real_fft_options={"complex_layout": "packed"})),
    ("f64-r2c-32-ept4-fpb1-full", dict(size=32, precision=np.float64, fft_type="r2c", elements_per_thread=4, ffts_per_block=1, real_fft_options={"complex_layout": "full"})),
    ("f32-c2c-inv-32-ept4-fpb2", dict(size=32, precision=np.float32, fft_type="c2c", direction="inverse", elements_per_thread=4, ffts_per_block=2)),
]


def fp16_fft(execution="Block", **kw):
    return FFT(precision=np.float16, execution=execution, sm=SM, **kw)


# ---------------------------------------------------------------------------------- data
def is_real(t) -> bool:
    """Whether an FFT's input_type / output_type is real data (half2 for float16)."""
    return t is nd_types.half2 or (isinstance(t, np.dtype) and t.kind == "f")


def _round(x, precision):
    real = np.dtype(precision)
    if np.iscomplexobj(x):
        return x.real.astype(real).astype(np.float64) + 1j * x.imag.astype(real).astype(np.float64)
    return x.astype(real).astype(np.float64)


def _pack(spec, n):
    """natural (n//2 + 1 values) -> packed (n/2 values, the Nyquist real part in value 0's imag)."""
    out = spec[:, : n // 2].copy()
    out[:, 0] = spec[:, 0].real + 1j * spec[:, n // 2].real
    return out


def random_case(fft, nfft, rng):
    """(input rows in the FFT's input layout, float64/complex128 and exactly representable in
    its precision; the float64 NumPy reference of the output rows in the output layout),
    unnormalised like cuFFTDx. Values are scaled so that no float16 output overflows."""
    n = fft.size
    layout = fft.real_fft_options["complex_layout"]
    folded = fft.real_fft_options["real_mode"] == "folded"
    if fft.fft_type == "c2c":
        x = rng.uniform(-1, 1, (nfft, n)) + 1j * rng.uniform(-1, 1, (nfft, n))
        if fft.direction == "inverse":
            x = _round(x / n, fft.precision)
            return x, np.fft.ifft(x, axis=-1) * n
        x = _round(x, fft.precision)
        return x, np.fft.fft(x, axis=-1)
    if fft.fft_type == "r2c":
        sig = _round(rng.uniform(-1, 1, (nfft, n)), fft.precision)
        x = sig[:, 0::2] + 1j * sig[:, 1::2] if folded else sig  # folded: real pairs as complex values
        spec = np.fft.rfft(sig, axis=-1)
        ref = {"natural": spec, "full": np.fft.fft(sig, axis=-1)}.get(layout) if layout != "packed" else _pack(spec, n)
        return x, ref
    # c2r: the spectrum of a real signal (Hermitian), outputs ~ the signal
    spec = _round(np.fft.rfft(rng.uniform(-1, 1, (nfft, n)), axis=-1) / n, fft.precision)
    spec[:, 0] = spec[:, 0].real
    if n % 2 == 0:
        spec[:, n // 2] = spec[:, n // 2].real
    out = np.fft.irfft(spec, n=n, axis=-1) * n
    if layout == "full":
        x = np.concatenate([spec, np.conj(spec[:, 1 : n - n // 2][:, ::-1])], axis=1)
    elif layout == "packed":
        x = _pack(spec, n)
    else:
        x = spec
    return x, (out[:, 0::2] + 1j * out[:, 1::2] if folded else out)


def to_device_layout(x, precision):
    """Rows of ``x`` as the kernels read them: float16 complex values interleaved (re, im) along
    the row (no NumPy complex32); float32/float64 as NumPy's complex / real arrays."""
    if np.dtype(precision) == np.float16:
        if np.iscomplexobj(x):
            out = np.empty((x.shape[0], 2 * x.shape[1]), np.float16)
            out[:, 0::2], out[:, 1::2] = x.real, x.imag
            return out
        return x.astype(np.float16)
    ctype = np.complex64 if np.dtype(precision) == np.float32 else np.complex128
    return x.astype(ctype if np.iscomplexobj(x) else precision)


def output_array(fft, nfft):
    """NaN-poisoned output array of the device layout."""
    length = fft.output_length
    real_out = is_real(fft.output_type)
    if np.dtype(fft.precision) == np.float16:
        return np.full((nfft, length if real_out else 2 * length), np.nan, np.float16)
    ctype = np.complex64 if np.dtype(fft.precision) == np.float32 else np.complex128
    return np.full((nfft, length), np.nan, fft.precision if real_out else ctype)


def from_device_layout(y, fft):
    y = np.asarray(y)
    if y.dtype == np.float16 and not is_real(fft.output_type):
        return y[:, 0::2].astype(np.float64) + 1j * y[:, 1::2].astype(np.float64)
    return y.astype(np.complex128 if np.iscomplexobj(y) else np.float64)


def rel_error(got, want):
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


# ---------------------------------------------------------------------------------- kernels
def make_block_kernel(fft):
    """FFTs ``2 * (blockIdx.x * block_dim.y + threadIdx.y)`` and the next one (lanes .x, .y of each
    value) of x -> y, through float16x4 registers (RRII), as nvmath-python's fp16 examples."""
    vt = fft.value_type
    n, stride, pairs = fft.storage_size, fft.stride, fft.block_dim[1]
    in_ept, out_ept = fft.input_ept, fft.output_ept
    in_len, out_len = fft.input_length, fft.output_length
    real_in, real_out = is_real(fft.input_type), is_real(fft.output_type)

    @cuda.jit
    def kernel(x, y):
        td = cuda.local.array(n, dtype=vt)
        tr = td.view(float16x2_type)
        smem = cuda.shared.array(0, dtype=vt)
        f0 = 2 * (cuda.blockIdx.x * pairs + cuda.threadIdx.y)
        for i in range(in_ept):
            idx = cuda.threadIdx.x + i * stride
            if idx < in_len:
                if real_in:
                    tr[i] = float16x2(x[f0, idx], x[f0 + 1, idx])
                else:
                    td[i] = float16x4(x[f0, 2 * idx], x[f0 + 1, 2 * idx], x[f0, 2 * idx + 1], x[f0 + 1, 2 * idx + 1])
        fft.execute(td, smem)
        for i in range(out_ept):
            idx = cuda.threadIdx.x + i * stride
            if idx < out_len:
                if real_out:
                    rr = tr[i]
                    y[f0, idx] = rr.x
                    y[f0 + 1, idx] = rr.y
                else:
                    v = td[i]
                    y[f0, 2 * idx] = v.x
                    y[f0 + 1, 2 * idx] = v.y
                    y[f0, 2 * idx + 1] = v.z
                    y[f0 + 1, 2 * idx + 1] = v.w

    return kernel


def make_thread_kernel(fft):
    """Thread execution: thread t computes FFTs 2t and 2t + 1 (one value holds both)."""
    vt = fft.value_type
    n = fft.storage_size
    in_len, out_len = fft.input_length, fft.output_length
    real_in, real_out = is_real(fft.input_type), is_real(fft.output_type)

    @cuda.jit
    def kernel(x, y):
        td = cuda.local.array(n, dtype=vt)
        tr = td.view(float16x2_type)
        f0 = 2 * (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x)
        for i in range(in_len):
            if real_in:
                tr[i] = float16x2(x[f0, i], x[f0 + 1, i])
            else:
                td[i] = float16x4(x[f0, 2 * i], x[f0 + 1, 2 * i], x[f0, 2 * i + 1], x[f0 + 1, 2 * i + 1])
        fft.execute(td)
        for i in range(out_len):
            if real_out:
                rr = tr[i]
                y[f0, i] = rr.x
                y[f0 + 1, i] = rr.y
            else:
                v = td[i]
                y[f0, 2 * i] = v.x
                y[f0 + 1, 2 * i] = v.y
                y[f0, 2 * i + 1] = v.z
                y[f0 + 1, 2 * i + 1] = v.w

    return kernel


def shared_bytes(fft):
    """Dynamic shared memory of the shared-memory form: scratch, and the block's data."""
    def size(t):
        return np.dtype(t).itemsize

    data = fft.block_dim[1] * max(fft.input_length * size(fft.input_type), fft.output_length * size(fft.output_type))
    return max(fft.shared_memory_size, data)


def make_shared_kernel(fft):
    """``fft.execute(smem)``: the block's FFTs loaded into shared memory in natural order (input of
    FFT [pair] p at p * input_length of the ``input_type`` view), transformed there, stored."""
    vt = fft.value_type
    pairs, bx = fft.block_dim[1], fft.block_dim[0]
    in_len, out_len = fft.input_length, fft.output_length
    real_in, real_out = is_real(fft.input_type), is_real(fft.output_type)
    if np.dtype(fft.precision) == np.float16:

        @cuda.jit
        def kernel16(x, y):
            smem = cuda.shared.array(0, dtype=vt)
            sr = smem.view(float16x2_type)
            p = cuda.threadIdx.y
            f0 = 2 * (cuda.blockIdx.x * pairs + p)
            for j in range(cuda.threadIdx.x, in_len, bx):
                if real_in:
                    sr[p * in_len + j] = float16x2(x[f0, j], x[f0 + 1, j])
                else:
                    smem[p * in_len + j] = float16x4(x[f0, 2 * j], x[f0 + 1, 2 * j], x[f0, 2 * j + 1], x[f0 + 1, 2 * j + 1])
            cuda.syncthreads()
            fft.execute(smem)
            cuda.syncthreads()
            for j in range(cuda.threadIdx.x, out_len, bx):
                if real_out:
                    rr = sr[p * out_len + j]
                    y[f0, j] = rr.x
                    y[f0 + 1, j] = rr.y
                else:
                    v = smem[p * out_len + j]
                    y[f0, 2 * j] = v.x
                    y[f0 + 1, 2 * j] = v.y
                    y[f0, 2 * j + 1] = v.z
                    y[f0 + 1, 2 * j + 1] = v.w

        return kernel16
    real = fft.precision

    @cuda.jit
    def kernel(x, y):
        smem = cuda.shared.array(0, dtype=vt)
        sr = smem.view(real)
        p = cuda.threadIdx.y
        f = cuda.blockIdx.x * pairs + p
        for j in range(cuda.threadIdx.x, in_len, bx):
            if real_in:
                sr[p * in_len + j] = x[f, j]
            else:
                smem[p * in_len + j] = x[f, j]
        cuda.syncthreads()
        fft.execute(smem)
        cuda.syncthreads()
        for j in range(cuda.threadIdx.x, out_len, bx):
            if real_out:
                y[f, j] = sr[p * out_len + j]
            else:
                y[f, j] = smem[p * out_len + j]

    return kernel


def run_case(fft, form, blocks, rng, launch):
    """Run one kernel form ('block', 'thread' or 'shared') over ``blocks`` blocks; returns the
    relative error against NumPy. ``launch(kernel, grid, block, smem, *args)`` runs it."""
    lanes = fft.implicit_type_batching
    if form == "thread":
        threads = 3
        nfft = lanes * threads * blocks
        kernel, block, smem = make_thread_kernel(fft), threads, 0
    else:
        nfft = fft.ffts_per_block * blocks
        if form == "block":
            kernel, smem = make_block_kernel(fft), fft.shared_memory_size
        else:
            kernel, smem = make_shared_kernel(fft), shared_bytes(fft)
        block = tuple(fft.block_dim)
    x, ref = random_case(fft, nfft, rng)
    y = output_array(fft, nfft)
    launch(kernel, blocks, block, smem, to_device_layout(x, fft.precision), y)
    got = from_device_layout(y, fft)
    assert np.all(np.isfinite(got)), "outputs left unwritten (NaN) or overflowed"
    return rel_error(got, ref)


def _sim_launch(kernel, grid, block, smem, *args):
    from tests.harness import launch_guarded

    launch_guarded(kernel, grid, block, smem, *args)


def _tol(fft):
    return {np.float16: TOL_SIM, np.float32: 2e-6, np.float64: 1e-13}[fft.precision]


# ---------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("kw", [kw for _, kw in FP16_BLOCK], ids=[i for i, _ in FP16_BLOCK])
def test_fp16_block(kw):
    fft = fp16_fft(**kw)
    assert fft.implicit_type_batching == 2 and fft.block_dim[1] * 2 == fft.ffts_per_block
    err = run_case(fft, "block", 2, np.random.default_rng(1), _sim_launch)
    assert err < TOL_SIM, err


@pytest.mark.parametrize("kw", [kw for _, kw in FP16_THREAD], ids=[i for i, _ in FP16_THREAD])
def test_fp16_thread(kw):
    fft = fp16_fft(execution="Thread", **kw)
    err = run_case(fft, "thread", 1, np.random.default_rng(2), _sim_launch)
    assert err < TOL_SIM, err


@pytest.mark.parametrize("kw", [kw for _, kw in SHARED], ids=[i for i, _ in SHARED])
def test_shared_memory_form(kw):
    fft = FFT(sm=SM, **kw)
    err = run_case(fft, "shared", 2, np.random.default_rng(3), _sim_launch)
    assert err < _tol(fft), err


def test_fp16_lanes_are_separate_ffts():
    """Lane .x holds FFT 2p, lane .y FFT 2p + 1: an input only in lane .y of pair 0 transforms
    into lane .y and leaves lane .x zero (a packing that mixed the lanes would fail)."""
    fft = fp16_fft(size=16, fft_type="c2c", direction="forward", elements_per_thread=4, ffts_per_block=2)
    x = np.zeros((2, 16), np.complex128)
    x[1, 3] = 1.0
    y = output_array(fft, 2)
    _sim_launch(make_block_kernel(fft), 1, tuple(fft.block_dim), fft.shared_memory_size,
                to_device_layout(x, np.float16), y)
    got = from_device_layout(y, fft)
    assert np.all(got[0] == 0)
    np.testing.assert_allclose(got[1], np.exp(-2j * np.pi * 3 * np.arange(16) / 16), atol=2e-3)


def test_fp16_value_types_on_the_host():
    c2c = fp16_fft(size=64, fft_type="c2c", direction="forward", elements_per_thread=8, ffts_per_block=2)
    r2c = fp16_fft(size=64, fft_type="r2c", elements_per_thread=8, ffts_per_block=2)
    c2r = fp16_fft(size=64, fft_type="c2r", elements_per_thread=8, ffts_per_block=2)
    assert c2c.value_type is nd_types.half4 and c2c.input_type is nd_types.half4
    assert r2c.input_type is nd_types.half2 and r2c.output_type is nd_types.half4
    assert c2r.output_type is nd_types.half2 and c2r.input_type is nd_types.half4
    assert np.dtype(c2c.value_type).itemsize == 8 and np.dtype(r2c.input_type).itemsize == 4


def _bad_kernel(fft, dtype):
    @cuda.jit
    def kernel():
        td = cuda.local.array(fft.storage_size, dtype=dtype)
        smem = cuda.shared.array(0, dtype=fft.value_type)
        fft.execute(td, smem)

    return kernel


@pytest.mark.parametrize("dtype,name", [(np.float16, "float16"), (np.complex64, "complex64"),
                                         (np.float32, "float32")])
def test_fp16_wrong_register_type_is_refused(dtype, name):
    fft = fp16_fft(size=16, fft_type="c2c", direction="forward", elements_per_thread=4, ffts_per_block=2)
    with pytest.raises(TypeError, match=rf"thread_data \(1st argument\) must hold float16x4 \(fft.value_type\) "
                                        rf"or float16x2 .*got an array of {name}"):
        _sim_launch(_bad_kernel(fft, dtype), 1, tuple(fft.block_dim), fft.shared_memory_size)


def test_fp16_shared_form_wrong_type_is_refused():
    fft = fp16_fft(size=16, fft_type="r2c", elements_per_thread=4, ffts_per_block=2)

    @cuda.jit
    def kernel():
        smem = cuda.shared.array(0, dtype=float16x2_type)
        fft.execute(smem)

    with pytest.raises(TypeError, match=r"1-D contiguous shared array of float16x4 \(fft.value_type\)"):
        _sim_launch(kernel, 1, tuple(fft.block_dim), 4096)


def test_shared_form_too_little_memory_is_refused():
    fft = FFT(size=64, precision=np.float32, fft_type="r2c", elements_per_thread=8, ffts_per_block=2, sm=SM)

    @cuda.jit
    def kernel():
        smem = cuda.shared.array(0, dtype=fft.value_type)
        fft.execute(smem)

    need = 2 * 33 * 8  # two FFTs' outputs (33 complex64 values) are larger than their inputs
    with pytest.raises(ValueError, match=rf"need {need // 8} \({need} bytes"):
        _sim_launch(kernel, 1, tuple(fft.block_dim), 8)
