# SPDX-License-Identifier: Apache-2.0
"""White Gaussian noise at a given SNR, added in one kernel: the normals are drawn in registers by
cuRAND's Philox4_32_10 (``nvmath_device.random``) and never stored.

The stream of random numbers (so that a user can reproduce it, e.g. with
``nvmath_device._random_math`` on the host or cuRAND's ``curand_init`` / ``curand_normal4``):

- one generator state per *lane*, ``LANES = 256`` lanes per row: lane ``t`` of row ``r`` is
  ``curand_init(seed, subsequence=r * 256 + t, offset=0)`` of Philox4_32_10 (``r`` counts from
  ``add_noise``'s ``row_offset``, 0 by default: a block of rows cut from a larger array gets the
  larger array's noise);
- the row's samples are cut into *groups* of ``G`` consecutive samples (float32: 4, complex64: 2,
  float64: 2, complex128: 1); group ``g`` belongs to lane ``g % 256`` and is the lane's
  ``g // 256``-th draw: ``curand_normal4`` (float32, complex64) or ``curand_normal2_double``
  (float64, complex128);
- real samples take the draw's values in order (``x, y, z, w``); complex samples take them in pairs
  as (real, imaginary): sample ``2k`` of a complex64 group gets ``(x, y)``, ``2k + 1`` gets ``(z, w)``;
  values past the row's end are discarded.

These depend on nothing but the seed and the row length: not on the launch (blocks per row) or
the stream.

Rows are processed by one block of 256 threads (the lanes) each when there are many; a few long
rows are split into several blocks per row (each lane's state started at its first draw with the
offset argument of ``curand_init``), which gives the same numbers. The power of such rows is
measured by a first kernel (partial sums per block), else in the noise kernel itself.
"""

from __future__ import annotations

import functools
import math
import numbers
import operator
import sys

import numpy as np
from numba import cuda, float32, float64

from mathdx_operands import on_device, resolve_stream, simulator
from nvmath_device import memory, random

from ._arrays import Operand, Output
from ._fused import jit
from ._launch import launch

LANES = 256  # threads per block = generator states per row (fixed: it defines the random stream)
_REAL = (np.dtype(np.float32), np.dtype(np.float64))
_COMPLEX = (np.dtype(np.complex64), np.dtype(np.complex128))
_SEED_MAX = 2**64 - 1


def noise_scale(power: float, snr_db: float, complex_: bool) -> float:
    """The standard deviation each normal is multiplied by, computed as the kernel does (float64):
    ``sqrt(power * 10**(-snr_db / 10))`` for real samples, that times ``sqrt(1/2)`` for complex
    ones (the real and imaginary parts each carry half of the noise power). float32 rows use it
    rounded to float32."""
    return math.sqrt(power * 10.0 ** (-snr_db / 10.0)) * (math.sqrt(0.5) if complex_ else 1.0)


def _state_type():
    """The type of one Philox4_32_10 state for ``cuda.local.array``: the states array's NumPy
    dtype under the simulator, the numba type a compiled kernel gives ``states[i]`` otherwise
    (numba-cuda's ``typeof`` of a ``StatesPhilox4_32_10`` object; no memory is allocated)."""
    cls = random.StatesPhilox4_32_10
    if simulator():
        return cls(1).dtype
    from numba.cuda.typing.typeof import typeof

    return typeof(cls.__new__(cls)).dtype


# The kernels name it as ``_this.PHILOX_STATE`` (a module attribute, resolved when a kernel is
# typed), not through a closure: a kernel recorded under the simulator and compiled for sm_90
# elsewhere then gets the compiled type.
PHILOX_STATE = _state_type()
_this = sys.modules[__name__]


