# SPDX-License-Identifier: Apache-2.0
"""Soak: 10^4 calls of each ``kernels`` function on small CuPy inputs; host RSS and device
memory must not grow (device: in one of up to three rounds, :func:`tests.harness.soak_rounds`).
The figures are printed as ``SOAK kernels <fn>, ... (round r): ...`` (pytest -s)."""

import numpy as np
import pytest

import kernels
from tests.harness import soak_rounds

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")

CALLS = 10_000
WARMUP = 200
RSS_LIMIT_MIB = 16  # host growth allowed over the calls
DEV_LIMIT_MIB = 8  # device growth allowed (the driver's granularity is 2 MiB)
rng = np.random.default_rng(17)


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


def _round(fn):
    for i in range(CALLS):
        out = fn()
        if i % 1000 == 999:
            cp.cuda.Stream.null.synchronize()  # bounded queue of outputs in flight
    del out


@pytest.mark.parametrize("name", NAMES)
def test_soak(name):
    fn = _calls()[name]
    for _ in range(WARMUP):
        out = fn()
    del out
    soak_rounds(f"kernels {name}, {CALLS} calls", lambda: _round(fn), RSS_LIMIT_MIB << 20, DEV_LIMIT_MIB << 20)
