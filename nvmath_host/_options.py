# SPDX-License-Identifier: Apache-2.0
"""The user's choices: compute type, options, plan preferences and algorithms, checked."""

from __future__ import annotations

import dataclasses
import enum
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from mathdx_operands import DTYPES

from . import _cublaslt as lt

__all__ = [
    "MatmulComputeType",
    "MatmulReductionScheme",
    "MatmulNumericalImplFlags",
    "MatmulOptions",
    "MatmulPlanPreferences",
    "MatmulEpilogPreferences",
    "matrix_qualifiers_dtype",
]

matrix_qualifiers_dtype = np.dtype([("structure", "O"), ("is_conjugate", "<i4")])
"""The NumPy dtype of :class:`Matmul`'s ``qualifiers`` (nvmath-python's name and fields): one
element per operand ``a``, ``b``, ``c``. ``is_conjugate`` non-zero: the operand's conjugate is
multiplied (a or b; complex dtypes: cuBLASLt's conjugate transpose, so the operand must be laid
out as a transpose of the result's order; no copy); ``structure``: None or 0 (general matrices
only)."""


class MatmulComputeType(int, enum.Enum):
    """Accumulation type of the matmul (values are ``cublasComputeType_t``'s).

    ``COMPUTE_32F_FAST_16F`` / ``_16BF`` / ``_TF32`` let cuBLASLt round float32 (or complex64)
    inputs down to that type for tensor cores, accumulating in float32.
    """

    COMPUTE_16F = lt.ComputeType.COMPUTE_16F
    COMPUTE_16F_PEDANTIC = lt.ComputeType.COMPUTE_16F_PEDANTIC
    COMPUTE_32F = lt.ComputeType.COMPUTE_32F
    COMPUTE_32F_PEDANTIC = lt.ComputeType.COMPUTE_32F_PEDANTIC
    COMPUTE_32F_FAST_16F = lt.ComputeType.COMPUTE_32F_FAST_16F
    COMPUTE_32F_FAST_16BF = lt.ComputeType.COMPUTE_32F_FAST_16BF
    COMPUTE_32F_FAST_TF32 = lt.ComputeType.COMPUTE_32F_FAST_TF32
    COMPUTE_64F = lt.ComputeType.COMPUTE_64F
    COMPUTE_64F_PEDANTIC = lt.ComputeType.COMPUTE_64F_PEDANTIC


class MatmulReductionScheme(enum.IntFlag):
    """``cublasLtReductionScheme_t``: how a split-K algorithm reduces its partial results
    (combine with ``|`` for :attr:`MatmulPlanPreferences.reduction_scheme_mask`)."""

    NONE = 0
    INPLACE = 1
    COMPUTE_TYPE = 2
    OUTPUT_TYPE = 4
    MASK = 7


class MatmulNumericalImplFlags(enum.IntFlag):
    """``cublasLtNumericalImplFlags_t``: an algorithm's numerical implementation (combine with
    ``|`` for :attr:`MatmulPlanPreferences.numerical_impl_mask`); nvmath-python's names."""

    OP_TYPE_FMA = 0x01
    OP_TYPE_TENSOR_HMMA = 0x02
    OP_TYPE_TENSOR_IMMA = 0x04
    OP_TYPE_TENSOR_DMMA = 0x08
    OP_TYPE_TENSOR_MASK = 0xFE
    OP_TYPE_MASK = 0xFF
    ACCUMULATOR_16F = 0x01 << 8
    ACCUMULATOR_32F = 0x02 << 8
    ACCUMULATOR_64F = 0x04 << 8
    ACCUMULATOR_32I = 0x08 << 8
    ACCUMULATOR_TYPE_MASK = 0xFF << 8
    INPUT_TYPE_16F = 0x01 << 16
    INPUT_TYPE_16BF = 0x02 << 16
    INPUT_TYPE_TF32 = 0x04 << 16
    INPUT_TYPE_32F = 0x08 << 16
    INPUT_TYPE_64F = 0x10 << 16
    INPUT_TYPE_8I = 0x20 << 16
    INPUT_TYPE_8F_E4M3 = 0x40 << 16
    INPUT_TYPE_8F_E5M2 = 0x80 << 16
    INPUT_TYPE_MASK = 0xFF << 16
    GAUSSIAN = 0x01 << 32
    ALL = (1 << 64) - 1


