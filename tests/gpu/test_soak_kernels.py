# SPDX-License-Identifier: Apache-2.0
"""Soak: 10^4 calls of each ``kernels`` function on small CuPy inputs; host RSS and device
memory must not grow (device: in one of up to three rounds, see ROUNDS). The figures are
printed as ``SOAK kernels <fn> (round r): ...`` (pytest -s)."""

import time

import numpy as np
import pytest

import kernels
from tests.harness import device_used_bytes, rss_bytes

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")

CALLS = 10_000
WARMUP = 200
RSS_LIMIT_MIB = 16  # host growth allowed over the calls
DEV_LIMIT_MIB = 8  # device growth allowed (the driver's granularity is 2 MiB)
rng = np.random.default_rng(17)


def _rss_mib() -> float:
    return rss_bytes() / 2**20


def _device_used_mib() -> float:
    return device_used_bytes() / 2**20


def _c(shape, dtype=np.complex64):
    return cp.asarray((rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype))


def _r(shape, dtype=np.float32):
    return cp.asarray(rng.standard_normal(shape).astype(dtype))


def _calls():
    x, xl, xc = _r((16, 256)), _r((4, 1000)), _c((16, 256))
    h, t, w = rng.standard_normal(15), np.asarray(cp.asnumpy(xc[0, :32])), np.hanning(64)
    dh, dt, dw = cp.asarray(h), xc[0, :32].copy(), cp.asarray(w)
    a, b, c = _r((32, 16, 16)), _r((32, 16, 16)), _r((32, 16, 16))
    xb, wb = _c((4, 8, 64)), _c((4, 8))
    return {
        "fft_convolve": lambda: kernels.fft_convolve(x, h),
        "fft_convolve(device taps)": lambda: kernels.fft_convolve(x, dh),
        "fir_filter": lambda: kernels.fir_filter(xl, h),
        "matched_filter": lambda: kernels.matched_filter(xc, t),
        "matched_filter(device template)":
            lambda: kernels.matched_filter(xc, dt, return_correlation=True),
        "stft_power": lambda: kernels.stft_power(xl, w, 32),
        "stft_power(device window)": lambda: kernels.stft_power(xl, dw, 32),
        "batched_gemm": lambda: kernels.batched_gemm(a, b, c=c, beta=0.5),
        "beamform_spectra": lambda: kernels.beamform_spectra(xb, wb),
        "beamform_spectra(device weights)": lambda: kernels.beamform_spectra(xb, cp.asarray(wb)),
    }


NAMES = [
    "fft_convolve", "fft_convolve(device taps)", "fir_filter", "matched_filter",
    "matched_filter(device template)", "stft_power", "stft_power(device window)", "batched_gemm",
    "beamform_spectra", "beamform_spectra(device weights)"]


# The device figure is the whole GPU's (cudaMemGetInfo): under pytest-xdist, other workers'
# allocations land in it too. A leak grows in every round of CALLS calls; another process's
# allocation is a step that the next round does not repeat. So up to ROUNDS rounds are run and
# the device growth must stay under the limit in one of them (host RSS is this process's own:
# checked over the first round).
ROUNDS = 3


def _round(fn):
    for i in range(CALLS):
        out = fn()
        if i % 1000 == 999:
            cp.cuda.Stream.null.synchronize()  # bounded queue of outputs in flight
    del out
    cp.cuda.Device().synchronize()


@pytest.mark.parametrize("name", NAMES)
def test_soak(name):
    fn = _calls()[name]
    for _ in range(WARMUP):
        out = fn()
    del out
    growths = []
    for r in range(ROUNDS):
        rss0, dev0 = _rss_mib(), _device_used_mib()
        t0 = time.perf_counter()
        _round(fn)
        secs = time.perf_counter() - t0
        rss1, dev1 = _rss_mib(), _device_used_mib()
        growths.append(dev1 - dev0)
        print(f"\nSOAK kernels {name} (round {r + 1}): {CALLS} calls in {secs:.2f} s "
              f"({secs / CALLS * 1e6:.1f} us/call); "
              f"host RSS {rss0:.1f} -> {rss1:.1f} MiB (+{rss1 - rss0:.2f}); "
              f"device used {dev0:.1f} -> {dev1:.1f} MiB (+{dev1 - dev0:.2f})", flush=True)
        if r == 0:
            assert rss1 - rss0 < RSS_LIMIT_MIB, f"{name}: host RSS grew {rss1 - rss0:.2f} MiB"
        if dev1 - dev0 < DEV_LIMIT_MIB:
            break
    assert min(growths) < DEV_LIMIT_MIB, \
        f"{name}: device memory grew in each of {ROUNDS} rounds: " + ", ".join(f"{g:.2f}" for g in growths) + " MiB"
