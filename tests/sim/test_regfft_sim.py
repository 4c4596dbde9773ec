# SPDX-License-Identifier: Apache-2.0
"""kernels._regfft (our own block FFT) under the CUDA simulator: the generated ``execute`` against
NumPy's FFT for every size, elements per thread, rows per block and both register layouts, and
its r2c/c2r (folded) against rfft;
forward then inverse is n times the input (with the forward equal to NumPy's, the inverse is
n times NumPy's ifft); ``fft_convolve`` and ``matched_filter`` with it
, the real kernels (fft_convolve of float32 rows, fir_filter, stft_power) and the direct
beamforming kernel with it
(``_fused.OWN_FFT``) against float64 references and against their cuFFTDx kernels. The dynamic
shared memory starts as NaN, so an exchange that reads a word nobody wrote fails."""

import numpy as np
import pytest
from numba import cuda

import kernels
from kernels import _fused, _regfft
from tests.regfft_kernels import roundtrip_kernel

rng = np.random.default_rng(24)


@pytest.fixture(autouse=True)
def _nan_dynamic_shared(monkeypatch):
    """The simulator's dynamic shared memory starts as all-ones bytes (NaN as float32/complex64)
    instead of zeros."""
    from numba.cuda.simulator import kernelapi

    original = kernelapi.FakeCUDAShared.__init__

    def init(self, dynshared_size):
        original(self, dynshared_size)
        self._dynshared[:] = -1

    monkeypatch.setattr(kernelapi.FakeCUDAShared, "__init__", init)