@dataclass
class MatmulOptions:
    """Options of a matmul; a field left ``None`` means the default.

    Attributes
    ----------
    compute_type : MatmulComputeType, optional
        Default: ``COMPUTE_32F`` for 16/32-bit floats, complex64 and FP8; ``COMPUTE_64F`` for
        float64 and complex128.
    result_type : str, optional
        dtype name of the result. Only FP8 operands accept another type than theirs:
        bfloat16, float16, float32, float8_e4m3fn, or float8_e5m2 (this one needs a
        float8_e5m2 operand). Their default, as in nvmath-python, is ``c``'s type when ``c``
        is given, else ``a``'s (an FP8 result, which needs a ``"d"`` scale). An FP8 result
        needs ``quantization_scales["d"]``; its ``c``, if any, must be float16 or bfloat16
        (cuBLASLt's FP8 type table); it is rounded to nearest and saturated to the FP8 range.
        Epilogs whose auxiliary data would be FP8 (DGELU*, the BGRAD ones) are refused with
        an FP8 result; GELU_AUX* need ``preferences.epilog.aux_type`` there
        (:class:`MatmulEpilogPreferences`).
    result_order : {"C", "F"}, optional
        Memory order of each result matrix. Default: from the bias shape (``(N,)`` -> "C",
        ``(M, 1)`` -> "F"), else from ``c``, else "C".
    inplace : bool, optional
        Write the result into ``c`` (default False).
    result_amax : bool, optional
        FP8 results only (cuBLASLt computes it for no other result type): also return
        ``aux["result_amax"]``, a one-element float32 array of the operands' package holding
        ``max |D|`` before the ``"d"`` scale and the FP8 rounding, i.e. the amax from which
        the next ``"d"`` scale is usually chosen (e.g. ``448 / amax`` for float8_e4m3fn).
    fast_accumulation : bool, optional
        FP8 only: cuBLASLt's fast (less accurate) accumulation.
    device_id : int, optional
        The GPU that computes NumPy operands (default: the current device).
    sm_count_target : int, optional
        Plan for this many SMs (cuBLASLt's ``SM_COUNT_TARGET``), e.g. when another stream
        keeps some busy; 0 or None: the device's count.
    blocking : True or "auto", optional
        True: :meth:`Matmul.execute` and :func:`matmul` wait for the result (the stream is
        synchronised). "auto" (the default): they return once it is enqueued for GPU operands,
        and wait for NumPy operands (whose result is copied back).
    logger : logging.Logger, optional
        Where :class:`Matmul` reports the problem it made, each plan (epilog, algorithms,
        workspace) and each autotuning (every algorithm's time), at INFO level; default: the
        root logger. Executions are not logged (they are the hot path).
    """

    compute_type: MatmulComputeType | None = None
    result_type: str | None = None
    result_order: str | None = None
    inplace: bool | None = None
    result_amax: bool | None = None
    fast_accumulation: bool | None = None
    device_id: int | None = None
    sm_count_target: int | None = None
    blocking: bool | str | None = None
    logger: logging.Logger | None = None


