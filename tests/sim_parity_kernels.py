# SPDX-License-Identifier: Apache-2.0
"""Kernels that use what the CUDA target accepts and numba-cuda's simulator did not (see
``nvmath_device/_sim/_compat.py``): run under the simulator by ``tests/sim/test_sim_parity.py``
and compiled to sm_90 cubins by ``tests/cpu/test_sim_parity_links.py``, one source for both.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

# --- dynamic shared memory spelled shape=(0,) / shape=0 --------------------------------------


@cuda.jit
def reverse_tuple_shape(x, y):
    """y = x reversed within the block, through dynamic shared memory ``shape=(0,)``."""
    s = cuda.shared.array(shape=(0,), dtype=np.float32)
    i = cuda.threadIdx.x
    s[i] = x[i]
    cuda.syncthreads()
    y[i] = s[cuda.blockDim.x - 1 - i]


@cuda.jit
def reverse_positional_tuple(x, y):
    """As :func:`reverse_tuple_shape`, ``cuda.shared.array((0,), np.float32)``."""
    s = cuda.shared.array((0,), np.float32)
    i = cuda.threadIdx.x
    s[i] = x[i]
    cuda.syncthreads()
    y[i] = s[cuda.blockDim.x - 1 - i]


@cuda.jit
def reverse_keyword_zero(x, y):
    """As :func:`reverse_tuple_shape`, ``cuda.shared.array(shape=0, dtype=...)``."""
    s = cuda.shared.array(shape=0, dtype=np.float32)
    i = cuda.threadIdx.x
    s[i] = x[i]
    cuda.syncthreads()
    y[i] = s[cuda.blockDim.x - 1 - i]


@cuda.jit
def dynamic_arrays_alias(x, y):
    """Two dynamic shared arrays (``(0,)`` and ``0``) are one buffer: y[i] = 2 * x[i]."""
    a = cuda.shared.array((0,), dtype=np.float32)
    b = cuda.shared.array(0, dtype=np.float32)
    i = cuda.threadIdx.x
    a[i] = x[i]
    cuda.syncthreads()
    y[i] = 2 * b[i]


DYNAMIC_SHARED_KERNELS = (reverse_tuple_shape, reverse_positional_tuple, reverse_keyword_zero)

# --- cuda.jit options the simulator refused ------------------------------------------------


@cuda.jit(device=True, forceinline=True)
def axpb(x, a=2.0, b=0.0):
    """a * x + b (a device function with defaults, forced inline on the GPU)."""
    return a * x + b


@cuda.jit(lineinfo=True, launch_bounds=(32,), lto=True, link=[])
def options_kernel(x):
    """x[i] = 3 * x[i] + 1, with ``lineinfo``/``launch_bounds``/``lto``/``link=[]`` options."""
    i = cuda.threadIdx.x
    x[i] = axpb(x[i], 3.0, 1.0)


@cuda.jit(device=True, forceinline=True)
def forceinline_only(x):
    """x + 1."""
    return x + 1


@cuda.jit
def calls_forceinline(x):
    """x[i] += 1 through a ``forceinline=True`` device function."""
    i = cuda.threadIdx.x
    x[i] = forceinline_only(x[i])


# --- device functions called with keyword arguments ------------------------------------------


@cuda.jit
def keyword_call(x):
    """x[i] = 3 * x[i] + 1, the device function called with keywords out of order."""
    i = cuda.threadIdx.x
    x[i] = axpb(x[i], b=1.0, a=3.0)


@cuda.jit
def keyword_call_defaults(x):
    """x[i] = 2 * x[i] + 5: one keyword, one default."""
    i = cuda.threadIdx.x
    x[i] = axpb(x=x[i], b=5.0)


# --- r2c registers: the size is a Python int, computed outside the kernel ----------------------


def make_r2c_kernel(fft):
    """Block r2c kernel with real registers of ``2 * fft.storage_size`` elements, the size
    computed outside the kernel (numba types ``2 * fft.storage_size`` inside a kernel as a
    plain int64, which ``cuda.local.array`` refuses: shapes must be integer literals)."""
    n_real = 2 * fft.storage_size  # a Python int: a literal for numba, a size for the simulator

    @cuda.jit
    def r2c(x, y):
        r = cuda.local.array(n_real, dtype=fft.precision_type, alignment=16)
        smem = cuda.shared.array(0, dtype=fft.value_type)
        row = cuda.blockIdx.x * fft.ffts_per_block + cuda.threadIdx.y
        for i in range(fft.input_ept):
            idx = cuda.threadIdx.x + i * fft.stride
            if idx < fft.input_length:
                r[i] = x[row, idx]
        fft.execute(r, smem)
        for i in range(fft.output_ept):
            idx = cuda.threadIdx.x + i * fft.stride
            if idx < fft.output_length:
                y[row, idx] = r[2 * i] + 1j * r[2 * i + 1]

    return r2c


def readme_r2c_kernel(fft):
    """The README's spelling, ``cuda.local.array(2 * fft.storage_size, ...)`` inside the kernel:
    runs under the simulator, fails numba's typing (see :func:`make_r2c_kernel`)."""

    def r2c(x, y):
        r = cuda.local.array(2 * fft.storage_size, dtype=fft.precision_type, alignment=16)
        smem = cuda.shared.array(0, dtype=fft.value_type)
        row = cuda.blockIdx.x * fft.ffts_per_block + cuda.threadIdx.y
        for i in range(fft.input_ept):
            r[i] = x[row, cuda.threadIdx.x + i * fft.stride]
        fft.execute(r, smem)
        y[row, cuda.threadIdx.x] = r[0] + 1j * r[1]

    return r2c
