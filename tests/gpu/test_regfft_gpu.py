# SPDX-License-Identifier: Apache-2.0
"""kernels._regfft (our own block FFT) on the GPU: the generated forward/inverse against NumPy for
every size and register layout, r2c/c2r against rfft; each kernels function with it
(``_fused.OWN_FFT``) against float64 references and against its cuFFTDx kernel on the same data;
several rows per block with rows past the batch; the kernels' sm_90 registers without local
memory. ``tests/gpu/sanitize.sh`` runs this file under compute-sanitizer (racecheck: the
exchanges' barriers)."""

import numpy as np
import pytest

import kernels
from kernels import _fused, _regfft
from tests.regfft_kernels import roundtrip_kernel

pytestmark = pytest.mark.gpu
rng = np.random.default_rng(41)


def _rel(a, b):
    return float(np.linalg.norm(np.ravel(a - b)) / np.linalg.norm(np.ravel(b)))


def _host(y):
    return y.get() if hasattr(y, "get") else np.asarray(y)


@pytest.fixture
def own(monkeypatch):
    monkeypatch.setattr(_fused, "OWN_FFT", set(_fused.OWN_FFT_FUNCTIONS))


@pytest.mark.parametrize("registers", ["float", "complex"])
@pytest.mark.parametrize("n,ept,fpb", [(64, 4, 3), (128, 8, 2), (256, 16, 8), (512, 8, 2), (512, 16, 4),
                                       (1024, 16, 2), (1024, 8, 1), (2048, 16, 1), (4096, 16, 1), (4096, 8, 1)])
