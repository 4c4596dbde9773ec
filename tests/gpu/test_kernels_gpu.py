# SPDX-License-Identifier: Apache-2.0
"""The fused kernels on the GPU at real sizes, for every array kind they accept."""

import numpy as np
import pytest

import kernels
from tests.array_kinds import as_kind as _as
from tests.array_kinds import to_host as _host

pytestmark = pytest.mark.gpu
rng = np.random.default_rng(11)


def _rel(a, b):
    return float(np.linalg.norm(np.ravel(a - b)) / np.linalg.norm(np.ravel(b)))


@pytest.mark.parametrize("kind", ["numpy", "cupy", "torch", "numba"])
def test_fft_convolve_real_4096(kind):
    x = rng.standard_normal((256, 4096)).astype(np.float32)
    h = rng.standard_normal(63)
    y = kernels.fft_convolve(_as(kind, x), h)
    assert type(y).__module__.split(".")[0] == type(_as(kind, x)).__module__.split(".")[0]
    ref = np.fft.irfft(np.fft.rfft(x.astype(np.float64), axis=-1) * np.fft.rfft(h, 4096), n=4096, axis=-1)
    assert _rel(_host(y), ref) < 1e-5


def test_fft_convolve_complex_512_on_a_cupy_stream():
    import cupy

    x = (rng.standard_normal((1000, 512)) + 1j * rng.standard_normal((1000, 512))).astype(np.complex64)
    h = rng.standard_normal(31) + 1j * rng.standard_normal(31)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        y = kernels.fft_convolve(cupy.asarray(x), h)
        s.synchronize()
    ref = np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * np.fft.fft(h, 512), axis=-1)
    assert _rel(y.get(), ref) < 1e-5


def test_fft_convolve_complex64_at_an_odd_float_offset():
    """A complex64 view of float32 data starting 4 bytes into the allocation cannot be read as
    8-byte vectors: the kernel gets an aligned copy, and the result is the same bits as for the
    same values at an aligned address."""
    import cupy

    from kernels._fused import vectors_ok

    x = (rng.standard_normal((64, 256)) + 1j * rng.standard_normal((64, 256))).astype(np.complex64)
    h = rng.standard_normal(15) + 1j * rng.standard_normal(15)
    raw = cupy.zeros(2 * x.size + 1, dtype=cupy.float32)
    raw[1:] = cupy.asarray(x.view(np.float32).ravel())
    xu = raw[1:].view(cupy.complex64).reshape(x.shape)
    assert xu.data.ptr % 8 == 4
    from kernels._arrays import DevArray

    assert not vectors_ok(DevArray.of(xu))
    np.testing.assert_array_equal(kernels.fft_convolve(xu, h).get(), kernels.fft_convolve(cupy.asarray(x), h).get())


def test_fir_filter_long_signals():
    from scipy.signal import lfilter

    x = rng.standard_normal((8, 100_000)).astype(np.float32)
    taps = rng.standard_normal(63)
    y = kernels.fir_filter(x, taps)
    assert _rel(y, lfilter(taps, 1, x.astype(np.float64), axis=-1)) < 1e-5


def test_matched_filter_peaks():
    n = 512
    t = rng.standard_normal(64) + 1j * rng.standard_normal(64)
    x = 0.5 * (rng.standard_normal((300, n)) + 1j * rng.standard_normal((300, n)))
    shifts = rng.integers(0, n - 64, 300)
    for b, s in enumerate(shifts):
        x[b, s : s + 64] += t
    idx, power = kernels.matched_filter(x.astype(np.complex64), t)
    ref = np.fft.ifft(np.fft.fft(x, axis=-1) * np.conj(np.fft.fft(t, n)), axis=-1)
    np.testing.assert_array_equal(idx, np.argmax(np.abs(ref) ** 2, axis=-1))
    np.testing.assert_allclose(power, (np.abs(ref) ** 2).max(-1), rtol=1e-4)


