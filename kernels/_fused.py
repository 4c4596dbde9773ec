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

from mathdx_operands import simulator
from nvmath_device import FFT, load_complex, store_complex

from . import _regfft
from ._arrays import Output
from ._launch import launch
from ._regfft import SIZES, RegFFT
from ._regfft import pair as own_pair


def _pair_descriptors(n, precision, real, ept, fpb, sm=None, folded=False):
    if sm is None and simulator():
        sm = 90  # the simulator uses sm_90's traits
    kw = dict(size=n, precision=precision, elements_per_thread=ept, ffts_per_block=fpb, sm=sm)
    if real:
        if folded:  # the real signal as complex pairs: cuFFTDx runs an n/2-point complex FFT
            kw["real_fft_options"] = {"complex_layout": "natural", "real_mode": "folded"}
        return FFT(fft_type="r2c", **kw), FFT(fft_type="c2r", **kw)
    return FFT(fft_type="c2c", direction="forward", **kw), FFT(fft_type="c2c", direction="inverse", **kw)


FFT_CONFIGS: dict = {
    # matched_filter, 65536 rows of 1024 complex64 (H200, fused_kernels.py --fft-configs, 2026-12-02):
    # 0.381 ms at (16, 1) vs 0.435 ms at the suggested (32, 2); the FFT pair alone is faster at
    # (32, 2) (161 vs 149 M pairs/s), the kernel around it is not.
    ("matched_filter", 1024, "float32", False, False): (16, 1),
}
"""``(elements_per_thread, ffts_per_block)`` of a kernels function's FFT pair, by
``(function name, n, precision name, real, folded)``, where a measured configuration replaces
cuFFTDx's suggestion (absent: the suggestion). ``benchmarks/fused_kernels.py --fft-configs``
times every valid configuration of each case's FFT in the case's own kernel; an entry goes here
only with that run's figures in the commit that adds it. Keyed by function: the same FFT's best
configuration differs between kernels (the work around the FFT changes register pressure)."""


OWN_FFT_EPT: dict = {
    # matched_filter, 65536 rows of 1024 complex64 (H100, fused_kernels.py --cases matched
    # [--own-fft-ept 32], 2026-12-06, one run each on one machine): 0.279 ms at 16 values per
    # thread (64 threads per row, 62 registers) -> 0.254 ms at 32 (one warp per row: two passes
    # and one exchange per FFT instead of three and two; sm_90: 121.9 K -> 95.0 K instructions
    # per row, 101 registers, no local memory). Few rows take longer at 32: one warp per row runs
    # the FFT's 95 K instructions on 32 threads, 16 values per thread on 64 (H100, plan calls,
    # GPU time per call: 8 rows 6.9 -> 4.5 us at 16, 512 rows 8.1 -> 6.2), hence a row floor. From
    # 4096 rows 32 was the faster again (same H100 session, plan calls back to back, us per call at
    # 16 / 32: 4096 rows 21.1 / 19.0, 8192 40.5 / 39.9, 16384 72.6 / 69.2); 1024 and 2048 rows were
    # bound by the host's enqueue there (~18 us either way), so the floor may lie lower.
    ("matched_filter", 1024, "float32", False, False): (32, 4096),
}
"""``(elements per thread, from rows)`` of a kernels function's FFT pair from
:mod:`kernels._regfft`, by the key of :data:`FFT_CONFIGS`: where the call has at least ``from
rows`` rows (or does not say), a measured count that replaces :func:`kernels._regfft.default_ept`'s
(absent, or fewer rows: its choice). Not used where ``kernels._regfft.EPT`` is set
(``fused_kernels.py --own-fft-ept``) or the caller gives a count; an entry goes here only with the
timing that shows it, beside the default's."""


OWN_FFT_FUNCTIONS = frozenset({"fft_convolve", "fir_filter", "matched_filter", "stft_power", "beamform_spectra"})
"""Every function that can run :mod:`kernels._regfft`'s FFT."""

OWN_FFT: set = set(OWN_FFT_FUNCTIONS)
"""Functions (``kernel`` names of :func:`fft_pair`: "fft_convolve", "fir_filter",
"matched_filter", "stft_power"; and "beamform_spectra", whose direct kernel asks for itself)
whose float32 FFT pairs are :mod:`kernels._regfft`'s instead of cuFFTDx's, where it has the size
(complex; real in the folded layout): all of them. On the H200 (``benchmarks/fused_kernels.py
--both-ffts`` and ``--own-fft-buffers 1``, 2026-12-05, benchmarks/RESULTS.md) each ran 16-28 %
faster with it than with cuFFTDx's (e.g. conv_complex 131072 x 512: 0.278 vs 0.349 ms; matched
65536 x 1024: 0.273 vs 0.380 ms). Remove a name to give that function cuFFTDx's FFT."""


