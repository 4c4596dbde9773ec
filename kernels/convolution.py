# SPDX-License-Identifier: Apache-2.0
"""FFT convolution and overlap-save FIR filtering, each one fused kernel."""

from __future__ import annotations

import functools

import numpy as np

from mathdx_operands import on_device, resolve_stream

from . import _direct
from ._arrays import Operand, Output, host_numbers
from ._consts import to_device_const
from ._fused import (
    aligned,
    can_fold,
    device_spectrum,
    fft_pair,
    filter_kernel,
    launch_rows,
    pairs_ok,
)

_REAL = (np.dtype(np.float32), np.dtype(np.float64))
_COMPLEX = (np.dtype(np.complex64), np.dtype(np.complex128))


def _precision(dtype):
    return np.float32 if dtype in (np.dtype(np.float32), np.dtype(np.complex64)) else np.float64


def _spectrum(taps, n, real, precision):
    """Filter spectrum scaled by 1/n (cuFFTDx's inverse is unnormalised), computed once on the host."""
    spec = np.fft.rfft(taps, n=n) if real else np.fft.fft(taps, n=n)
    return (spec / n).astype(np.complex64 if precision is np.float32 else np.complex128)


@functools.cache
def _spectrum_maker(n, real, precision):
    """``taps -> _spectrum(taps, ...)`` for one (n, real, precision): one function object per
    shape, so the device-constant cache can key on it."""
    return functools.partial(_spectrum, n=n, real=real, precision=precision)


def _taps(name, h, real, precision, max_len):
    """The taps: a float64/complex128 NumPy array, or an Operand of device taps (left on the
    device: their spectrum is computed there, see :func:`_run`)."""
    if on_device(h):
        ho = Operand(name, h, _REAL + _COMPLEX, (1,), None)
        size, cplx = ho.shape[0], ho.dtype in _COMPLEX
    else:
        h = host_numbers(name, h)
        if h.ndim != 1:
            raise ValueError(f"{name} must be a non-empty 1-D array, got shape {h.shape}")
        size, cplx = h.size, np.iscomplexobj(h)
    if size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape (0,)")
    if real and cplx:
        raise TypeError(f"{name} must be real for a real signal, got a complex dtype")
    if size > max_len:
        raise ValueError(f"{name} has {size} taps; at most {max_len} fit this FFT length")
    if on_device(h):
        return ho
    return h.astype(np.float64 if real else np.complex128)


def _ntaps(taps) -> int:
    """len(taps) of host or device taps, without copying device taps."""
    if on_device(taps):
        shape = tuple(taps.shape)
        return shape[0] if len(shape) == 1 else 0
    try:
        return int(np.size(taps)) if np.ndim(taps) == 1 else 0
    except (TypeError, ValueError):  # np.size of a ragged list: _taps names the argument
        return 0


def fft_convolve(x, h, *, method="auto", stream=None):
    """Circular convolution of every row of ``x`` with the filter ``h``, in one kernel.

    ``y[b] = ifft(fft(x[b]) * fft(h, n))`` with ``n = x.shape[-1]``: load, forward FFT, multiply,
    inverse FFT and store happen in registers and shared memory of one kernel (``method="fft"``),
    or, for short real filters on float32 rows, the same sums computed directly
    (``method="direct"``, see below).

    Parameters
    ----------
    x : array, shape (batch, n) or (n,)
        float32/float64 (real FFTs, r2c/c2r) or complex64/complex128 (c2c). CuPy, PyTorch and
        Numba device arrays are used in place; NumPy arrays are copied to the GPU and back.
        For the FFT kernel ``n`` must be a size cuFFTDx implements without a workspace
        (``FFT.valid_sizes()``; every power of 2 from 2 to 4096 is); for ``method="direct"`` a
        multiple of 64 up to 8192.
    h : array_like, shape (m,), m <= n
        Filter taps, real for real ``x``. Host taps (NumPy, lists): their spectrum is computed
        on the host once and kept on the device for later calls with the same taps. Device
        taps (CuPy, PyTorch, Numba; float32/float64/complex64/complex128, C-contiguous) stay
        on the device: their spectrum is computed there by one small kernel on ``stream`` at
        every call (their content may change between calls), with no copy to the host and no
        synchronisation.
    method : {"auto", "fft", "direct"}
        As ``scipy.signal.convolve``'s. ``"fft"``: the FFT kernel above. ``"direct"``:
        ``y[b, t] = sum_k h[k] x[b, (t - k) mod n]`` summed in one kernel with no FFT (a fast
        FIR: the two-parallel algorithm, nested from 65 taps on where that takes fewer instructions, 0.56-0.77
        multiply-adds per tap and output from 16 taps on; the taps are kernel parameters, so
        each tap count compiles its own kernel on first use, 8-16 s); float32 ``x`` with rows
        of a multiple of 64 samples up to 8192 (any such length, not only FFT sizes), host
        taps, at most 128 of them. ``"auto"`` (default): ``"direct"`` where it runs and was
        measured faster than the FFT kernel (up to 64 taps, rows of >= 1024 samples; 512 with
        <= 32 taps), else ``"fft"``. On the H200, 65536 rows of 4096 samples and 63 taps: 0.71
        ms direct (the kernel before its nesting and paired shared-memory accesses, which took
        its instructions from 2360 to 1744 per thread and are not timed yet), 0.95 ms FFT
        (benchmarks/RESULTS.md, ``benchmarks/conv_methods.py``).
    stream : optional
        Numba/CuPy/PyTorch stream, ``__cuda_stream__`` object or raw handle; default: the current
        stream of ``x``'s package. No synchronisation for GPU arrays.

    Returns
    -------
    Same kind, dtype and shape as ``x``.
    """
    _check_method(method)
    xo = Operand("x", x, _REAL + _COMPLEX, (1, 2), None)
    real = xo.dtype in _REAL
    n = xo.shape[-1]
    precision = _precision(xo.dtype)
    taps = _taps("h", h, real, precision, n)
    if convolve_method(method, n, taps, xo.dtype) == "direct":
        return _run_direct(xo, taps, n, stream)
    return _run(xo, taps, n, real, precision, halo=0, stream=stream, conj=False, fn_name="fft_convolve")