def test_stft_power():
    x = rng.standard_normal((4, 20_000)).astype(np.float32)
    w = np.hanning(256)
    p = kernels.stft_power(x, w, hop=64)
    frames = 1 + (20_000 - 256) // 64
    ref = np.abs(np.fft.rfft(np.stack([x[:, f * 64 : f * 64 + 256] * w for f in range(frames)], 1), axis=-1)) ** 2
    assert p.shape == ref.shape and _rel(p, ref) < 1e-5


@pytest.mark.parametrize("dtype,size", [(np.float32, (16, 16, 16)), (np.float32, (32, 32, 32)),
                                        (np.float64, (64, 64, 64)), (np.complex64, (16, 24, 8))])
def test_batched_gemm(dtype, size):
    m, n, k = size
    batch = 1001
    a = _signal3((batch, m, k), dtype)
    b = _signal3((batch, k, n), dtype)
    c = _signal3((batch, m, n), dtype)
    d = kernels.batched_gemm(_as("cupy", a), _as("cupy", b), c=_as("cupy", c), alpha=1.5, beta=-0.5)
    ref = 1.5 * (a.astype(np.complex128) @ b) - 0.5 * c
    assert _rel(_host(d), ref) < (1e-5 if np.dtype(dtype).itemsize <= 8 and dtype != np.float64 else 1e-12)


@pytest.mark.parametrize("kind", ["cupy", "numba", "torch"])
@pytest.mark.parametrize("dtype,size,with_c", [(np.complex64, (16, 16, 16), True), (np.complex128, (8, 8, 8), False),
                                               (np.float32, (32, 32, 32), False)])
@pytest.mark.parametrize("offsets", [False, True], ids=["places", "offsets"])
def test_batched_gemm_vector_kernel(kind, dtype, size, with_c, offsets, monkeypatch):
    """The vector kernel (padded tiles; real and complex, with and without beta * C) on every
    device-array kind (their 16-byte alignment is read from the device pointer); batch 70001
    is odd: the last block has an idle slot. C is not modified. ``offsets``: the result's places
    as one register and constants (``kernels.gemm._VECTOR_OFFSETS``) or from the descriptor."""
    import kernels.gemm
    from kernels.gemm import _batched_gemm

    monkeypatch.setattr(kernels.gemm, "_VECTOR_OFFSETS", offsets)

    m, n, k = size
    batch = 70001
    a, b, c = _signal3((batch, m, k), dtype), _signal3((batch, k, n), dtype), _signal3((batch, m, n), dtype)
    alpha, beta = (1.5 - 0.5j, 0.25 + 1j) if np.dtype(dtype).kind == "c" else (1.5, 0.0)
    cd = _as(kind, c)
    d, path = _batched_gemm(_as(kind, a), _as(kind, b), cd if with_c else None, alpha, beta if with_c else 0.0, None)
    assert path == "vector"
    ref = alpha * (a.astype(np.complex128) @ b) + (beta * c if with_c else 0)
    ref = ref if np.dtype(dtype).kind == "c" else ref.real
    assert _rel(_host(d), ref) < (1e-12 if dtype == np.complex128 else 1e-5)
    np.testing.assert_array_equal(_host(cd), c)



@pytest.mark.parametrize("dtype,size,slices,with_c", [(np.float64, (64, 64, 64), (16, 4, 2), True),
                                                      (np.float64, (64, 64, 64), (8, 8, None), False),
                                                      (np.float64, (64, 64, 64), (16, 4, 2), "unaligned"),
                                                      (np.float64, (64, 64, 64), (64, 1, None), True),
                                                      (np.float64, (64, 64, 64), (64, 1, None, 128), True),
                                                      (np.complex64, (16, 24, 16), (4, 3, 3), True)])
