# SPDX-License-Identifier: Apache-2.0
"""Matched filtering with a fused peak search, and STFT power spectrograms — one kernel each."""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from mathdx_operands import on_device, resolve_stream, simulator
from nvmath_device import FFT, load_complex, store_complex

from ._arrays import Operand, Output, host_numbers
from ._consts import to_device_const
from ._fused import (
    aligned,
    can_fold,
    copy_1d,
    device_spectrum,
    fft_pair,
    jit,
    launch_rows,
    pairs_ok,
)
from ._regfft import RegFFT

_REAL = (np.dtype(np.float32), np.dtype(np.float64))
_COMPLEX = (np.dtype(np.complex64), np.dtype(np.complex128))


@functools.cache
def _matched_kernel(fwd: FFT, inv: FFT, keep: bool):
    n, stride, fpb = fwd.size, fwd.stride, fwd.ffts_per_block_value
    bx = fwd.block_dim[0]
    ept, storage, vt = fwd.elements_per_thread_value, fwd.storage_size, fwd.value_type
    prec = fwd.precision_type
    czero = np.dtype(vt).type(0)  # typed: a bare 0 would make the load complex128

    half = 1  # the tree's first step: half the row's threads, rounded up to a power of 2
    while 2 * half < bx:
        half *= 2
    exact = ept * stride == n  # every register holds an element: no per-element bounds tests
    nthreads = fwd.block_dim[0] * fwd.block_dim[1] * fwd.block_dim[2]
    # our FFT with rows of at most one warp (whole warps per block): the warp's barrier between
    # the two FFTs and the row's peak by shuffles, no shared memory or block barrier
    wsync = isinstance(fwd, RegFFT) and fwd.warp_sync

    @jit(nthreads)
    def kernel(x, tspec, corr, peak_idx, peak_val, nrows):
        td = cuda.local.array(storage, dtype=vt)
        tv = cuda.local.array(ept, dtype=vt)
        smem = cuda.shared.array(0, dtype=vt)
        best_v = cuda.shared.array((fpb, bx), dtype=prec)
        best_i = cuda.shared.array((fpb, bx), dtype=np.int32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row = cuda.blockIdx.x * fpb + ty
        ok = row < nrows
        # a block's rows past the batch compute on its last row (never stored): unpredicated
        # loads, no zeroing of the registers first (one instruction per value)
        src = row if ok else nrows - 1
        for i in range(ept):
            j = tx + i * stride
            td[i] = load_complex(x, (src, j)) if exact or j < n else czero
        fwd.execute(td, smem)
        # the template spectrum after the FFT: loaded before it, it stayed live through it (half
        # the registers; 163 per thread on sm_90), all loads first so they are in flight together
        for i in range(ept):
            j = tx + i * stride
            tv[i] = load_complex(tspec, j) if exact or j < n else czero
        for i in range(ept):
            if exact or tx + i * stride < n:
                td[i] = td[i] * tv[i].conjugate()
        if wsync:
            cuda.syncwarp()
        else:
            cuda.syncthreads()
        inv.execute(td, smem)
        # per-thread peak of |c|^2, then the row's peak (lowest index wins ties). The thread keeps
        # the register number of its peak (a constant per unrolled step: one 32-bit select per
        # value, where the element index had taken a 64-bit add and two selects)
        bv = prec.type(-1.0)
        bk = np.int32(0)
        for i in range(ept):
            j = tx + i * stride
            if exact or j < n:
                p = td[i].real * td[i].real + td[i].imag * td[i].imag
                if p > bv:
                    bv = p
                    bk = np.int32(i)
                if keep and ok:
                    store_complex(corr, (row, j), td[i])
        bi = np.int32(tx + bk * stride)  # (int32 + int32 is int64 in numba)
        if wsync:  # lane tx + d holds the row's thread tx + d while tx + d < bx
            d = half
            while d > 0:
                w = cuda.shfl_down_sync(0xFFFFFFFF, bv, d)
                k = cuda.shfl_down_sync(0xFFFFFFFF, bi, d)
                if tx + d < bx and (w > bv or (w == bv and k < bi)):
                    bv = w
                    bi = k
                d //= 2
        else:  # tree over the row's threads in shared memory: log2(bx) steps instead of one thread's bx - 1
            best_v[ty, tx] = bv
            best_i[ty, tx] = bi
            d = half
            while d > 0:
                cuda.syncthreads()
                if tx < d and tx + d < bx:
                    w = best_v[ty, tx + d]
                    k = best_i[ty, tx + d]
                    if w > bv or (w == bv and k < bi):
                        bv = w
                        bi = k
                        best_v[ty, tx] = bv
                        best_i[ty, tx] = bi
                d //= 2
        if tx == 0 and ok:
            peak_idx[row] = bi
            peak_val[row] = bv

    return kernel


@functools.cache
def _template_spectrum(n, cdt):
    """``template -> fft(template, n) / n`` as ``cdt`` (one function per shape: a cache key), computed
    in complex128 whatever the template's dtype (NumPy 2's FFT of a float32 template is complex64:
    a float64 signal's correlation then lost 7e-9 of relative accuracy, found by the fuzz test)."""
    return lambda t: (np.fft.fft(np.asarray(t, np.complex128), n) / n).astype(cdt)


def matched_filter(x, template, *, return_correlation=False, stream=None):
    """Circular cross-correlation of each row of ``x`` with ``template`` and its peak, fused.

    ``c[b, k] = sum_j x[b, (j + k) % n] * conj(template[j])`` (``= ifft(fft(x) * conj(fft(t)))``);
    the kernel also finds ``argmax_k |c[b, k]|**2`` per row without writing ``c`` (unless asked).

    Parameters
    ----------
    x : array, shape (batch, n) or (n,)
        complex64/complex128, or float32/float64 (computed as complex). Array kinds and ``n``:
        as for :func:`kernels.fft_convolve`.
    template : array_like, shape (m,), m <= n
        Host template (NumPy, list): its spectrum is computed on the host once and kept on the
        device for later calls. Device template (CuPy, PyTorch, Numba): its spectrum is computed
        on the device by one small kernel on ``stream`` at every call, with no copy to the host
        and no synchronisation.
    return_correlation : bool
        Also return the full correlation (complex, shape of ``x``).

    Returns
    -------
    (peak_index, peak_power) or (peak_index, peak_power, correlation): int32 and real arrays of
    shape (batch,), the caller's kind of array.
    """
    xo = Operand("x", x, _REAL + _COMPLEX, (1, 2), None)
    s = resolve_stream(stream, xo)
    precision = np.float32 if xo.dtype in (np.dtype(np.float32), np.dtype(np.complex64)) else np.float64
    cdt = np.dtype(np.complex64 if precision is np.float32 else np.complex128)
    n = xo.shape[-1]
    t = _host_or_device("template", template, _REAL + _COMPLEX)
    if len(t.shape) != 1 or t.shape[0] == 0 or t.shape[0] > n:
        raise ValueError(f"template must be a 1-D array of 1..{n} samples, got shape {t.shape}")
    if not isinstance(return_correlation, bool):
        raise TypeError(f"return_correlation must be a bool, got {return_correlation!r}")
    x2 = xo.dev.reshape(1, n) if len(xo.shape) == 1 else xo.dev
    if xo.dtype in _REAL:  # promote on the device side of the copy: one extra pass, documented
        x2 = _to_complex(x2, cdt, xo, s)
    x2 = aligned(x2, xo, s)  # complex values move as single accesses
    batch = x2.shape[0]
    fwd, inv = _fft_pair("x", n, precision, False, kernel="matched_filter", rows=batch)
    if isinstance(t, Operand):  # a device template: its spectrum on the device, on s
        tspec = device_spectrum(fwd, t.dev, xo, s)
    else:
        tspec = to_device_const(t, s, _template_spectrum(n, np.dtype(cdt)))
    corr = Output((batch, n) if return_correlation else (1, 1), cdt, xo, s)
    pidx = Output((batch,), np.int32, xo, s)
    pval = Output((batch,), np.dtype(precision), xo, s)
    launch_rows(_matched_kernel(fwd, inv, return_correlation), fwd, batch, s, x2, tspec, corr.dev, pidx.dev,
                pval.dev, batch)
    out = [pidx.result(s), pval.result(s)]
    if return_correlation:
        out.append(corr.result(s, xo.shape))
    return tuple(out)


def _host_or_device(name, obj, dtypes):
    """A device array as an :class:`Operand` (left on the device), anything else as a NumPy
    array of ``dtypes``' kinds (TypeError naming ``name`` otherwise)."""
    if on_device(obj):
        return Operand(name, obj, dtypes, (1, 2, 3), None)
    kinds = "biu" + "".join(sorted({d.kind for d in dtypes}))
    return host_numbers(name, obj, kinds, " or ".join(d.name for d in dtypes) + " values")


def _fft_pair(name, n, precision, real, folded=False, *, kernel, rows=None):
    """:func:`kernels._fused.fft_pair` of function ``kernel`` on ``rows`` rows, its ValueError
    naming the argument whose length ``n`` is."""
    try:
        return fft_pair(n, precision, real, folded=folded, kernel=kernel, rows=rows)
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None


def _to_complex(x, cdt, like, stream):
    if simulator():
        return np.asarray(x).astype(cdt)
    y = Output(x.shape, cdt, like, stream).dev
    copy_1d(x.reshape(x.size), y.reshape(y.size), stream)
    return y


@functools.cache
def _stft_kernel(fft: FFT, pairs: bool = False):
    """x (B, L) -> out (B, frames, nfft // 2 + 1): |rfft(frame * w)|^2.

    Folded descriptors load the frame as sample pairs: with ``pairs`` (see
    :func:`kernels._fused.pairs_ok`) ``x`` and ``w`` are viewed as complex (B, L/2) and (nfft/2,)
    and ``hop`` counts pairs, else the pairs are read sample by sample.
    """
    n, stride, fpb = fft.size, fft.stride, fft.ffts_per_block_value
    s2 = 2 * fft.storage_size
    in_ept, out_ept, nfreq = fft.input_ept, fft.output_ept, fft.output_length
    prec = fft.precision_type
    rzero = np.dtype(prec).type(0)  # typed: a bare 0 would make the sum float64
    folded = fft.real_fft_options["real_mode"] == "folded"
    n2 = n // 2
    cdt = fft.value_type
    # thread tx < stride holds input j = tx + i * stride: every j is inside the frame when the
    # threads' places end at its end; output k = tx + i * stride is inside the spectrum for every
    # i below full_out (the later ones test k), so the unrolled loops test only where they must
    exact_in = in_ept * stride <= (n2 if pairs or folded else n)
    full_out = nfreq // stride
    # float32 frames moved as pairs at 32 values per thread (nfft 512-2048): without a cap the
    # compiler takes 70-72 registers, 7 blocks of 128 threads per SM; at 64 nothing spills (sm_90
    # cubins; at 4096 points 8 bytes spilled). Elsewhere the compiler picks: a cap raised the
    # small kernels' registers and made the sample-by-sample ones at 1024 points spill 8 bytes.
    own = isinstance(fft, RegFFT)  # our FFT (cuFFTDx's, where ours declines: not measured under a cap)
    cap = 64 if own and pairs and prec == np.float32 and fft.elements_per_thread_value >= 32 and n <= 2048 else None

    @jit(fft.block_dim[0] * fft.block_dim[1] * fft.block_dim[2], cap)
    def kernel(x, w, out, nrows, nframes, hop):
        r = cuda.local.array(s2, dtype=prec, alignment=16)
        smem = cuda.shared.array(0, dtype=cdt)
        tx = cuda.threadIdx.x
        row = cuda.blockIdx.x * fpb + cuda.threadIdx.y
        ok = row < nrows
        b = row // nframes
        f = row - b * nframes
        for i in range(in_ept):
            j = tx + i * stride
            if pairs:  # complex index j holds the samples 2j and 2j + 1 (frame and window)
                if ok and (exact_in or j < n2):
                    v = load_complex(x, (b, f * hop + j))
                    wv = load_complex(w, j)
                    r[2 * i] = v.real * wv.real
                    r[2 * i + 1] = v.imag * wv.imag
                else:
                    r[2 * i] = rzero
                    r[2 * i + 1] = rzero
            elif folded:
                for p in range(2):
                    jj = 2 * j + p
                    r[2 * i + p] = x[b, f * hop + jj] * w[jj] if ok and (exact_in or jj < n) else rzero
            else:
                r[i] = x[b, f * hop + j] * w[j] if ok and (exact_in or j < n) else rzero
        fft.execute(r, smem)
        if ok:
            for i in range(out_ept):
                k = tx + i * stride
                if i < full_out or k < nfreq:
                    out[b, f, k] = r[2 * i] * r[2 * i] + r[2 * i + 1] * r[2 * i + 1]

    return kernel


def stft_power(x, window, hop, *, stream=None):
    """Power spectrogram ``|rfft(x[b, f*hop : f*hop + nfft] * window)|**2``, one kernel.

    Parameters
    ----------
    x : array, shape (batch, L) or (L,), float32/float64
    window : array_like, shape (nfft,)
        Real window (e.g. ``numpy.hanning(nfft)``); ``nfft`` must be in ``FFT.valid_sizes()``.
        A host window is kept on the device for later calls; a device window (CuPy, PyTorch,
        Numba; float32/float64) is read in place, converted on the device (on ``stream``) when
        its dtype differs from ``x``'s; never copied to the host.
    hop : int
        Samples between frames, >= 1.

    Returns
    -------
    array, shape (batch, frames, nfft // 2 + 1) (or (frames, nfft // 2 + 1) for 1-D ``x``),
    with ``frames = 1 + (L - nfft) // hop``; the caller's kind of array.
    """
    xo = Operand("x", x, _REAL, (1, 2), None)
    s = resolve_stream(stream, xo)
    w = _host_or_device("window", window, _REAL)
    if len(w.shape) != 1 or w.shape[0] == 0:
        raise ValueError(f"window must be a non-empty real 1-D array, got shape {w.shape}")
    nfft = w.shape[0]
    if isinstance(hop, bool) or not isinstance(hop, (int, np.integer)) or hop < 1:
        raise ValueError(f"hop must be an int >= 1, got {hop!r}")
    length = xo.shape[-1]
    if length < nfft:
        raise ValueError(f"x has {length} samples, fewer than one frame of len(window) = {nfft}")
    precision = np.float32 if xo.dtype == np.dtype(np.float32) else np.float64
    folded = can_fold(nfft)
    fft, _ = _fft_pair("window", nfft, precision, True, folded, kernel="stft_power")
    hop = int(hop)
    nframes = 1 + (length - nfft) // hop
    batch = 1 if len(xo.shape) == 1 else xo.shape[0]
    out = Output((batch, nframes, nfft // 2 + 1), xo.dtype, xo, s)
    xd, cols = xo.dev, length
    if isinstance(w, Operand):  # a device window stays there (converted there to x's dtype)
        wd = w.dev
        if simulator():
            wd = np.asarray(wd).astype(xo.dtype)
        elif w.dtype != xo.dtype:
            wd = Output((nfft,), xo.dtype, xo, s).dev
            copy_1d(w.dev, wd, s)
    else:
        wd = w.astype(xo.dtype)
    pairs = pairs_ok(True, folded, nfft, length, hop, 0, xd, *(() if isinstance(wd, np.ndarray) else (wd,)))
    if pairs:  # frames as complex sample pairs (viewed before the reshape), window likewise
        cdt = np.complex64 if precision is np.float32 else np.complex128
        xd, wd, hop, cols = xd.view(cdt), wd.view(cdt), hop // 2, length // 2
    if isinstance(wd, np.ndarray) and not isinstance(w, Operand):
        wd = to_device_const(wd, s)
    launch_rows(_stft_kernel(fft, pairs), fft, batch * nframes, s, xd.reshape(batch, cols), wd, out.dev,
                batch * nframes, nframes, hop)
    return out.result(s, (nframes, nfft // 2 + 1) if len(xo.shape) == 1 else None)
