# SPDX-License-Identifier: Apache-2.0
"""kernels.add_noise under the simulator: value by value against a NumPy reference that draws the
same cuRAND Philox4_32_10 numbers with nvmath_device._random_math (the stream the module's
docstring defines: lane t of row r = curand_init(seed, r * 256 + t, 0), group g of the row is
lane g % 256's (g // 256)-th normal4 / normal2_double), plus the statistics of the noise."""

import math

import numpy as np
import pytest
from numba import cuda

import kernels
from kernels import noise
from nvmath_device import _random_math as rm
from nvmath_device._random_states import STATE_DTYPES

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def reference_normals(seed, rows, nvalues, double):
    """The normals the kernel adds to each row of ``nvalues`` real values (complex rows:
    interleaved real, imaginary), unscaled: float32 (normal4) or float64 (normal2_double)."""
    group = 2 if double else 4
    ngroups = -(-nvalues // group)
    out = np.zeros((rows, ngroups * group), np.float64 if double else np.float32)
    for r in range(rows):
        for t in range(min(noise.LANES, ngroups)):
            st = np.zeros(1, STATE_DTYPES["Philox4_32_10"])[0]
            rm.init(seed, r * noise.LANES + t, 0, st)
            for g in range(t, ngroups, noise.LANES):
                out[r, g * group:(g + 1) * group] = rm.normal2_double(st) if double else rm.normal4(st)
    return out[:, :nvalues]


def reference(x, snr_db, seed, signal_power=None):
    x2 = np.atleast_2d(x)
    cplx = np.iscomplexobj(x2)
    real_t = x2.real.dtype.type
    xr = x2.view(real_t) if cplx else x2
    double = real_t is np.float64
    z = reference_normals(seed, xr.shape[0], xr.shape[1], double)
    y = np.empty_like(xr)
    for r in range(xr.shape[0]):
        p = signal_power if signal_power is not None else float(np.mean(np.abs(x2[r].astype(np.complex128)) ** 2))
        sigma = noise.noise_scale(p, snr_db, cplx)
        y[r] = xr[r] + (real_t(sigma) * z[r]).astype(real_t)
    return (y.view(x2.dtype) if cplx else y).reshape(x.shape)


def _signal(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 3.0 + 1.0
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * (rng.standard_normal(shape) - 0.5)
    return x.astype(dtype)


@pytest.mark.parametrize("n", [37, 38, 40])
@pytest.mark.parametrize("dtype", DTYPES)
def test_given_power_is_bit_exact(dtype, n):
    """signal_power given: sigma is a host number, every output value equals the reference's.
    An odd number of real values per row takes the scalar kernel, an even one the pair kernel
    (a float32 row of 38 values ends in a group of one pair)."""
    x = _signal(dtype, (2, n))
    y = kernels.add_noise(x, 6.0, seed=11, signal_power=2.5)
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(y, reference(x, 6.0, 11, signal_power=2.5))


@pytest.mark.parametrize("dtype", DTYPES)
def test_measured_power_matches_reference(dtype):
    """Measured per row (float64 sums, in the kernel's order): same draws, sigma to rounding."""
    x = _signal(dtype, (3, 21), seed=1)
    x[1] *= 10  # rows of different power get different sigma
    y = kernels.add_noise(x, 3.0, seed=2)
    want = reference(x, 3.0, 2)
    real = x.real.dtype
    np.testing.assert_allclose(y, want, rtol=4 * np.finfo(real).eps, atol=4 * np.finfo(real).eps * 30)
    # and not what another seed gives
    assert not np.allclose(kernels.add_noise(x, 3.0, seed=3), want)


def test_rows_longer_than_the_lanes_and_a_1d_signal():
    """A row of more than 256 groups: lanes draw again (their second normal4)."""
    x = _signal(np.float32, (1100,), seed=4)
    y = kernels.add_noise(x, 0.0, seed=9, signal_power=1.0)
    np.testing.assert_array_equal(y, reference(x, 0.0, 9, signal_power=1.0))


def test_same_seed_same_bits_and_out_in_place():
    x = _signal(np.complex64, (2, 10), seed=5)
    a = kernels.add_noise(x, 12.0, seed=2**64 - 1)
    b = kernels.add_noise(x, 12.0, seed=2**64 - 1)
    np.testing.assert_array_equal(a, b)
    out = np.full_like(x, np.nan)
    r = kernels.add_noise(x, 12.0, seed=2**64 - 1, out=out)
    assert r is out
    np.testing.assert_array_equal(out, a)
    xin = x.copy()
    kernels.add_noise(xin, 12.0, seed=2**64 - 1, out=xin)  # in place: power read before any write
    np.testing.assert_array_equal(xin, a)


def test_device_arrays_in_and_out():
    x = _signal(np.float64, (2, 16), seed=6)
    d = cuda.to_device(x)
    o = cuda.device_array_like(d)
    r = kernels.add_noise(d, 1.0, seed=7, out=o)
    assert r is o
    np.testing.assert_array_equal(o.copy_to_host(), kernels.add_noise(x, 1.0, seed=7))
    y = kernels.add_noise(d, 1.0, seed=7)  # a new result (the simulator's Output: a NumPy array)
    y = y.copy_to_host() if hasattr(y, "copy_to_host") else np.asarray(y)
    np.testing.assert_array_equal(y, o.copy_to_host())


def test_zero_signal_power_adds_nothing_and_empty_rows():
    x = np.zeros((2, 9), np.float32)
    np.testing.assert_array_equal(kernels.add_noise(x, 5.0, seed=1), x)
    e = np.zeros((3, 0), np.complex64)
    assert kernels.add_noise(e, 5.0).shape == (3, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("snr_db", [-3.0, 10.0])
def test_measured_snr(dtype, snr_db):
    """The noise power is the row's power / 10**(snr/10): measured SNR within 0.4 dB (2048
    samples: the noise power estimate's standard deviation is ~3% = 0.13 dB); noise mean ~ 0."""
    x = _signal(dtype, (1, 2048), seed=8)
    y = kernels.add_noise(x, snr_db, seed=123)
    d = (y - x).astype(np.complex128)
    p_sig = np.mean(np.abs(x.astype(np.complex128)) ** 2)
    p_noise = np.mean(np.abs(d) ** 2)
    assert abs(10 * math.log10(p_sig / p_noise) - snr_db) < 0.4
    assert abs(np.mean(d)) < 4 * math.sqrt(p_noise / d.size)
    if np.iscomplexobj(x):  # circular: the power splits evenly between real and imaginary parts
        assert abs(np.mean(d.real ** 2) / np.mean(d.imag ** 2) - 1) < 0.2


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_blocks_per_row_do_not_change_the_noise(dtype):
    """A row split over several blocks (each lane's state started at its first draw with
    curand_init's offset) gives the same bits as one block per row; the power measured by the
    partial-sums kernel agrees to rounding."""
    x = _signal(dtype, (2, 2300), seed=10)
    one = kernels.add_noise(x, 4.0, seed=8, signal_power=3.0, _chunks=1)
    np.testing.assert_array_equal(one, reference(x, 4.0, 8, signal_power=3.0))
    for chunks in (2, 3, 5):
        np.testing.assert_array_equal(kernels.add_noise(x, 4.0, seed=8, signal_power=3.0, _chunks=chunks), one)
    m1 = kernels.add_noise(x, 4.0, seed=8, _chunks=1)
    m3 = kernels.add_noise(x, 4.0, seed=8, _chunks=3)
    eps = np.finfo(x.real.dtype).eps
    np.testing.assert_allclose(m3, m1, rtol=4 * eps, atol=4 * eps * 30)
    np.testing.assert_allclose(m3, reference(x, 4.0, 8), rtol=4 * eps, atol=4 * eps * 30)


def test_chunks_for():
    assert noise.chunks_for(8192, 1 << 17, False) == 1  # many rows: a block each
    assert noise.chunks_for(1024, 1 << 17, False) == 8  # 8192 blocks of 16 draws per lane
    assert noise.chunks_for(1, 1 << 20, False) == 128  # one long row: 1024 draws per lane, 8 a block
    assert noise.chunks_for(1, 4000, False) == 1  # 1000 groups: 4 draws per lane, one block
    assert noise.chunks_for(1, 1 << 14, False) == 2  # 16 draws per lane: 2 blocks of 8
    assert noise.chunks_for(3, 10, True) == 1