@pytest.mark.parametrize("order", [None, ("ring", "pairs", "values")], ids=["default", "ring"])
def test_batched_gemm_slice_kernel(dtype, size, slices, with_c, order, monkeypatch):
    """The K-slice kernel (``_batched_gemm(..., slices=...)``, not batched_gemm's pick yet) on a
    persistent grid of the blocks that fit, batch 10001, against NumPy; C is not modified.
    Results leave through the C tile ("stage"), or with ``order`` "ring" through the ring's
    stages in bands of rows, except where C is not aligned to a pair ("unaligned": C starts one
    value into its buffer), where each value leaves on its own."""
    import kernels.gemm
    from kernels.gemm import _batched_gemm

    if order:  # the result through the ring's stages, in bands ("ring"), where C is aligned
        monkeypatch.setattr(kernels.gemm, "_SLICE_EPILOGUE_ORDER", order)
    m, n, k = size
    batch = 10001
    a, b, c = _signal3((batch, m, k), dtype), _signal3((batch, k, n), dtype), _signal3((batch, m, n), dtype)
    alpha, beta = (1.5 - 0.5j, 0.25 + 1j) if np.dtype(dtype).kind == "c" else (1.5, -0.5)
    cd = _as("cupy", c)
    if with_c == "unaligned":
        import cupy as cp

        buf = cp.empty(c.size + 1, c.dtype)
        cd = buf[1:].reshape(c.shape)
        cd[...] = cp.asarray(c)
        assert cd.data.ptr % 16
    d, path = _batched_gemm(_as("cupy", a), _as("cupy", b), cd if with_c else None, alpha, beta if with_c else 0.0,
                            None, slices=slices)
    assert path == "slices"
    ref = alpha * (a.astype(np.complex128) @ b) + (beta * c if with_c else 0)
    ref = ref if np.dtype(dtype).kind == "c" else ref.real
    assert _rel(_host(d), ref) < (1e-12 if dtype == np.float64 else 1e-5)
    np.testing.assert_array_equal(_host(cd), c)

def test_batched_gemm_unaligned_operands_take_the_fallback():
    """A CuPy slice starting 4 bytes into a buffer cannot be loaded as 16-byte vectors."""
    import cupy

    from kernels.gemm import _batched_gemm

    a = _signal3((101, 16, 16), np.float32)
    b = _signal3((101, 16, 16), np.float32)
    flat = cupy.asarray(np.concatenate([[0.0], a.ravel()]).astype(np.float32))
    au = flat[1:].reshape(a.shape)  # 4 bytes past a 256-byte aligned allocation
    d, path = _batched_gemm(au, cupy.asarray(b), None, 1.0, 0.0, None)
    assert path == "smem"
    assert _rel(_host(d), a.astype(np.float64) @ b) < 1e-5
    d, path = _batched_gemm(cupy.asarray(a), cupy.asarray(b), None, 1.0, 0.0, None)
    assert path == "vector"


def test_beamform_spectra():
    x = _signal3((50, 16, 256), np.complex64)
    w = _signal3((8, 16), np.complex64)
    y = kernels.beamform_spectra(_as("torch", x), w)
    ref = np.fft.fft(np.einsum("bc,ncs->nbs", w.astype(np.complex128), x), axis=-1)
    assert _rel(_host(y), ref) < 1e-5


@pytest.mark.parametrize("kernel", ["gemm", "direct"])
@pytest.mark.parametrize("beams,channels,nsamp,dtype", [(2, 4, 64, np.complex64), (16, 16, 256, np.complex64),
                                                        (4, 8, 128, np.complex128), (8, 3, 64, np.complex64),
                                                        (4, 16, 1024, np.complex64), (8, 16, 256, np.complex64)])
def test_beamform_spectra_shapes(beams, channels, nsamp, dtype, kernel, monkeypatch):
    """Beam counts 2-16, channel counts (3: not a power of 2), 64-1024 samples, both
    precisions (the shapes beamform_spectra accepts: its FFT's block must have 32-1024 threads
    for cuBLASDx), with either beamforming kernel (kernels.gemm.BEAMFORM_KERNEL)."""
    import cupy

    from kernels import gemm

    monkeypatch.setattr(gemm, "BEAMFORM_KERNEL", kernel)
    x = _signal3((37, channels, nsamp), dtype)
    w = _signal3((beams, channels), dtype)
    y = kernels.beamform_spectra(cupy.asarray(x), w)
    ref = np.fft.fft(np.einsum("bc,ncs->nbs", w.astype(np.complex128), x), axis=-1)
    assert _rel(y.get(), ref) < (1e-5 if dtype == np.complex64 else 1e-12)