@cuda.jit(device=True)
def _sum_of_squares(x, r, start, stop, t):
    """The float64 sum of squares of ``x[r, start:stop]`` (``|v|**2`` of complex values: a pair
    view counts both of its values), by the block's ``LANES`` threads (thread ``t`` takes
    ``start + t``, ``start + t + LANES``, ...) and a tree in shared memory; every thread of the
    block calls it and gets the total."""
    sums = cuda.shared.array(LANES, float64)
    acc = 0.0
    for j in range(start + t, stop, LANES):
        v = x[r, j]
        re, im = float64(v.real), float64(v.imag)
        acc += re * re + im * im
    sums[t] = acc
    cuda.syncthreads()
    s = LANES // 2
    while s > 0:
        if t < s:
            sums[t] += sums[t + s]
        cuda.syncthreads()
        s //= 2
    return sums[0]


@cuda.jit(device=True)
def _row_sigma(x, r, t, part, power, inv_snr, scale, nsamples, chunks):
    """The noise's standard deviation for row ``r`` (see :func:`noise_kernel`): ``power`` when it
    is >= 0, else the row's power measured by the block (``chunks == 1``: every thread of the
    block must call this) or summed from the ``chunks`` partial sums in ``part``."""
    p = power
    if power < 0.0:
        if chunks == 1:  # the row's sum of squares, in float64
            p = _sum_of_squares(x, r, 0, x.shape[1], t) / nsamples
        else:
            acc = 0.0
            for i in range(chunks):
                acc += part[r * chunks + i]
            p = acc / nsamples
    return math.sqrt(p * inv_snr) * scale


@cuda.jit(device=True)
def _draw_range(ngroups, c, chunks):
    """(first, last): the lane draws block ``c`` of a row's ``chunks`` blocks makes."""
    draws = (ngroups + LANES - 1) // LANES
    per = (draws + chunks - 1) // chunks
    first = c * per
    return first, min(first + per, draws)


@functools.cache
def noise_kernel(double: bool):
    """The kernel for float32 (``double=False``) or float64 rows: ``kernel(x, y, part, power,
    inv_snr, scale, nsamples, seed, chunks, row0)`` on the 2-D real arrays ``x``/``y`` (complex rows as
    interleaved (real, imaginary) values), ``LANES`` threads per block, ``rows * chunks`` blocks:
    block ``b`` makes draws ``[c * per, (c + 1) * per)`` of every lane of row ``b // chunks``
    (``c = b % chunks``, ``per = ceil(draws per lane / chunks)``), its states started at that draw
    (``offset = 4 * c * per``: normal4 and normal2_double each take one Philox block of 4 words),
    so the noise does not depend on ``chunks``. The noise is ``sqrt(p * inv_snr) * scale * normal``
    (``scale``: 1, or sqrt(1/2) for complex rows) with ``p = power`` when ``power >= 0``, else the
    row's sum of squares / ``nsamples``: measured here when ``chunks == 1``, else the sum of the
    row's ``chunks`` partial sums in ``part`` (:func:`power_kernel`). Row ``r`` of ``x`` draws
    the stream of row ``row0 + r`` (lanes ``(row0 + r) * LANES + t``)."""
    group = 2 if double else 4

    @jit(LANES)
    def kernel(x, y, part, power, inv_snr, scale, nsamples, seed, chunks, row0):
        r = cuda.blockIdx.x // chunks
        c = cuda.blockIdx.x % chunks
        t = cuda.threadIdx.x
        n = x.shape[1]
        sigma = _row_sigma(x, r, t, part, power, inv_snr, scale, nsamples, chunks)
        ngroups = (n + group - 1) // group
        first, last = _draw_range(ngroups, c, chunks)
        if first >= last:
            return
        st = cuda.local.array(1, _this.PHILOX_STATE)
        random.init(seed, (row0 + r) * LANES + t, 4 * first, st[0])
        if double:
            for k in range(first, last):
                g = k * LANES + t
                if g < ngroups:
                    v = random.normal2_double(st[0])
                    j = 2 * g
                    y[r, j] = x[r, j] + sigma * v.x
                    if j + 1 < n:
                        y[r, j + 1] = x[r, j + 1] + sigma * v.y
        else:
            sigma32 = float32(sigma)
            for k in range(first, last):
                g = k * LANES + t
                if g < ngroups:
                    v = random.normal4(st[0])
                    j = 4 * g
                    y[r, j] = x[r, j] + sigma32 * v.x
                    if j + 1 < n:
                        y[r, j + 1] = x[r, j + 1] + sigma32 * v.y
                    if j + 2 < n:
                        y[r, j + 2] = x[r, j + 2] + sigma32 * v.z
                    if j + 3 < n:
                        y[r, j + 3] = x[r, j + 3] + sigma32 * v.w

    return kernel


