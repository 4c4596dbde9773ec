# SPDX-License-Identifier: Apache-2.0
"""kernels.add_noise without a GPU: every bad argument is refused (named) before anything is
compiled or copied, and both of its kernels (float32 / float64 rows) type, lower and link to an
sm_90 cubin with cuRAND's Philox4_32_10 unit (the generator state a local record, no States array)."""

import numpy as np
import pytest
from numba import types

import kernels
from kernels import noise
from nvmath_device.aot import compile_kernel

X32 = np.zeros((2, 8), np.float32)


@pytest.mark.parametrize("double,ty", [(False, types.float32), (True, types.float64)])
def test_noise_kernel_links_for_sm90(double, ty):
    arr = types.Array(ty, 2, "C")
    f64 = types.float64
    out = compile_kernel(noise.noise_kernel(double), (arr, arr, f64, f64, f64, f64, types.uint64), sm=90)
    assert out.cubin[:4] == b"\x7fELF"
    assert out.linked == ("nvmathdx_curand_Philox4_32_10.ltoir",)


def test_state_type_is_the_compiled_philox_state():
    """Outside the simulator the local state has the type numba gives states[i] of a
    StatesPhilox4_32_10 array (random.* type-check it against the generator)."""
    assert type(noise.PHILOX_STATE).__name__ == "CurandState"
    assert noise.PHILOX_STATE.generator == "Philox4_32_10"


def test_exported():
    assert kernels.add_noise is noise.add_noise and "add_noise" in kernels.__all__


@pytest.mark.parametrize("kw,exc,match", [
    (dict(snr_db="10"), TypeError, "snr_db must be a real number"),
    (dict(snr_db=True), TypeError, "snr_db must be a real number"),
    (dict(snr_db=1j), TypeError, "snr_db must be a real number"),
    (dict(snr_db=float("nan")), ValueError, "snr_db must be a finite"),
    (dict(snr_db=float("inf")), ValueError, "snr_db must be a finite"),
    (dict(seed=-1), ValueError, r"seed must be an integer from 0 to 2\*\*64 - 1, got -1"),
    (dict(seed=2**64), ValueError, "seed must be an integer from 0"),
    (dict(seed=1.5), TypeError, "seed must be an integer"),
    (dict(seed=True), TypeError, "seed must be an integer"),
    (dict(seed="1"), TypeError, "seed must be an integer"),
    (dict(signal_power=-1.0), ValueError, "signal_power must be >= 0"),
    (dict(signal_power="1"), TypeError, "signal_power must be a real number"),
    (dict(signal_power=float("nan")), ValueError, "signal_power must be a finite"),
    (dict(stream="default"), TypeError, "stream"),
    (dict(out=np.zeros((2, 7), np.float32)), ValueError, r"out must have x's shape \(2, 8\)"),
    (dict(out=np.zeros((2, 8), np.float64)), TypeError, "out must have x's dtype float32"),
    (dict(out=[[0.0] * 8] * 2), TypeError, "out must be a writable NumPy array"),
])
def test_bad_arguments_are_named(kw, exc, match):
    args = dict(snr_db=10.0)
    args.update(kw)
    snr = args.pop("snr_db")
    with pytest.raises(exc, match=match):
        kernels.add_noise(X32, snr, **args)


def test_read_only_out_is_refused():
    out = np.zeros_like(X32)
    out.flags.writeable = False
    with pytest.raises(TypeError, match="out must be a writable NumPy array"):
        kernels.add_noise(X32, 3.0, out=out)


@pytest.mark.parametrize("x,exc,match", [
    (np.zeros((2, 8), np.int32), TypeError, "x must have dtype float32 or float64 or complex64 or complex128"),
    (np.zeros((2, 2, 2), np.float32), ValueError, "x must have 1 or 2 dimension"),
    (np.zeros((2, 8), np.float16), TypeError, "x must have dtype"),
])
def test_bad_x_is_named(x, exc, match):
    with pytest.raises(exc, match=match):
        kernels.add_noise(x, 10.0)


def test_noise_scale_definition():
    assert noise.noise_scale(1.0, 0.0, False) == 1.0
    assert noise.noise_scale(4.0, 20.0, False) == pytest.approx(0.2)
    assert noise.noise_scale(2.0, 0.0, True) == pytest.approx(1.0)  # half the power per component
    assert noise.LANES == 256
