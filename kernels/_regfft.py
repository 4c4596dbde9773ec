# SPDX-License-Identifier: Apache-2.0
"""Our own block FFT's descriptor, :class:`RegFFT`: float32 FFTs of power-of-2 size (complex
64-4096 points; real 128-8192 in cuFFTDx's folded layout), with the attributes of a cuFFTDx
descriptor, its numba type and its device function (compiled from the source
:mod:`kernels._regfft_code` writes), and the cache of descriptors the kernels use. It stands in
for a cuFFTDx descriptor pair in the fused kernels (:func:`kernels._fused.filter_kernel`, the
matched filter, STFT and direct beamforming kernels; :data:`kernels._fused.OWN_FFT` selects it
per function).

Why: Nsight Compute on the fused FFT kernels (benchmarks/RESULTS.md, twenty-first session) found
them bound by cuFFTDx's shared-memory exchanges: 0.95-2.31 bank conflicts per shared instruction,
L1 at 78-96 %, and no cuFFTDx option changes its exchange layout. This FFT moves the same data
with every warp access at its minimum number of wavefronts (checked by
:func:`kernels._regfft_code.wavefronts`).

Same contract as a cuFFTDx Block FFT: ``fft.execute(r, smem)`` (:meth:`RegFFT.execute`) with ``r``
the thread's registers (element ``t + T i`` at ``r[2i], r[2i+1]``, or ``r[i]`` complex) and
``smem`` the dynamic shared memory as complex64 (``shared_memory_size`` bytes per block);
unnormalized in both directions; the caller synchronizes the block (the warp, where
``warp_sync``) between two calls that share ``smem``. Rows of a block are ``threadIdx.y``
(``ffts_per_block``).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from mathdx_operands import simulator

from ._regfft_code import EPTS, MAX_SHARED, SIZES, layout, radices, source, unsupported, warp_rows

__all__ = ["BUFFERS", "EPT", "EPTS", "MAX_SHARED", "SIZES", "RegFFT", "default_ept", "default_fpb", "descriptor",
           "pair", "unsupported"]

EPT = None
"""Elements per thread of every FFT built without an explicit count, where it is valid (None:
:func:`default_ept`'s choice); ``benchmarks/fused_kernels.py --own-fft-ept`` sets it."""


def default_ept(n: int) -> int:
    """Elements per thread when the caller gives none (:data:`EPT` if set and valid for ``n``):
    16 from 256 points up (at least 16 threads per row), 8 at 128, 4 at 64. From the sm_90 code
    of ``filter_kernel`` (``benchmarks/sass_counts.py --fft``): 16 issues fewer instructions per
    row than 8 (c2c 1024: 105 K vs 131 K, 256: 18 K vs 24 K; real 512: 27 K vs 35 K), with more
    registers (c2c 512: 66 vs 44)."""
    if EPT is not None and unsupported(n, EPT, 1) is None:
        return EPT
    return 16 if n >= 256 else 8 if n >= 128 else 4


def default_fpb(n: int, ept: int) -> int:
    """Rows per block when the caller gives none: blocks of at least 128 threads."""
    return max(1, 128 // (n // ept))


BUFFERS = 1
"""Shared-memory buffers per row of every FFT built without an explicit count: 1, 2 (two only
where they fit :data:`MAX_SHARED`) or None (two where they fit, else one). Two buffers take one
barrier per exchange, one buffer two, and half the shared memory: more blocks per SM where shared
memory limits them (34 KiB per block allows 6 of them on an H200 SM, 17 KiB 12; the fused kernels'
registers then allow 6-8). Measured on the H200 (``benchmarks/fused_kernels.py --own-fft-buffers
1``, 2026-12-05, against the default-2 run of the same session): conv_complex 0.305 -> 0.278 ms,
FIR 0.510 -> 0.452, matched 0.285 -> 0.273, STFT 0.476 -> 0.438, conv_real's FFT method 0.429 ->
0.383, beamforming 0.239 -> 0.238. ``--own-fft-buffers`` sets it."""


def sincospi(x):
    """``(sin(pi x), cos(pi x))`` as float32: libdevice's ``sincospif`` in a kernel (the overload
    below), ``math`` under the simulator, whose libdevice functions are stubs. One module-level
    function for both, so that a simulated kernel recorded by tests/sim_kernels_compile.py links
    for sm_90 as it is."""
    return np.float32(math.sin(math.pi * float(x))), np.float32(math.cos(math.pi * float(x)))


def _register_sincospi() -> None:
    from numba.cuda import libdevice
    from numba.cuda.extending import overload

    @overload(sincospi, target="cuda")
    def _sincospi(x):
        return lambda x: libdevice.sincospif(x)


if not simulator():
    _register_sincospi()


def _namespace(consts: dict) -> dict:
    from numba import cuda

    from nvmath_device import load_complex, store_complex

    ns = dict(cuda=cuda, sincospi=sincospi, np=np, load_complex=load_complex, store_complex=store_complex)
    ns.update({name: np.float32(v) for v, name in consts.items()})
    return ns


@functools.cache
def _execute(n: int, ept: int, fpb: int, sign: int, registers: str, kind: str, buffers: int):
    from numba import cuda

    # the simulator has no syncwarp: the block's barrier there (stronger; the GPU's racecheck
    # covers the warp's)
    src, consts, _, _ = source(n, ept, fpb, sign, registers, kind, warp_rows(n, ept, fpb) and not simulator(),
                               buffers=buffers)
    ns = _namespace(consts)
    name = f"<kernels._regfft {kind} n={n} ept={ept} fpb={fpb} sign={sign} registers={registers} buffers={buffers}>"
    exec(compile(src, name, "exec"), ns)  # noqa: S102 - our own generated source
    if simulator():
        return cuda.jit(device=True)(ns["execute"])
    return cuda.jit(device=True, inline="always")(ns["execute"])


_KINDS = {"c2c": None, "r2c": "forward", "c2r": "inverse"}


class RegFFT:
    """A float32 Block FFT (see the module docstring), with the attributes of a cuFFTDx
    descriptor that :func:`kernels._fused.filter_kernel`, :func:`kernels._fused.launch_rows` and
    the spectral kernels read.

    ``fft_type`` "c2c": ``size`` complex points, ``direction`` "forward" (``exp(-2 pi i jk/n)``)
    or "inverse" (``exp(+...)``, unnormalized). "r2c" (forward) / "c2r" (inverse): ``size`` real
    points in cuFFTDx's folded layout (sample pairs as complex values, ``size / 2 + 1`` spectrum
    values in natural order), through a ``size / 2``-point complex FFT. ``elements_per_thread``:
    complex values per thread of that complex FFT (``elements_per_thread_value`` counts real
    samples for the real types, as cuFFTDx's folded descriptors do)."""

    precision_type = np.dtype(np.float32)
    value_type = np.dtype(np.complex64)

    def __init__(self, size: int, direction: str | None = None, elements_per_thread: int | None = None,
                 ffts_per_block: int | None = None, fft_type: str = "c2c", buffers: int | None = None):
        if fft_type not in _KINDS:
            raise ValueError(f"fft_type must be 'c2c', 'r2c' or 'c2r', got {fft_type!r}")
        if fft_type != "c2c":
            if direction not in (None, _KINDS[fft_type]):
                raise ValueError(f"direction of a {fft_type} FFT is {_KINDS[fft_type]!r}, got {direction!r}")
            direction = _KINDS[fft_type]
            if not isinstance(size, int) or size % 2:
                raise ValueError(f"size of a real FFT must be an even int, got {size!r}")
        elif direction not in ("forward", "inverse"):
            raise ValueError(f"direction must be 'forward' or 'inverse', got {direction!r}")
        m = size if fft_type == "c2c" else size // 2  # the complex FFT's points
        ept = default_ept(m) if elements_per_thread is None else elements_per_thread
        if ffts_per_block is None and m in SIZES and ept in EPTS and ept <= m:
            ffts_per_block = default_fpb(m, ept)
        why = unsupported(m, ept, ffts_per_block)
        if why:
            raise ValueError(why if fft_type == "c2c" else f"{fft_type} of {size} real points: the complex {why}")
        self.size, self.direction, self.fft_type = size, direction, fft_type
        self.complex_size, self.ept = m, ept
        self.ffts_per_block_value = ffts_per_block
        self.stride = m // ept
        self.block_dim = (self.stride, ffts_per_block, 1)
        self.radices = radices(m, ept)
        self.sign = -1 if direction == "forward" else 1
        if fft_type == "c2c":
            self.real_fft_options = None
            self.elements_per_thread_value = self.storage_size = self.input_ept = self.output_ept = ept
            self.output_length = self.input_length = size
        else:
            self.real_fft_options = {"complex_layout": "natural", "real_mode": "folded"}
            self.elements_per_thread_value = 2 * ept
            self.storage_size = ept + 1
            ins, outs = (ept, ept + 1) if fft_type == "r2c" else (ept + 1, ept)
            self.input_ept, self.output_ept = ins, outs
            self.input_length, self.output_length = (m, m + 1) if fft_type == "r2c" else (m + 1, m)
        lay = layout(m, ept, ffts_per_block, fft_type, BUFFERS if buffers is None else buffers)
        self.shared_memory_size, self.buffers = lay["bytes"], 2 if lay["double"] else 1
        # its barriers are the warp's (not under the simulator, which has no syncwarp): a caller
        # that reuses the shared memory between two calls may also synchronize just the warp
        self.warp_sync = warp_rows(m, ept, ffts_per_block) and not simulator()
        if self.shared_memory_size > MAX_SHARED:  # our kernels link no code that opts them in to more
            raise ValueError(f"ffts_per_block={ffts_per_block}: {self.shared_memory_size} bytes of shared memory "
                             f"per block, more than the {MAX_SHARED} a kernel gets without opting in; use fewer rows")

    def executor(self, registers: str = "float"):
        """The device function ``execute(r, sc)``: ``sc`` the dynamic shared memory as complex64,
        ``r`` a local array of ``2 * storage_size`` float32 (``registers="float"``: value ``i``
        of the thread at ``r[2i], r[2i+1]``) or of ``storage_size`` complex64 ("complex")."""
        if registers not in ("float", "complex"):
            raise ValueError(f"registers must be 'float' or 'complex', got {registers!r}")
        return _execute(self.complex_size, self.ept, self.ffts_per_block_value, self.sign, registers, self.fft_type,
                        self.buffers)

    @property
    def key(self) -> tuple:
        """What the generated code depends on: equal keys, one numba type and one device function."""
        return (self.complex_size, self.ept, self.ffts_per_block_value, self.sign, self.fft_type, self.buffers)

    def __eq__(self, other):
        return type(other) is RegFFT and other.key == self.key

    def __hash__(self):
        return hash(self.key)

    def execute(self, r, sc):
        """``fft.execute(r, sc)`` in a kernel, as a cuFFTDx descriptor's: ``r`` the thread's
        registers (``2 * storage_size`` float32, or ``storage_size`` complex64), ``sc`` a 1-D
        shared array of complex64 (the dynamic shared memory, ``shared_memory_size`` bytes).
        This Python body runs under the simulator; compiled kernels type and lower the call
        through :func:`_register_numba`'s ``RegFFTType`` (same checks, same device function)."""
        self.executor(_registers_of(self, np.dtype(r.dtype), r.ndim, r.shape[0], np.dtype(sc.dtype), sc.ndim))(r, sc)

    def __repr__(self):
        return (f"RegFFT(size={self.size}, fft_type={self.fft_type!r}, direction={self.direction!r}, "
                f"elements_per_thread={self.ept}, ffts_per_block={self.ffts_per_block_value}, buffers={self.buffers})")


def _registers_of(fft: RegFFT, rdt: np.dtype, rnd: int, rlen: int | None, sdt: np.dtype, snd: int) -> str:
    """"float" or "complex": the register kind of ``fft.execute(r, sc)``'s arguments (their
    dtypes, dimensions and, where known, ``r``'s length), else TypeError naming what is allowed."""
    s = fft.storage_size
    allowed = (f"{fft!r}.execute(r, sc): r must be a 1-D local array of {2 * s} float32 or {s} complex64 "
               f"values, sc a 1-D shared array of complex64")
    if sdt != np.complex64 or snd != 1:
        raise TypeError(f"{allowed}; got sc of {sdt} with {snd} dimension(s)")
    kinds = {np.dtype(np.float32): ("float", 2 * s), np.dtype(np.complex64): ("complex", s)}
    if rdt not in kinds or rnd != 1:
        raise TypeError(f"{allowed}; got r of {rdt} with {rnd} dimension(s)")
    kind, need = kinds[rdt]
    if rlen is not None and rlen < need:
        raise TypeError(f"{allowed}; got r of {rlen} values")
    return kind


def _register_numba():
    """``RegFFT`` in compiled kernels: a numba type per :attr:`RegFFT.key` whose
    ``execute(r, sc)`` is the generated device function, inlined (not under the simulator,
    where :meth:`RegFFT.execute` runs as Python)."""
    from numba.core import types
    from numba.core.errors import TypingError
    from numba.cuda.core.imputils import lower_constant
    from numba.cuda.extending import core_models, overload_method, register_model, typeof_impl

    class RegFFTType(types.Type):
        def __init__(self, fft):
            self.fft = fft
            super().__init__(name=f"RegFFT{fft.key}")

        @property
        def key(self):
            return self.fft.key

    register_model(RegFFTType)(core_models.OpaqueModel)

    @lower_constant(RegFFTType)  # a descriptor a kernel closes over: no run-time value
    def _constant(context, builder, ty, pyval):
        return context.get_dummy_value()

    @typeof_impl.register(RegFFT)
    def _typeof(val, c):
        return RegFFTType(val)

    @overload_method(RegFFTType, "execute", inline="always")
    def _execute_ol(fft, r, sc):
        if not isinstance(r, types.Array) or not isinstance(sc, types.Array):
            raise TypingError(f"{fft.fft!r}.execute(r, sc): r and sc must be arrays, got {r} and {sc}")
        try:
            kind = _registers_of(fft.fft, np.dtype(str(r.dtype)), r.ndim, None, np.dtype(str(sc.dtype)), sc.ndim)
        except TypeError as e:
            raise TypingError(str(e)) from None
        run = fft.fft.executor(kind)

        def impl(fft, r, sc):
            run(r, sc)

        return impl

    return RegFFTType


RegFFTType = None if simulator() else _register_numba()


def descriptor(size: int, direction: str | None = None, elements_per_thread: int | None = None,
               ffts_per_block: int | None = None, fft_type: str = "c2c") -> RegFFT | None:
    """The :class:`RegFFT` of these arguments, or None where it cannot be built (``RegFFT(...)``
    says why). Built once per arguments and :data:`EPT` / :data:`BUFFERS`; refusals are
    remembered too, so a kernel that asks at every call and falls back to cuFFTDx's FFT pays
    for the check once."""
    fft = _descriptor(size, direction, elements_per_thread, ffts_per_block, fft_type, EPT, BUFFERS)
    return fft if type(fft) is RegFFT else None


def pair(n: int, ept: int | None = None, fpb: int | None = None, real: bool = False) -> tuple:
    """(forward, inverse) :class:`RegFFT` of one layout: c2c of ``n`` points, or with ``real``
    r2c and c2r of ``n`` real points (``ept`` counts the complex values of their n/2-point FFT);
    from :func:`descriptor`'s cache. ValueError where they cannot be built."""
    out = []
    for fft_type, direction in (("r2c", None), ("c2r", None)) if real else (("c2c", "forward"), ("c2c", "inverse")):
        fft = _descriptor(n, direction, ept, fpb, fft_type, EPT, BUFFERS)
        if type(fft) is not RegFFT:
            raise ValueError(fft)
        out.append(fft)
    return tuple(out)


@functools.cache
def _descriptor(size, direction, ept, fpb, fft_type, _ept_default, _buffers) -> RegFFT | str:
    """``RegFFT(...)``, or the message of its ValueError. ``_ept_default`` / ``_buffers``: the
    :data:`EPT` / :data:`BUFFERS` it was built under (a key, not read)."""
    try:
        return RegFFT(size, direction, ept, fpb, fft_type)
    except ValueError as e:
        return str(e)
