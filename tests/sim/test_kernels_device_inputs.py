# SPDX-License-Identifier: Apache-2.0
"""Device taps, templates, windows and weights stay on the device: no ``.get()`` (a device ->
host copy that synchronises) and no host copy of any kind; the results equal the host inputs'."""

import numpy as np
import pytest
from numba import cuda
from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

import kernels

rng = np.random.default_rng(3)


class NoHostCopy(FakeCUDAArray):
    """A simulated device array (as CuPy's: ``__cuda_array_interface__`` and ``.get``) whose every
    way to the host raises."""

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "strides": None, "typestr": self.dtype.str, "data": (0, False),
                "version": 3}

    def get(self, *a, **k):
        raise AssertionError("device -> host copy (.get) of a device input")

    def copy_to_host(self, *a, **k):
        raise AssertionError("device -> host copy (copy_to_host) of a device input")


def dev(a):
    return NoHostCopy(cuda.to_device(np.ascontiguousarray(a))._ary)


@pytest.fixture(scope="module", autouse=True)
def _traits():
    from kernels._fused import prefetch

    prefetch([(64, np.float32, True), (64, np.float32, False), (32, np.float32, False)])


def _sig(shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_fft_convolve_device_taps(dtype):
    x = _sig((3, 64), dtype)
    h = _sig(9, np.float64 if dtype is np.float32 else np.complex128)
    y_dev = kernels.fft_convolve(x, dev(h))
    ref = np.fft.ifft(np.fft.fft(x.astype(np.complex128)) * np.fft.fft(h, 64))
    ref = ref.real if dtype is np.float32 else ref
    assert np.linalg.norm(y_dev - ref) / np.linalg.norm(ref) < 1e-5
    np.testing.assert_allclose(y_dev, kernels.fft_convolve(x, h), rtol=1e-5, atol=1e-5)


def test_fir_filter_device_taps():
    x = _sig((2, 150), np.float32)
    h = _sig(7, np.float32)  # float32 device taps into a float32 signal
    y = kernels.fir_filter(x, dev(h), fft_size=64)
    ref = np.array([np.convolve(r.astype(np.float64), h)[:150] for r in x])
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-5


def test_matched_filter_device_template():
    x = _sig((2, 64), np.complex64)
    t = _sig(16, np.complex64)
    idx, pw, c = kernels.matched_filter(x, dev(t), return_correlation=True)
    ref = np.fft.ifft(np.fft.fft(x.astype(np.complex128)) * np.conj(np.fft.fft(t, 64)))
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-5
    np.testing.assert_array_equal(idx, np.argmax(np.abs(ref) ** 2, axis=-1))


def test_stft_power_device_window():
    x = _sig((2, 200), np.float32)
    w = np.hanning(64)  # float64 window, float32 signal: converted on the device
    p = kernels.stft_power(x, dev(w), 16)
    frames = np.stack([x[:, f * 16:f * 16 + 64] for f in range(1 + (200 - 64) // 16)], axis=1)
    ref = np.abs(np.fft.rfft(frames * w, axis=-1)) ** 2
    assert np.linalg.norm(p - ref) / np.linalg.norm(ref) < 1e-5


def test_beamform_spectra_device_weights():
    x = _sig((2, 4, 32), np.complex64)
    w = _sig((4, 4), np.float32)  # real weights for complex x: converted on the device
    y = kernels.beamform_spectra(x, dev(w))
    ref = np.fft.fft(np.einsum("bc,ncs->nbs", w.astype(np.complex128), x), axis=-1)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-5


@pytest.mark.parametrize("call, exc, match", [
    (lambda: kernels.fft_convolve(_sig((2, 64), np.float32), dev(_sig(3, np.complex64))),
     TypeError, "h must be real"),
    (lambda: kernels.fft_convolve(_sig((2, 64), np.float32), dev(np.zeros((2, 2)))),
     ValueError, "h must have 1 dimension"),
    (lambda: kernels.fft_convolve(_sig((2, 64), np.float32), dev(np.zeros(65))),
     ValueError, "h has 65 taps"),
    (lambda: kernels.fft_convolve(_sig((2, 64), np.float32), dev(np.zeros(3, np.int32))),
     TypeError, "h must have dtype"),
    (lambda: kernels.stft_power(_sig((2, 64), np.float32), dev(np.zeros(32, np.complex64)), 4),
     TypeError, "window must have dtype"),
    (lambda: kernels.beamform_spectra(_sig((2, 4, 32), np.complex64), dev(np.zeros((3, 4), np.complex64))),
     ValueError, "weights must have a power-of-2 number of beams"),
])
def test_bad_device_inputs_are_named(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("batch, beams, channels, nsamp", [(1, 16, 16, 256), (2, 8, 3, 64)])
def test_beamform_spectra_with_and_without_the_fft_over_the_gemm_tiles(batch, beams, channels, nsamp, monkeypatch):
    """The GEMM kernel (kernels.gemm.BEAMFORM_KERNEL = "gemm"): the main shape (the FFT's
    workspace over the GEMM's A and B tiles) and 3 channels (A and B too small: the workspace
    after the GEMM's buffer) both equal NumPy."""
    from kernels import gemm

    monkeypatch.setattr(gemm, "BEAMFORM_KERNEL", "gemm")
    x = _sig((batch, channels, nsamp), np.complex64)
    w = _sig((beams, channels), np.complex64)
    y = kernels.beamform_spectra(x, w)
    ref = np.fft.fft(np.einsum("bc,ncs->nbs", w.astype(np.complex128), x), axis=-1)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-5


def test_beamform_spectra_refuses_weights_beyond_shared_memory_before_compiling(monkeypatch):
    """The direct kernel keeps W (beams x channels) in shared memory beside the beams x samples
    tile: 1000 channels of 8 complex128 beams over 1024 samples need 259072 bytes, more than
    sm_90's 232448: a ValueError naming x and weights and both sizes, raised before anything is
    launched."""
    from kernels import gemm

    monkeypatch.setattr(gemm, "BEAMFORM_KERNEL", "direct")
    monkeypatch.setattr(gemm, "launch", lambda *a: pytest.fail(f"launched {a[0]}"))
    x = np.zeros((1, 1000, 1024), np.complex128)
    with pytest.raises(ValueError, match=r"x and weights: 8 beams of 1024 samples from 1000 channels do not fit "
                                         r"one block: needs 259072 bytes .* sm_90 allows 232448"):
        kernels.beamform_spectra(x, np.ones((8, 1000)))


@pytest.mark.parametrize("batch, beams, channels, nsamp, dtype", [
    (2, 8, 16, 256, np.complex64), (1, 16, 16, 256, np.complex64), (2, 2, 4, 64, np.complex64),
    (2, 4, 8, 128, np.complex128), (2, 8, 3, 64, np.complex64), (2, 4, 16, 1024, np.complex64),
    (3, 1, 20, 32, np.complex64),  # 8 threads: too few for cuBLASDx's GEMM; 20 channels: two chunks
])
def test_beamform_spectra_direct_kernel(batch, beams, channels, nsamp, dtype, monkeypatch):
    """The direct kernel (kernels.gemm.BEAMFORM_KERNEL = "direct", the default) equals NumPy for threads
    per block below, at and above the sample count (beams split among column groups), channel
    counts that are not a multiple of its chunk, and both precisions."""
    from kernels import gemm

    monkeypatch.setattr(gemm, "BEAMFORM_KERNEL", "direct")
    x = _sig((batch, channels, nsamp), dtype)
    w = _sig((beams, channels), dtype)
    y = kernels.beamform_spectra(x, w)
    ref = np.fft.fft(np.einsum("bc,ncs->nbs", w.astype(np.complex128), x), axis=-1)
    assert y.shape == ref.shape and y.dtype == dtype
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < (1e-6 if dtype == np.complex64 else 1e-13)