@dataclass
class MatmulEpilogPreferences:
    """The epilog's auxiliary output, as nvmath-python's ``MatmulEpilogPreferences`` (the
    ``epilog`` field of :class:`MatmulPlanPreferences`).

    Attributes
    ----------
    aux_type : str, CudaDataType or None
        The dtype of the ``gelu_aux`` output of GELU_AUX and GELU_AUX_BIAS (default: the
        result's). cuBLASLt takes another type only with a float8_e4m3fn result:
        float8_e4m3fn or float16. An FP8 ``aux_type`` needs the epilog input
        ``"aux_quantization_scale"`` (a float or a one-element float32 device array), which
        scales the stored values as ``"d"`` scales the result.
    aux_amax : bool
        Also return ``"gelu_aux_amax"``, the largest ``|gelu_aux|`` before its scale (a
        one-element float32 array); FP8 ``gelu_aux`` only.
    """

    aux_type: Any = None
    aux_amax: bool = False


@dataclass
class MatmulPlanPreferences:
    """Preferences for :meth:`Matmul.plan`.

    Attributes
    ----------
    limit : int
        How many algorithms to ask cuBLASLt's heuristic for (default 8).
    max_workspace : int
        Workspace limit in bytes (default 32 MiB).
    reduction_scheme_mask : MatmulReductionScheme
        The split-K reductions allowed (default: all).
    max_waves_count : float
        Exclude algorithms whose device utilisation estimate (waves) is above this; 0: no limit.
    numerical_impl_mask : MatmulNumericalImplFlags
        The numerical implementations allowed (default: all).
    epilog : MatmulEpilogPreferences or dict, optional
        The type and amax of the epilog's auxiliary output.
    """

    limit: int = 8
    max_workspace: int = 32 * 1024 * 1024
    reduction_scheme_mask: MatmulReductionScheme = MatmulReductionScheme.MASK
    max_waves_count: float = 0.0
    numerical_impl_mask: MatmulNumericalImplFlags = MatmulNumericalImplFlags.ALL
    epilog: MatmulEpilogPreferences | dict | None = None


