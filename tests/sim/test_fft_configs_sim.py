# SPDX-License-Identifier: Apache-2.0
"""The fused kernels with FFT configurations other than cuFFTDx's suggestion (the ones
``benchmarks/fused_kernels.py --fft-configs`` times on the GPU, and that
``kernels._fused.FFT_CONFIGS`` may select): every function still equals its NumPy reference, and
the configuration asked for is the one used. Under the simulator; the suite's kernel recorder
links each of these kernels for sm_90 as well."""

import numpy as np
import pytest

import kernels
from kernels import _fused

rng = np.random.default_rng(11)
F32 = "float32"


@pytest.fixture(autouse=True)
def _table(monkeypatch):
    monkeypatch.setattr(_fused, "FFT_CONFIGS", {})
    return _fused.FFT_CONFIGS


def _rel(a, b):
    return np.linalg.norm(np.ravel(a - b)) / np.linalg.norm(np.ravel(b))


def _used(n, real, folded):
    fwd, inv = _fused.fft_pair(n, np.float32, real, folded=folded)
    assert (inv.elements_per_thread_value, inv.ffts_per_block_value) == (
        fwd.elements_per_thread_value, fwd.ffts_per_block_value)
    return fwd.elements_per_thread_value, fwd.ffts_per_block_value


@pytest.mark.parametrize("cfg", [(8, 1), (16, 2)])
def test_real_convolution(_table, cfg):
    _table[(64, F32, True, True)] = cfg
    x = rng.standard_normal((5, 64)).astype(np.float32)  # 5 rows: a partial last block at fpb 2
    h = rng.standard_normal(9)
    y = kernels.fft_convolve(x, h)
    ref = np.fft.irfft(np.fft.rfft(x.astype(np.float64), axis=-1) * np.fft.rfft(h, 64), 64, axis=-1)
    assert _rel(y, ref) < 1e-5
    assert _used(64, True, True) == cfg


@pytest.mark.parametrize("cfg", [(4, 1), (8, 3)])
def test_complex_convolution(_table, cfg):
    _table[(64, F32, False, False)] = cfg
    x = (rng.standard_normal((4, 64)) + 1j * rng.standard_normal((4, 64))).astype(np.complex64)
    h = rng.standard_normal(7)
    y = kernels.fft_convolve(x, h)
    ref = np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * np.fft.fft(h, 64), axis=-1)
    assert _rel(y, ref) < 1e-5
    assert _used(64, False, False) == cfg


def test_fir_segments(_table):
    _table[(64, F32, True, True)] = (16, 2)
    x = rng.standard_normal((2, 300)).astype(np.float32)
    h = rng.standard_normal(9)
    y = kernels.fir_filter(x, h, fft_size=64)
    ref = np.stack([np.convolve(r.astype(np.float64), h)[:300] for r in x])
    assert _rel(y, ref) < 1e-5
    assert _used(64, True, True) == (16, 2)


def test_matched_filter(_table):
    _table[(64, F32, False, False)] = (4, 2)
    x = (rng.standard_normal((3, 64)) + 1j * rng.standard_normal((3, 64))).astype(np.complex64)
    t = x[1, 10:26].copy()
    idx, power = kernels.matched_filter(x, t)
    corr = np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * np.conj(np.fft.fft(t, 64)), axis=-1)
    p = np.abs(corr) ** 2
    assert np.array_equal(idx, p.argmax(axis=-1))
    assert _rel(power, p.max(axis=-1)) < 1e-4
    assert _used(64, False, False) == (4, 2)


def test_stft_power(_table):
    _table[(64, F32, True, True)] = (8, 3)
    x = rng.standard_normal((2, 400)).astype(np.float32)
    w = np.hanning(64)
    y = kernels.stft_power(x, w, 16)
    frames = np.stack([x[:, f * 16:f * 16 + 64] for f in range(1 + (400 - 64) // 16)], axis=1)
    ref = np.abs(np.fft.rfft(frames.astype(np.float64) * w, axis=-1)) ** 2
    assert _rel(y, ref) < 1e-5
    assert _used(64, True, True) == (8, 3)


def test_the_table_is_keyed_by_size_precision_and_mode(_table):
    _table[(64, F32, True, True)] = (8, 1)
    assert _fused.fft_config(64, np.float32, True, True) == (8, 1)
    assert _fused.fft_config(64, np.float32, True, False) == ("suggested", "suggested")
    assert _fused.fft_config(64, np.float64, True, True) == ("suggested", "suggested")
    assert _fused.fft_config(128, np.float32, True, True) == ("suggested", "suggested")
    assert _fused.fft_config(64, np.float32, False, True) == ("suggested", "suggested")  # no fold for c2c