def _run(n, ept, fpb, registers, rows):
    fwd, inv = _regfft.pair(n, ept, fpb)
    x = (rng.standard_normal((rows, n)) + 1j * rng.standard_normal((rows, n))).astype(np.complex64)
    y, z = np.full_like(x, np.nan), np.full_like(x, np.nan)
    roundtrip_kernel(fwd, inv, registers)[-(-rows // fpb), fwd.block_dim, 0, fwd.shared_memory_size](x, y, z, rows)
    return x, y, z


CASES = [(64, 4, 1), (64, 4, 3), (128, 8, 2), (256, 16, 2), (256, 8, 1), (512, 8, 2), (512, 4, 1),
         (1024, 8, 1), (1024, 16, 1), (1024, 32, 1), (2048, 16, 1), (4096, 16, 1), (4096, 8, 1)]


@pytest.mark.parametrize("n,ept,fpb", CASES)
def test_execute_matches_numpy(n, ept, fpb):
    rows = fpb + 1 if fpb > 1 else 1  # a last block with a row past the batch where fpb > 1
    x, y, z = _run(n, ept, fpb, "float", rows)
    ref = np.fft.fft(x.astype(np.complex128), axis=-1)
    err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    assert err < 1e-6, (n, ept, fpb, err)
    back = np.linalg.norm(z / n - x) / np.linalg.norm(x)
    assert back < 1e-6, (n, ept, fpb, back)


@pytest.mark.parametrize("buffers", [1, 2])
@pytest.mark.parametrize("n,ept,fpb", [(512, 16, 4), (1024, 16, 2), (256, 8, 3)])
def test_buffers_match_numpy(monkeypatch, n, ept, fpb, buffers):
    """One shared buffer per row (kernels._regfft.BUFFERS = 1, the default: every exchange in one
    buffer) or two (alternating)."""
    monkeypatch.setattr(_regfft, "BUFFERS", buffers)
    assert _regfft.pair(n, ept, fpb)[0].buffers == buffers
    x, y, z = _run(n, ept, fpb, "float", fpb + 1)
    ref = np.fft.fft(x.astype(np.complex128), axis=-1)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-6
    assert np.linalg.norm(z / n - x) / np.linalg.norm(x) < 1e-6


@pytest.mark.parametrize("n,ept", [(64, 4), (512, 8), (1024, 16)])
def test_complex_registers(n, ept):
    x, y, z = _run(n, ept, 2, "complex", 2)
    ref = np.fft.fft(x.astype(np.complex128), axis=-1)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-6
    assert np.linalg.norm(z / n - x) / np.linalg.norm(x) < 1e-6


def _run_real(N, ept, fpb, rows):
    """r2c of float32 rows of N samples (loaded as complex pairs), then c2r of the spectrum."""
    fwd, inv = _regfft.pair(N, ept, fpb, real=True)
    x = rng.standard_normal((rows, N)).astype(np.float32)
    y = np.full((rows, N // 2 + 1), np.nan, np.complex64)
    z = np.full((rows, N // 2), np.nan, np.complex64)
    roundtrip_kernel(fwd, inv, "float")[-(-rows // fpb), fwd.block_dim, 0, fwd.shared_memory_size](
        x.view(np.complex64), y, z, rows)
    return x, y, z.view(np.float32)


@pytest.mark.parametrize("N,ept,fpb", [(128, 4, 1), (256, 8, 2), (512, 16, 3), (512, 8, 1), (2048, 16, 1),
                                       (2048, 32, 1), (8192, 16, 1)])
def test_real_execute_matches_numpy(N, ept, fpb):
    """r2c equals NumPy's rfft (the Nyquist bin from thread 0's extra register), c2r of it is N
    times the signal (with the r2c equal to rfft, c2r is N times irfft)."""
    x, y, z = _run_real(N, ept, fpb, fpb + 1 if fpb > 1 else 1)
    ref = np.fft.rfft(x.astype(np.float64), axis=-1)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-6
    assert np.linalg.norm(z / N - x) / np.linalg.norm(x) < 1e-6


@pytest.fixture
def own_fft(monkeypatch):
    monkeypatch.setattr(_fused, "OWN_FFT", set(_fused.OWN_FFT_FUNCTIONS))


@pytest.mark.parametrize("n", [64, 512, 1024])
def test_fft_convolve_own(own_fft, n):
    x = (rng.standard_normal((5, n)) + 1j * rng.standard_normal((5, n))).astype(np.complex64)
    h = rng.standard_normal(9) + 1j * rng.standard_normal(9)
    fwd, _ = _fused.fft_pair(n, np.float32, False, kernel="fft_convolve")
    # 5 rows leave the last block rows past the batch: they load the last row (the simulator
    # raises on an index outside x) and store nothing
    assert isinstance(fwd, _regfft.RegFFT) and 5 % fwd.ffts_per_block_value != 0
    y = kernels.fft_convolve(x, h)
    ref = np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * np.fft.fft(h, n), axis=-1)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-6


def test_fft_convolve_own_device_taps(own_fft):
    """Device taps: the spectrum comes from cuFFTDx's spectrum kernel (the same natural order)."""
    n = 512
    x = (rng.standard_normal((3, n)) + 1j * rng.standard_normal((3, n))).astype(np.complex64)
    h = (rng.standard_normal(17) + 1j * rng.standard_normal(17)).astype(np.complex64)
    y = kernels.fft_convolve(cuda.to_device(x), cuda.to_device(h))
    y = y.copy_to_host() if hasattr(y, "copy_to_host") else np.asarray(y)
    ref = np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * np.fft.fft(h.astype(np.complex128), n), axis=-1)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-6


def test_fft_convolve_engines_agree(monkeypatch):
    n = 512
    x = (rng.standard_normal((4, n)) + 1j * rng.standard_normal((4, n))).astype(np.complex64)
    h = rng.standard_normal(31) + 1j * rng.standard_normal(31)
    monkeypatch.setattr(_fused, "OWN_FFT", set())  # cuFFTDx's
    assert not isinstance(_fused.fft_pair(n, np.float32, False, kernel="fft_convolve")[0], _regfft.RegFFT)
    ours = kernels.fft_convolve(x, h)
    monkeypatch.setattr(_fused, "OWN_FFT", {"fft_convolve"})
    own = kernels.fft_convolve(x, h)
    assert np.linalg.norm(own - ours) / np.linalg.norm(ours) < 2e-6


def test_matched_filter_own(own_fft):
    n, m = 1024, 128
    t = rng.standard_normal(m) + 1j * rng.standard_normal(m)
    x = (0.5 * (rng.standard_normal((4, n)) + 1j * rng.standard_normal((4, n)))).astype(np.complex64)
    shifts = [0, 311, 700, n - m]
    for b, s in enumerate(shifts):
        x[b, s:s + m] += t.astype(np.complex64)
    idx, val, corr = kernels.matched_filter(x, t, return_correlation=True)
    ref = np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * np.conj(np.fft.fft(t, n)), axis=-1)
    assert list(idx) == shifts == list(np.argmax(np.abs(ref) ** 2, axis=-1))
    np.testing.assert_allclose(val, np.max(np.abs(ref) ** 2, axis=-1), rtol=1e-5)
    assert np.linalg.norm(corr - ref) / np.linalg.norm(ref) < 1e-6


@pytest.mark.parametrize("n", [512, 1024])
def test_matched_filter_own_rows_past_the_batch(own_fft, n):
    """A last block with rows past the batch: those load the batch's last row and store nothing
    (the simulator raises on an index outside the arrays). A row of zeros is one tie over every
    thread and value: the lowest index, 0, wins."""
    rows, m = 5, 32
    fwd, _ = _fused.fft_pair(n, np.float32, False, kernel="matched_filter", rows=rows)
    assert isinstance(fwd, _regfft.RegFFT) and rows % fwd.ffts_per_block_value != 0
    t = np.exp(2j * np.pi * rng.random(m))
    x = np.zeros((rows, n), np.complex64)
    shifts = [7, n - m, 200, 33]
    for b, s in enumerate(shifts):
        x[b, s:s + m] = t
    shifts.append(0)  # the last row: zeros
    idx, val = kernels.matched_filter(x, t)
    ref = np.abs(np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * np.conj(np.fft.fft(t, n)), axis=-1)) ** 2
    assert list(idx) == shifts == list(np.argmax(ref, axis=-1))
    np.testing.assert_allclose(val, ref.max(axis=-1), rtol=1e-5)


def test_which_ffts_are_ours(own_fft, monkeypatch):
    """OWN_FFT covers float32, complex and folded real, of the sizes kernels._regfft has; float64,
    unfolded real, other sizes and functions not listed stay cuFFTDx's."""
    def ours(n, precision, real, folded=False, kernel="fft_convolve"):
        return isinstance(_fused.fft_pair(n, precision, real, folded=folded, kernel=kernel)[0], _regfft.RegFFT)

    assert ours(512, np.float32, False) and ours(512, np.float32, True, True) and ours(1024, np.float32, False)
    assert not ours(512, np.float32, True, False)
    assert not ours(512, np.float64, False) and not ours(512, np.float64, True, True)
    assert not ours(8192, np.float32, False) and not ours(96, np.float32, False)
    assert ours(8192, np.float32, True, True)  # real: a 4096-point complex FFT
    # two rows of 4096 points need more than 48 KiB: cuFFTDx's pair instead
    assert not isinstance(_fused.fft_pair(4096, np.float32, False, 16, 2, kernel="fft_convolve")[0], _regfft.RegFFT)
    monkeypatch.setattr(_fused, "OWN_FFT", {"matched_filter"})
    assert not ours(512, np.float32, False) and ours(512, np.float32, False, kernel="matched_filter")


@pytest.mark.parametrize("n", [128, 512, 4096])
def test_fft_convolve_real_own(own_fft, n):
    x = rng.standard_normal((3, n)).astype(np.float32)
    h = rng.standard_normal(11)
    assert isinstance(_fused.fft_pair(n, np.float32, True, folded=True, kernel="fft_convolve")[0], _regfft.RegFFT)
    y = kernels.fft_convolve(x, h, method="fft")
    ref = np.fft.irfft(np.fft.rfft(x.astype(np.float64), axis=-1) * np.fft.rfft(h, n), n, axis=-1)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-6


def test_fft_convolve_real_own_device_taps(own_fft):
    n = 512
    x = rng.standard_normal((2, n)).astype(np.float32)
    h = rng.standard_normal(20).astype(np.float32)
    y = kernels.fft_convolve(cuda.to_device(x), cuda.to_device(h), method="fft")
    y = y.copy_to_host() if hasattr(y, "copy_to_host") else np.asarray(y)
    ref = np.fft.irfft(np.fft.rfft(x.astype(np.float64), axis=-1) * np.fft.rfft(h.astype(np.float64), n), n, axis=-1)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-6


def test_fir_filter_own(own_fft):
    """Overlap-save segments (halo, last segment cut short) through our r2c/c2r pair."""
    x = rng.standard_normal((2, 3000)).astype(np.float32)
    taps = rng.standard_normal(127)
    assert isinstance(_fused.fft_pair(512, np.float32, True, folded=True, kernel="fir_filter")[0], _regfft.RegFFT)
    y = kernels.fir_filter(x, taps, method="fft")
    ref = np.array([np.convolve(r, taps)[:3000] for r in x.astype(np.float64)])
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-6


def test_stft_power_own(own_fft):
    x = rng.standard_normal((2, 4096)).astype(np.float32)
    w = np.hanning(512)
    p = kernels.stft_power(x, w, 256)
    frames = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), 512, axis=-1)[:, ::256]
    ref = np.abs(np.fft.rfft(frames * w, axis=-1)) ** 2
    assert p.shape == ref.shape
    assert np.linalg.norm(p - ref) / np.linalg.norm(ref) < 2e-6


@pytest.mark.parametrize("beams,nsamp,channels", [(8, 256, 16), (4, 64, 3), (16, 1024, 2)])
def test_beamform_spectra_own(own_fft, monkeypatch, beams, nsamp, channels):
    """The direct beamforming kernel with our FFT (one forward FFT per beam, the beams as the
    block's rows)."""
    from kernels import gemm

    monkeypatch.setattr(gemm, "BEAMFORM_KERNEL", "direct")
    ours = isinstance(gemm._beamform_fft(beams, nsamp, np.float32, 90, own=True), _regfft.RegFFT)
    assert ours == (nsamp < 1024)  # 16 rows of 1024 points need over 48 KiB: cuFFTDx's
    x = (rng.standard_normal((2, channels, nsamp)) + 1j * rng.standard_normal((2, channels, nsamp))).astype(np.complex64)
    w = (rng.standard_normal((beams, channels)) + 1j * rng.standard_normal((beams, channels))).astype(np.complex64)
    y = kernels.beamform_spectra(x, w)
    ref = np.fft.fft(np.einsum("bc,ncs->nbs", w.astype(np.complex128), x), axis=-1)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-6


def test_beamform_own_fft_only_within_48_kib(own_fft):
    """The direct beamforming kernel takes our FFT only where the whole kernel (tile, weights,
    FFT workspace) fits 48 KiB: with 1024 channels the weights alone need 64 KiB."""
    from kernels import gemm
    from nvmath_device import FFT

    fft, kernel, smem = gemm._beamform_direct(8, 256, 16, np.float32, 90)
    assert isinstance(fft, _regfft.RegFFT) and smem <= 48 * 1024
    # one descriptor and kernel per shape: a new one each call recompiled the kernel each call
    assert gemm._beamform_direct(8, 256, 16, np.float32, 90)[:2] == (fft, kernel)
    fft, _, smem = gemm._beamform_direct(8, 256, 1024, np.float32, 90)
    assert isinstance(fft, FFT) and smem > 48 * 1024