def _check_method(method):
    if not isinstance(method, str) or method not in ("auto", "fft", "direct"):
        raise ValueError(f"method must be 'auto', 'fft' or 'direct', got {method!r}")


def convolve_method(method, n, taps, dtype) -> str:
    """The kernel :func:`fft_convolve` runs, "fft" or "direct", for ``method``, rows of ``n``
    samples of ``dtype`` and ``taps`` (as :func:`_taps` returns them); ValueError naming the
    argument when ``method="direct"`` cannot run."""
    _check_method(method)
    if method == "fft":
        return "fft"
    m = _ntaps(taps)
    why = _direct.unsupported(n, m, dtype, on_device(taps) or isinstance(taps, Operand))
    if method == "direct":
        if why is not None:
            raise ValueError(f"method='direct': {why}")
        return "direct"
    return "direct" if why is None and _direct.faster(n, m) else "fft"


def _run_direct(xo, taps, n, stream, linear=False):
    """``method="direct"`` (:mod:`kernels._direct`): float32 rows of ``n`` samples, host taps;
    fft_convolve's circular convolution, or fir_filter's causal filtering (``linear``)."""
    s = resolve_stream(stream, xo)
    batch = 1 if len(xo.shape) == 1 else xo.shape[0]
    y = Output((batch, n), xo.dtype, xo, s)
    if batch * n:
        seg, nseg = _direct.segments(n) if linear else (n, 0)
        xd, yd = xo.dev.reshape(batch * n), y.dev.reshape(batch * n)
        xp = aligned(xd.view(np.complex64), xo, s)  # y is ours: aligned
        _direct.convolve(xp, xd, yd.view(np.complex64), batch * max(nseg, 1), seg, taps, s, nseg=nseg)
    return y.result(s, xo.shape)