@pytest.mark.parametrize("kernel", ["gemm", "direct"])
def test_beamform_spectra_at_an_odd_float_offset(kernel, monkeypatch):
    """x at an address that is not a multiple of 8 bytes: same bits as the aligned x (the direct
    kernel's whole-value loads read an aligned copy)."""
    import cupy

    from kernels import gemm

    monkeypatch.setattr(gemm, "BEAMFORM_KERNEL", kernel)

    x = _signal3((20, 16, 256), np.complex64)
    w = _signal3((8, 16), np.complex64)
    raw = cupy.zeros(2 * x.size + 1, dtype=cupy.float32)
    raw[1:] = cupy.asarray(x.view(np.float32).ravel())
    xu = raw[1:].view(cupy.complex64).reshape(x.shape)
    assert xu.data.ptr % 8 == 4
    np.testing.assert_array_equal(kernels.beamform_spectra(xu, w).get(),
                                  kernels.beamform_spectra(cupy.asarray(x), w).get())


def _signal3(shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _fast_cases():
    x = _signal3((64, 4096), np.float32)
    xc = _signal3((32, 512), np.complex64)
    xm = _signal3((32, 256), np.complex64)
    a, b = _signal3((301, 32, 32), np.float32), _signal3((301, 32, 32), np.float32)
    xb = _signal3((5, 16, 256), np.complex64)
    w = _signal3((8, 16), np.complex64)
    t = _signal3((128,), np.complex64)
    taps = rng.standard_normal(31)
    return {
        "conv_real": lambda kind: kernels.fft_convolve(_as(kind, x), taps),
        "conv_complex": lambda kind: kernels.fft_convolve(_as(kind, xc), taps),
        "fir": lambda kind: kernels.fir_filter(_as(kind, x[:4]), taps),
        "matched": lambda kind: kernels.matched_filter(_as(kind, xm), t),
        "stft": lambda kind: kernels.stft_power(_as(kind, x[:2]), np.hanning(256), 128),
        "gemm": lambda kind: kernels.batched_gemm(_as(kind, a), _as(kind, b)),
        "beamform": lambda kind: kernels.beamform_spectra(_as(kind, xb), w),
    }


@pytest.mark.parametrize("kind", ["cupy", "numba", "torch", "numpy"])
@pytest.mark.parametrize("case", ["conv_real", "conv_complex", "fir", "matched", "stft", "gemm", "beamform"])
def test_fast_launch_equals_numba_launch(case, kind, monkeypatch):
    """The default launch (cuLaunchKernel, parameters packed by kernels._launch) gives the same
    bits as numba-cuda's launch (NUMBA_MATHDX_FAST_LAUNCH=0: the same DevArrays through
    __cuda_array_interface__), for every function and array kind, on a first and a second call
    (the launcher cached)."""
    from kernels import _launch

    fn = _fast_cases()[case]
    monkeypatch.setattr(_launch, "FAST", False)
    n = _launch.stats["fast_launches"]
    want = fn(kind)
    assert _launch.stats["fast_launches"] == n
    monkeypatch.setattr(_launch, "FAST", True)
    got, again = fn(kind), fn(kind)
    assert _launch.stats["fast_launches"] >= n + 2  # both calls took the fast path
    for w_, g_, a_ in zip(*(r if isinstance(r, tuple) else (r,) for r in (want, got, again))):
        np.testing.assert_array_equal(_host(g_), _host(w_))
        np.testing.assert_array_equal(_host(a_), _host(w_))
