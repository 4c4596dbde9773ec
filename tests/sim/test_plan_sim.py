# SPDX-License-Identifier: Apache-2.0
"""kernels.plan under the simulator: a plan of each kernels function gives, on new arrays, what
the function gives on them (the simulator has no fast launch to replay: the plan checks its
arguments and calls the function, the GPU suite checks the replay); device arrays among the
keyword arguments (``out=``) and several device inputs (device taps) are a call's arrays in
order; bad plans and calls are refused, named."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import kernels

rng = np.random.default_rng(11)


def _sig(shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _dev(a):
    return cuda.to_device(np.ascontiguousarray(a))


def _same(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


CASES = {
    "fft_convolve": (kernels.fft_convolve, lambda: ((_dev(_sig((3, 64), np.float32)), _sig(9, np.float64)), {})),
    "fir_device_taps": (kernels.fir_filter, lambda: ((_dev(_sig((2, 300), np.complex64)),
                                                      _dev(_sig(7, np.complex64))), {})),
    "matched_filter": (kernels.matched_filter, lambda: ((_dev(_sig((3, 64), np.complex64)), _sig(16, np.complex64)),
                                                        {"return_correlation": True})),
    "stft_power": (kernels.stft_power, lambda: ((_dev(_sig((2, 256), np.float32)), np.hanning(64), 32), {})),
    "batched_gemm": (kernels.batched_gemm, lambda: ((_dev(_sig((4, 16, 16), np.float32)),
                                                     _dev(_sig((4, 16, 16), np.float32))), {})),
    "beamform_spectra": (kernels.beamform_spectra, lambda: ((_dev(_sig((2, 4, 64), np.complex64)),
                                                             _sig((4, 4), np.complex64)), {})),
    "add_noise_out": (kernels.add_noise, lambda: ((_dev(_sig((2, 128), np.float32)), 10.0),
                                                  {"seed": 5, "out": _dev(np.zeros((2, 128), np.float32))})),
}


def _fresh(args, kwargs):
    """The same call with new device arrays of the same kinds (new data)."""
    new = tuple(_dev(_sig(a.shape, a.dtype)) if isinstance(a, cuda.simulator.cudadrv.devicearray.FakeCUDAArray)
                else a for a in args)
    newk = {k: (_dev(_sig(v.shape, v.dtype)) if isinstance(v, cuda.simulator.cudadrv.devicearray.FakeCUDAArray)
                else v) for k, v in kwargs.items()}
    return new, newk


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_plan_gives_what_the_function_gives_on_new_arrays(case):
    fn, make = CASES[case]
    args, kwargs = make()
    p = kernels.plan(fn, *args, **kwargs)
    assert not p.replayed and "calls the function" in repr(p)
    for _ in range(2):
        new, newk = _fresh(args, kwargs)
        arrays = [a for a in new if kernels._plan.on_device(a)] + [v for v in newk.values() if kernels._plan.on_device(v)]
        got = p(*arrays)
        if "out" in newk:  # the function writes out and returns it: compare with a second out
            assert got is arrays[-1]
            got = newk["out"].copy_to_host()
            newk = dict(newk, out=_dev(np.zeros(got.shape, got.dtype)))
            want = fn(*new, **newk).copy_to_host()
        else:
            want = fn(*new, **newk)
        _same(got, want)


def test_plan_names_its_arrays_by_parameter():
    x, h = _dev(_sig((2, 300), np.float32)), _dev(_sig(7, np.float32))
    out = _dev(np.zeros((2, 300), np.float32))
    assert kernels.plan(kernels.fir_filter, x, h).names == ["x", "taps"]
    assert kernels.plan(kernels.fir_filter, x, _sig(7, np.float32)).names == ["x"]  # host taps: fixed
    assert kernels.plan(kernels.add_noise, x, 3.0, out=out).names == ["x", "out"]


def test_bad_plans_are_refused():
    with pytest.raises(TypeError, match="needs at least one device array argument"):
        kernels.plan(kernels.fft_convolve, _sig((2, 64), np.float32), np.ones(3))
    with pytest.raises(TypeError, match="fn must be a kernels function, got int"):
        kernels.plan(3, _dev(np.ones(4)))
    with pytest.raises(ValueError, match="x must be C-contiguous"):
        kernels.plan(kernels.fft_convolve, _dev(np.ones((8, 64), np.float32))[:, :32], np.ones(3))


def test_bad_calls_are_named():
    x = _dev(_sig((3, 64), np.float32))
    p = kernels.plan(kernels.fft_convolve, x, np.ones(5))
    with pytest.raises(ValueError, match=r"x must match the planned array: numba float32 \(3, 64\).*got numba float32 \(3, 32\)"):
        p(_dev(_sig((3, 32), np.float32)))
    with pytest.raises(TypeError, match="x must be a device array like the planned one"):
        p(_sig((3, 64), np.float32))
    with pytest.raises(TypeError, match=r"takes 1 array\(s\) \(x\), got 0"):
        p()
