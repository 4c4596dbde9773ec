# SPDX-License-Identifier: Apache-2.0
"""kernels.add_noise on the GPU: the noise is cuRAND's Philox4_32_10 stream the module documents
(checked against nvmath_device._random_math on a slice, to the device's float math: its Box-Muller
uses __sincosf and logf), at the SNR asked for, with
every output sample written (NaN-poisoned outputs), for every array kind and on the caller's stream."""

import math

import numpy as np
import pytest

import kernels
from kernels import noise
from nvmath_device import _random_math as rm
from nvmath_device._random_states import STATE_DTYPES
from tests.array_kinds import as_kind as _as
from tests.array_kinds import to_host as _host

pytestmark = pytest.mark.gpu


def normals(seed, row, nvalues, double):
    """Row ``row``'s first ``nvalues`` unscaled normals (see kernels/noise.py's docstring)."""
    group = 2 if double else 4
    ngroups = -(-nvalues // group)
    out = np.zeros(ngroups * group, np.float64 if double else np.float32)
    for t in range(min(noise.LANES, ngroups)):
        st = np.zeros(1, STATE_DTYPES["Philox4_32_10"])[0]
        rm.init(seed, row * noise.LANES + t, 0, st)
        for g in range(t, ngroups, noise.LANES):
            out[g * group:(g + 1) * group] = rm.normal2_double(st) if double else rm.normal4(st)
    return out[:nvalues]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_noise_is_the_documented_philox_stream(dtype):
    """x = 0, signal_power = 1, 0 dB: y is sigma * normal with sigma = 1 (real) or sqrt(1/2)
    (complex). The normals are the reference's to the device's float math (the first GPU run
    found float32 values ~1 ulp of |z| <= 7 apart, so not bit for bit): float32 within 2e-5,
    float64 within 1e-12 (nvmath_device._random_math.DEVICE_TOLERANCE's bounds); another seed's
    normals are nowhere near."""
    import cupy

    rows, n = 300, 2500  # rows past the first block of subsequences, lanes drawing 3 times
    x = cupy.zeros((rows, n), dtype)
    y = _host(kernels.add_noise(x, 0.0, seed=2024, signal_power=1.0))
    cplx = np.issubdtype(dtype, np.complexfloating)
    real_t = np.dtype(dtype).type(0).real.dtype.type
    sigma = real_t(noise.noise_scale(1.0, 0.0, cplx))
    for r in (0, 1, 257, rows - 1):
        yr = y[r].view(real_t) if cplx else y[r]
        want = (sigma * normals(2024, r, yr.size, real_t is np.float64)).astype(np.float64)
        tol = 1e-12 if real_t is np.float64 else 2e-5
        err = np.abs(yr.astype(np.float64) - want) / np.maximum(1.0, np.abs(want))
        assert err.max() <= tol, (r, err.max())
        other = (sigma * normals(2025, r, yr.size, real_t is np.float64)).astype(np.float64)
        assert np.mean(np.abs(yr - other)) > 0.5


@pytest.mark.parametrize("kind", ["numpy", "cupy", "torch", "numba"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float64])
@pytest.mark.parametrize("snr_db", [-5.0, 0.0, 20.0])
def test_measured_snr_per_row(kind, dtype, snr_db):
    if kind == "torch":
        pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    rows, n = 64, 65536 + 3  # a tail group per row
    x = rng.standard_normal((rows, n)) * np.linspace(0.1, 10, rows)[:, None]
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal((rows, n))
    x = x.astype(dtype)
    y = _host(kernels.add_noise(_as(kind, x), snr_db, seed=77))
    d = (y.astype(np.complex128) - x)
    p_sig = np.mean(np.abs(x.astype(np.complex128)) ** 2, axis=1)
    p_noise = np.mean(np.abs(d) ** 2, axis=1)
    snr = 10 * np.log10(p_sig / p_noise)
    # the noise power of a row of n samples is measured to a relative sqrt(2 / n) (0.55 %, 0.024 dB
    # for real rows; complex rows half of it): every row within 5 of those, the mean of 64 rows
    # within 6 of its own (0.003 dB)
    assert np.all(np.abs(snr - snr_db) < 0.12), snr
    assert abs(np.mean(snr) - snr_db) < 0.02, np.mean(snr)
    assert np.all(np.abs(d.mean(axis=1)) < 5 * np.sqrt(p_noise / n))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("n", [1, 3, 5, 1023, 4097])
def test_every_sample_is_written(dtype, n):
    """out poisoned with NaN: after the call none is left (tails of every group size)."""
    import cupy

    x = cupy.ones((5, n), dtype)
    out = cupy.full((5, n), np.nan, dtype)
    r = kernels.add_noise(x, 10.0, seed=1, out=out)
    assert r is out
    h = out.get()
    assert not np.isnan(h.view(h.real.dtype)).any()
    assert np.all(np.abs(h - 1) < 2)


def test_measured_power_matches_given_power_result():
    """Rows of constant power P: measuring P in the kernel and passing signal_power=P agree to
    the rounding of P."""
    import cupy

    x = cupy.full((8, 10000), 2.0, cupy.float32)
    a = kernels.add_noise(x, 3.0, seed=5).get()
    b = kernels.add_noise(x, 3.0, seed=5, signal_power=4.0).get()
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_same_seed_same_bits_other_seed_other_noise_and_in_place():
    import cupy

    x = cupy.asarray(np.random.default_rng(1).standard_normal((16, 5000)).astype(np.float32))
    a = kernels.add_noise(x, 6.0, seed=9).get()
    b = kernels.add_noise(x, 6.0, seed=9).get()
    c = kernels.add_noise(x, 6.0, seed=10).get()
    np.testing.assert_array_equal(a, b)
    assert np.mean(a == c) < 0.01
    xin = x.copy()
    kernels.add_noise(xin, 6.0, seed=9, out=xin)
    np.testing.assert_array_equal(xin.get(), a)


def test_runs_on_the_callers_stream_without_syncing():
    import cupy

    x = cupy.asarray(np.random.default_rng(2).standard_normal((256, 1 << 16)).astype(np.float32))
    # x's upload is on the legacy default stream, which a non-blocking stream does not wait for:
    # without this the kernel on s read rows still in flight (first GPU run of 256 x 2**16: 26 rows)
    cupy.cuda.get_current_stream().synchronize()
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        y = kernels.add_noise(x, 0.0, seed=3)  # the current stream: s
        ev = s.record()
    ev.synchronize()
    ref = kernels.add_noise(x, 0.0, seed=3, stream=cupy.cuda.get_current_stream())
    cupy.cuda.get_current_stream().synchronize()
    np.testing.assert_array_equal(y.get(), ref.get())
    p = float(cupy.mean((y - x) ** 2) / cupy.mean(x ** 2))
    assert abs(10 * math.log10(1 / p)) < 0.05


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_one_long_row_split_over_blocks(dtype):
    """A 1-D signal of 2**22 samples runs on 256 to 512 blocks (each lane's state started at its first
    draw): the same bits as one block per row, and the SNR measured by the partial-sums kernel."""
    import cupy

    rng = np.random.default_rng(4)
    x = rng.standard_normal(1 << 22)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(1 << 22)
    x = cupy.asarray(x.astype(dtype))
    split = kernels.add_noise(x, 7.0, seed=3, signal_power=2.0).get()
    single = kernels.add_noise(x, 7.0, seed=3, signal_power=2.0, _chunks=1).get()
    np.testing.assert_array_equal(split, single)
    y = kernels.add_noise(x, 7.0, seed=3)
    snr = 10 * math.log10(float(cupy.mean(cupy.abs(x) ** 2) / cupy.mean(cupy.abs(y - x) ** 2)))
    assert abs(snr - 7.0) < 0.01
