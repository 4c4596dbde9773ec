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


# ---------------------------------------------------------------------------------------------
# Helpers for real-FFT layouts, raw register dumps and the GPU/simulator cross-check (additive).


def layout_case(fft, batch, rng):
    """(x, expected) for any descriptor, built from a fresh real signal / complex input.

    Real FFTs follow cuFFTDx's complex layouts: "natural" (N//2 + 1 values), "packed" (N/2
    values, Nyquist real part in the imaginary part of value 0), "full" (N values); real_mode
    "folded" carries the real signal as complex pairs ``(x[2j], x[2j + 1])``. Inverse transforms
    are unnormalised. ``expected`` is float64/complex128 with fft.output_length columns.
    """
    if fft.fft_type == "c2c":
        x = random_input(fft, batch, rng)
        return x, reference(fft, x)
    n = fft.size
    layout = fft.real_fft_options["complex_layout"]
    folded = fft.real_fft_options["real_mode"] == "folded"
    sig = rng.standard_normal((batch, n))
    spec = np.fft.rfft(sig, axis=-1)
    if layout == "natural":
        lay = spec
    elif layout == "packed":
        lay = spec[:, : n // 2].copy()
        lay[:, 0] = spec[:, 0].real + 1j * spec[:, n // 2].real
    else:
        lay = np.fft.fft(sig, axis=-1)

    def as_pairs(real):
        return real[:, 0::2] + 1j * real[:, 1::2]

    if fft.fft_type == "r2c":
        x = as_pairs(sig) if folded else sig
        expected = lay
    else:
        x = lay
        expected = as_pairs(sig * n) if folded else sig * n
    assert x.shape[1] == fft.input_length and expected.shape[1] == fft.output_length
    return x.astype(fft.input_type), expected


def register_shape(fft, batch):
    """Shape of a raw register dump: Block (blocks, bdz, bdy, bdx, 2*storage); Thread (threads, 2*storage)."""
    s2 = 2 * fft.storage_size
    if fft.execution == "Block":
        fpb = fft.ffts_per_block_value
        assert batch % fpb == 0
        x, y, z = fft.block_dim
        return (batch // fpb, z, y, x, s2)
    return (batch, s2)


def register_input(fft, batch, rng):
    """Random registers (as ``precision``) for every thread, including registers outside the layout.

    c2r inputs must be Hermitian to be defined: there the registers of the layout (thread x,
    register i <-> element x + i * stride) get a spectrum from :func:`layout_case`; the other
    registers stay random, so a device that read them would disagree with the simulator.
    """
    regs = rng.standard_normal(register_shape(fft, batch)).astype(fft.precision_type)
    if fft.fft_type != "c2r":
        return regs
    x, _ = layout_case(fft, batch, rng)
    stride, ept, length = fft.stride, fft.input_ept, fft.input_length
    if fft.execution == "Block":
        nb, bz, by, bx, _ = regs.shape
        x = x.reshape(nb, bz, by, length)
        for t in range(bx):
            for i in range(ept):
                idx = t + i * stride
                if idx < length:
                    regs[:, :, :, t, 2 * i] = x[..., idx].real
                    regs[:, :, :, t, 2 * i + 1] = x[..., idx].imag
    else:
        for i in range(ept):
            regs[:, 2 * i] = x[:, i].real
            regs[:, 2 * i + 1] = x[:, i].imag
    return regs


def make_register_kernel(fft):
    """Kernel: load each thread's whole register array, ``execute``, store the whole array back."""
    s2 = 2 * fft.storage_size
    prec = fft.precision_type

    if fft.execution == "Block":

        @cuda.jit
        def kernel(rin, rout):
            r = cuda.local.array(s2, dtype=prec, alignment=16)
            smem = cuda.shared.array(0, dtype=prec)
            b, tx, ty, tz = cuda.blockIdx.x, cuda.threadIdx.x, cuda.threadIdx.y, cuda.threadIdx.z
            for i in range(s2):
                r[i] = rin[b, tz, ty, tx, i]
            fft.execute(r, smem)
            for i in range(s2):
                rout[b, tz, ty, tx, i] = r[i]

    else:

        @cuda.jit
        def kernel(rin, rout):
            r = cuda.local.array(s2, dtype=prec, alignment=16)
            t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
            if t >= rin.shape[0]:
                return
            for i in range(s2):
                r[i] = rin[t, i]
            fft.execute(r)
            for i in range(s2):
                rout[t, i] = r[i]

    return kernel


def run_registers(fft, regs, threads_per_block=32):
    """Run :func:`make_register_kernel` on host registers ``regs``; returns the registers after."""
    d_in = cuda.to_device(regs)
    d_out = cuda.to_device(np.full_like(regs, np.nan))
    kernel = make_register_kernel(fft)
    if fft.execution == "Block":
        kernel[regs.shape[0], fft.block_dim, 0, fft.shared_memory_size](d_in, d_out)
    else:
        n = regs.shape[0]
        kernel[(n + threads_per_block - 1) // threads_per_block, threads_per_block](d_in, d_out)
    return d_out.copy_to_host()


def crosscheck_run(folder, threads_per_block=32):
    """Run every case saved in ``folder`` (cases.pkl + NAME_x.npy + NAME_regs.npy) with this
    process's CUDA (GPU or simulator) and save NAME_y_<tag>.npy and NAME_regsout_<tag>.npy,
    tag "sim" under the simulator, else "gpu". Used by tests/gpu/test_fft_sim_crosscheck.py."""
    import os
    import pickle

    tag = "sim" if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0") else "gpu"
    with open(os.path.join(folder, "cases.pkl"), "rb") as f:
        cases = pickle.load(f)
    from nvmath_device._build.fft_codegen import prefetch_traits

    prefetch_traits([fft for _, fft in cases])  # one NVRTC run for the traits not cached yet
    for name, fft in cases:
        x = np.load(os.path.join(folder, f"{name}_x.npy"))
        regs = np.load(os.path.join(folder, f"{name}_regs.npy"))
        np.save(os.path.join(folder, f"{name}_y_{tag}.npy"), run_fft(fft, x, threads_per_block))
        np.save(os.path.join(folder, f"{name}_regsout_{tag}.npy"),
                run_registers(fft, regs, threads_per_block))
