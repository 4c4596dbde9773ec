# SPDX-License-Identifier: Apache-2.0
"""nvmath-python programs that mix vector values and complex numbers, under the simulator,
against NumPy; and the stores/operations kernels refuse, refused here too (TypeError).

Run: NUMBA_ENABLE_CUDASIM=1 python -m pytest -q tests/sim/test_nvmath_compat_vectors.py

On the GPU a two-element float vector (float16x2, float32x2, float64x2) converts to and from
complex (``thread_data[i] = float32x2(a, b)`` into a complex64 register array, as nvmath-python's
curand_cufftdx_block_fft example writes; ``regs[0] = x[t]``, a complex into a float32x2 array;
``v * v + 1`` as complex arithmetic); the simulator does the same. The programs are plain
factories so that tests/cpu/test_nvmath_compat_vectors.py links the same kernels for sm_90 and
checks that each refused store fails numba's CUDA typing as well.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from nvmath_device import (
    FFT,
    float16x2,
    float16x2_type,
    float32x2,
    float32x2_type,
    float32x4,
    float64x2_type,
)

THREADS = 32


def _random_complex(shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


# ---------------------------------------------------------------------------- programs
def make_fft_program(sm=None):
    """curand_cufftdx_block_fft's shape without the random numbers: each thread builds its
    elements as float32x2 values stored both into the global complex64 array and into the FFT's
    complex64 register array (one chained assignment), then ``fft(thread_data, smem)``; the
    result is scaled with complex arithmetic on the registers. (fft, kernel, grid). No ``sm``
    (nvmath-style: the current GPU, sm_90 under the simulator); tests/cpu passes ``sm=90``."""
    fft = FFT(fft_type="c2c", size=32, precision=np.float32, direction="forward", execution="Block",
              elements_per_thread=4, ffts_per_block=2, **({} if sm is None else {"sm": sm}))
    size, stride, ept, fpb = fft.size, fft.stride, fft.elements_per_thread, fft.ffts_per_block

    @cuda.jit(link=fft.files)
    def kernel(re, im, data, result):
        thread_data = cuda.local.array(fft.storage_size, dtype=fft.value_type)
        smem = cuda.shared.array(shape=(0,), dtype=fft.value_type)
        fft_id = cuda.blockIdx.x * fpb + cuda.threadIdx.y
        index = cuda.threadIdx.x
        for i in range(ept):
            data[fft_id, index] = thread_data[i] = float32x2(re[fft_id, index], im[fft_id, index])
            index += stride
        fft(thread_data, smem)
        index = cuda.threadIdx.x
        for i in range(ept):
            result[fft_id, index] = thread_data[i] / size
            index += stride

    return fft, kernel, 2


def run_fft_program(launch):
    fft, kernel, grid = make_fft_program()
    batch = grid * fft.ffts_per_block
    x = _random_complex((batch, fft.size), seed=1)
    data = np.zeros_like(x)
    result = np.zeros_like(x)
    re, im = np.ascontiguousarray(x.real), np.ascontiguousarray(x.imag)
    launch(kernel, grid, fft.block_dim, fft.shared_memory_size, re, im, data, result)
    return (data, result), (x, np.fft.fft(x, axis=1) / fft.size)


def make_vector_program():
    """The kernel function (made here: the compile step of tests.sim_kernels_compile pickles it
    by value, this module is not importable there)."""

    def vector_program(x, out):
        _vector_program(x, out)

    return vector_program


@cuda.jit(device=True)
def _vector_program(x, out):
    """Thread ``t``: a complex stored into a float32x2 register array, complex arithmetic on
    float32x2 values stored back into it, float16x2 values in shared memory (as nvmath-python's
    load_to_shared_1d_float16x2), and vectors stored into a complex64 global array."""
    t = cuda.threadIdx.x
    regs = cuda.local.array(2, dtype=float32x2_type)
    regs[0] = x[t]
    regs[1] = regs[0] * regs[0] + 1
    halves = cuda.shared.array(THREADS, dtype=float16x2_type)
    halves[t] = float16x2(x[t].real, x[t].imag)
    wide = cuda.local.array(1, dtype=float64x2_type)
    wide[0] = -regs[0] / 2
    cuda.syncthreads()
    out[t, 0] = regs[1]
    out[t, 1] = halves[(t + 1) % THREADS]
    out[t, 2] = wide[0]
    out[t, 3] = complex(regs[0]) * 1j
    out[t, 4] = abs(regs[0])


def run_vector_program(launch):
    x = _random_complex(THREADS, seed=2)
    out = np.zeros((THREADS, 5), np.complex64)
    launch(cuda.jit(make_vector_program()), 1, THREADS, 0, x, out)
    h = x.real.astype(np.float16).astype(np.float32) + 1j * x.imag.astype(np.float16).astype(np.float32)
    want = np.stack([x * x + 1, np.roll(h, -1), -x / 2, x * 1j, np.abs(x)], axis=1).astype(np.complex64)
    return out, want


# What kernels refuse (numba's CUDA typing; tests/cpu checks each), refused here at run time.
def store_real_into_vector(x, out):
    regs = cuda.local.array(1, dtype=float32x2_type)
    regs[0] = x[0].real  # a real number is no float32x2 (NumPy would copy it into .x and .y)
    out[0] = regs[0]


def store_other_vector_type(x, out):
    wide = cuda.local.array(1, dtype=float64x2_type)
    wide[0] = float32x2(x[0].real, x[0].imag)  # no conversion between vector types
    out[0] = wide[0]


def store_four_vector_into_complex(x, out):
    out[0] = float32x4(x[0].real, x[0].imag, 0, 0)  # only two-element float vectors are complex


MISUSE = {
    store_real_into_vector: r"cannot store float32 .* into an array of float32x2_type",
    store_other_vector_type: r"cannot store a float32x2 value into an array of float64x2_type",
    store_four_vector_into_complex: r"cannot store a float32x4 value into a complex64 array",
}


# ---------------------------------------------------------------------------- tests
def _launch(kernel, grid, block, smem, *args):
    from tests.harness import launch_guarded

    launch_guarded(kernel, grid, block, smem, *args)


def test_fft_program_stores_float32x2_into_complex_arrays():
    (data, result), (x, want) = run_fft_program(_launch)
    np.testing.assert_array_equal(data, x)
    np.testing.assert_allclose(result, want, rtol=1e-5, atol=1e-5)


def test_vector_program_converts_as_on_the_gpu():
    got, want = run_vector_program(_launch)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("fn", list(MISUSE), ids=lambda f: f.__name__)
def test_stores_kernels_refuse_are_type_errors(fn):
    x = _random_complex(2, seed=3)
    out = np.zeros(2, np.complex64)
    with pytest.raises(TypeError, match=MISUSE[fn]):
        _launch(cuda.jit(fn), 1, 1, 0, x, out)


def test_vector_values_are_read_only_and_only_two_float_vectors_do_arithmetic():
    def assign_element(out):
        v = float32x2(1.0, 2.0)
        v.x = 3.0
        out[0] = v

    def four_arithmetic(out):
        out[0] = float32x4(1.0, 2.0, 3.0, 4.0) * 2

    out = np.zeros(1, np.complex64)
    with pytest.raises(TypeError, match=r"float32x2.x is read-only"):
        _launch(cuda.jit(assign_element), 1, 1, 0, out)
    with pytest.raises(TypeError, match=r"float32x4 value does no arithmetic"):
        _launch(cuda.jit(four_arithmetic), 1, 1, 0, out)

    def four_complex(out):
        out[0] = complex(float32x4(1.0, 2.0, 3.0, 4.0))

    with pytest.raises(TypeError, match=r"float32x4 value does no arithmetic"):
        _launch(cuda.jit(four_complex), 1, 1, 0, out)


def test_host_values_do_complex_arithmetic():
    v = float32x2(1.0, 2.0)
    assert isinstance(v / 4, np.complex64) and v / 4 == np.complex64(0.25 + 0.5j)
    assert v * v == -3 + 4j and complex(v) == 1 + 2j and 1 - v == -2j and abs(v) == pytest.approx(5 ** 0.5)
    assert isinstance(float16x2(1, 2) * 2, np.complex64)
