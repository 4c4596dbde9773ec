# SPDX-License-Identifier: Apache-2.0
"""float16 FFTs (two FFTs per complex<__half2> value) and the shared-memory form of real FFTs on
a real GPU (sm_90, an H200), against numpy.fft in float64 of the same (float16-rounded) input.

The kernels are the simulator suite's (tests/sim/test_fft_fp16_sim.py); outputs start as NaN,
so an element the kernel leaves unwritten fails the test.
"""

import numpy as np
import pytest
from numba import cuda

from nvmath_device import FFT
from tests.sim.test_fft_fp16_sim import FP16_BLOCK, FP16_THREAD, SHARED, TOL_GPU, run_case

pytestmark = pytest.mark.gpu

SM = 90
TOL = {np.float16: TOL_GPU, np.float32: 1e-5, np.float64: 1e-12}

# beyond the simulator's small cases: larger sizes, cuFFTDx's suggestions
MORE_BLOCK = [
    dict(size=s, fft_type=t, direction=d)
    for s in (32, 256, 512)
    for t, d in (("c2c", "forward"), ("c2c", "inverse"), ("r2c", None), ("c2r", None))
]
MORE_THREAD = [dict(size=s, fft_type="c2c", direction="forward") for s in (2, 32, 64)] + [
    dict(size=s, fft_type=t) for s in (32, 64) for t in ("r2c", "c2r")
]


def _gpu_launch(kernel, grid, block, smem, x, y):
    x_d = cuda.to_device(x)
    y_d = cuda.to_device(y)
    kernel[grid, block, 0, smem](x_d, y_d)
    cuda.synchronize()
    y[...] = y_d.copy_to_host()


def _check(fft, form, blocks=3, seed=0):
    err = run_case(fft, form, blocks, np.random.default_rng(seed), _gpu_launch)
    assert err < TOL[fft.precision], f"{fft}: relative error {err:.2e}"


@pytest.mark.parametrize("kw", [kw for _, kw in FP16_BLOCK] + MORE_BLOCK)
def test_fp16_block_gpu(kw):
    _check(FFT(precision=np.float16, sm=SM, **kw), "block")


@pytest.mark.parametrize("kw", [kw for _, kw in FP16_THREAD] + MORE_THREAD)
def test_fp16_thread_gpu(kw):
    _check(FFT(precision=np.float16, execution="Thread", sm=SM, **kw), "thread")


@pytest.mark.parametrize("kw", [kw for _, kw in SHARED], ids=[i for i, _ in SHARED])
def test_shared_memory_form_gpu(kw):
    _check(FFT(sm=SM, **kw), "shared")


@pytest.mark.parametrize("prec", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("ft", ["r2c", "c2r"])
def test_shared_memory_form_real_suggested_gpu(prec, ft):
    fpb = 2 if prec is np.float16 else 1
    _check(FFT(size=256, precision=prec, fft_type=ft, ffts_per_block=fpb, sm=SM), "shared")
