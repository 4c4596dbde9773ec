# SPDX-License-Identifier: Apache-2.0
"""The GEMM descriptor: a cuBLASDx matrix multiply described once in plain Python.

Pure Python: knows neither the numba layer nor the simulator (methods called outside kernels go
through :mod:`._dispatch`). Everything that follows from the description alone (leading dimensions,
sizes, shared-memory offsets) is computed in Python with cuBLASDx's own formulas, so bad input
is rejected before NVRTC runs; what needs cuBLASDx's database (the suggested block shape, the
register-fragment size) is read from compiled constants (no GPU needed).
"""

from __future__ import annotations

import warnings
from collections import namedtuple

import numpy as np

from . import _dispatch
from ._descriptor import Frozen, show
from ._descriptor import choice as _choice
from ._descriptor import parse_sm as _parse_sm
from ._layouts import LAYOUT_NAMES as _LAYOUT_NAMES
from ._layouts import Layout
from ._partitioners import Accumulator, Partitioner
from ._types import GEMM_PRECISIONS as _PRECISIONS
from ._types import NUMBA_PRECISION_NAMES as _NUMBA_NAMES
from ._types import SHARED_MEMORY_LIMIT as _SHARED_MEMORY_LIMIT
from ._types import complex_dtype, precision_dtype
from .common_cuda import Dim3
from .types import complex32 as _complex32

__all__ = ["Alignment", "Arrangement", "LeadingDimension", "Matmul", "TransposeMode"]


class Arrangement(namedtuple("Arrangement", ("a", "b", "c"))):
    """The arrangements of A, B and C: ``"row_major"`` or ``"col_major"`` each (as nvmath-python's)."""

    __slots__ = ()


class LeadingDimension(namedtuple("LeadingDimension", ("a", "b", "c"))):
    """The leading dimensions (lda, ldb, ldc) of the shared-memory tiles (as nvmath-python's)."""

    __slots__ = ()


class Alignment(namedtuple("Alignment", ("a", "b", "c"))):
    """The alignments in bytes of the A, B and C tiles in shared memory (as nvmath-python's)."""

    __slots__ = ()


class TransposeMode(namedtuple("TransposeMode", ("a", "b"))):
    """cuBLASDx's older operand description (nvmath-python's ``transpose_mode=``): for A and B,
    ``"non_transposed"``, ``"transposed"`` or ``"conj_transposed"`` (real data only here)."""

    __slots__ = ()


_TRANSPOSES = ("non_transposed", "transposed", "conj_transposed")
# the largest cosize a layout may have here: cuBLASDx's leading dimensions are ints, the traits unsigned
_MAX_LAYOUT_COSIZE = 2**31 - 1

_PRECISION_HINT = ("numpy.float16, 'bfloat16' (or ml_dtypes.bfloat16, numba.cuda.types.bfloat16), "
                   "numpy.float32, numpy.float64, or an integer type: numpy.int8, numpy.uint8, numpy.int16, "
                   "numpy.uint16, numpy.int32, numpy.uint32, numpy.int64, numpy.uint64")
_FLOATS = ("float16", "bfloat16", "float32", "float64")
_DATA_TYPES = ("real", "complex")
_ARRANGEMENTS = ("row_major", "col_major")
_EXECUTIONS = ("Block",)


def _is_suggested(v) -> bool:
    """None or "suggested" (numpy arrays and other objects compare false, without raising)."""
    return v is None or (isinstance(v, str) and v == "suggested")


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _parse_one_precision(p, argname) -> str:
    name = None
    if isinstance(p, str) and p in _PRECISIONS:
        name = p
    elif type(p).__module__.split(".")[0] == "numba":  # a numba scalar type, told by name
        name = _NUMBA_NAMES.get(str(p))
    else:
        try:
            name = np.dtype(p).name
        except Exception:  # noqa: BLE001 - numpy raises TypeError, ValueError, ... for non-types
            name = None
    if name not in _PRECISIONS:
        raise ValueError(
            f"{argname} must be one of {_PRECISION_HINT} (or an (a, b, c) tuple of them); got {show(p)}"
        )
    return name


def _parse_precision(precision) -> tuple[str, str, str]:
    if isinstance(precision, (tuple, list)):
        if len(precision) != 3:
            raise ValueError(f"precision must be one type or an (a, b, c) tuple of 3 types, got {show(precision)}")
        return tuple(_parse_one_precision(p, f"precision[{i}]") for i, p in enumerate(precision))
    p = _parse_one_precision(precision, "precision")
    return (p, p, p)


def _parse_size(size) -> tuple[int, int, int]:
    if not isinstance(size, (tuple, list)) or len(size) != 3:
        raise TypeError(f"size must be a tuple (m, n, k) of 3 positive ints, got {show(size)}")
    out = []
    for name, v in zip("mnk", size):
        if not _is_int(v):
            raise TypeError(f"size must be a tuple (m, n, k) of positive ints; {name}={show(v)}")
        if v < 1:
            raise ValueError(f"size must hold positive ints; {name}={show(v)}")
        out.append(int(v))
    return tuple(out)


def _parse_transpose_mode(transpose_mode, data_type) -> tuple[str, str]:
    if not isinstance(transpose_mode, (tuple, list)) or len(transpose_mode) != 2:
        raise ValueError(f"transpose_mode must be a TransposeMode or a 2-tuple (a, b) of {_TRANSPOSES}, "
                         f"got {show(transpose_mode)}")
    out = tuple(_choice(t, _TRANSPOSES, f"transpose_mode.{x}") for t, x in zip(transpose_mode, "ab"))
    if "conj_transposed" in out and data_type == "complex":
        raise ValueError("transpose_mode 'conj_transposed' is not supported for data_type='complex' (it "
                         "would conjugate the operand); conjugate the data and use 'transposed'")
    return TransposeMode(*out)


def _parse_arrangement(arrangement) -> tuple[str, str, str]:
    if isinstance(arrangement, str):
        arrangement = (arrangement,) * 3
    if not isinstance(arrangement, (tuple, list)) or len(arrangement) != 3:
        raise ValueError(
            f"arrangement must be one of {_ARRANGEMENTS} or a tuple of 3 of them (A, B, C), got {show(arrangement)}"
        )
    for name, a in zip("ABC", arrangement):
        if not (isinstance(a, str) and a in _ARRANGEMENTS):
            raise ValueError(f"arrangement of {name} must be one of {_ARRANGEMENTS}, got {show(a)}")
    return tuple(arrangement)