@functools.cache
def pair_noise_kernel(double: bool):
    """:func:`noise_kernel`'s arithmetic and random stream on rows viewed as *pairs* of values
    (``x``/``y``: complex64 views of float32 rows, complex128 views of float64 rows; a row of an
    even number of values, each row's data aligned to the pair size), so that every access is
    one 8- or 16-byte ``load_complex``/``store_complex``; and with the next draw's values loaded
    before the current draw's normals are computed, so that the load latency hides behind the
    Philox and Box-Muller arithmetic. A group is 2 pairs (float32) or 1 pair (float64). Every
    value of a group is read before any of it is written, so ``y`` may be ``x``."""
    group = 1 if double else 2  # pairs per group
    zero = np.complex128(0) if double else np.complex64(0)  # typed: no complex128 detour for float32

    @jit(LANES)
    def kernel(x, y, part, power, inv_snr, scale, nsamples, seed, chunks, row0):
        r = cuda.blockIdx.x // chunks
        c = cuda.blockIdx.x % chunks
        t = cuda.threadIdx.x
        m = x.shape[1]  # pairs per row
        sigma = _row_sigma(x, r, t, part, power, inv_snr, scale, nsamples, chunks)
        ngroups = (m + group - 1) // group
        nfull = m // group  # groups with all their pairs in the row
        first, last = _draw_range(ngroups, c, chunks)
        if first >= last:
            return
        st = cuda.local.array(1, _this.PHILOX_STATE)
        random.init(seed, (row0 + r) * LANES + t, 4 * first, st[0])
        k = first
        g = k * LANES + t
        a = b = a0 = a1 = b0 = b1 = zero
        if double:
            if g < nfull:
                a = memory.load_complex(x, (r, g))
            while k < last and g < nfull:
                v = random.normal2_double(st[0])
                gn = g + LANES
                if k + 1 < last and gn < nfull:
                    b = memory.load_complex(x, (r, gn))
                memory.store_complex(y, (r, g), complex(a.real + sigma * v.x, a.imag + sigma * v.y))
                a = b
                k += 1
                g = gn
        else:
            s32 = float32(sigma)
            if g < nfull:
                a0 = memory.load_complex(x, (r, 2 * g))
                a1 = memory.load_complex(x, (r, 2 * g + 1))
            while k < last and g < nfull:
                v = random.normal4(st[0])
                gn = g + LANES
                if k + 1 < last and gn < nfull:
                    b0 = memory.load_complex(x, (r, 2 * gn))
                    b1 = memory.load_complex(x, (r, 2 * gn + 1))
                memory.store_complex(y, (r, 2 * g), complex(a0.real + s32 * v.x, a0.imag + s32 * v.y))
                memory.store_complex(y, (r, 2 * g + 1), complex(a1.real + s32 * v.z, a1.imag + s32 * v.w))
                a0 = b0
                a1 = b1
                k += 1
                g = gn
            if k < last and g < ngroups:  # the row's last group holds one pair (float32 only)
                v = random.normal4(st[0])
                a0 = memory.load_complex(x, (r, 2 * g))
                memory.store_complex(y, (r, 2 * g), complex(a0.real + s32 * v.x, a0.imag + s32 * v.y))

    return kernel


@functools.cache
def power_kernel():
    """``kernel(x, part, chunks)``: block ``b`` writes the float64 sum of squares of its slice
    (``c = b % chunks`` of ``chunks`` equal slices) of row ``b // chunks`` to ``part[b]``."""

    @jit(LANES)
    def kernel(x, part, chunks):
        r = cuda.blockIdx.x // chunks
        c = cuda.blockIdx.x % chunks
        t = cuda.threadIdx.x
        n = x.shape[1]
        size = (n + chunks - 1) // chunks
        total = _sum_of_squares(x, r, c * size, min(n, (c + 1) * size), t)
        if t == 0:
            part[cuda.blockIdx.x] = total

    return kernel


