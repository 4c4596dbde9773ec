# SPDX-License-Identifier: Apache-2.0
"""Batched small GEMMs (several per block) and a GEMM -> FFT fusion (beamforming), one kernel each."""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from nvmath_device import FFT, Matmul

from ._arrays import Operand, Output, resolve_stream, simulator

_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.complex64), np.dtype(np.complex128))


def _sm():
    return 90 if simulator() else None


def _gemm_descriptor(m, n, k, dtype, block_dim="suggested", sm=None):
    dtype = np.dtype(dtype)
    single = dtype in (np.dtype(np.float32), np.dtype(np.complex64))
    return Matmul(size=(m, n, k), precision=np.float32 if single else np.float64,
                  data_type="complex" if dtype.kind == "c" else "real",
                  arrangement=("row_major", "row_major", "row_major"), block_dim=block_dim, sm=sm or _sm())


@functools.cache
def _batched_kernel(mm: Matmul, per_block: int, use_c: bool):
    m, n, _ = mm.size
    a_off = mm.a_shared_memory_offset // mm.a_value_type.itemsize
    b_off = mm.b_shared_memory_offset // mm.b_value_type.itemsize
    c_off = mm.c_shared_memory_offset // mm.c_value_type.itemsize
    per = -(-mm.shared_memory_size // 16) * 16 // mm.c_value_type.itemsize  # values per GEMM slot
    a_size, b_size, c_size = mm.a_size, mm.b_size, mm.c_size
    vt = mm.c_value_type

    @cuda.jit
    def kernel(A, B, C, D, alpha, beta, batch):
        y = cuda.threadIdx.y
        g = cuda.blockIdx.x * per_block + y
        gg = g if g < batch else batch - 1  # idle slots redo the last GEMM and do not store it
        smem = cuda.shared.array(0, dtype=vt)
        base = y * per
        sa = smem[base + a_off:base + a_off + a_size]
        sb = smem[base + b_off:base + b_off + b_size]
        sc = smem[base + c_off:base + c_off + c_size]
        mm.load_a(A[gg], sa)
        mm.load_b(B[gg], sb)
        if use_c:
            mm.load_c(C[gg], sc)
        cuda.syncthreads()
        mm.execute(alpha, sa, sb, beta, sc)
        cuda.syncthreads()
        if g < batch:
            mm.store_c(sc, D[g])

    return kernel, per * vt.itemsize * per_block


def batched_gemm(a, b, *, c=None, alpha=1.0, beta=0.0, stream=None):
    """``alpha * a[i] @ b[i] + beta * c[i]`` for every i, several small GEMMs per block (cuBLASDx).

    Parameters
    ----------
    a : array, shape (batch, m, k)
        float32, float64, complex64 or complex128, C-contiguous; CuPy / PyTorch / Numba device
        arrays are used in place, NumPy arrays are copied to the GPU and back.
    b : array, shape (batch, k, n), same dtype and kind as ``a``
    c : array, shape (batch, m, n), optional
        Added with weight ``beta`` (required when ``beta != 0``); not modified.
    alpha, beta : scalars
    stream : optional
        As for :func:`kernels.fft_convolve`.

    Returns
    -------
    array, shape (batch, m, n): a new array of ``a``'s kind.

    Notes
    -----
    m, n, k up to what one block's shared memory holds (cuBLASDx's limits; an error names the
    size otherwise). Blocks of 256 threads hold ``256 // threads_per_gemm`` GEMMs.
    """
    ao = Operand("a", a, _DTYPES, (3,), None)
    bo = Operand("b", b, (ao.dtype,), (3,), None)
    batch, m, k = ao.shape
    if bo.shape[0] != batch or bo.shape[1] != k:
        raise ValueError(f"b must have shape (batch={batch}, k={k}, n), got {bo.shape}")
    n = bo.shape[2]
    if beta != 0 and c is None:
        raise ValueError("c is required when beta != 0")
    co = Operand("c", c, (ao.dtype,), (3,), None) if c is not None else None
    if co is not None and co.shape != (batch, m, n):
        raise ValueError(f"c must have shape {(batch, m, n)}, got {co.shape}")
    for name, v in (("alpha", alpha), ("beta", beta)):
        if not isinstance(v, (int, float, complex, np.number)) or isinstance(v, bool):
            raise TypeError(f"{name} must be a number, got {v!r}")
        if ao.dtype.kind != "c" and isinstance(v, complex):
            raise TypeError(f"{name} is complex but a is real ({ao.dtype.name})")
    s = resolve_stream(stream, ao)
    mm = _gemm_descriptor(m, n, k, ao.dtype)
    threads = mm.block_dim[0] * mm.block_dim[1] * mm.block_dim[2]
    per_block = max(1, 256 // threads)
    kernel, smem = _batched_kernel(mm, per_block, co is not None)
    out = Output((batch, m, n), ao.dtype, ao, s)
    cdev = co.dev if co is not None else out.dev
    scal = ao.dtype.type
    grid = max(1, -(-batch // per_block))
    kernel[grid, (threads, per_block, 1), s, smem](ao.dev, bo.dev, cdev, out.dev, scal(alpha), scal(beta), batch)
    return out.result(s)


@functools.cache
def _beamform_kernel(mm: Matmul, fft: FFT):
    beams, nsamp, _ = mm.size
    isz = mm.c_value_type.itemsize
    a_off, b_off, c_off = (mm.a_shared_memory_offset // isz, mm.b_shared_memory_offset // isz,
                           mm.c_shared_memory_offset // isz)
    a_size, b_size, c_size = mm.a_size, mm.b_size, mm.c_size
    fft_off = -(-mm.shared_memory_size // 16) * 16 // isz
    ept, stride, storage = fft.elements_per_thread_value, fft.stride, fft.storage_size
    vt = mm.c_value_type

    @cuda.jit
    def kernel(W, X, Y):
        b = cuda.blockIdx.x
        smem = cuda.shared.array(0, dtype=vt)
        sa = smem[a_off:a_off + a_size]
        sb = smem[b_off:b_off + b_size]
        sc = smem[c_off:c_off + c_size]
        mm.load_a(W, sa)
        mm.load_b(X[b], sb)
        cuda.syncthreads()
        mm.execute(1.0, sa, sb, 0.0, sc)            # beams x samples, row-major, in shared memory
        cuda.syncthreads()
        td = cuda.local.array(storage, dtype=vt)
        beam = cuda.threadIdx.y
        for i in range(ept):
            td[i] = sc[beam * nsamp + cuda.threadIdx.x + i * stride]
        fft.execute(td, smem[fft_off:])             # one FFT per beam, fused after the GEMM
        for i in range(ept):
            Y[b, beam, cuda.threadIdx.x + i * stride] = td[i]

    return kernel, fft_off * isz + fft.shared_memory_size


def beamform_spectra(x, weights, *, stream=None):
    """Beamforming then spectra in one kernel: ``fft(weights @ x[b], axis=-1)`` for every b.

    Parameters
    ----------
    x : array, shape (batch, channels, samples), complex64 or complex128
        ``samples`` a power of 2 from 32 to 1024.
    weights : array_like, shape (beams, channels)
        Beam weights; ``beams`` a power of 2 from 1 to 16 (one FFT per beam and block).

    Returns
    -------
    array, shape (batch, beams, samples): the beams' spectra, ``x``'s kind of array.
    """
    xo = Operand("x", x, (np.dtype(np.complex64), np.dtype(np.complex128)), (3,), None)
    batch, channels, nsamp = xo.shape
    w = np.asarray(weights.get() if hasattr(weights, "get") else weights).astype(xo.dtype)
    if w.ndim != 2 or w.shape[1] != channels:
        raise ValueError(f"weights must have shape (beams, channels={channels}), got {w.shape}")
    beams = w.shape[0]
    if beams < 1 or beams > 16 or beams & (beams - 1):
        raise ValueError(f"weights must have a power-of-2 number of beams from 1 to 16, got {beams}")
    if nsamp < 32 or nsamp > 1024 or nsamp & (nsamp - 1):
        raise ValueError(f"x must have a power-of-2 number of samples from 32 to 1024, got {nsamp}")
    s = resolve_stream(stream, xo)
    prec = np.float32 if xo.dtype == np.dtype(np.complex64) else np.float64
    fft = FFT(size=nsamp, precision=prec, direction="forward", elements_per_thread=8 if nsamp >= 256 else 4,
              ffts_per_block=beams, sm=_sm())
    mm = Matmul(size=(beams, nsamp, channels), precision=prec, data_type="complex",
                arrangement=("row_major", "row_major", "row_major"), block_dim=fft.block_dim, sm=_sm())
    kernel, smem = _beamform_kernel(mm, fft)
    from ._arrays import to_device_const

    wd = to_device_const(w, s)
    out = Output((batch, beams, nsamp), xo.dtype, xo, s)
    kernel[batch, fft.block_dim, s, smem](wd, xo.dev, out.dev)
    return out.result(s)
