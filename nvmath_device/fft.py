# SPDX-License-Identifier: Apache-2.0
"""The FFT descriptor: a cuFFTDx FFT described once in plain Python.

Pure Python: knows neither the numba layer nor the simulator (methods called outside kernels go
through :mod:`._dispatch`). Traits are compiled constants read from NVRTC output (no GPU needed).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from . import _dispatch
from ._build import fftdb
from ._descriptor import Frozen, show
from ._descriptor import choice as _choice
from ._descriptor import parse_sm as _parse_sm
from ._types import FFT_PRECISIONS as _PRECISIONS
from ._types import FFT_THREAD_MAX, complex_dtype
from .common_cuda import Dim3
from .types import half2 as _half2
from .types import half4 as _half4

__all__ = ["FFT"]

_FFT_TYPES = ("c2c", "r2c", "c2r")
_DIRECTIONS = ("forward", "inverse")
_EXECUTIONS = ("Block", "Thread")
_LAYOUTS = ("natural", "packed", "full")
_REAL_MODES = ("normal", "folded")


_REAL_OPTION_KEYS = ("complex_layout", "real_mode")


def _parse_precision(precision, argname: str = "precision") -> np.dtype:
    try:
        dt = np.dtype(precision)
    except Exception:  # noqa: BLE001 - numpy raises TypeError, ValueError, ... for non-types
        dt = None
    if dt not in _PRECISIONS:
        raise ValueError(
            f"{argname} must be one of numpy.float16, numpy.float32, numpy.float64; got {show(precision)}"
        )
    return dt


def _parse_int_or_suggested(value, name):
    if value is None or (isinstance(value, str) and value == "suggested"):
        return "suggested"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a positive int or 'suggested', got {show(value)}")
    if value < 1:
        raise ValueError(f"{name} must be a positive int or 'suggested', got {show(value)}")
    return int(value)


class FFT(Frozen):
    """A cuFFTDx FFT, callable inside ``@cuda.jit`` kernels as ``fft.execute(...)``.

    Parameters
    ----------
    size : int
        FFT length (2 up to cuFFTDx's maximum for the architecture and precision).
    precision : numpy.float16, numpy.float32 or numpy.float64
        Precision of the computation (the real type; complex values are pairs of it).
    fft_type : {"c2c", "r2c", "c2r"}
        Complex-to-complex, real-to-complex (always forward) or complex-to-real (always inverse).
    direction : {"forward", "inverse"} or None
        Required for c2c; implied (and checked if given) for r2c and c2r.
    elements_per_thread : int or "suggested"
        Values each thread holds in registers. Block execution: one of the values cuFFTDx
        implements for the size (see :meth:`valid_elements_per_thread`). Thread execution: the size.
        The attribute ``fft.elements_per_thread`` is always the resolved int (as in kernels).
    ffts_per_block : int or "suggested"
        FFTs one block computes together (Block execution only). The attribute
        ``fft.ffts_per_block`` is always the resolved int. float16 counts FFTs, not values:
        it must be even, and ``block_dim.y`` is ``ffts_per_block // 2`` (each value holds two).
    execution : {"Block", "Thread"}
        Block: the block's threads cooperate on ``ffts_per_block`` FFTs (needs shared memory).
        Thread: each thread computes one FFT in its registers.
    sm : int, tuple or str, optional
        Target architecture: 90, (9, 0) or "sm_90". Default: the current GPU (required without one).
    real_fft_options : dict, optional
        For r2c/c2r: ``{"complex_layout": "natural"|"packed"|"full", "real_mode": "normal"|"folded"}``
        (cuFFTDx's RealFFTOptions). Default: natural layout, normal mode.

    Notes
    -----
    Data layout (Block, as cuFFTDx): thread ``threadIdx.x`` of FFT ``threadIdx.y`` holds elements
    ``threadIdx.x + i * stride`` for ``i < elements_per_thread``. For r2c the registers hold real
    values on input (view the register array as ``precision``), for c2r on output.

    float16 (cuFFTDx's implicit batching, ``implicit_type_batching == 2``): every register value
    holds the same element of two FFTs, ``value_type`` ``half4`` =
    ``float16x4(re0, re1, im0, im1)``; the real view (r2c input, c2r output) is ``float16x2_type``: ``(x0, x1)``. Block
    execution: ``threadIdx.y`` numbers pairs of FFTs; Thread execution: each thread computes two.
    """

    def __init__(self, size: int, precision=np.float32, fft_type: str = "c2c", direction: str | None = None,
                 elements_per_thread="suggested", ffts_per_block="suggested", execution: str = "Block",
                 sm=None, real_fft_options=None):
        if isinstance(size, (bool, np.bool_)) or not isinstance(size, (int, np.integer)):
            raise TypeError(f"size must be an int >= 2, got {show(size)}")
        size = int(size)
        if size < 2:
            raise ValueError(f"size must be >= 2, got {show(size)}")
        precision = _parse_precision(precision)
        prec = _PRECISIONS[precision]
        fft_type = _choice(fft_type, _FFT_TYPES, "fft_type")
        implied = {"r2c": "forward", "c2r": "inverse"}.get(fft_type)
        if direction is not None:
            direction = _choice(direction, _DIRECTIONS, "direction", " (or None for r2c/c2r)")
        if implied is not None:
            if direction is not None and direction != implied:
                raise ValueError(
                    f"direction={direction!r} contradicts fft_type={fft_type!r}, which is always {implied!r}"
                )
            direction = implied
        elif direction is None:
            raise ValueError("direction is required for fft_type='c2c': 'forward' or 'inverse'")
        execution = _choice(execution, _EXECUTIONS, "execution")
        sm = _parse_sm(sm)
        ept = _parse_int_or_suggested(elements_per_thread, "elements_per_thread")
        fpb = _parse_int_or_suggested(ffts_per_block, "ffts_per_block")

        layout, mode = "natural", "normal"
        if real_fft_options is not None:
            if not isinstance(real_fft_options, Mapping):
                raise TypeError(
                    "real_fft_options must be a dict {'complex_layout': ..., 'real_mode': ...} or None, "
                    f"got {show(real_fft_options)}"
                )
            unknown = [k for k in real_fft_options if not (isinstance(k, str) and k in _REAL_OPTION_KEYS)]
            if unknown:
                raise ValueError(
                    f"real_fft_options: unknown keys [{', '.join(show(k) for k in unknown)}]; "
                    "allowed: 'complex_layout', 'real_mode'"
                )
            layout = _choice(real_fft_options.get("complex_layout", "natural"), _LAYOUTS,
                             "real_fft_options['complex_layout']")
            mode = _choice(real_fft_options.get("real_mode", "normal"), _REAL_MODES,
                           "real_fft_options['real_mode']")
            if fft_type == "c2c" and (layout, mode) != ("natural", "normal"):
                raise ValueError("real_fft_options apply to r2c/c2r only; fft_type='c2c' takes none")
        if layout == "packed" and size % 2:
            raise ValueError(f"real_fft_options complex_layout='packed' needs an even size, got size={show(size)}")
        if mode == "folded":
            if execution == "Block" and size & (size - 1):
                raise ValueError(f"real_mode='folded' with Block execution needs a power-of-2 size, got {show(size)}")
            if execution == "Thread" and size % 2:
                raise ValueError(f"real_mode='folded' with Thread execution needs an even size, got {show(size)}")
        exec_size = size // 2 if mode == "folded" else size
        epts = fftdb.valid_epts(sm, prec, exec_size)

        if execution == "Thread":
            limit = FFT_THREAD_MAX[prec]
            if size > limit * (2 if mode == "folded" else 1):
                raise ValueError(
                    f"size={show(size)} is too large for Thread execution with precision={precision.name}"
                    f"{' and real_mode=folded' if mode == 'folded' else ''}; at most "
                    f"{limit * (2 if mode == 'folded' else 1)}"
                )
            if ept not in ("suggested", size):
                raise ValueError(f"elements_per_thread must equal size ({size}) for Thread execution, got {show(ept)}")
            if fpb not in ("suggested", 1):
                raise ValueError(
                    "ffts_per_block applies to Block execution only; use 1 or 'suggested' with Thread, "
                    f"got {show(fpb)}"
                )
            ept, fpb = size, 1
            if exec_size not in fftdb.records(sm, prec):
                raise NotImplementedError(
                    f"size={size} has no cuFFTDx Thread implementation with precision={precision.name}"
                )
        else:
            limit = fftdb.block_max_size(sm, prec)
            if exec_size > limit:
                raise ValueError(
                    f"size={show(size)} is too large for Block execution with precision={precision.name} on "
                    f"sm={sm}{' (real_mode=folded: size/2)' if mode == 'folded' else ''}; "
                    f"at most {limit}"
                )
            if not epts:
                raise NotImplementedError(
                    f"size={size} (precision={precision.name}, sm={sm}) needs a cuFFTDx workspace (Bluestein algorithm), "
                    "which numba-mathdx does not support yet; sizes with a direct implementation: "
                    "see FFT.valid_sizes(...)"
                )
            if ept != "suggested":
                eff = ept // 2 if mode == "folded" else ept
                if eff not in epts or (mode == "folded" and ept % 2):
                    allowed = [e * 2 for e in epts] if mode == "folded" else list(epts)
                    raise ValueError(
                        f"elements_per_thread={show(ept)} is not implemented for size={size} "
                        f"(precision={precision.name}, sm={sm}); allowed: {allowed}"
                    )
            if fpb != "suggested" and prec == "fp16" and fpb % 2:
                raise ValueError(f"ffts_per_block must be even for float16 (two FFTs per half2 value), got {fpb}")
        # _key: exactly what the generated code depends on (equality and hash go through it)
        # _elements_per_thread / _ffts_per_block: the user's choice ("suggested" or an int), which
        # the generated code and the cache keys depend on; the public names are resolved ints
        self._set(size=size, precision=precision.type, fft_type=fft_type, direction=direction,
                  _elements_per_thread=ept, _ffts_per_block=fpb, execution=execution, sm=sm,
                  real_fft_options={"complex_layout": layout, "real_mode": mode},
                  _key=(size, precision.name, fft_type, direction, ept, fpb, execution, sm, layout, mode))

    def __repr__(self):
        if "_key" not in self.__dict__:  # a constructor that raised
            return f"<{type(self).__name__} (invalid, not constructed)>"
        return (f"FFT(size={self.size}, precision={self.precision.__name__}, fft_type={self.fft_type!r}, "
                f"direction={self.direction!r}, elements_per_thread={self._elements_per_thread!r}, "
                f"ffts_per_block={self._ffts_per_block!r}, execution={self.execution!r}, sm={self.sm}, "
                f"real_fft_options={self.real_fft_options!r})")

    def __reduce__(self):
        return (_rebuild_fft, (self._key,))

    # ------------------------------------------------------------------ class helpers
    @staticmethod
    def valid_elements_per_thread(size: int, precision=np.float32, sm=None) -> tuple[int, ...]:
        """elements_per_thread values cuFFTDx implements for a c2c Block FFT of ``size``.

        Parameters
        ----------
        size : int
            FFT length.
        precision : numpy.float16, numpy.float32 or numpy.float64
            Precision of the FFT.
        sm : int, tuple or str, optional
            Target architecture (e.g. 90); default: the current GPU (required without one).

        Returns
        -------
        tuple of int
            The allowed ``elements_per_thread`` values, ascending (empty if ``size`` has no
            workspace-free implementation).
        """
        sm = _parse_sm(sm)
        return fftdb.valid_epts(sm, _PRECISIONS[_parse_precision(precision)], int(size))

    @staticmethod
    def valid_sizes(precision=np.float32, sm=None) -> tuple[int, ...]:
        """Sizes with a direct (workspace-free) cuFFTDx Block implementation.

        Parameters
        ----------
        precision : numpy.float16, numpy.float32 or numpy.float64
            Precision of the FFT.
        sm : int, tuple or str, optional
            Target architecture (e.g. 90); default: the current GPU (required without one).

        Returns
        -------
        tuple of int
            The sizes, ascending (every power of 2 from 2 to 4096 among them).
        """
        sm = _parse_sm(sm)
        prec = _PRECISIONS[_parse_precision(precision)]
        return tuple(sorted(fftdb.records(sm, prec)))

    # ------------------------------------------------------------------ traits
    @property
    def _traits(self) -> dict:
        # kept on the instance: every trait property reads it, and a cache lookup renders the
        # shim source and hashes it; kernel launchers read several traits per call
        return self._memo("_traits_memo", lambda: _fft_traits(self))

    @property
    def value_type(self):
        """Type of one register element, as nvmath-python names it: ``numpy.complex64`` /
        ``numpy.complex128`` (numpy dtypes) for float32 / float64; for float16
        :data:`nvmath_device.types.half4`, cuFFTDx's ``complex<__half2>``: one value holds the
        same element of two FFTs, as a ``float16x4`` in RRII order ``(re0, re1, im0, im1)``
        (``.x .y .z .w``). In kernels it is a dtype: ``cuda.local.array(n, dtype=fft.value_type)``."""
        if self.precision is np.float16:
            return _half4
        return complex_dtype(self.precision)

    @property
    def precision_type(self) -> np.dtype:
        """The real scalar type (numpy dtype)."""
        return np.dtype(self.precision)

    @property
    def input_type(self):
        """Type of one input element: the real type for r2c (normal mode), else ``value_type``.
        For float16 the real type is :data:`nvmath_device.types.half2` (``float16x2``: the
        element of the two FFTs one value holds), cuFFTDx's ``__half2``."""
        return self._real_type if self._real_in else self.value_type

    @property
    def output_type(self):
        """Type of one output element: the real type for c2r (normal mode), else ``value_type``
        (float16: ``half2`` for real data, ``half4`` for complex data)."""
        return self._real_type if self._real_out else self.value_type

    @property
    def _real_type(self):
        return _half2 if self.precision is np.float16 else self.precision_type

    @property
    def _real_in(self):
        return self.fft_type == "r2c" and self.real_fft_options["real_mode"] == "normal"

    @property
    def _real_out(self):
        return self.fft_type == "c2r" and self.real_fft_options["real_mode"] == "normal"

    def _trait(name):  # noqa: N805 - descriptor factory used in the class body only
        def get(self):
            return self._traits[name]

        get.__name__ = name
        return property(get)

    storage_size = _trait("storage_size")
    stride = _trait("stride")
    implicit_type_batching = _trait("implicit_type_batching")
    input_ept = _trait("input_ept")
    output_ept = _trait("output_ept")
    input_length = _trait("input_length")
    output_length = _trait("output_length")
    storage_size.__doc__ = "Number of ``value_type`` registers each thread must allocate."
    stride.__doc__ = "Distance between consecutive elements of one thread (Block: block_dim.x; Thread: 1)."
    implicit_type_batching.__doc__ = "FFTs packed into one value (2 for float16, else 1)."
    input_ept.__doc__ = "Input elements per thread (in ``input_type`` units)."
    output_ept.__doc__ = "Output elements per thread (in ``output_type`` units)."
    input_length.__doc__ = "Input length of one FFT (in ``input_type`` units)."
    output_length.__doc__ = "Output length of one FFT (in ``output_type`` units)."

    @property
    def elements_per_thread(self) -> int:
        """Values each thread holds: the resolved int (cuFFTDx's choice when 'suggested' was asked
        for), the same number on the host as inside kernels."""
        if isinstance(self._elements_per_thread, int):
            return self._elements_per_thread
        return self._traits["elements_per_thread"]

    @property
    def ffts_per_block(self) -> int:
        """FFTs one block computes: the resolved int (cuFFTDx's suggestion when 'suggested' was
        asked for; 1 for Thread execution), the same number on the host as inside kernels."""
        if isinstance(self._ffts_per_block, int):
            return self._ffts_per_block
        return self._traits["ffts_per_block"]

    @property
    def elements_per_thread_value(self) -> int:
        """The resolved elements_per_thread (the same as :attr:`elements_per_thread`)."""
        return self.elements_per_thread

    @property
    def ffts_per_block_value(self) -> int:
        """The resolved ffts_per_block (the same as :attr:`ffts_per_block`)."""
        return self.ffts_per_block

    @property
    def block_dim(self) -> Dim3:
        """Launch block shape for Block execution: a :class:`~nvmath_device.common_cuda.Dim3`
        ``(x, y, z)`` (a tuple, so ``kernel[grid, fft.block_dim, 0, smem]`` takes it)."""
        self._need_block("block_dim")
        t = self._traits
        return Dim3(t["block_dim_x"], t["block_dim_y"], t["block_dim_z"])

    @property
    def shared_memory_size(self) -> int:
        """Bytes of dynamic shared memory one block needs (Block execution)."""
        self._need_block("shared_memory_size")
        return self._traits["shared_memory_size"]

    @property
    def max_threads_per_block(self) -> int:
        """block_dim.x * block_dim.y * block_dim.z (Block execution)."""
        x, y, z = self.block_dim
        return x * y * z

    @property
    def requires_workspace(self) -> bool:
        """Whether cuFFTDx needs a global-memory workspace (never, for descriptors we accept)."""
        return bool(self._traits.get("requires_workspace", 0))

    @property
    def workspace_size(self) -> int:
        """Bytes of the workspace cuFFTDx would need (0 without one)."""
        return self._traits.get("workspace_size", 0)

    def _need_block(self, what):
        if self.execution != "Block":
            raise AttributeError(f"{what} exists for execution='Block' only (this FFT has execution='Thread')")

    def valid(self, *knobs: str) -> list[tuple[int, ...]]:
        """Valid combinations of the knobs ``"elements_per_thread"`` and ``"ffts_per_block"``
        for this FFT (as nvmath-python's ``FFT.valid``).

        Each tuple holds one value per knob, in the order asked for; a new
        ``FFT(..., elements_per_thread=e, ffts_per_block=f)`` with those values is valid. A knob
        this descriptor fixed (an int given to the constructor) has that one value;
        ``elements_per_thread`` otherwise ranges over the values cuFFTDx implements for the size,
        ``ffts_per_block`` over 1 (2 for float16) and cuFFTDx's suggestion for each
        ``elements_per_thread``.

        Parameters
        ----------
        *knobs : {"elements_per_thread", "ffts_per_block"}
            One or both knob names.

        Returns
        -------
        list of tuple of int
        """
        allowed = ("elements_per_thread", "ffts_per_block")
        if not knobs:
            raise ValueError(f"valid() needs at least one knob of {allowed}")
        for k in knobs:
            _choice(k, allowed, "knob")
        if self.execution == "Thread":
            one = {"elements_per_thread": self.size, "ffts_per_block": 1}
            return [tuple(one[k] for k in knobs)]
        if isinstance(self._elements_per_thread, int):
            epts = (self._elements_per_thread,)
        else:
            folded = self.real_fft_options["real_mode"] == "folded"
            base = fftdb.valid_epts(self.sm, _PRECISIONS[np.dtype(self.precision)],
                                    self.size // 2 if folded else self.size)
            epts = tuple(e * 2 for e in base) if folded else tuple(base)
        combos = []
        for e in epts:
            if isinstance(self._ffts_per_block, int):
                fpbs = (self._ffts_per_block,)
            elif "ffts_per_block" in knobs:
                low = 2 if self.precision is np.float16 else 1
                fpbs = tuple(sorted({low, self._with(e).ffts_per_block}))
            else:
                fpbs = (None,)
            for f in fpbs:
                value = {"elements_per_thread": e, "ffts_per_block": f}
                combo = tuple(value[k] for k in knobs)
                if combo not in combos:
                    combos.append(combo)
        return combos

    def _with(self, ept):
        """This FFT with elements_per_thread=ept (ffts_per_block as asked)."""
        (size, prec, fft_type, direction, _, fpb, execution, sm, layout, mode) = self._key
        return _rebuild_fft((size, prec, fft_type, direction, ept, fpb, execution, sm, layout, mode))

    # ------------------------------------------------------------------ code
    @property
    def files(self) -> list:
        """``[]``: nothing to link by hand (kernels link this FFT's code themselves), so
        nvmath-python programs' ``@cuda.jit(link=fft.files)`` keep working."""
        return []

    @property
    def symbol(self) -> str:
        """Name of the generated ``extern "C"`` device function."""
        from ._build.fft_codegen import fft_symbol

        return fft_symbol(self)

    def ltoir(self) -> bytes:
        """LTO-IR of this FFT's device function for ``sm`` (compiled once, then cached)."""
        from ._build.fft_codegen import fft_ltoir

        return fft_ltoir(self)

    def execute(self, *args):
        """Run the FFT in place on the thread's registers. Callable only inside ``@cuda.jit`` kernels.

        Block: ``fft.execute(thread_data, shared_memory)``; Thread: ``fft.execute(thread_data)``.
        Block, data in shared memory (cuFFTDx's shared-memory API, every fft_type and precision):
        ``fft.execute(shared_memory)`` where the input of FFT ``threadIdx.y`` of the block is at
        elements ``threadIdx.y * input_length ...`` of the array viewed as ``input_type``, in
        natural order; its output replaces it at elements ``threadIdx.y * output_length ...`` of
        the array viewed as ``output_type`` (r2c: real in, complex out; c2r: complex in, real
        out; float16: each element holds a pair of FFTs). The array needs ``max(shared_memory_size,
        (block_dim.y * max(input_length * input itemsize, output_length * output itemsize)))``
        bytes. It runs as: each thread loads its register elements, a barrier, the register form
        with the same array as scratch, a barrier, the store.
        ``fft(...)`` is the same as ``fft.execute(...)``.
        ``thread_data`` is a local array of ``storage_size`` ``value_type`` elements (or of
        ``2 * storage_size`` ``precision`` elements); ``shared_memory`` a shared array of at least
        ``shared_memory_size`` bytes.

        Parameters
        ----------
        thread_data : local array
            This thread's registers, ``cuda.local.array(fft.storage_size, dtype=fft.value_type)``
            (or ``2 * fft.storage_size`` values of ``fft.precision_type`` with ``alignment=16``,
            e.g. for r2c/c2r). Element ``i`` holds element ``threadIdx.x + i * fft.stride`` of
            the FFT ``threadIdx.y`` of the block, before and after the call. float16: an array
            of ``float16x4_type`` (``fft.value_type``, ``(re0, re1, im0, im1)`` of the pair of
            FFTs ``threadIdx.y`` holds) or of ``float16x2_type`` (the real view ``(x0, x1)``;
            ``thread_data.view(float16x2_type)`` reads and writes real data).
        shared_memory : shared array
            Block execution only: ``cuda.shared.array(0, dtype=fft.value_type)`` (or of
            ``fft.precision_type``), with at least ``fft.shared_memory_size`` bytes of dynamic
            shared memory given at launch. Every thread of ``fft.block_dim`` must call ``execute``.
        """
        run = _dispatch.implementation(
            "FFT.execute",
            "FFT.execute can only be called inside a @cuda.jit kernel (or under NUMBA_ENABLE_CUDASIM=1)")
        return run(self, *args)

    def __call__(self, *args):
        """``fft(...)`` is ``fft.execute(...)`` (nvmath-python's older spelling)."""
        return self.execute(*args)

    del _trait


def _fft_traits(fft) -> dict:
    from ._build.fft_codegen import fft_traits

    # under the simulator no device code is linked: the cheaper traits-only unit will do
    return fft_traits(fft, from_unit=_dispatch.links_device_code())


def _rebuild_fft(key):
    size, prec, fft_type, direction, ept, fpb, execution, sm, layout, mode = key
    return FFT(size=size, precision=np.dtype(prec).type, fft_type=fft_type, direction=direction,
               elements_per_thread=ept, ffts_per_block=fpb, execution=execution, sm=sm,
               real_fft_options={"complex_layout": layout, "real_mode": mode})