#: Blocks add_noise aims at: about 8 waves of resident 256-thread blocks on an H200 (132 SMs, 6 of
#: the noise kernel's blocks each at 40 registers a thread), so the last, partial wave costs little.
#: Measured on the H200 (1024 rows of 2**17 float32): one block per row (1024 blocks, 1.3 waves)
#: ran at 59 % of the memory floor.
BLOCKS = 8192
#: Fewest draws per lane in a block: each block starts its states and loads its first values
#: before any arithmetic can hide them.
MIN_DRAWS = 8


def chunks_for(rows: int, nvalues: int, double: bool, blocks: int = BLOCKS) -> int:
    """Blocks per row: enough for about ``blocks`` blocks in all, each making at least
    ``MIN_DRAWS`` draws per lane (a row of 256 * MIN_DRAWS groups or fewer stays one block);
    1 when there are ``blocks`` rows or more. The noise does not depend on it."""
    group = 2 if double else 4
    groups = (nvalues + group - 1) // group
    draws = (groups + LANES - 1) // LANES
    return max(1, min(draws // MIN_DRAWS, (blocks + max(rows, 1) - 1) // max(rows, 1)))


def _real_number(name, value, *, minimum=None):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _bounded_int(name: str, value, top: int, shown: str) -> int:
    """``value`` as an int in ``[0, top]``, or a TypeError / ValueError naming ``name`` and the range."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer from 0 to {shown}, got {type(value).__name__}")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer from 0 to {shown}, got {type(value).__name__}") from None
    if not 0 <= value <= top:
        raise ValueError(f"{name} must be an integer from 0 to {shown}, got {value}")
    return value


def _seed(seed) -> int:
    return _bounded_int("seed", seed, _SEED_MAX, "2**64 - 1")


_ROW_OFFSET_MAX = 2**48


def _row_offset(value) -> int:
    return _bounded_int("row_offset", value, _ROW_OFFSET_MAX, "2**48")


def add_noise(x, snr_db, *, seed=0, signal_power=None, out=None, row_offset=0, stream=None, _chunks=None):
    """``x`` plus white Gaussian noise at ``snr_db`` decibels, in one kernel (two for a few long
    rows whose power is measured).

    Each row gets noise of power ``P / 10**(snr_db / 10)``, where ``P`` is the row's mean
    ``|x|**2`` measured in the same kernel (float64 sums), or ``signal_power`` when given (then
    ``x`` is read once). Real samples get ``N(0, sigma**2)``, complex samples circular noise
    (real and imaginary parts each ``N(0, sigma**2 / 2)``). The normals are cuRAND's Philox4_32_10
    draws made in registers; which draw lands on which sample is fixed by ``seed`` and the row
    length alone (the module's docstring spells it out), so a seed reproduces the noise: bit for
    bit from run to run on one GPU, and under the simulator to the device's float math (its
    Box-Muller uses the hardware ``__sincosf``: float32 values agree to ~2e-5 relative, float64
    to ~1e-12; the raw Philox bits are identical).

    Parameters
    ----------
    x : array, shape (batch, n) or (n,)
        float32/float64/complex64/complex128. CuPy, PyTorch and Numba device arrays are used in
        place; NumPy arrays are copied to the GPU and back.
    snr_db : real number
        Signal-to-noise ratio in dB (finite).
    seed : int, optional
        Philox seed, 0 to 2**64 - 1 (default 0).
    signal_power : real number >= 0, optional
        The signal power to use for every row instead of measuring it.
    out : array, optional
        Where to write the result: same shape, dtype and kind of array as ``x``, C-contiguous
        (``x`` itself is allowed: each sample is read before it is written). Default: a new array.
    row_offset : int, optional
        Index of ``x``'s first row in a larger array (0 to 2**48, default 0): row ``r`` gets the
        noise of row ``row_offset + r``, so blocks of rows noised separately get the same noise
        as the whole array in one call.
    stream : optional
        Numba/CuPy/PyTorch stream, ``__cuda_stream__`` object or raw handle; default: the current
        stream of ``x``'s package. No synchronisation for GPU arrays.

    Returns
    -------
    ``out``, or a new array of ``x``'s kind, dtype and shape.
    """
    # every scalar and ``out`` checked before x is touched (a NumPy x is copied to the device)
    snr = _real_number("snr_db", snr_db)
    seed = _seed(seed)
    row0 = _row_offset(row_offset)
    power = -1.0 if signal_power is None else _real_number("signal_power", signal_power, minimum=0.0)
    s = None if stream is None else resolve_stream(stream, None)  # a given stream: checked now
    oo = None
    if out is not None and on_device(out) != on_device(x):
        raise TypeError("out must be the same kind of array as x (both on the device or both NumPy), "
                        f"got {type(out).__name__} for x of {type(x).__name__}")
    if out is not None and not on_device(out):
        if not isinstance(out, np.ndarray) or not out.flags.writeable:
            raise TypeError(f"out must be a writable NumPy array for a NumPy x, got {type(out).__name__}")
        xd, xs = np.dtype(getattr(x, "dtype", np.asarray(x).dtype)), tuple(np.shape(x))
        if out.dtype != xd:
            raise TypeError(f"out must have x's dtype {xd.name}, got {out.dtype.name}")
        if out.shape != xs:
            raise ValueError(f"out must have x's shape {xs}, got {out.shape}")
    xo = Operand("x", x, _REAL + _COMPLEX, (1, 2), None)
    if out is not None and on_device(out):
        oo = Operand("out", out, (xo.dtype,), (len(xo.shape),), None)
        if oo.shape != xo.shape:
            raise ValueError(f"out must have x's shape {xo.shape}, got {oo.shape}")
    if s is None:  # the default: the current stream of x's package
        s = resolve_stream(None, xo)
    batch, n = (1, xo.shape[0]) if len(xo.shape) == 1 else xo.shape
    if out is not None and on_device(out):
        ydev, result = oo.dev, None
    else:
        result = Output((batch, n), xo.dtype, xo, s)
        ydev = result.dev
    if batch * n:
        cplx = xo.dtype in _COMPLEX
        real_t = np.float64 if xo.dtype in (np.dtype(np.float64), np.dtype(np.complex128)) else np.float32
        xr, yr = xo.dev.reshape(batch, n), ydev.reshape(batch, n)
        if cplx:  # interleaved (real, imaginary) rows of 2n values
            xr, yr = xr.view(real_t), yr.view(real_t)
        double = real_t is np.float64
        nvalues = 2 * n if cplx else n
        chunks = chunks_for(batch, nvalues, double) if _chunks is None else int(_chunks)
        split = power < 0.0 and chunks > 1  # the power first, in partial sums per block
        part = Output((batch * chunks if split else 1,), np.float64, xo, s).dev
        kernel = noise_kernel(double)
        pair_t = np.dtype(np.complex128 if double else np.complex64)
        if nvalues % 2 == 0 and (simulator() or (xr.ptr % pair_t.itemsize == 0 and yr.ptr % pair_t.itemsize == 0)):
            xr, yr, kernel = xr.view(pair_t), yr.view(pair_t), pair_noise_kernel(double)  # 8/16-byte accesses
        if split:
            launch(power_kernel(), batch * chunks, LANES, s, 0, xr, part, np.int64(chunks))
        launch(kernel, batch * chunks, LANES, s, 0, xr, yr, part, power, 10.0 ** (-snr / 10.0),
               math.sqrt(0.5) if cplx else 1.0, float(n), np.uint64(seed), np.int64(chunks), np.int64(row0))
    if result is None:
        return out
    y = result.result(s, xo.shape)
    if out is not None:  # a NumPy out
        np.copyto(out, y)
        return out
    return y