def _parse_block_dim(block_dim, block_size):
    if block_size is not None and not _is_suggested(block_dim):
        raise ValueError("pass block_dim or block_size, not both")
    if block_size is not None and not _is_suggested(block_size):
        if not _is_int(block_size):
            raise TypeError(f"block_size must be an int or 'suggested', got {show(block_size)}")
        block_dim = (int(block_size), 1, 1)
        argname = "block_size"
    else:
        argname = "block_dim"
    if _is_suggested(block_dim):
        return "suggested"
    if _is_int(block_dim):
        block_dim = (int(block_dim),)
    if not isinstance(block_dim, (tuple, list)) or not 1 <= len(block_dim) <= 3 or not all(_is_int(d) for d in block_dim):
        raise TypeError(f"{argname} must be 'suggested', an int or a tuple of 1-3 ints, got {show(block_dim)}")
    dims = tuple(int(d) for d in block_dim) + (1,) * (3 - len(block_dim))
    if any(d < 1 for d in dims):
        raise ValueError(f"{argname} must hold positive ints, got {show(block_dim)}")
    if dims[0] > 1024 or dims[1] > 1024 or dims[2] > 64:
        raise ValueError(f"{argname}={show(block_dim)} exceeds CUDA's limits (x, y <= 1024, z <= 64)")
    total = dims[0] * dims[1] * dims[2]
    if not 32 <= total <= 1024:
        raise ValueError(f"{argname}={show(block_dim)} has {total} threads; cuBLASDx needs 32 to 1024 threads")
    return dims


def _is_integer(name: str) -> bool:
    return name not in _FLOATS


def _check_precision_rules(prec, data_type) -> None:
    """cuBLASDx 25.6's precision constraints (cublasdx/detail/blas_description.hpp), plus the
    value types this package can hand to NumPy and Numba; before any compiler runs."""
    ints = [_is_integer(p) for p in prec]
    if any(ints) and not all(ints):
        raise ValueError(
            f"precision={prec}: cuBLASDx cannot mix integer and floating-point types; use three "
            "floating-point types or three integer types, e.g. (numpy.int8, numpy.int8, numpy.int32)"
        )
    if all(ints):
        if data_type == "complex":
            raise ValueError(
                f"precision={prec} with data_type='complex': complex integer GEMMs are not offered "
                "(NumPy and Numba have no complex integer type); integer precisions need data_type='real'"
            )
        sizes = [np.dtype(p).itemsize for p in prec]
        if sizes[0] > 4 * sizes[2] or sizes[1] > 4 * sizes[2]:
            raise ValueError(
                f"precision={prec}: cuBLASDx needs C's integer type at least a quarter as wide as A's "
                "and B's (an accumulator wide enough), e.g. (numpy.int8, numpy.int8, numpy.int32)"
            )
        signed = [np.dtype(p).kind == "i" for p in prec]
        if (signed[0] or signed[1]) and not signed[2]:
            raise ValueError(
                f"precision={prec}: when A or B is a signed integer type, cuBLASDx needs a signed C "
                "(numpy.int16, numpy.int32 or numpy.int64)"
            )
        return
    if data_type == "complex":
        if "bfloat16" in prec:
            raise ValueError(
                f"precision={prec} with data_type='complex': complex bfloat16 is not offered (NumPy and "
                "Numba have no complex bfloat16 type); complex GEMMs take numpy.float16 (complex32), "
                "numpy.float32 or numpy.float64"
            )
        if "float16" in prec and not (prec[:2] == ("float16", "float16") and prec[2] in ("float16", "float32")):
            raise ValueError(
                f"precision={prec} with data_type='complex': complex float16 (complex32) takes A and B "
                "in numpy.float16 and C in numpy.float16 or numpy.float32, i.e. (numpy.float16,) * 3 or "
                "(numpy.float16, numpy.float16, numpy.float32)"
            )


def _pad_if_needed(itemsize: int, n: int) -> int:
    # cublasdx::detail::pad_if_needed (traits/blas_traits.hpp)
    nbytes = itemsize * n
    return n + 16 // itemsize if (nbytes >= 128 and nbytes % 128 == 0) else n


def _round_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