def own_fft(n: int, precision, real: bool, folded: bool, kernel) -> bool:
    """Whether :func:`fft_pair` gives function ``kernel`` this FFT from :mod:`kernels._regfft`."""
    if kernel not in OWN_FFT or np.dtype(precision) != np.float32:
        return False
    return n // 2 in SIZES and n % 2 == 0 and folded if real else n in SIZES


def fft_config(n: int, precision, real: bool, folded: bool, kernel: str | None = None) -> tuple:
    """The ``(elements_per_thread, ffts_per_block)`` function ``kernel`` uses for this FFT pair:
    the :data:`FFT_CONFIGS` entry, else ``("suggested", "suggested")``."""
    return FFT_CONFIGS.get(_config_key(n, precision, real, folded, kernel), ("suggested", "suggested"))


def _config_key(n: int, precision, real: bool, folded: bool, kernel) -> tuple:
    """The key of :data:`FFT_CONFIGS` and :data:`OWN_FFT_EPT` for function ``kernel``'s FFT pair."""
    return kernel, n, np.dtype(precision).name, bool(real), bool(folded and real)


def prefetch(shapes) -> None:
    """Build the FFT pairs of ``(n, precision, real)`` shapes now (``nvmath_device.prepare``), at
    cuFFTDx's suggestion: what every function uses where :data:`FFT_CONFIGS` has no entry for it."""
    from nvmath_device import prepare

    prepare(*[d for n, p, r in shapes for d in _pair_descriptors(n, p, r, "suggested", "suggested")])


def table_ept(key, rows) -> int | None:
    """:data:`OWN_FFT_EPT`'s count for ``key`` at ``rows`` rows (None: any number), or None."""
    entry = OWN_FFT_EPT.get(key)
    if entry is None or (rows is not None and rows < entry[1]):
        return None
    return entry[0]


def can_fold(n: int) -> bool:
    """Whether a real FFT of size ``n`` can run folded (cuFFTDx: Block folded needs a power of 2)."""
    return n >= 4 and n & (n - 1) == 0


def fft_pair(n: int, precision, real: bool, ept=None, fpb=None, folded=False, kernel=None, rows=None):
    """Forward and inverse FFT descriptors of size ``n`` sharing one register layout.

    ``folded`` (real pairs, power-of-2 ``n``): registers hold the real signal as complex pairs
    ``(x[2k], x[2k + 1])`` at complex index ``k``, the spectrum in natural order.
    ``ept``/``fpb`` None: :func:`fft_config`'s for function ``kernel`` (the measured table's, else
    cuFFTDx's suggestion). A function in :data:`OWN_FFT` gets :func:`kernels._regfft.pair` for a
    float32 FFT it has (:func:`own_fft`; ``ept``/``fpb``: used where ints, else
    :data:`OWN_FFT_EPT`'s count for ``rows`` rows (None: any number) and its defaults; where that
    layout cannot be built, e.g. needs over 48 KiB of shared memory: cuFFTDx's).
    """
    if own_fft(n, precision, real, folded, kernel):
        own_ept = ept if isinstance(ept, int) else None
        if own_ept is None and _regfft.EPT is None:
            own_ept = table_ept(_config_key(n, precision, real, folded, kernel), rows)
        try:
            return own_pair(n, own_ept, fpb if isinstance(fpb, int) else None, real=real)
        except ValueError:  # e.g. the rows asked for need more than 48 KiB: cuFFTDx's
            pass
    if ept is None or fpb is None:
        e, f = fft_config(n, precision, real, folded, kernel)
        ept, fpb = e if ept is None else ept, f if fpb is None else fpb
    return _fft_pair(n, precision, real, ept, fpb, folded)


@functools.cache  # descriptors are frozen: build and resolve them once per process, not per call
def _fft_pair(n: int, precision, real: bool, ept, fpb, folded):
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


