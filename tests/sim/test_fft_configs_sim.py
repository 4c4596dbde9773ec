# SPDX-License-Identifier: Apache-2.0
"""The fused kernels with FFT configurations other than cuFFTDx's suggestion (the ones
``benchmarks/fused_kernels.py --fft-configs`` times on the GPU, and that
``kernels._fused.FFT_CONFIGS`` may select, for a function not in ``OWN_FFT``): every function
still equals its NumPy reference, and the configuration asked for is the one used. Under the simulator; the suite's kernel recorder
links each of these kernels for sm_90 as well."""

import numpy as np
import pytest

import kernels
from kernels import _fused

rng = np.random.default_rng(11)
F32 = "float32"
SHIPPED = dict(_fused.FFT_CONFIGS)  # the table as the package ships it (the fixture empties it)


@pytest.fixture(autouse=True)
def _table(monkeypatch):
    """An empty table, and cuFFTDx's FFT for every function (the table configures cuFFTDx's
    descriptors; our own FFT, the default where it has the size, takes none of it)."""
    monkeypatch.setattr(_fused, "FFT_CONFIGS", {})
    monkeypatch.setattr(_fused, "OWN_FFT", set())
    return _fused.FFT_CONFIGS


def _rel(a, b):
    return np.linalg.norm(np.ravel(a - b)) / np.linalg.norm(np.ravel(b))


def _used(n, real, folded, kernel):
    fwd, inv = _fused.fft_pair(n, np.float32, real, folded=folded, kernel=kernel)
    assert (inv.elements_per_thread_value, inv.ffts_per_block_value) == (
        fwd.elements_per_thread_value, fwd.ffts_per_block_value)
    return fwd.elements_per_thread_value, fwd.ffts_per_block_value


@pytest.mark.parametrize("cfg", [(8, 1), (16, 2)])
def test_real_convolution(_table, cfg):
    _table[("fft_convolve", 64, F32, True, True)] = cfg
    x = rng.standard_normal((5, 64)).astype(np.float32)  # 5 rows: a partial last block at fpb 2
    h = rng.standard_normal(9)
    y = kernels.fft_convolve(x, h)
    ref = np.fft.irfft(np.fft.rfft(x.astype(np.float64), axis=-1) * np.fft.rfft(h, 64), 64, axis=-1)
    assert _rel(y, ref) < 1e-5
    assert _used(64, True, True, "fft_convolve") == cfg


@pytest.mark.parametrize("cfg", [(4, 1), (8, 3)])
def test_complex_convolution(_table, cfg):
    _table[("fft_convolve", 64, F32, False, False)] = cfg
    x = (rng.standard_normal((4, 64)) + 1j * rng.standard_normal((4, 64))).astype(np.complex64)
    h = rng.standard_normal(7)
    y = kernels.fft_convolve(x, h)
    ref = np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * np.fft.fft(h, 64), axis=-1)
    assert _rel(y, ref) < 1e-5
    assert _used(64, False, False, "fft_convolve") == cfg


def test_fir_segments(_table):
    _table[("fir_filter", 64, F32, True, True)] = (16, 2)
    x = rng.standard_normal((2, 300)).astype(np.float32)
    h = rng.standard_normal(9)
    y = kernels.fir_filter(x, h, fft_size=64)
    ref = np.stack([np.convolve(r.astype(np.float64), h)[:300] for r in x])
    assert _rel(y, ref) < 1e-5
    assert _used(64, True, True, "fir_filter") == (16, 2)


def _matched_filter_equals_numpy(n, rows):
    x = (rng.standard_normal((rows, n)) + 1j * rng.standard_normal((rows, n))).astype(np.complex64)
    t = x[1, 10:26].copy()
    idx, power = kernels.matched_filter(x, t)
    corr = np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * np.conj(np.fft.fft(t, n)), axis=-1)
    p = np.abs(corr) ** 2
    assert np.array_equal(idx, p.argmax(axis=-1))
    assert _rel(power, p.max(axis=-1)) < 1e-4


def test_matched_filter(_table):
    _table[("matched_filter", 64, F32, False, False)] = (4, 2)
    _matched_filter_equals_numpy(64, 3)
    assert _used(64, False, False, "matched_filter") == (4, 2)


def test_stft_power(_table):
    _table[("stft_power", 64, F32, True, True)] = (8, 3)
    x = rng.standard_normal((2, 400)).astype(np.float32)
    w = np.hanning(64)
    y = kernels.stft_power(x, w, 16)
    frames = np.stack([x[:, f * 16:f * 16 + 64] for f in range(1 + (400 - 64) // 16)], axis=1)
    ref = np.abs(np.fft.rfft(frames.astype(np.float64) * w, axis=-1)) ** 2
    assert _rel(y, ref) < 1e-5
    assert _used(64, True, True, "stft_power") == (8, 3)


def test_the_table_is_keyed_by_function_size_precision_and_mode(_table):
    _table[("fft_convolve", 64, F32, True, True)] = (8, 1)
    assert _fused.fft_config(64, np.float32, True, True, "fft_convolve") == (8, 1)
    assert _fused.fft_config(64, np.float32, True, True, "fir_filter") == ("suggested", "suggested")
    assert _fused.fft_config(64, np.float32, True, True) == ("suggested", "suggested")
    assert _fused.fft_config(64, np.float32, True, False, "fft_convolve") == ("suggested", "suggested")
    assert _fused.fft_config(64, np.float64, True, True, "fft_convolve") == ("suggested", "suggested")
    assert _fused.fft_config(128, np.float32, True, True, "fft_convolve") == ("suggested", "suggested")
    # no fold for c2c
    assert _fused.fft_config(64, np.float32, False, True, "fft_convolve") == ("suggested", "suggested")


def test_an_entry_for_one_function_leaves_the_others_on_the_suggestion(_table):
    """fft_convolve and fir_filter share the 64-point real FFT; an entry for fir_filter alone
    changes only fir_filter's kernel (both still equal NumPy)."""
    suggested = _used(64, True, True, "fir_filter")
    other = (16, 2) if suggested != (16, 2) else (8, 1)
    _table[("fir_filter", 64, F32, True, True)] = other
    x = rng.standard_normal((3, 64)).astype(np.float32)
    h = rng.standard_normal(9)
    y = kernels.fft_convolve(x, h)
    ref = np.fft.irfft(np.fft.rfft(x.astype(np.float64), axis=-1) * np.fft.rfft(h, 64), 64, axis=-1)
    assert _rel(y, ref) < 1e-5
    assert _used(64, True, True, "fft_convolve") == suggested
    assert _used(64, True, True, "fir_filter") == other


def test_the_shipped_table_names_real_functions_and_valid_configurations(_table):
    """Each FFT_CONFIGS entry as shipped names a kernels function that looks its FFT up, and a
    configuration cuFFTDx accepts for that FFT (the descriptors build with it)."""
    assert SHIPPED, "the table is empty: this test has nothing to check"
    _table.update(SHIPPED)
    for (fn, n, prec, real, folded), (ept, fpb) in SHIPPED.items():
        assert fn in {"fft_convolve", "fir_filter", "matched_filter", "stft_power"}, fn
        fwd, inv = _fused.fft_pair(n, np.dtype(prec), real, folded=folded, kernel=fn)
        assert (fwd.elements_per_thread_value, fwd.ffts_per_block_value) == (ept, fpb)
    if ("matched_filter", 1024, F32, False, False) in SHIPPED:  # the entry's kernel, run
        _matched_filter_equals_numpy(1024, 2)