def test_c2c_matches_numpy(n, ept, fpb, registers):
    fwd, inv = _regfft.pair(n, ept, fpb)
    rows = 5 * fpb + 1  # the last block holds rows past the batch
    x = (rng.standard_normal((rows, n)) + 1j * rng.standard_normal((rows, n))).astype(np.complex64)
    y, z = np.full_like(x, np.nan), np.full_like(x, np.nan)
    roundtrip_kernel(fwd, inv, registers)[-(-rows // fpb), fwd.block_dim, 0, fwd.shared_memory_size](x, y, z, rows)
    assert _rel(y, np.fft.fft(x.astype(np.complex128), axis=-1)) < 1e-6
    assert _rel(z / n, x) < 1e-6


@pytest.mark.parametrize("N,ept,fpb", [(128, 4, 2), (512, 16, 8), (512, 8, 4), (4096, 16, 1), (8192, 16, 1)])
def test_real_matches_rfft(N, ept, fpb):
    """The folded pairs as complex values in, N/2 + 1 bins out, and back."""
    fwd, inv = _regfft.pair(N, ept, fpb, real=True)
    rows = 3 * fpb + 1
    x = rng.standard_normal((rows, N)).astype(np.float32)
    pairs = x.view(np.complex64)
    y = np.full((rows, N // 2 + 1), np.nan, np.complex64)
    z = np.full_like(pairs, np.nan)
    roundtrip_kernel(fwd, inv, "float")[-(-rows // fpb), fwd.block_dim, 0, fwd.shared_memory_size](pairs, y, z, rows)
    assert _rel(y, np.fft.rfft(x.astype(np.float64), axis=-1)) < 1e-6
    assert _rel(z.view(np.float32) / N, x) < 1e-6


def test_fft_convolve_complex(own):
    import cupy

    x = (rng.standard_normal((4099, 512)) + 1j * rng.standard_normal((4099, 512))).astype(np.complex64)
    h = rng.standard_normal(63) + 1j * rng.standard_normal(63)
    y = _host(kernels.fft_convolve(cupy.asarray(x), h))
    ref = np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * np.fft.fft(h, 512), axis=-1)
    assert _rel(y, ref) < 1e-6


def test_fft_convolve_real_and_fir(own):
    import cupy

    x = rng.standard_normal((33, 4096)).astype(np.float32)
    h = rng.standard_normal(63)
    y = _host(kernels.fft_convolve(cupy.asarray(x), h, method="fft"))
    ref = np.fft.irfft(np.fft.rfft(x.astype(np.float64), axis=-1) * np.fft.rfft(h, 4096), 4096, axis=-1)
    assert _rel(y, ref) < 1e-6
    x = rng.standard_normal((3, 100_000)).astype(np.float32)
    taps = rng.standard_normal(127)
    y = _host(kernels.fir_filter(cupy.asarray(x), taps, method="fft"))
    ref = np.array([np.convolve(r, taps)[: x.shape[1]] for r in x.astype(np.float64)])
    assert _rel(y, ref) < 1e-6


def test_matched_filter(own):
    import cupy

    n, m = 1024, 128
    t = rng.standard_normal(m) + 1j * rng.standard_normal(m)
    x = (0.5 * (rng.standard_normal((1000, n)) + 1j * rng.standard_normal((1000, n)))).astype(np.complex64)
    shifts = rng.integers(0, n - m, 1000)
    for b, s in enumerate(shifts):
        x[b, s:s + m] += t.astype(np.complex64)
    idx, val = kernels.matched_filter(cupy.asarray(x), t)
    assert (_host(idx) == shifts).all()
    ref = np.abs(np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * np.conj(np.fft.fft(t, n)), axis=-1)) ** 2
    np.testing.assert_allclose(_host(val), ref.max(axis=-1), rtol=1e-5)


def test_matched_filter_values_per_thread_by_rows(own):
    """1024 points: from OWN_FFT_EPT's row floor up one warp per row (32 values per thread, blocks
    of 32 x 4), one row fewer 64 threads per row (16 values, blocks of 64 x 2), as a plan records
    the launch; both find every row's planted template and its power."""
    import cupy

    count, floor = _fused.OWN_FFT_EPT[("matched_filter", 1024, "float32", False, False)]
    n, m = 1024, 128
    t = rng.standard_normal(m) + 1j * rng.standard_normal(m)
    ref_t = np.conj(np.fft.fft(t, n))
    for rows, block in ((floor - 1, (64, 2, 1)), (floor, (32, 4, 1))):
        x = (0.5 * (rng.standard_normal((rows, n)) + 1j * rng.standard_normal((rows, n)))).astype(np.complex64)
        shifts = rng.integers(0, n - m, rows)
        for b, s in enumerate(shifts):
            x[b, s:s + m] += t.astype(np.complex64)
        dx = cupy.asarray(x)
        p = kernels.plan(kernels.matched_filter, dx, t)
        assert count == 32 and [launch[2] for launch in p._launches][-1] == block
        idx, val = p(dx)
        assert (_host(idx) == shifts).all()
        ref = np.abs(np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * ref_t, axis=-1)) ** 2
        np.testing.assert_allclose(_host(val), ref.max(axis=-1), rtol=1e-5)


@pytest.mark.parametrize("n,ept", [(256, 16), (512, 16), (1024, 32), (1024, 16)])
def test_matched_filter_peaks_by_row_width(own, monkeypatch, n, ept):
    """Rows of one warp or less (256 / 16, 512 / 16, 1024 / 32: the peak by shuffles) and of two
    warps (1024 / 16: the tree in shared memory): every row's peak index and power against
    float64, a row of zeros (every power equal: index 0, the lowest, wins) and rows past the
    batch in the last block."""
    import cupy

    monkeypatch.setattr(_regfft, "EPT", ept)
    m, rows = 64, 301
    t = rng.standard_normal(m) + 1j * rng.standard_normal(m)
    x = (0.5 * (rng.standard_normal((rows, n)) + 1j * rng.standard_normal((rows, n)))).astype(np.complex64)
    for b, s in enumerate(rng.integers(0, n - m, rows)):
        x[b, s:s + m] += t.astype(np.complex64)
    x[7] = 0
    idx, val = kernels.matched_filter(cupy.asarray(x), t)
    ref = np.abs(np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * np.conj(np.fft.fft(t, n)), axis=-1)) ** 2
    np.testing.assert_array_equal(_host(idx), np.argmax(ref, axis=-1))
    assert _host(idx)[7] == 0 and _host(val)[7] == 0
    np.testing.assert_allclose(_host(val), ref.max(axis=-1), rtol=1e-5)


def test_stft_power(own):
    import cupy

    x = rng.standard_normal((4, 1 << 16)).astype(np.float32)
    w = np.hanning(512)
    p = _host(kernels.stft_power(cupy.asarray(x), w, 256))
    frames = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), 512, axis=-1)[:, ::256]
    assert _rel(p, np.abs(np.fft.rfft(frames * w, axis=-1)) ** 2) < 2e-6


def test_beamform_spectra(own, monkeypatch):
    import cupy

    from kernels import gemm

    monkeypatch.setattr(gemm, "BEAMFORM_KERNEL", "direct")
    x = (rng.standard_normal((300, 16, 256)) + 1j * rng.standard_normal((300, 16, 256))).astype(np.complex64)
    w = (rng.standard_normal((8, 16)) + 1j * rng.standard_normal((8, 16))).astype(np.complex64)
    y = _host(kernels.beamform_spectra(cupy.asarray(x), w))
    ref = np.fft.fft(np.einsum("bc,ncs->nbs", w.astype(np.complex128), x), axis=-1)
    assert _rel(y, ref) < 1e-6


def test_engines_agree(monkeypatch):
    """The same call with cuFFTDx's pair and with ours: equal to float32 rounding."""
    import cupy

    x = cupy.asarray((rng.standard_normal((257, 1024)) + 1j * rng.standard_normal((257, 1024))).astype(np.complex64))
    h = rng.standard_normal(31) + 1j * rng.standard_normal(31)
    monkeypatch.setattr(_fused, "OWN_FFT", set())  # cuFFTDx's
    theirs = _host(kernels.fft_convolve(x, h))
    monkeypatch.setattr(_fused, "OWN_FFT", {"fft_convolve"})
    ours = _host(kernels.fft_convolve(x, h))
    assert _rel(ours, theirs) < 2e-6
