# SPDX-License-Identifier: Apache-2.0
"""The building block of the FFT kernels: rows of segments -> FFT -> per-frequency work -> (inverse
FFT) -> rows, all in one kernel, written only against nvmath_device's public API.

A "row" is one FFT: signal ``b`` and segment ``s`` of it (``row = b * nseg + s``); the segment
starts at sample ``s * step - halo`` (samples outside ``[0, L)`` read as zero) and its outputs
``j >= halo`` land at ``s * step + j - halo``. Convolution: ``halo = 0, step = N, nseg = 1``;
overlap-save FIR: ``halo = M - 1, step = N - M + 1``.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from nvmath_device import FFT

from ._arrays import simulator


def _pair_descriptors(n, precision, real, ept, fpb, sm=None, folded=False):
    if sm is None and simulator():
        sm = 90  # the simulator uses sm_90's traits
    kw = dict(size=n, precision=precision, elements_per_thread=ept, ffts_per_block=fpb, sm=sm)
    if real:
        if folded:  # the real signal as complex pairs: cuFFTDx runs an n/2-point complex FFT
            kw["real_fft_options"] = {"complex_layout": "natural", "real_mode": "folded"}
        return FFT(fft_type="r2c", **kw), FFT(fft_type="c2r", **kw)
    return FFT(fft_type="c2c", direction="forward", **kw), FFT(fft_type="c2c", direction="inverse", **kw)


def prefetch(shapes) -> None:
    """Compute the traits of the FFT pairs for ``(n, precision, real)`` shapes in one NVRTC run."""
    from nvmath_device._codegen.fft_codegen import prefetch_traits

    prefetch_traits([d for n, p, r in shapes for d in _pair_descriptors(n, p, r, "suggested", "suggested")])


def can_fold(n: int) -> bool:
    """Whether a real FFT of size ``n`` can run folded (cuFFTDx: Block folded needs a power of 2)."""
    return n >= 4 and n & (n - 1) == 0


@functools.cache  # descriptors are frozen: build and resolve them once per process, not per call
def fft_pair(n: int, precision, real: bool, ept="suggested", fpb="suggested", folded=False):
    """Forward and inverse FFT descriptors of size ``n`` sharing one register layout.

    ``folded`` (real pairs, power-of-2 ``n``): registers hold the real signal as complex pairs
    ``(x[2k], x[2k + 1])`` at complex index ``k``, the spectrum in natural order.
    """
    sm = 90 if simulator() else None
    if n not in FFT.valid_sizes(precision, sm=sm):
        raise ValueError(
            f"FFT length {n} is not implemented by cuFFTDx without a workspace in "
            f"{np.dtype(precision).name}; use one of FFT.valid_sizes() (e.g. powers of 2 up to 4096)"
        )
    folded = bool(folded and real)
    if folded and not can_fold(n):
        raise ValueError(f"a folded real FFT needs a power-of-2 size >= 4, got {n}")
    fwd, inv = _pair_descriptors(n, precision, real, ept, fpb, folded=folded)
    layout = (fwd.elements_per_thread_value, fwd.ffts_per_block_value, fwd.stride)
    if (inv.elements_per_thread_value, inv.ffts_per_block_value, inv.stride) != layout:
        # pin the inverse to the forward's resolved layout
        inv = _pair_descriptors(n, precision, real, layout[0], layout[1], folded=folded)[1]
    return fwd, inv


@functools.cache
def filter_kernel(fwd: FFT, inv: FFT, real: bool, conj: bool):
    """x (B, L) -> y (B, L): y = segments of IFFT(FFT(segment) * H[(conj)]), H (N or N//2+1,)."""
    n = fwd.size
    stride, fpb = fwd.stride, fwd.ffts_per_block_value
    s2 = 2 * fwd.storage_size
    in_ept, mid_ept, out_ept = fwd.input_ept, fwd.output_ept, inv.output_ept
    nfreq = fwd.output_length
    prec = fwd.precision_type
    folded = real and fwd.real_fft_options["real_mode"] == "folded"

    @cuda.jit
    def kernel(x, h, y, nrows, nseg, step, halo):
        r = cuda.local.array(s2, dtype=prec, alignment=16)
        smem = cuda.shared.array(0, dtype=prec)
        tx = cuda.threadIdx.x
        row = cuda.blockIdx.x * fpb + cuda.threadIdx.y
        ok = row < nrows
        b = row // nseg
        start = (row - b * nseg) * step - halo
        length = x.shape[1]
        for i in range(in_ept):
            j = tx + i * stride
            if folded:  # complex index j holds the samples 2j and 2j + 1
                for p in range(2):
                    jj = 2 * j + p
                    tt = start + jj
                    r[2 * i + p] = x[b, tt].real if ok and jj < n and tt >= 0 and tt < length else 0
                continue
            t = start + j
            inside = ok and j < n and t >= 0 and t < length
            if real:
                r[i] = x[b, t].real if inside else 0
            else:
                v = x[b, t] if inside else 0j
                r[2 * i] = v.real
                r[2 * i + 1] = v.imag
        fwd.execute(r, smem)
        for i in range(mid_ept):
            k = tx + i * stride
            if k < nfreq:
                hv = h[k].conjugate() if conj else h[k]
                re = r[2 * i] * hv.real - r[2 * i + 1] * hv.imag
                im = r[2 * i] * hv.imag + r[2 * i + 1] * hv.real
                r[2 * i] = re
                r[2 * i + 1] = im
        cuda.syncthreads()
        inv.execute(r, smem)
        if ok:
            for i in range(out_ept):
                j = tx + i * stride
                t = start + j
                if folded:
                    for p in range(2):
                        jj = 2 * j + p
                        tt = start + jj
                        if jj >= halo and jj < n and tt < length:
                            y[b, tt] = r[2 * i + p]
                elif j >= halo and j < n and t < length:
                    if real:
                        y[b, t] = r[i]
                    else:
                        y[b, t] = r[2 * i] + 1j * r[2 * i + 1]

    return kernel


def launch_rows(kernel, fwd: FFT, nrows: int, stream, *args):
    """Launch ``kernel`` with one FFT row per ``threadIdx.y`` slot: enough blocks for ``nrows``."""
    fpb = fwd.ffts_per_block_value
    grid = max(1, (nrows + fpb - 1) // fpb)
    kernel[grid, fwd.block_dim, stream, fwd.shared_memory_size](*args)