def is_int(v) -> bool:
    """Whether ``v`` is a Python or NumPy integer (not a bool, which Python counts as one)."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def as_dataclass(value, cls, what):
    """``value`` (an instance of ``cls``, a dict of its fields or None) as a ``cls``."""
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    if isinstance(value, dict):
        names = {f.name for f in dataclasses.fields(cls)}
        bad = set(value) - names
        if bad:
            raise ValueError(
                f"{what}: unknown field(s) {sorted(bad, key=repr)}; allowed: {sorted(names)}"
            )
        return cls(**value)
    raise TypeError(f"{what}: expected {cls.__name__}, a dict or None; got {type(value).__name__}")


_BOOL_OPTIONS = ("inplace", "result_amax", "fast_accumulation")


def _compute_type(ct) -> MatmulComputeType:
    """A compute type given as a member, its name or its value, as a member."""
    allowed = [x.name for x in MatmulComputeType]
    if isinstance(ct, str):
        new = MatmulComputeType.__members__.get(ct.upper())
        if new is None:
            raise ValueError(
                f"options.compute_type: unknown name {ct!r}; allowed (case-insensitive): {allowed}"
            )
        return new
    if is_int(ct):
        try:
            return MatmulComputeType(int(ct))
        except ValueError:
            raise ValueError(
                f"options.compute_type: unknown value {ct!r}; allowed: {allowed}"
            ) from None
    raise TypeError(
        f"options.compute_type: expected a MatmulComputeType, its name or None; got "
        f"{type(ct).__qualname__}; allowed: {allowed}"
    )


class CudaDataType(enum.IntEnum):
    """``cudaDataType_t`` (CUDA's ``library_types.h``), as nvmath-python's ``nvmath.CudaDataType``.

    ``options.result_type`` takes a member for the dtype of that name (``CUDA_R_8F_E4M3`` is
    float8_e4m3fn); the types nvmath_host computes with are float16, bfloat16, float32,
    float64, complex64, complex128 and the two FP8 types, the others are refused by name.
    """

    CUDA_R_16F = 2
    CUDA_C_16F = 6
    CUDA_R_16BF = 14
    CUDA_C_16BF = 15
    CUDA_R_32F = 0
    CUDA_C_32F = 4
    CUDA_R_64F = 1
    CUDA_C_64F = 5
    CUDA_R_4I = 16
    CUDA_C_4I = 17
    CUDA_R_4U = 18
    CUDA_C_4U = 19
    CUDA_R_8I = 3
    CUDA_C_8I = 7
    CUDA_R_8U = 8
    CUDA_C_8U = 9
    CUDA_R_16I = 20
    CUDA_C_16I = 21
    CUDA_R_16U = 22
    CUDA_C_16U = 23
    CUDA_R_32I = 10
    CUDA_C_32I = 11
    CUDA_R_32U = 12
    CUDA_C_32U = 13
    CUDA_R_64I = 24
    CUDA_C_64I = 25
    CUDA_R_64U = 26
    CUDA_C_64U = 27
    CUDA_R_8F_E4M3 = 28
    CUDA_R_8F_UE4M3 = 28  # an alias of CUDA_R_8F_E4M3, as in library_types.h
    CUDA_R_8F_E5M2 = 29
    CUDA_R_8F_UE8M0 = 30
    CUDA_R_6F_E2M3 = 31
    CUDA_R_6F_E3M2 = 32
    CUDA_R_4F_E2M1 = 33
    CUDA_R_8F_UE5M3 = 34


# cudaDataType_t names (CudaDataType members without "CUDA_": R_8F_E4M3, ...) of the result
# types, as dtype names
_CUDA_TYPE_NAMES = {
    "R_16F": "float16",
    "R_16BF": "bfloat16",
    "R_32F": "float32",
    "R_64F": "float64",
    "C_32F": "complex64",
    "C_64F": "complex128",
    "R_8F_E4M3": "float8_e4m3fn",
    "R_8F_E5M2": "float8_e5m2",
}


def _dtype_name(rt, what: str = "options.result_type") -> str:
    """A type given as a dtype, a ``cudaDataType`` enum member (``CUDA_R_16BF``: as
    nvmath-python's ``nvmath.CudaDataType``) or anything with a dtype's ``name``, as its name."""
    try:
        return np.dtype(rt).name
    except Exception:
        name = getattr(rt, "name", None)
        if not isinstance(name, str):
            raise TypeError(
                f"{what}: expected a dtype name (str), a NumPy dtype or None; "
                f"got {type(rt).__qualname__}; supported: {', '.join(DTYPES)}"
            ) from None
        return _CUDA_TYPE_NAMES.get(name.removeprefix("CUDA_"), name)


def check_options(o: MatmulOptions) -> MatmulOptions:
    """``o`` with its field types checked (TypeError/ValueError naming the field) and a
    compute type given by name or value made a :class:`MatmulComputeType` (a copy then)."""
    ct = o.compute_type
    if ct is not None and type(ct) is not MatmulComputeType:
        o = dataclasses.replace(o, compute_type=_compute_type(ct))
    rt = o.result_type
    if rt is not None and not isinstance(rt, str):
        o = dataclasses.replace(o, result_type=_dtype_name(rt))
    if o.result_order is not None and (
        not isinstance(o.result_order, str) or o.result_order not in ("C", "F")
    ):
        raise ValueError(f"options.result_order: {o.result_order!r}; allowed 'C', 'F' or None")
    for f in _BOOL_OPTIONS:
        v = getattr(o, f)
        if v is not None and not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"options.{f}: expected True, False or None; got {v!r}")
    t = o.sm_count_target
    if t is not None and (not is_int(t) or t < 0):
        raise ValueError(f"options.sm_count_target: {t!r}; expected an int >= 0 or None")
    if o.logger is not None and not isinstance(o.logger, logging.Logger):
        raise TypeError(f"options.logger: expected a logging.Logger or None; got {type(o.logger).__name__}")
    if o.blocking is not None and o.blocking is not True and o.blocking != "auto":
        raise ValueError(f"options.blocking: {o.blocking!r}; allowed True, 'auto' or None")
    d = o.device_id
    if d is not None:
        if not is_int(d):
            raise TypeError(f"options.device_id: expected a device ordinal (int); got {d!r}")
        if d < 0:
            raise ValueError(f"options.device_id: {d}; must be >= 0")
    return o


def check_preferences(p: MatmulPlanPreferences) -> MatmulPlanPreferences:
    """``p`` with its fields checked (TypeError/ValueError naming the field)."""
    for f, least in (("limit", 1), ("max_workspace", 0)):
        v = getattr(p, f)
        if not is_int(v):
            raise TypeError(f"preferences.{f}: expected an int; got {v!r}")
        if v < least:
            raise ValueError(f"preferences.{f}: {v}; must be >= {least}")
    for f, top in (("reduction_scheme_mask", 7), ("numerical_impl_mask", (1 << 64) - 1)):
        v = getattr(p, f)
        if not is_int(v) or not 0 <= v <= top:
            raise ValueError(f"preferences.{f}: {v!r}; expected a mask of {top:#x} or less (its flags combined with |)")
    w = p.max_waves_count
    if not isinstance(w, (int, float, np.integer, np.floating)) or isinstance(w, (bool, np.bool_)) or not w >= 0:
        raise ValueError(f"preferences.max_waves_count: {w!r}; expected a number >= 0 (0: no limit)")
    e = as_dataclass(p.epilog, MatmulEpilogPreferences, "preferences.epilog")
    if e.aux_type is not None and not isinstance(e.aux_type, str):
        e = dataclasses.replace(e, aux_type=_dtype_name(e.aux_type, "preferences.epilog.aux_type"))
    if not isinstance(e.aux_amax, (bool, np.bool_)):
        raise TypeError(f"preferences.epilog.aux_amax: expected a bool; got {e.aux_amax!r}")
    return p if e is p.epilog else dataclasses.replace(p, epilog=e)


def check_qualifiers(qualifiers, a, b) -> tuple[bool, bool]:
    """Whether cuBLASLt conjugates ``a`` and ``b`` (Operands): ``qualifiers``'
    ``is_conjugate`` (None: none) against each operand's own conjugate bit (a lazy torch
    ``.conj()``, :attr:`mathdx_operands.Operand.conj`): both conjugate twice, back to the
    memory's values. Real dtypes are their own conjugates (False).

    Raises
    ------
    TypeError
        ``qualifiers`` not a NumPy array of :data:`matrix_qualifiers_dtype`.
    ValueError
        Not of shape (3,); a structure other than None or 0; ``c`` conjugated.
    """
    flags = [a.conj, b.conj]
    if qualifiers is not None:
        if not isinstance(qualifiers, np.ndarray) or qualifiers.dtype != matrix_qualifiers_dtype:
            got = qualifiers.dtype if isinstance(qualifiers, np.ndarray) else type(qualifiers).__name__
            raise TypeError(
                f"qualifiers: expected a NumPy array of nvmath_host.matrix_qualifiers_dtype "
                f"{matrix_qualifiers_dtype}; got {got}"
            )
        if qualifiers.shape != (3,):
            raise ValueError(
                f"qualifiers: shape {qualifiers.shape}; expected (3,): one qualifier each for a, b and c"
            )
        for i, name in enumerate("abc"):
            st = qualifiers[i]["structure"]
            if not (st is None or (isinstance(st, (int, np.integer)) and st == 0)):
                raise ValueError(
                    f"qualifiers[{i}]['structure'] ({name}): {st!r}; only general matrices are "
                    "supported (None or 0)"
                )
        if qualifiers[2]["is_conjugate"]:
            raise ValueError(
                "qualifiers[2]['is_conjugate'] (c): conjugating c is not supported (cuBLASLt "
                "conjugates only a and b)"
            )
        flags = [f != bool(q) for f, q in zip(flags, qualifiers["is_conjugate"][:2])]
    return tuple(f and op.dtype.kind == "c" for f, op in zip(flags, (a, b)))
