# SPDX-License-Identifier: Apache-2.0
"""nvmath-style ``sm=current_device_sm()`` under the simulator (cufftdx_autotuning's spelling):
without a GPU it is sm_90, what descriptors without ``sm=`` target here, so both spellings make
the same descriptor and the program runs (it raised DriverError)."""

import functools

import numpy as np
from numba import cuda

from nvmath_device import FFT, common_cuda, current_device_sm


def test_current_device_sm_is_what_descriptors_without_sm_target():
    gpu = common_cuda.current_device_cc()
    assert current_device_sm() == (common_cuda.ComputeCapability(9, 0) if gpu is None else gpu)
    base = functools.partial(FFT, fft_type="c2c", size=64, precision=np.float32, direction="forward",
                             execution="Block")
    assert base(sm=current_device_sm()).sm == base().sm


def make_autotuning_program(ept, fpb):
    base = functools.partial(FFT, fft_type="c2c", size=64, precision=np.float32, direction="forward",
                             execution="Block", sm=current_device_sm())
    fft = base(elements_per_thread=ept, ffts_per_block=fpb)

    @cuda.jit
    def kernel(x, y):
        thread_data = cuda.local.array(shape=(fft.storage_size,), dtype=fft.value_type)
        fft_id = cuda.blockIdx.x * fft.ffts_per_block + cuda.threadIdx.y
        index = cuda.threadIdx.x
        for i in range(fft.elements_per_thread):
            thread_data[i] = x[fft_id, index]
            index += fft.stride
        shared_mem = cuda.shared.array(shape=(0,), dtype=fft.value_type)
        fft.execute(thread_data, shared_mem)
        index = cuda.threadIdx.x
        for i in range(fft.elements_per_thread):
            y[fft_id, index] = thread_data[i]
            index += fft.stride

    return fft, kernel


def test_autotuning_program_over_two_valid_knobs():
    base = FFT(fft_type="c2c", size=64, precision=np.float32, direction="forward", execution="Block",
               sm=current_device_sm())
    knobs = base.valid("elements_per_thread", "ffts_per_block")
    assert len(knobs) >= 2
    rng = np.random.default_rng(4)
    for ept, fpb in (knobs[0], knobs[-1]):
        fft, kernel = make_autotuning_program(ept, fpb)
        assert (fft.elements_per_thread, fft.ffts_per_block) == (ept, fpb)
        x = (rng.standard_normal((2 * fpb, 64)) + 1j * rng.standard_normal((2 * fpb, 64))).astype(np.complex64)
        y = np.zeros_like(x)
        kernel[2, fft.block_dim, 0, fft.shared_memory_size](x, y)
        np.testing.assert_allclose(y, np.fft.fft(x, axis=1), rtol=1e-4, atol=1e-4)
