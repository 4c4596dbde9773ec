# SPDX-License-Identifier: Apache-2.0
"""User-style kernels and NumPy references shared by the CPU, simulator and GPU FFT tests."""

import numpy as np
from numba import cuda


def reference(fft, x):
    """float64 NumPy reference for a batch ``x`` (rows = FFTs), unnormalised like cuFFTDx."""
    n = fft.size
    if fft.fft_type == "c2c":
        x = x.astype(np.complex128)
        return np.fft.fft(x, axis=-1) if fft.direction == "forward" else np.fft.ifft(x, axis=-1) * n
    if fft.fft_type == "r2c":
        return np.fft.rfft(x.astype(np.float64), axis=-1)
    return np.fft.irfft(x.astype(np.complex128), n=n, axis=-1) * n


def random_input(fft, batch, rng):
    """Fresh random input of shape (batch, input_length) in fft.input_type (never zeros)."""
    if fft.fft_type == "c2r":
        sig = rng.standard_normal((batch, fft.size))
        return np.fft.rfft(sig, axis=-1).astype(fft.input_type)
    shape = (batch, fft.input_length)
    if fft.input_type.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(fft.input_type)
    return rng.standard_normal(shape).astype(fft.input_type)


def make_block_kernel(fft):
    """Kernel: FFT ``blockIdx.x * ffts_per_block + threadIdx.y`` of x -> y, cuFFTDx's Block layout."""
    real_in = fft.input_type.kind == "f"
    real_out = fft.output_type.kind == "f"
    s2 = 2 * fft.storage_size
    ept_in, ept_out = fft.input_ept, fft.output_ept
    len_in, len_out = fft.input_length, fft.output_length
    stride, fpb = fft.stride, fft.ffts_per_block_value
    prec = fft.precision_type

    @cuda.jit
    def kernel(x, y):
        r = cuda.local.array(s2, dtype=prec, alignment=16)
        smem = cuda.shared.array(0, dtype=prec)
        b = cuda.blockIdx.x * fpb + cuda.threadIdx.y
        for i in range(ept_in):
            idx = cuda.threadIdx.x + i * stride
            if idx < len_in:
                v = x[b, idx]
                if real_in:
                    r[i] = v.real
                else:
                    r[2 * i] = v.real
                    r[2 * i + 1] = v.imag
        fft.execute(r, smem)
        for i in range(ept_out):
            idx = cuda.threadIdx.x + i * stride
            if idx < len_out:
                if real_out:
                    y[b, idx] = r[i]
                else:
                    y[b, idx] = r[2 * i] + 1j * r[2 * i + 1]

    return kernel


def make_thread_kernel(fft):
    """Kernel: thread ``blockIdx.x * blockDim.x + threadIdx.x`` computes FFT of that row (Thread layout)."""
    real_in = fft.input_type.kind == "f"
    real_out = fft.output_type.kind == "f"
    s2 = 2 * fft.storage_size
    len_in, len_out = fft.input_length, fft.output_length
    prec = fft.precision_type

    @cuda.jit
    def kernel(x, y):
        r = cuda.local.array(s2, dtype=prec, alignment=16)
        b = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        if b >= x.shape[0]:
            return
        for i in range(len_in):
            v = x[b, i]
            if real_in:
                r[i] = v.real
            else:
                r[2 * i] = v.real
                r[2 * i + 1] = v.imag
        fft.execute(r)
        for i in range(len_out):
            if real_out:
                y[b, i] = r[i]
            else:
                y[b, i] = r[2 * i] + 1j * r[2 * i + 1]

    return kernel


def run_fft(fft, x, threads_per_block=64):
    """Run ``fft`` on every row of host array ``x``; returns the host result (outputs poisoned first)."""
    batch = x.shape[0]
    d_x = cuda.to_device(x)
    d_y = cuda.to_device(np.full((batch, fft.output_length), np.nan, dtype=fft.output_type))
    if fft.execution == "Block":
        fpb = fft.ffts_per_block_value
        assert batch % fpb == 0
        kernel = make_block_kernel(fft)
        kernel[batch // fpb, fft.block_dim, 0, fft.shared_memory_size](d_x, d_y)
    else:
        kernel = make_thread_kernel(fft)
        kernel[(batch + threads_per_block - 1) // threads_per_block, threads_per_block](d_x, d_y)
    return d_y.copy_to_host()
