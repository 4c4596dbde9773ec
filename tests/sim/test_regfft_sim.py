# SPDX-License-Identifier: Apache-2.0
"""kernels._regfft (our own block FFT) under the CUDA simulator: the generated ``execute`` against
NumPy's FFT for every size, elements per thread, rows per block and both register layouts;
forward then inverse is n times the input (with the forward equal to NumPy's, the inverse is
n times NumPy's ifft); ``fft_convolve`` and ``matched_filter`` with it
(``_fused.OWN_FFT``) against float64 references and against their cuFFTDx kernels. The dynamic
shared memory starts as NaN, so an exchange that reads a word nobody wrote fails."""

import numpy as np
import pytest
from numba import cuda, types

import kernels
from kernels import _fused, _regfft

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
    fx, ix = fwd.executor(registers), inv.executor(registers)
    T = fwd.stride
    cplx = registers == "complex"
    width = ept if cplx else 2 * ept
    dt = np.complex64 if cplx else np.float32

    @cuda.jit
    def k(x, y, z, nrows):
        r = cuda.local.array(width, dt)
        sc = cuda.shared.array(0, types.complex64)
        t = cuda.threadIdx.x
        row = cuda.blockIdx.x * fpb + cuda.threadIdx.y
        ok = row < nrows
        for i in range(ept):
            v = x[row, t + T * i] if ok else x[0, 0]
            if cplx:
                r[i] = v
            else:
                r[2 * i] = v.real
                r[2 * i + 1] = v.imag
        fx(r, sc)
        for i in range(ept):
            if ok:
                y[row, t + T * i] = r[i] if cplx else complex(r[2 * i], r[2 * i + 1])
        cuda.syncthreads()
        ix(r, sc)
        for i in range(ept):
            if ok:
                z[row, t + T * i] = r[i] if cplx else complex(r[2 * i], r[2 * i + 1])

    x = (rng.standard_normal((rows, n)) + 1j * rng.standard_normal((rows, n))).astype(np.complex64)
    y, z = np.full_like(x, np.nan), np.full_like(x, np.nan)
    k[-(-rows // fpb), fwd.block_dim, 0, fwd.shared_memory_size](x, y, z, rows)
    return x, y, z


CASES = [(64, 4, 1), (64, 4, 3), (128, 8, 2), (256, 16, 2), (256, 8, 1), (512, 8, 2), (512, 4, 1),
         (1024, 8, 1), (1024, 16, 1), (2048, 16, 1), (4096, 16, 1), (4096, 8, 1)]


@pytest.mark.parametrize("n,ept,fpb", CASES)
def test_execute_matches_numpy(n, ept, fpb):
    rows = fpb + 1 if fpb > 1 else 1  # a last block with a row past the batch where fpb > 1
    x, y, z = _run(n, ept, fpb, "float", rows)
    ref = np.fft.fft(x.astype(np.complex128), axis=-1)
    err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    assert err < 1e-6, (n, ept, fpb, err)
    back = np.linalg.norm(z / n - x) / np.linalg.norm(x)
    assert back < 1e-6, (n, ept, fpb, back)


@pytest.mark.parametrize("n,ept", [(64, 4), (512, 8), (1024, 16)])
def test_complex_registers(n, ept):
    x, y, z = _run(n, ept, 2, "complex", 2)
    ref = np.fft.fft(x.astype(np.complex128), axis=-1)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-6
    assert np.linalg.norm(z / n - x) / np.linalg.norm(x) < 1e-6


@pytest.fixture
def own_fft(monkeypatch):
    monkeypatch.setattr(_fused, "OWN_FFT", {"fft_convolve", "matched_filter"})


@pytest.mark.parametrize("n", [64, 512, 1024])
def test_fft_convolve_own(own_fft, n):
    x = (rng.standard_normal((5, n)) + 1j * rng.standard_normal((5, n))).astype(np.complex64)
    h = rng.standard_normal(9) + 1j * rng.standard_normal(9)
    fwd, _ = _fused.fft_pair(n, np.float32, False, kernel="fft_convolve")
    assert isinstance(fwd, _regfft.RegFFT)
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


def test_real_and_float64_keep_cufftdx(own_fft):
    """OWN_FFT covers complex float32 only: real and float64 pairs stay cuFFTDx's."""
    assert not isinstance(_fused.fft_pair(512, np.float32, True, kernel="fft_convolve")[0], _regfft.RegFFT)
    assert not isinstance(_fused.fft_pair(512, np.float64, False, kernel="fft_convolve")[0], _regfft.RegFFT)
    assert isinstance(_fused.fft_pair(512, np.float32, False, kernel="matched_filter")[0], _regfft.RegFFT)
    assert not isinstance(_fused.fft_pair(512, np.float32, False, kernel="fir_filter")[0], _regfft.RegFFT)