class Matmul(Frozen):
    """A cuBLASDx GEMM ``C = alpha * A @ B + beta * C``, callable inside ``@cuda.jit`` kernels.

    Parameters
    ----------
    size : tuple of 3 ints
        ``(m, n, k)``: A is m x k, B is k x n, C is m x n.
    precision : type, str or tuple of 3
        Precision of A, B and C (compute and accumulate in C's precision): one of
        ``numpy.float16``, ``"bfloat16"``, ``numpy.float32``, ``numpy.float64`` (anything
        ``numpy.dtype`` accepts for these, numba's scalar types, ``ml_dtypes.bfloat16`` or
        ``numba.cuda.types.bfloat16``), or an ``(a, b, c)`` tuple of them for mixed precision,
        e.g. ``("bfloat16", "bfloat16", numpy.float32)``. One type means all three. A bfloat16
        C needs bfloat16 A and B. See Notes for bfloat16. Integer GEMMs take three integer types
        (``numpy.int8``, ``numpy.uint8``, ``numpy.int16``, ``numpy.uint16``, ``numpy.int32``,
        ``numpy.uint32``, ``numpy.int64``, ``numpy.uint64``), e.g. ``(numpy.int8, numpy.int8,
        numpy.int32)``, with cuBLASDx's rules: no mixing of integer and floating-point types, C
        at least a quarter as wide as A and B, a signed C when A or B is signed. See Notes.
    data_type : {"real", "complex"}
        Complex uses complex64/complex128 values for float32/float64, and
        :data:`~nvmath_device.types.complex32` (cuBLASDx's ``complex<__half>``) for float16 (A and
        B float16, C float16 or float32). No complex bfloat16 or complex integers (no NumPy/Numba type for them).
    arrangement : str or tuple of 3 str
        ``"row_major"`` or ``"col_major"`` for A, B and C (one string for all three).
    leading_dimension : None, "suggested" or tuple (lda, ldb, ldc)
        Leading dimensions of the shared-memory tiles. None: the tight ones (m or k, ...);
        "suggested": cuBLASDx's padded ones (``suggested_leading_dimension_of``), which avoid bank conflicts.
    block_dim : "suggested", int or tuple of 1-3 ints
        Threads that execute one GEMM (cuBLASDx's BlockDim); 32 to 1024 in total.
    block_size : int or "suggested", optional
        Alternative to ``block_dim``: a 1-D block of that many threads.
    alignment : None, int or tuple of 3 ints
        Alignment in bytes of the A, B, C tiles in shared memory (powers of 2, from the value
        type's alignment up to 16; one int: the same for all three, e.g.
        ``nvmath_device.cublasdx.MAX_ALIGNMENT``). None: each value type's alignment.
    execution : {"Block"}
        The threads of ``block_dim`` cooperate on one GEMM.
    sm : int, tuple or str, optional
        Target architecture: 90, (9, 0) or "sm_90". Default: the current GPU (required without one).
    with_pipeline : bool, optional
        Whether :meth:`suggest_device_pipeline` may make device pipelines of this GEMM (the
        tile's K loop streamed through shared memory, see :class:`~nvmath_device.DevicePipeline`).
    enable_input_streaming : bool, optional
        nvmath-python's switch for streaming A and B into shared memory within pipelines. Here
        pipelines always stream their inputs (asynchronous copies into a ring of stages); the
        flag is accepted and recorded (it changes no code).
    static_block_dim : bool, optional
        Promise that kernels launch exactly ``block_dim`` threads (cuBLASDx's
        ``experimental::StaticBlockDim``: no inactive-thread checks in the generated code).
    transpose_mode : TransposeMode or tuple of 2 str, optional
        nvmath-python's older spelling of ``arrangement`` (deprecated there and here: a
        ``DeprecationWarning``): ``(a, b)`` of ``"non_transposed"``, ``"transposed"`` or
        ``"conj_transposed"`` (real data only). As cuBLASDx maps it: non_transposed is col_major,
        transposed row_major, C col_major. ``a_dim`` / ``b_dim`` are then the transposed shapes (as
        nvmath-python's), and the copy helpers take global arrays of those shapes.

    Notes
    -----
    Shared-memory layout of the tiles: element (r, c) of a column-major operand with leading
    dimension ``ld`` is at ``r + c * ld``, of a row-major one at ``r * ld + c``. One dynamic
    shared buffer of ``shared_memory_size`` bytes holds A, B and C at ``a_shared_memory_offset``,
    ``b_shared_memory_offset`` and ``c_shared_memory_offset`` (the GEMMs of several descriptors
    can of course use separate static ``cuda.shared.array(MM.a_size, MM.a_value_type)`` arrays).

    When a launch uses more threads than ``block_dim`` (e.g. ``(64, 4)`` for a ``(64, 1, 1)``
    GEMM), cuBLASDx uses only the dimensions of ``block_dim`` that are not 1 to number its
    threads, so ``threadIdx.y`` can select one of several GEMMs computed by the block.

    bfloat16: NumPy has no bfloat16, so a bfloat16 operand's value type (``a_value_type``...) is
    ``numpy.dtype(ml_dtypes.bfloat16)`` (ml_dtypes is a dependency), which numba-cuda types as
    ``numba.cuda.types.bfloat16`` (C++ ``__nv_bfloat16``). It works as the ``dtype`` of
    ``cuda.shared.array`` / ``cuda.local.array`` in kernels (importing ``nvmath_device`` lets
    numba-cuda 0.30 allocate bfloat16 arrays, which it otherwise refuses) and in the simulator.
    Global data comes in as device arrays of that dtype. numba-cuda 0.30's ``cuda.to_device`` and
    ``copy_to_host`` refuse bfloat16 host arrays (NumPy's buffer protocol has no bfloat16 format:
    "cannot include dtype 'E' in a buffer"), so move the bits as uint16 and
    view them: ``cuda.to_device(x.view(numpy.uint16)).view(ml_dtypes.bfloat16)`` and
    ``d.view(numpy.uint16).copy_to_host().view(ml_dtypes.bfloat16)``.
    The copy helpers (:meth:`load_a`...) copy without conversion, so their global arrays must
    hold the tile's value type; in kernels, bfloat16 values convert to and from float32/float64
    by assignment or ``numpy.float32(x)``. Complex bfloat16 is not offered (no NumPy or Numba
    type for it).

    Complex float16: ``a_value_type`` ... are :data:`nvmath_device.types.complex32` (as in
    nvmath-python), ``float16x2_type`` in kernels (a dtype for ``cuda.shared.array`` /
    ``cuda.local.array``; values read as ``.x``/``.y``, built with ``float16x2(re, im)``,
    converted to and from numba's complex types on assignment); ``numpy.dtype(complex32)`` is
    its host dtype (records ``x, y`` of float16, 4 bytes). The copy helpers also take
    complex64/complex128 global arrays (each element rounded to float16 on load, widened on
    store), as nvmath-python's complex-half example passes its data. alpha and beta may be
    complex or real numbers or ``float16x2`` values. cuBLASDx accumulates in float16.

    Integers: the value types are the NumPy integer dtypes, alpha and beta convert to C's type
    (floats towards zero), and arithmetic wraps modulo C's width as the device's integer
    arithmetic does (the simulator computes exactly that). A GEMM whose C is bfloat16 accumulates in bfloat16 (cuBLASDx has no bfloat16
    tensor-core MMA with a bfloat16 accumulator); ``("bfloat16", "bfloat16", numpy.float32)``
    runs on the tensor cores (sm_80+) with a float32 accumulator.
    """

    def __init__(self, size, precision=np.float32, data_type: str = "real",
                 arrangement=None, leading_dimension=None,
                 block_dim="suggested", block_size=None, alignment=None, execution: str = "Block",
                 sm=None, *, transpose_mode=None, with_pipeline=False, enable_input_streaming=False,
                 static_block_dim=False):
        self._validate(size, precision, data_type, arrangement, leading_dimension, block_dim, block_size,
                       alignment, execution, sm, transpose_mode)
        for name, v in (("with_pipeline", with_pipeline), ("enable_input_streaming", enable_input_streaming),
                        ("static_block_dim", static_block_dim)):
            if not isinstance(v, (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {show(v)}")
        # not part of _key (the per-GEMM code depends only on static_block_dim, which the
        # description and the symbol take into account): compared and hashed beside it
        self._set(_options=(bool(with_pipeline), bool(enable_input_streaming), bool(static_block_dim)))

    def _validate(self, size, precision, data_type, arrangement, leading_dimension, block_dim, block_size,
                  alignment, execution, sm, transpose_mode=None):
        m, n, k = _parse_size(size)
        prec = _parse_precision(precision)
        data_type = _choice(data_type, _DATA_TYPES, "data_type")
        if transpose_mode is not None:
            if not _quiet_transpose_mode:
                warnings.warn("Matmul(transpose_mode=...) is deprecated (as in nvmath-python and cuBLASDx); "
                              "use arrangement=(a, b, c) with 'row_major'/'col_major' instead",
                              DeprecationWarning, stacklevel=3)
            if arrangement is not None:
                raise ValueError("pass arrangement or transpose_mode, not both (transpose_mode is "
                                 "nvmath-python's older spelling of arrangement)")
            transpose_mode = _parse_transpose_mode(transpose_mode, data_type)
            # cuBLASDx: TransposeMode<X, Y> is Arrangement<X ? row_major : col_major, ..., col_major>
            arrangement = tuple("col_major" if t == "non_transposed" else "row_major"
                                for t in transpose_mode) + ("col_major",)
        elif arrangement is None:
            arrangement = ("col_major",) * 3
        _check_precision_rules(prec, data_type)
        if prec[2] == "bfloat16" and prec[:2] != ("bfloat16", "bfloat16"):
            # cuBLASDx 0.4's generic FMA computes d = a * b + c; with other A or B types the
            # product is float, and CUTLASS's bfloat16_t cannot be assigned from float (NVRTC error)
            raise ValueError(
                f"precision={prec}: a bfloat16 C needs bfloat16 A and B (cuBLASDx cannot accumulate "
                "other products into bfloat16); use ('bfloat16', 'bfloat16', 'bfloat16') or a wider C, "
                "e.g. ('bfloat16', 'bfloat16', numpy.float32)"
            )
        arr = _parse_arrangement(arrangement)
        execution = _choice(execution, _EXECUTIONS, "execution")
        sm = _parse_sm(sm)
        if "bfloat16" in prec and sm < 80:
            raise ValueError(
                f"precision={prec} on sm_{sm}: bfloat16 needs sm_80 or newer (numba-cuda supports "
                "bfloat16 from compute capability 8.0)"
            )
        bdim = _parse_block_dim(block_dim, block_size)
        cplx = 2 if data_type == "complex" else 1
        itemsizes = tuple(_PRECISIONS[p][1] * cplx for p in prec)

        # leading dimensions (cuBLASDx: col_major A is m x k stored with ld >= m, ...)
        rows = (m, k, m)
        cols = (k, n, n)
        tight = tuple(r if a == "col_major" else c for r, c, a in zip(rows, cols, arr))
        ld = leading_dimension
        if ld is None:
            lds, ld_mode = tight, None
        elif isinstance(ld, str) and ld == "suggested":
            best = tuple(_pad_if_needed(s, t) for s, t in zip(itemsizes, tight))
            # cuBLASDx keeps the padding only if A and B still fit in shared memory
            need = _round_up(itemsizes[0] * best[0] * (cols[0] if arr[0] == "col_major" else rows[0]), 1)
            need += itemsizes[1] * best[1] * (cols[1] if arr[1] == "col_major" else rows[1])
            lds = best if need <= _SHARED_MEMORY_LIMIT[sm] else tight
            ld_mode = "suggested"
        else:
            if not isinstance(ld, (tuple, list)) or len(ld) != 3 or not all(_is_int(v) for v in ld):
                raise TypeError(f"leading_dimension must be None, 'suggested' or a tuple (lda, ldb, ldc) of ints, got {show(ld)}")
            for name, v, t, a, what in zip(("lda", "ldb", "ldc"), ld, tight, arr, ("A", "B", "C")):
                if v < t:
                    dim = "rows" if a == "col_major" else "columns"
                    raise ValueError(
                        f"leading_dimension: {name}={show(v)} is smaller than the {dim} of {what} ({t}) for "
                        f"arrangement {show(a)}"
                    )
            lds = tuple(int(v) for v in ld)
            ld_mode = lds

        # alignment
        natural = tuple(min(s, 16) for s in itemsizes)
        al = alignment
        if al is None:
            aligns = natural
        else:
            if _is_int(al):  # one alignment for A, B and C (nvmath-python's alignment=MAX_ALIGNMENT)
                al = (al, al, al)
            if not isinstance(al, (tuple, list)) or len(al) != 3 or not all(_is_int(v) for v in al):
                raise TypeError(f"alignment must be None, an int or a tuple of 3 ints (bytes), got {show(al)}")
            for name, v, nat in zip("ABC", al, natural):
                if v < nat or v > 16 or v & (v - 1):
                    raise ValueError(
                        f"alignment of {name} must be a power of 2 between {nat} (its value type's "
                        f"alignment) and 16 bytes, got {show(v)}"
                    )
            aligns = tuple(int(v) for v in al)

        # cuBLASDx's a_size/b_size/c_size are the layouts' cosize: ld * (outer - 1) + inner
        sizes = tuple(
            ldv * (c - 1) + r if a == "col_major" else ldv * (r - 1) + c
            for ldv, r, c, a in zip(lds, rows, cols, arr)
        )
        a_off = 0
        b_off = _round_up(a_off + sizes[0] * itemsizes[0], aligns[1])
        c_off = _round_up(b_off + sizes[1] * itemsizes[1], aligns[2])
        smem = c_off + sizes[2] * itemsizes[2]
        limit = _SHARED_MEMORY_LIMIT[sm]
        if smem > limit:
            raise ValueError(
                f"size={show((m, n, k))} needs {show(smem)} bytes of shared memory for A, B and C "
                f"(precision={prec}, data_type={data_type!r}, leading_dimension={show(lds)}); sm_{sm} "
                f"allows at most {limit} bytes per block"
            )
        # _key: exactly what the generated code depends on (equality and hash go through it)
        key = ((m, n, k), prec, data_type, arr, ld_mode, bdim, aligns if al is not None else None,
               execution, sm)
        # _transpose_mode is not part of _key: it maps to an arrangement (the same generated code);
        # it only changes how a_dim / b_dim (and the copy helpers' global arrays) are shaped
        self._set(size=(m, n, k), precision=tuple(precision_dtype(p).type for p in prec),
                  data_type=data_type, arrangement=Arrangement(*arr),
                  leading_dimension=LeadingDimension(*lds), _block_dim=bdim,
                  alignment=Alignment(*aligns), execution=execution, sm=sm, _key=key,
                  _transpose_mode=transpose_mode,
                  _layout={"itemsizes": itemsizes, "sizes": sizes, "offsets": (a_off, b_off, c_off),
                           "smem": smem})

    def __repr__(self):
        key = self.__dict__.get("_key")
        if key is None:  # a constructor that raised
            return f"<{type(self).__name__} (invalid, not constructed)>"
        return (f"Matmul(size={self.size}, precision={tuple(np.dtype(p).name for p in self.precision)}, "
                f"data_type={self.data_type!r}, arrangement={tuple(self.arrangement)}, "
                f"leading_dimension={tuple(self.leading_dimension)}, block_dim={key[5]!r}, sm={self.sm}"
                + (f", transpose_mode={tuple(self._transpose_mode)}" if self._transpose_mode else "")
                + "".join(f", {n}=True" for n, v in zip(("with_pipeline", "enable_input_streaming", "static_block_dim"),
                                                       self.__dict__.get("_options", ())) if v) + ")")

    def __reduce__(self):
        return (_rebuild_matmul, (self._key, self._transpose_mode, self._options))

    def __eq__(self, other):
        eq = super().__eq__(other)
        return eq if eq is not True else (self._transpose_mode == other._transpose_mode
                                          and self._options == other._options)

    def __hash__(self):
        return hash((type(self).__name__, self._key, self._transpose_mode, self._options))

    @property
    def with_pipeline(self) -> bool:
        """Whether device pipelines of this GEMM may be made (``Matmul(with_pipeline=True)``)."""
        return self._options[0]

    @property
    def enable_input_streaming(self) -> bool:
        """``Matmul(enable_input_streaming=...)`` as given (pipelines here always stream)."""
        return self._options[1]

    @property
    def static_block_dim(self) -> bool:
        """Whether the generated code assumes exactly ``block_dim`` threads (cuBLASDx's StaticBlockDim)."""
        return self._options[2]

    def suggest_device_pipeline(self, pipeline_depth, a, b):
        """A :class:`~nvmath_device.DevicePipeline` of this GEMM over the global arrays ``a`` and
        ``b`` (this Matmul's ``size`` is the tile: m x n of C per block, k per stage).

        Parameters
        ----------
        pipeline_depth : int
            Shared-memory stages (1 to 16): K slices in flight while one is multiplied.
        a, b : device arrays
            A (M x K, or M x K x batch) and B (K x N, or K x N x batch) with this GEMM's value
            types and arrangements (unit stride along a row-major operand's rows, a column-major
            one's columns); M, N and K multiples of the tile's m, n and k.

        Returns
        -------
        DevicePipeline
        """
        from ._pipeline import DevicePipeline

        return DevicePipeline(self, pipeline_depth, a, b)

    # ------------------------------------------------------------------ traits known in Python
    @property
    def m(self) -> int:
        """Rows of A and C."""
        return self.size[0]

    @property
    def n(self) -> int:
        """Columns of B and C."""
        return self.size[1]

    @property
    def k(self) -> int:
        """Columns of A, rows of B."""
        return self.size[2]

    @property
    def a_dim(self) -> tuple[int, int]:
        """Shape of A: (m, k); (k, m) when ``transpose_mode`` said A is transposed (as nvmath-python)."""
        return self._dims(0)

    @property
    def b_dim(self) -> tuple[int, int]:
        """Shape of B: (k, n); (n, k) when ``transpose_mode`` said B is transposed (as nvmath-python)."""
        return self._dims(1)

    @property
    def transpose_mode(self) -> TransposeMode | None:
        """The ``transpose_mode`` given to the constructor (None when ``arrangement`` was used)."""
        return self._transpose_mode

    def _dims(self, idx) -> tuple[int, int]:
        rows, cols = ((self.m, self.k), (self.k, self.n), (self.m, self.n))[idx]
        if idx < 2 and self._transpose_mode is not None and self._transpose_mode[idx] != "non_transposed":
            return (cols, rows)
        return (rows, cols)

    def _copy_layout(self, idx) -> tuple[int, int, bool]:
        """(rows, cols, col_major) of operand ``idx``'s global array for the copy helpers: the
        math shape and arrangement, or, for an operand that ``transpose_mode`` transposed, the
        transposed shape stored column-major (the same shared-memory addresses)."""
        rows, cols = self._dims(idx)
        if idx < 2 and self._transpose_mode is not None and self._transpose_mode[idx] != "non_transposed":
            return rows, cols, True
        return rows, cols, self.arrangement[idx] == "col_major"

    @property
    def c_dim(self) -> tuple[int, int]:
        """Shape of C: (m, n)."""
        return (self.m, self.n)

    def _vt(self, i):
        p = np.dtype(self.precision[i])
        if self.data_type == "complex":
            if p.itemsize == 2:  # complex<__half>: no NumPy complex type (nvmath-python's complex32)
                return _complex32
            return complex_dtype(p)
        return p

    @property
    def a_value_type(self):
        """Type of one element of A (numpy dtype; ``numpy.dtype(ml_dtypes.bfloat16)`` for bfloat16;
        :data:`nvmath_device.types.complex32` for complex float16).

        Usable as the ``dtype`` of ``cuda.shared.array`` / ``cuda.local.array`` in kernels.
        """
        return self._vt(0)

    @property
    def b_value_type(self):
        """Type of one element of B (as :attr:`a_value_type`)."""
        return self._vt(1)

    @property
    def c_value_type(self):
        """Type of one element of C, of alpha and beta, and of the register accumulator (numpy
        dtype; ``numpy.dtype(ml_dtypes.bfloat16)`` for bfloat16; :data:`nvmath_device.types.complex32`
        for complex float16)."""
        return self._vt(2)

    @property
    def lda(self) -> int:
        """Leading dimension of A in shared memory."""
        return self.leading_dimension[0]

    @property
    def ldb(self) -> int:
        """Leading dimension of B in shared memory."""
        return self.leading_dimension[1]

    @property
    def ldc(self) -> int:
        """Leading dimension of C in shared memory."""
        return self.leading_dimension[2]

    @property
    def a_size(self) -> int:
        """Elements of A's shared-memory tile: ``lda * (k - 1) + m`` (col-major) or ``lda * (m - 1) + k``."""
        return self._layout["sizes"][0]

    @property
    def b_size(self) -> int:
        """Elements of B's shared-memory tile."""
        return self._layout["sizes"][1]

    @property
    def c_size(self) -> int:
        """Elements of C's shared-memory tile."""
        return self._layout["sizes"][2]

    @property
    def a_shared_memory_offset(self) -> int:
        """Byte offset of A in a shared buffer holding A, B and C (always 0)."""
        return self._layout["offsets"][0]

    @property
    def b_shared_memory_offset(self) -> int:
        """Byte offset of B in a shared buffer holding A, B and C."""
        return self._layout["offsets"][1]

    @property
    def c_shared_memory_offset(self) -> int:
        """Byte offset of C in a shared buffer holding A, B and C."""
        return self._layout["offsets"][2]

    @property
    def shared_memory_size(self) -> int:
        """Bytes of shared memory for A, B and C with their alignments (cuBLASDx's get_shared_storage_size)."""
        return self._layout["smem"]

    @property
    def shared_memory_size_ab(self) -> int:
        """Bytes of shared memory for A and B only (the register-accumulator form needs no C tile)."""
        return self._layout["offsets"][1] + self.b_size * self._layout["itemsizes"][1]

    def _storage_size(self, lds) -> int:
        rows, cols = (self.m, self.k, self.m), (self.k, self.n, self.n)
        tight = tuple(r if a == "col_major" else c for r, c, a in zip(rows, cols, self.arrangement))
        out = []
        for i, (name, v) in enumerate(zip(("lda", "ldb", "ldc"), lds)):
            if not _is_int(v):
                raise TypeError(f"{name} must be an int, got {show(v)}")
            if v < tight[i]:
                raise ValueError(f"{name}={show(v)} is smaller than the {tight[i]} that {'ABC'[i]} "
                                 f"({self.arrangement[i]}) needs")
            r, c = rows[i], cols[i]
            out.append(int(v) * (c - 1) + r if self.arrangement[i] == "col_major" else int(v) * (r - 1) + c)
        itemsizes = self._layout["itemsizes"]
        total = 0
        for i, n in enumerate(out):
            total = _round_up(total, self.alignment[i]) + n * itemsizes[i]
        return total

    def get_shared_storage_size(self, *lds) -> int:
        """Bytes of shared memory for the A, B and C tiles (nvmath-python's name).

        ``MM.get_shared_storage_size()``: with this descriptor's leading dimensions (the same as
        :attr:`shared_memory_size`). ``MM.get_shared_storage_size(lda, ldb, ldc)``: with other
        leading dimensions (ints, at least the tight ones), each tile aligned as
        :attr:`alignment` says. ``MM.get_shared_storage_size(layout_a, layout_b, layout_c)``:
        for tiles of those shared-memory :class:`~nvmath_device._layouts.Layout` s (e.g.
        :meth:`suggest_layout_smem_a`), each of ``cosize`` elements (as cuBLASDx's overload).

        Parameters
        ----------
        *lds : int or Layout
            Nothing, ``lda, ldb, ldc``, or three shared-memory layouts of A, B and C.

        Returns
        -------
        int
        """
        if len(lds) == 0:
            return self.shared_memory_size
        if len(lds) != 3:
            raise TypeError(f"get_shared_storage_size() takes no arguments, three shared-memory Layouts "
                            f"(a, b, c) or (lda, ldb, ldc), got {len(lds)} arguments")
        if any(isinstance(v, Layout) for v in lds):
            return self._layouts_storage_size(lds, "get_shared_storage_size")
        return self._storage_size(lds)

    def get_shared_storage_size_ab(self, *lds) -> int:
        """Bytes of shared memory for the A and B tiles only (nvmath-python's name; the register
        form needs no C tile). ``()``, ``(lda, ldb)`` or two shared-memory layouts
        ``(layout_a, layout_b)``, as :meth:`get_shared_storage_size`.

        Parameters
        ----------
        *lds : int or Layout
            Nothing, ``lda, ldb``, or the shared-memory layouts of A and B.

        Returns
        -------
        int
        """
        if len(lds) == 0:
            return self.shared_memory_size_ab
        if len(lds) != 2:
            raise TypeError(f"get_shared_storage_size_ab() takes no arguments, two shared-memory Layouts "
                            f"(a, b) or (lda, ldb), got {len(lds)} arguments")
        if any(isinstance(v, Layout) for v in lds):
            return self._layouts_storage_size(lds, "get_shared_storage_size_ab")
        rows, cols = (self.m, self.k), (self.k, self.n)
        total = 0
        for i, (name, v) in enumerate(zip(("lda", "ldb"), lds)):
            tight = rows[i] if self.arrangement[i] == "col_major" else cols[i]
            if not _is_int(v):
                raise TypeError(f"{name} must be an int, got {show(v)}")
            if v < tight:
                raise ValueError(f"{name}={show(v)} is smaller than the {tight} that {'AB'[i]} "
                                 f"({self.arrangement[i]}) needs")
            r, c = rows[i], cols[i]
            n = int(v) * (c - 1) + r if self.arrangement[i] == "col_major" else int(v) * (r - 1) + c
            total = _round_up(total, self.alignment[i]) + n * self._layout["itemsizes"][i]
        return total

    def _layouts_storage_size(self, layouts, method) -> int:
        total = 0
        for i, lay in enumerate(layouts):
            op = "abc"[i]
            if not isinstance(lay, Layout):
                raise TypeError(f"{method}: layout_{op} must be a Layout (all arguments Layouts or all "
                                f"ints), got {show(lay)}")
            if lay.memory != "smem" or lay.operand != op:
                raise ValueError(f"{method}: layout_{op} must be a shared-memory layout of {op.upper()} "
                                 f"(get_layout_smem_{op}() or suggest_layout_smem_{op}()), got {lay!r}")
            total = _round_up(total, self.alignment[i]) + lay.cosize * self._layout["itemsizes"][i]
        return total

    # ------------------------------------------------------------------ cuBLASDx layouts
    def _compiled_layout(self, name: str, leading_dimension=None) -> Layout:
        memory, op, suggested = _LAYOUT_NAMES[name]
        key = f"layout_{'suggested_' if suggested else ''}{memory}_{op}"
        t = self._traits
        return Layout(self, name, leading_dimension, t[key + "_size"], t[key + "_cosize"])

    def _gmem_layout(self, op: str, leading_dimension) -> Layout:
        i = "abc".index(op)
        rows, cols = ((self.m, self.k), (self.k, self.n), (self.m, self.n))[i]
        col_major = self.arrangement[i] == "col_major"
        tight, outer = (rows, cols) if col_major else (cols, rows)
        method = f"get_layout_gmem_{op}"
        if leading_dimension is None:
            return self._compiled_layout(method, tight)
        if not _is_int(leading_dimension):
            raise TypeError(f"{method}: leading_dimension must be None or an int (at least {tight}, the "
                            f"{'rows' if col_major else 'columns'} of {op.upper()}), got {show(leading_dimension)}")
        ld = int(leading_dimension)
        if ld < tight:
            raise ValueError(
                f"{method}: leading_dimension={ld} is smaller than the {tight} "
                f"{'rows' if col_major else 'columns'} of {op.upper()} ({rows} x {cols}, "
                f"{self.arrangement[i]}); it must be an int >= {tight}")
        if ld * (outer - 1) + tight > _MAX_LAYOUT_COSIZE:
            raise ValueError(
                f"{method}: leading_dimension={ld} makes {op.upper()}'s layout span "
                f"{ld * (outer - 1) + tight} elements; at most {_MAX_LAYOUT_COSIZE} are allowed")
        if ld == tight:  # cuBLASDx's default global layout: already among the traits
            return self._compiled_layout(method, tight)
        from ._build.gemm_codegen import gemm_gmem_layout_sizes

        size, cosize = gemm_gmem_layout_sizes(self, op, ld)
        return Layout(self, method, ld, size, cosize)

    def get_layout_gmem_a(self, leading_dimension=None) -> Layout:
        """cuBLASDx's layout of A (m x k) in global memory, in A's arrangement.

        Parameters
        ----------
        leading_dimension : int, optional
            Elements between columns (col_major) or rows (row_major); at least m (col_major) or
            k (row_major). Default: that tight one.

        Returns
        -------
        Layout
            ``size`` m * k, ``cosize`` ``leading_dimension * (outer - 1) + inner`` (as compiled).
        """
        return self._gmem_layout("a", leading_dimension)

    def get_layout_gmem_b(self, leading_dimension=None) -> Layout:
        """cuBLASDx's layout of B (k x n) in global memory (see :meth:`get_layout_gmem_a`; the
        leading dimension is at least k for col_major, n for row_major).

        Parameters
        ----------
        leading_dimension : int, optional

        Returns
        -------
        Layout
        """
        return self._gmem_layout("b", leading_dimension)

    def get_layout_gmem_c(self, leading_dimension=None) -> Layout:
        """cuBLASDx's layout of C (m x n) in global memory (see :meth:`get_layout_gmem_a`; the
        leading dimension is at least m for col_major, n for row_major).

        Parameters
        ----------
        leading_dimension : int, optional

        Returns
        -------
        Layout
        """
        return self._gmem_layout("c", leading_dimension)

    def get_layout_smem_a(self) -> Layout:
        """cuBLASDx's layout of A's shared-memory tile with :attr:`lda` (``cosize`` is :attr:`a_size`).

        Returns
        -------
        Layout
        """
        return self._compiled_layout("get_layout_smem_a")

    def get_layout_smem_b(self) -> Layout:
        """cuBLASDx's layout of B's shared-memory tile with :attr:`ldb`.

        Returns
        -------
        Layout
        """
        return self._compiled_layout("get_layout_smem_b")

    def get_layout_smem_c(self) -> Layout:
        """cuBLASDx's layout of C's shared-memory tile with :attr:`ldc`.

        Returns
        -------
        Layout
        """
        return self._compiled_layout("get_layout_smem_c")

    def suggest_layout_smem_a(self) -> Layout:
        """cuBLASDx's suggested layout of A's shared-memory tile (swizzled where its database has
        one for this GEMM; else :meth:`get_layout_smem_a`'s).

        Returns
        -------
        Layout
        """
        return self._compiled_layout("suggest_layout_smem_a")

    def suggest_layout_smem_b(self) -> Layout:
        """cuBLASDx's suggested layout of B's shared-memory tile (see :meth:`suggest_layout_smem_a`).

        Returns
        -------
        Layout
        """
        return self._compiled_layout("suggest_layout_smem_b")

    def suggest_layout_smem_c(self) -> Layout:
        """cuBLASDx's suggested layout of C's shared-memory tile (see :meth:`suggest_layout_smem_a`).

        Returns
        -------
        Layout
        """
        return self._compiled_layout("suggest_layout_smem_c")

    def get_layout_rmem_c(self) -> Layout:
        """The layout of this thread's C fragment in registers: cuBLASDx 0.4's
        ``get_partitioner().make_accumulator_fragment()`` (``size`` is :attr:`accumulator_size`).

        Returns
        -------
        Layout
        """
        return self._compiled_layout("get_layout_rmem_c")

    def suggest_layout_rmem_c(self) -> Layout:
        """The suggested layout of this thread's C fragment in registers: cuBLASDx 0.4's
        ``suggest_partitioner().make_accumulator_fragment()``; ``cosize`` is the length of the
        ``cuda.local.array`` that holds it.

        Returns
        -------
        Layout
        """
        return self._compiled_layout("suggest_layout_rmem_c")

    # ------------------------------------------------------------------ partitioners (tensor API)
    def get_partitioner(self) -> Partitioner:
        """cuBLASDx's partitioner of fragments of :meth:`get_layout_rmem_c` (its queries run inside
        kernels: ``is_thread_active()``, ``map_fragment_index(i)`` ...; see
        :class:`~nvmath_device._partitioners.Partitioner`).

        Returns
        -------
        Partitioner
        """
        return Partitioner(self, False)

    def suggest_partitioner(self) -> Partitioner:
        """cuBLASDx's partitioner of fragments of :meth:`suggest_layout_rmem_c`.

        Returns
        -------
        Partitioner
        """
        return Partitioner(self, True)

    def get_accumulator(self) -> Accumulator:
        """Inside a kernel: a register accumulator of :meth:`get_layout_rmem_c`, cleared to zero,
        for ``MM.execute(smem_a, smem_b, accumulator)`` (nvmath-python's name). On the host this
        returns the (stateless) description; an accumulator's storage exists only in a kernel.

        Returns
        -------
        Accumulator
        """
        hook = _dispatch.hook("Matmul.make_accumulator")  # the simulator's, with a fragment
        return hook(self, False) if hook else Accumulator(self, False)

    def suggest_accumulator(self) -> Accumulator:
        """As :meth:`get_accumulator`, with fragments of :meth:`suggest_layout_rmem_c`.

        Returns
        -------
        Accumulator
        """
        hook = _dispatch.hook("Matmul.make_accumulator")
        return hook(self, True) if hook else Accumulator(self, True)

    # ------------------------------------------------------------------ traits read from cuBLASDx
    @property
    def _traits(self) -> dict:
        # kept on the instance: every trait property reads it, and a cache lookup renders the
        # shim source and hashes it; kernel launchers read several traits per call
        return self._memo("_traits_memo", lambda: _gemm_traits(self))

    @property
    def block_dim(self) -> Dim3:
        """The block shape of one GEMM, a :class:`~nvmath_device.common_cuda.Dim3` ``(x, y, z)``
        (resolved by cuBLASDx when 'suggested' was asked for)."""
        if self._block_dim != "suggested":
            return Dim3(*self._block_dim)
        t = self._traits
        return Dim3(t["block_dim_x"], t["block_dim_y"], t["block_dim_z"])

    @property
    def block_size(self) -> int:
        """Threads of one GEMM: ``block_dim.x * block_dim.y * block_dim.z`` (nvmath-python's name)."""
        return self.max_threads_per_block

    def valid(self, *knobs: str):
        """Valid values of the knob ``"block_dim"`` (as nvmath-python's ``Matmul.valid``): an
        iterator of 1-tuples, here the one block shape cuBLASDx suggests.

        Parameters
        ----------
        *knobs : {"block_dim"}

        Returns
        -------
        iterator of tuple of Dim3
        """
        if not knobs:
            raise ValueError("valid() needs at least one knob: 'block_dim'")
        for k in knobs:
            _choice(k, ("block_dim",), "knob")
        return iter([tuple(Dim3(*self.suggested_block_dim) for _ in knobs)])

    @property
    def max_threads_per_block(self) -> int:
        """Threads of one GEMM: the product of ``block_dim``."""
        x, y, z = self.block_dim
        return x * y * z

    @property
    def suggested_block_dim(self) -> Dim3:
        """cuBLASDx's suggested block shape for this GEMM."""
        t = self._traits
        return Dim3(t["suggested_block_dim_x"], t["suggested_block_dim_y"], t["suggested_block_dim_z"])

    @property
    def suggested_leading_dimension(self) -> LeadingDimension:
        """cuBLASDx's suggested (lda, ldb, ldc) for this GEMM."""
        t = self._traits
        return LeadingDimension(t["suggested_lda"], t["suggested_ldb"], t["suggested_ldc"])

    @property
    def accumulator_size(self) -> int:
        """Elements of the per-thread register accumulator (C fragment) of the register form."""
        return self._traits["accumulator_size"]

    # ------------------------------------------------------------------ code
    @property
    def files(self) -> list:
        """``[]``: nothing to link by hand (kernels link this GEMM's code themselves), so
        nvmath-python programs' ``@cuda.jit(link=MM.files)`` keep working."""
        return []

    @property
    def symbol(self) -> str:
        """Base name of the generated ``extern "C"`` device functions."""
        from ._build.gemm_codegen import gemm_symbol

        return gemm_symbol(self)

    def ltoir(self) -> bytes:
        """LTO-IR of this GEMM's device functions for ``sm`` (compiled once, then cached)."""
        from ._build.gemm_codegen import gemm_ltoir

        return gemm_ltoir(self)

    def execute(self, *args):
        """Run the GEMM. Callable only inside ``@cuda.jit`` kernels.

        ``MM.execute(alpha, a, b, beta, c)``: ``c = alpha * a @ b + beta * c`` on shared-memory
        tiles (1-D or 2-D C-contiguous shared arrays of ``a_value_type``... with the descriptor's
        layout); alpha and beta are scalars converted to ``c_value_type``.

        ``MM.execute(alpha, a, lda, b, ldb, beta, c, ldc)``: the same with leading dimensions
        given at run time (ints, each at least the tight one of its operand's arrangement: m or k
        for A, ...) instead of :attr:`leading_dimension`; the tiles hold ``ld * (outer - 1) +
        inner`` elements each (size the buffer with :meth:`get_shared_storage_size` ``(lda, ldb,
        ldc)``). Its code is a separate unit, compiled only for kernels that use this form.

        ``MM.execute(a, b, acc)``: ``acc += a @ b`` where ``acc`` is a local array of
        ``accumulator_size`` ``c_value_type`` values (this thread's C fragment; see
        :meth:`fragment_coordinates`). Only A and B live in shared memory.

        All threads of ``block_dim`` must call it; synchronise (``cuda.syncthreads()``) between
        writing the tiles and the call, and before reusing the tiles afterwards.

        Parameters
        ----------
        *args
            ``(alpha, a, b, beta, c)`` for the shared-memory form,
            ``(alpha, a, lda, b, ldb, beta, c, ldc)`` for it with run-time leading dimensions, ``(a, b, acc)`` for the register
            form: ``alpha``/``beta`` scalars, ``a``/``b``/``c`` shared arrays of
            ``a_value_type``/``b_value_type``/``c_value_type`` holding ``a_size``/``b_size``/
            ``c_size`` elements, ``acc`` a local array of ``accumulator_size`` ``c_value_type``.
        """
        run = _dispatch.implementation(
            "Matmul.execute", "Matmul.execute can only be called inside a @cuda.jit kernel")
        return run(self, *args)

    def __call__(self, *args):
        """``MM(...)`` is ``MM.execute(...)`` (nvmath-python's older spelling)."""
        return self.execute(*args)

    def fragment_coordinates(self, *args):
        """Fill this thread's accumulator coordinates. Callable only inside ``@cuda.jit`` kernels.

        ``MM.fragment_coordinates(rows, cols)``: ``rows`` and ``cols`` are int32 local arrays of
        ``accumulator_size`` elements; element ``i`` of the accumulator of :meth:`execute`'s
        register form is C[rows[i], cols[i]], or unused when ``rows[i] == -1`` (threads beyond the
        GEMM's tiling, or a partial tile).

        Parameters
        ----------
        *args
            ``(rows, cols)``: int32 local arrays of ``accumulator_size`` elements, filled in place.
        """
        run = _dispatch.implementation(
            "Matmul.fragment_coordinates",
            "Matmul.fragment_coordinates can only be called inside a @cuda.jit kernel")
        return run(self, *args)

    def fragment_coordinates_table(self) -> np.ndarray:
        """Every thread's :meth:`fragment_coordinates`, on the host and without a GPU: an int32
        array of shape ``(threads, accumulator_size, 2)`` whose ``[t, i]`` is ``(row, col)`` of
        accumulator value ``i`` of thread ``t`` (cuBLASDx's thread index within ``block_dim``),
        or ``(-1, -1)`` where it is unused. Read out of cuBLASDx's partitioner by NVRTC (one
        compile per architecture, kept in the disk cache), the same table the simulator uses.
        Beyond nvmath-python (which has no ``fragment_coordinates``): lets host code plan how a
        kernel's results leave the registers, e.g. which values are neighbours in a row.

        Returns
        -------
        numpy.ndarray
            Read-only, int32, ``(threads, accumulator_size, 2)``.
        """
        from ._build.gemm_sim_tables import fragment_table

        return fragment_table(self)[0]

    def _copy(self, name, args):
        run = _dispatch.implementation(
            "Matmul.copy", f"Matmul.{name} can only be called inside a @cuda.jit kernel")
        return run(self, name, *args)

    def load_a(self, *args):
        """``MM.load_a(gA, sA)``: copy the 2-D global A (m x k) into the shared tile (``a_size``
        elements in A's arrangement and leading dimension), by the threads of ``block_dim``.
        Callable only inside ``@cuda.jit`` kernels; synchronise before reading the tile.

        Parameters
        ----------
        *args
            ``(gA, sA)``: a 2-D global array (any strides) and the shared tile.
        """
        return self._copy("load_a", args)

    def load_b(self, *args):
        """``MM.load_b(gB, sB)``: copy the 2-D global B (k x n) into B's shared tile (see :meth:`load_a`).

        Parameters
        ----------
        *args
            ``(gB, sB)``: a 2-D global array (any strides) and the shared tile.
        """
        return self._copy("load_b", args)

    def load_c(self, *args):
        """``MM.load_c(gC, sC)``: copy the 2-D global C (m x n) into C's shared tile (see :meth:`load_a`).

        Parameters
        ----------
        *args
            ``(gC, sC)``: a 2-D global array (any strides) and the shared tile.
        """
        return self._copy("load_c", args)

    def store_c(self, *args):
        """``MM.store_c(sC, gC)``: copy C's shared tile to the 2-D global C (m x n) (see :meth:`load_a`).

        Parameters
        ----------
        *args
            ``(sC, gC)``: the shared tile and a 2-D global array (any strides).
        """
        return self._copy("store_c", args)


def _gemm_traits(mm) -> dict:
    from ._build.gemm_codegen import gemm_traits

    return gemm_traits(mm)


_quiet_transpose_mode = False  # True while unpickling: the warning was given when it was made


def _rebuild_matmul(key, transpose_mode=None, options=(False, False, False)):
    global _quiet_transpose_mode
    size, prec, data_type, arr, ld_mode, bdim, aligns, execution, sm = key
    opts = dict(zip(("with_pipeline", "enable_input_streaming", "static_block_dim"), options))
    if transpose_mode is not None:
        arr = None
        _quiet_transpose_mode = True
        try:
            return Matmul(size=size, precision=tuple(prec), data_type=data_type, leading_dimension=ld_mode,
                          block_dim=bdim, alignment=aligns, execution=execution, sm=sm,
                          transpose_mode=transpose_mode, **opts)
        finally:
            _quiet_transpose_mode = False
    return Matmul(size=size, precision=tuple(prec), data_type=data_type,
                  arrangement=arr, leading_dimension=ld_mode, block_dim=bdim, alignment=aligns,
                  execution=execution, sm=sm, transpose_mode=transpose_mode, **opts)


class _RuntimeLDCode:
    """The code of ``Matmul.execute(alpha, a, lda, b, ldb, beta, c, ldc)`` for one descriptor: a
    separate NVRTC unit (kernels that never call that form neither compile nor link it). Stands
    where the numba layer expects a descriptor to link (``symbol``, ``ltoir()``; hashable,
    picklable)."""

    __slots__ = ("mm",)

    def __init__(self, mm: Matmul):
        self.mm = mm

    @property
    def symbol(self) -> str:
        return f"{self.mm.symbol}_ld"

    @property
    def sm(self) -> int:
        return self.mm.sm

    def ltoir(self) -> bytes:
        from ._build.gemm_codegen import gemm_runtime_ld_ltoir

        return gemm_runtime_ld_ltoir(self.mm)

    def __eq__(self, other):
        return type(other) is _RuntimeLDCode and other.mm == self.mm

    def __hash__(self):
        return hash(("runtime-ld", self.mm))

    def __reduce__(self):
        return (_RuntimeLDCode, (self.mm,))

    def __repr__(self):
        return f"RuntimeLD({self.mm!r})"


def runtime_ld_code(mm: Matmul) -> _RuntimeLDCode:
    """What the numba layer links for ``mm``'s run-time leading-dimension execute."""
    return _RuntimeLDCode(mm)


def check_runtime_lds(mm: Matmul, lds) -> tuple[int, int, int]:
    """Run-time (lda, ldb, ldc) checked against the tight ones (ValueError naming the argument)."""
    rows, cols = (mm.m, mm.k, mm.m), (mm.k, mm.n, mm.n)
    out = []
    for i, (name, v) in enumerate(zip(("lda", "ldb", "ldc"), lds)):
        tight = rows[i] if mm.arrangement[i] == "col_major" else cols[i]
        if not _is_int(v):
            raise TypeError(f"Matmul.execute: {name} must be an int, got {show(v)}")
        if v < tight:
            raise ValueError(f"Matmul.execute: {name}={show(v)} is smaller than the {tight} that "
                             f"{'ABC'[i]} ({mm.arrangement[i]}, {rows[i]} x {cols[i]}) needs")
        out.append(int(v))
    return tuple(out)


def runtime_tile_sizes(mm: Matmul, lds) -> tuple[int, int, int]:
    """Elements of the A, B, C tiles with leading dimensions ``lds``: ``ld * (outer - 1) + inner``."""
    rows, cols = (mm.m, mm.k, mm.m), (mm.k, mm.n, mm.n)
    return tuple(ld * (c - 1) + r if a == "col_major" else ld * (r - 1) + c
                 for ld, r, c, a in zip(lds, rows, cols, mm.arrangement))