def fir_filter(x, taps, *, fft_size=None, method="auto", stream=None):
    """FIR-filter long signals: ``y[b, t] = sum_k taps[k] * x[b, t - k]``.

    Same as ``scipy.signal.lfilter(taps, 1, x, axis=-1)``; one kernel: by overlap-save
    (``method="fft"``), one FFT per segment of ``fft_size - len(taps) + 1`` output samples, or
    by direct summation (``method="direct"``).

    Parameters
    ----------
    x : array, shape (batch, L) or (L,)
        float32/float64 or complex64/complex128 (see :func:`fft_convolve` for the array kinds).
    taps : array_like, shape (M,)
        Host or device taps, as ``h`` of :func:`fft_convolve`.
    fft_size : int, optional
        Segment FFT length of ``method="fft"``: a power of 2 with ``fft_size >= 2 * M``
        (default: the smallest power of 2 >= max(64, 4 * M), capped at 4096).
    method : {"auto", "fft", "direct"}
        ``"fft"``: overlap-save as above. ``"direct"``: the sums computed in one kernel with no
        FFT, as :func:`fft_convolve`'s ``"direct"`` (the fast FIR of ``kernels._direct``, each
        tap count compiling its own kernel on first use, up to ~16 s), for float32 ``x`` with
        rows of a multiple of 64 samples (any length), host taps, at most 128 of them, no
        ``fft_size``. ``"auto"`` (default): ``"fft"`` (the direct kernel is not yet measured
        against it on a GPU).
    stream : optional
        As for :func:`fft_convolve`.
    """
    _check_method(method)
    xo = Operand("x", x, _REAL + _COMPLEX, (1, 2), None)
    real = xo.dtype in _REAL
    precision = _precision(xo.dtype)
    m = _ntaps(taps)
    if method == "direct":
        _no_fft_size(fft_size)
        taps = _taps("taps", taps, real, precision, float("inf"))  # the count: fir_method's
        fir_method(method, xo.shape[-1], taps, xo.dtype)  # raises where "direct" cannot run
        return _run_direct(xo, taps, xo.shape[-1], stream, linear=True)
    if fft_size is None:
        fft_size = 64
        while fft_size < 4 * m and fft_size < 4096:
            fft_size *= 2
    if (isinstance(fft_size, bool) or not isinstance(fft_size, (int, np.integer)) or fft_size < 2
            or fft_size > 4096 or fft_size & (fft_size - 1)):
        raise ValueError(f"fft_size must be a power of 2 from 2 to 4096, got {fft_size!r}")
    if fft_size < 2 * m:
        raise ValueError(f"fft_size={fft_size} must be at least 2 * len(taps) = {2 * m}")
    taps = _taps("taps", taps, real, precision, fft_size // 2)
    return _run(xo, taps, int(fft_size), real, precision, halo=m - 1, stream=stream, conj=False,
                fn_name="fir_filter")


def _no_fft_size(fft_size):
    """fir_filter's ``method="direct"`` takes no ``fft_size`` (overlap-save's segment length)."""
    if fft_size is not None:
        raise ValueError(f"fft_size={fft_size!r} is method='fft''s segment length; method='direct' takes none")


def fir_method(method, length, taps, dtype) -> str:
    """The kernel :func:`fir_filter` runs for ``method``, rows of ``length`` samples of
    ``dtype`` and ``taps`` (host or device): ``"fft"`` or ``"direct"``; ``"auto"`` is
    ``"fft"`` (the direct kernel not yet measured against it). ValueError naming the argument
    where ``method="direct"`` cannot run."""
    _check_method(method)
    if method != "direct":
        return "fft"
    why = _direct.unsupported(length, _ntaps(taps), dtype, on_device(taps) or isinstance(taps, Operand),
                              linear=True)
    if why is not None:
        raise ValueError(f"method='direct': {why}")
    return "direct"


def _run(xo, taps, n, real, precision, *, halo, stream, conj, fn_name):
    s = resolve_stream(stream, xo)
    folded = real and can_fold(n)
    try:
        fwd, inv = fft_pair(n, precision, real, folded=folded, kernel=fn_name)
    except ValueError as e:
        raise ValueError(f"x: rows of {n} samples: {e}" if halo == 0 else f"fft_size: {e}") from None
    if isinstance(taps, Operand):  # device taps: the spectrum on the device, on s
        spec = device_spectrum(fwd, taps.dev, xo, s)
    else:
        spec = to_device_const(taps, s, _spectrum_maker(n, real, precision))
    batch, length = (1, xo.shape[0]) if len(xo.shape) == 1 else xo.shape
    step = n - halo
    nseg = -(-length // step)
    y = Output((batch, length), xo.dtype, xo, s)
    if batch * nseg == 0:  # nothing to compute (and no segment to divide rows among)
        return y.result(s, xo.shape)
    xd, yd, cols = xo.dev, y.dev, length
    pairs = pairs_ok(real, folded, n, length, step, halo, xd, yd)
    if pairs:  # real rows as complex sample pairs (viewed before any reshape); positions count pairs
        cdt = np.complex64 if precision is np.float32 else np.complex128
        xd, yd, step, halo, cols = xd.view(cdt), yd.view(cdt), step // 2, halo // 2, length // 2
    flat = halo == 0 and nseg == 1 and length == n and (pairs or not folded)
    # flat (whole rows): 1-D views, no per-element bounds tests
    x2, y2 = (xd.reshape(xd.size), yd.reshape(yd.size)) if flat else (xd.reshape(batch, cols), yd.reshape(batch, cols))
    x2 = aligned(x2, xo, s)  # y2 and spec are ours: aligned
    kernel = filter_kernel(fwd, inv, real, conj, pairs, flat)
    launch_rows(kernel, fwd, batch * nseg, s, x2, spec, y2, batch * nseg, nseg, step, halo)
    return y.result(s, xo.shape)