def jit(nthreads: int, max_regs: int | None = None):
    """``cuda.jit`` with launch bounds: at most ``nthreads`` per block (a register budget that
    always launches; the simulator, as nvmath_device patches it, accepts and ignores them).

    ``max_regs``: also ask for as many resident blocks per SM as ``max_regs`` registers per
    thread allow (the launch bounds' minimum blocks per multiprocessor; 64 K registers per SM),
    i.e. cap the registers for occupancy. Each cap used below was checked on the sm_90 cubin
    (``cuobjdump -res-usage``): no spills.
    """
    if max_regs is None:
        return cuda.jit(launch_bounds=nthreads)
    return cuda.jit(launch_bounds=(nthreads, max(1, 65536 // (nthreads * max_regs))))


def pairs_ok(real: bool, folded: bool, n: int, length: int, step: int, halo: int, *arrays) -> bool:
    """Whether a folded real kernel can move samples as complex pairs (one 8/16-byte access per
    pair): every segment starts on an even sample, rows have even length, and the arrays are
    C-contiguous (as numba sees it) and aligned to a pair."""
    if not (real and folded) or n % 2 or length % 2 or step % 2 or halo % 2:
        return False
    if simulator():
        return True
    return all(a.ptr % (2 * a.dtype.itemsize) == 0 for a in arrays)  # DevArrays: C-contiguous


def vectors_ok(*arrays) -> bool:
    """Whether ``load_complex``/``store_complex`` (one 8/16-byte access per complex value) may
    access these arrays: on the GPU, every complex array's data pointer is a multiple of its
    element size (not so for, e.g., a complex64 view of a float32 array that starts at an odd
    element). Always under the simulator (plain indexing there)."""
    return simulator() or all(a.dtype.kind != "c" or a.ptr % a.dtype.itemsize == 0 for a in arrays)


@cuda.jit
def _copy(x, y):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = x[i]


def copy_1d(x, y, stream) -> None:
    """``y[:] = x[:]`` (1-D, any dtypes numba converts between), one element per thread."""
    launch(_copy, max(1, -(-x.size // 256)), 256, stream, 0, x, y)


def aligned(dev, like, stream):
    """``dev`` (a DevArray), or a copy of it at an address the vector accesses accept."""
    if vectors_ok(dev):
        return dev
    out = Output(dev.shape, dev.dtype, like, stream).dev
    copy_1d(dev.reshape(dev.size), out.reshape(out.size), stream)
    return out


@functools.cache
def filter_kernel(fwd: FFT, inv: FFT, real: bool, conj: bool, pairs: bool = False, flat: bool = False):
    """x (B, L) -> y (B, L): y = segments of IFFT(FFT(segment) * H[(conj)]), H (N or N//2+1,).

    ``pairs`` (folded real FFTs, see :func:`pairs_ok`): ``x`` and ``y`` are the real rows viewed
    as complex (B, L/2) arrays and ``step``/``halo`` count pairs; each register pair is one load.
    ``flat`` (whole rows: one segment per row, no halo, ``L == N``; unfolded or ``pairs``): ``x``
    and ``y`` are 1-D views of the rows and elements move without per-element bounds tests.
    Complex values of x, h and y move as one access each (``load_complex``/``store_complex``;
    numba's indexing makes two): the arrays must pass :func:`vectors_ok`.
    """
    n = fwd.size
    stride, fpb = fwd.stride, fwd.ffts_per_block_value
    s2 = 2 * fwd.storage_size
    in_ept, mid_ept, out_ept = fwd.input_ept, fwd.output_ept, inv.output_ept
    nfreq = fwd.output_length
    prec = fwd.precision_type
    rzero, czero = np.dtype(prec).type(0), np.dtype(fwd.value_type).type(0)  # typed: no float64 detour
    folded = real and fwd.real_fft_options["real_mode"] == "folded"
    n2 = n // 2
    nthreads = fwd.block_dim[0] * fwd.block_dim[1] * fwd.block_dim[2]
    cplx = pairs or not real  # registers load/store as complex values
    rowlen = n2 if pairs else n  # elements per row of the flat views
    fft_len = n2 if pairs or folded else n  # index j of an FFT's elements: complex pairs, else values
    # every thread's every index j is inside the FFT (flat rows: fft_len is rowlen)
    exact_in, exact_out = in_ept * stride <= fft_len, out_ept * stride <= fft_len
    exact_mid = mid_ept * stride <= nfreq  # every thread's every spectrum index is in range
    cdt = fwd.value_type
    # register cap for occupancy where the FFT's data is small (checked on sm_90 cubins, float32
    # 4096-point folded convolution and 512-point folded FIR, 34 data registers each: no spills;
    # 72 -> 64 and 85 -> 80 registers, 7 -> 8 and 5 -> 6 blocks of 128 threads per SM): 64 for
    # whole rows, 80 for segments (whose index math needs more: 64 spilled 48 bytes in the FIR)
    # (complex kernels: left to the compiler; a minimum of 5 blocks of 192 threads made the
    # 512-point one take 48 registers instead of 40, fewer blocks; float64: not measured)
    own = isinstance(fwd, RegFFT)  # our own FFT (kernels._regfft)
    # (our own FFT: left to the compiler; at 64 the 4096-point one at 16 values per thread spilled)
    max_regs = None if own or not real or prec != np.float32 or s2 > 36 else 64 if flat else 80
    # Where the compiler picks the registers, the unrolled loops test an index only where it can
    # pass the end: segments' j where exact_in / exact_out (the halo and the signal's ends are
    # still tested), the spectrum's k for the values i >= full_mid. Fewer registers and
    # instructions in every sm_90 kernel of our FFT counted (benchmarks/RESULTS.md, thirty-first
    # session); under a register cap the tests stay: without them the capped cuFFTDx kernels
    # spilled (4096-point flat 128 B, 512-point FIR 80 B).
    lean = max_regs is None
    seg_in, seg_out = lean and exact_in, lean and exact_out
    full_mid = nfreq // stride if lean else 0
    # lean kernels load and store a segment inside the signal with no tests of its place
    inner_path = lean and cplx
    wsync = own and fwd.warp_sync  # its rows are warps: the warp's barrier between the two FFTs
    # our FFT's complex flat rows past the batch load the batch's last row (never stored): no
    # zeroing of the registers first, one instruction per value less. Real FFTs and cuFFTDx's keep
    # the zeroing: without it the 4096-point real one at 16 values per thread took 79 registers,
    # not 72, and cuFFTDx's 512-point one at 8 took 42, not 40 (benchmarks/RESULTS.md)
    load_all = flat and own and not real

    @jit(nthreads, max_regs)
    def kernel(x, h, y, nrows, nseg, step, halo):
        r = cuda.local.array(s2, dtype=prec, alignment=16)
        smem = cuda.shared.array(0, dtype=cdt)
        tx = cuda.threadIdx.x
        row = cuda.blockIdx.x * fpb + cuda.threadIdx.y
        ok = row < nrows
        if flat:
            base = (row if ok or not load_all else nrows - 1) * rowlen + tx
        else:  # the segment: signal b, first sample start (64-bit division: not in flat kernels)
            b = row // nseg
            start = (row - b * nseg) * step - halo
            length = x.shape[1]
            # every sample of the segment inside the signal: no per-value tests of t (all but a
            # row's first and last segments)
            inner = ok and start >= 0 and start + fft_len <= length
        if flat:
            for i in range(in_ept):
                j = tx + i * stride
                if cplx:
                    v = load_complex(x, base + i * stride) if (load_all or ok) and (exact_in or j < rowlen) else czero
                    r[2 * i] = v.real
                    r[2 * i + 1] = v.imag
                else:
                    r[i] = x[base + i * stride] if ok and (exact_in or j < rowlen) else rzero
        elif inner_path and inner:  # one access per complex value (pairs or complex samples)
            for i in range(in_ept):
                j = tx + i * stride
                v = load_complex(x, (b, start + j)) if seg_in or j < fft_len else czero
                r[2 * i] = v.real
                r[2 * i + 1] = v.imag
        else:
            for i in range(in_ept):
                j = tx + i * stride
                if pairs:  # complex index j of x holds the samples 2j and 2j + 1
                    t = start + j
                    v = load_complex(x, (b, t)) if ok and (seg_in or j < n2) and t >= 0 and t < length else czero
                    r[2 * i] = v.real
                    r[2 * i + 1] = v.imag
                elif folded:  # complex index j holds the samples 2j and 2j + 1
                    for p in range(2):
                        jj = 2 * j + p
                        tt = start + jj
                        r[2 * i + p] = x[b, tt].real if ok and (seg_in or jj < n) and tt >= 0 and tt < length else rzero
                else:
                    t = start + j
                    inside = ok and (seg_in or j < n) and t >= 0 and t < length
                    if real:
                        r[i] = x[b, t].real if inside else rzero
                    else:
                        v = load_complex(x, (b, t)) if inside else czero
                        r[2 * i] = v.real
                        r[2 * i + 1] = v.imag
        fwd.execute(r, smem)
        # the filter spectrum: every load issued before the first use (one loop that loads and
        # multiplies serialized them: each load's latency exposed in turn)
        hl = cuda.local.array(mid_ept, dtype=cdt)
        for i in range(mid_ept):
            k = tx + i * stride
            hl[i] = load_complex(h, k) if exact_mid or i < full_mid or k < nfreq else czero
        for i in range(mid_ept):
            k = tx + i * stride
            if exact_mid or i < full_mid or k < nfreq:
                hv = hl[i].conjugate() if conj else hl[i]
                re = r[2 * i] * hv.real - r[2 * i + 1] * hv.imag
                im = r[2 * i] * hv.imag + r[2 * i + 1] * hv.real
                r[2 * i] = re
                r[2 * i + 1] = im
        if wsync:
            cuda.syncwarp()
        else:
            cuda.syncthreads()
        inv.execute(r, smem)
        if flat:
            if ok:
                for i in range(out_ept):
                    j = tx + i * stride
                    if exact_out or j < rowlen:
                        if cplx:
                            store_complex(y, base + i * stride, complex(r[2 * i], r[2 * i + 1]))
                        else:
                            y[base + i * stride] = r[i]
        elif inner_path and inner:
            for i in range(out_ept):
                j = tx + i * stride
                if j >= halo and (seg_out or j < fft_len):
                    store_complex(y, (b, start + j), complex(r[2 * i], r[2 * i + 1]))
        else:
            if ok:
                for i in range(out_ept):
                    j = tx + i * stride
                    t = start + j
                    if pairs:
                        if j >= halo and (seg_out or j < n2) and t < length:
                            store_complex(y, (b, t), complex(r[2 * i], r[2 * i + 1]))
                    elif folded:
                        for p in range(2):
                            jj = 2 * j + p
                            tt = start + jj
                            if jj >= halo and (seg_out or jj < n) and tt < length:
                                y[b, tt] = r[2 * i + p]
                    elif j >= halo and (seg_out or j < n) and t < length:
                        if real:
                            y[b, t] = r[i]
                        else:
                            store_complex(y, (b, t), complex(r[2 * i], r[2 * i + 1]))

    return kernel


@functools.cache
def spectrum_kernel(fwd: FFT):
    """h (m,) -> H (nfreq,): ``H = FFT(h zero-padded to n) / n`` in ``fwd``'s output layout (the
    filter spectrum :func:`filter_kernel` reads), computed on the device from device taps. Launch
    as one row (:func:`launch_rows` with ``nrows=1``); ``m <= n``, h real for a real ``fwd``."""
    n = fwd.size
    stride = fwd.stride
    s2 = 2 * fwd.storage_size
    in_ept, mid_ept, nfreq = fwd.input_ept, fwd.output_ept, fwd.output_length
    prec = fwd.precision_type
    real = fwd.fft_type == "r2c"
    folded = real and fwd.real_fft_options["real_mode"] == "folded"
    rzero = np.dtype(prec).type(0)
    scale = np.dtype(prec).type(1.0 / n)
    nthreads = fwd.block_dim[0] * fwd.block_dim[1] * fwd.block_dim[2]

    @jit(nthreads)
    def kernel(h, out):
        r = cuda.local.array(s2, dtype=prec, alignment=16)
        smem = cuda.shared.array(0, dtype=prec)
        tx = cuda.threadIdx.x
        m = h.shape[0]
        for i in range(in_ept):
            j = tx + i * stride
            if folded:  # complex index j holds the samples 2j and 2j + 1
                for p in range(2):
                    jj = 2 * j + p
                    r[2 * i + p] = h[jj].real if jj < m else rzero
            elif real:
                r[i] = h[j].real if j < m else rzero
            else:
                r[2 * i] = h[j].real if j < m else rzero
                r[2 * i + 1] = h[j].imag if j < m else rzero
        fwd.execute(r, smem)
        if cuda.threadIdx.y == 0:
            for i in range(mid_ept):
                k = tx + i * stride
                if k < nfreq:
                    out[k] = complex(r[2 * i] * scale, r[2 * i + 1] * scale)

    return kernel


def device_spectrum(fwd: FFT, h, like, stream):
    """``FFT(h, n) / n`` of the device taps ``h`` (a DevArray, or the simulator's array), on the
    device and on ``stream``: a new device array of ``fwd.output_length`` complex values."""
    if isinstance(fwd, RegFFT):  # the spectrum's layout (natural order) is cuFFTDx's as well
        real = fwd.fft_type == "r2c"
        fwd = _fft_pair(fwd.size, np.float32, real, "suggested", "suggested", real)[0]
    cdt = np.complex64 if fwd.precision_type == np.float32 else np.complex128
    out = Output((fwd.output_length,), cdt, like, stream).dev
    launch_rows(spectrum_kernel(fwd), fwd, 1, stream, h, out)
    return out


def launch_rows(kernel, fwd: FFT, nrows: int, stream, *args):
    """Launch ``kernel`` with one FFT row per ``threadIdx.y`` slot: enough blocks for ``nrows``."""
    fpb = fwd.ffts_per_block_value
    grid = max(1, (nrows + fpb - 1) // fpb)
    launch(kernel, grid, fwd.block_dim, stream, fwd.shared_memory_size, *args)
