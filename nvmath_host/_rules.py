# SPDX-License-Identifier: Apache-2.0
"""Which types cuBLASLt combines: compute and scale types, result and C types, FP8 rules."""

from __future__ import annotations

import numpy as np

from mathdx_operands import DTYPES, DType, dtype_of_name

from . import _cublaslt as lt
from ._options import MatmulComputeType
from ._wrap import AUX_SCALE_INPUT
from .epilogs import EPILOGS, MatmulEpilog

CT = MatmulComputeType
_F32 = {CT.COMPUTE_32F, CT.COMPUTE_32F_PEDANTIC}
_F32_FAST = {CT.COMPUTE_32F_FAST_16F, CT.COMPUTE_32F_FAST_16BF, CT.COMPUTE_32F_FAST_TF32}
_F64 = {CT.COMPUTE_64F, CT.COMPUTE_64F_PEDANTIC}
#: operand dtype -> (default compute type, allowed compute types)
COMPUTE_TYPES = {
    "float16": (CT.COMPUTE_32F, _F32 | {CT.COMPUTE_16F, CT.COMPUTE_16F_PEDANTIC}),
    "bfloat16": (CT.COMPUTE_32F, _F32),
    "float32": (CT.COMPUTE_32F, _F32 | _F32_FAST),
    "float64": (CT.COMPUTE_64F, _F64),
    "complex64": (CT.COMPUTE_32F, _F32 | _F32_FAST),
    "complex128": (CT.COMPUTE_64F, _F64),
    "float8_e4m3fn": (CT.COMPUTE_32F, _F32),
    "float8_e5m2": (CT.COMPUTE_32F, _F32),
}
FP8_RESULTS = ("float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2")
# cuBLASLt's FP8 type table (cuBLAS docs, cublasLtMatmul, "FP8" data types; the same list is in
# nvmath-python's FP8 tests): an FP8 result D takes a C matrix (and a bias) of float16 or
# bfloat16 only, never C == D's type; float8_e5m2 results need one float8_e5m2 operand
# (e4m3 x e4m3 gives e4m3, bf16, fp16 or fp32 only); e5m2 x e5m2 is not supported at all.
FP8_C_TYPES = ("float16", "bfloat16")
#: epilogs allowed with an FP8 result: those whose auxiliary data does not take D's (FP8)
#: type, and GELU_AUX* (whose gelu_aux takes its own type, scale and amax: cuBLASLt's
#: EPILOGUE_AUX_DATA_TYPE/_SCALE_POINTER/_AMAX_POINTER). DGELU* (an FP8 gelu_aux input) and
#: the BGRAD ones (an FP8 bgrad output) are refused.
FP8_RESULT_EPILOGS = (
    "DEFAULT",
    "RELU",
    "RELU_AUX",
    "BIAS",
    "RELU_BIAS",
    "RELU_AUX_BIAS",
    "DRELU",
    "GELU",
    "GELU_BIAS",
    "GELU_AUX",
    "GELU_AUX_BIAS",
)
#: the gelu_aux types cuBLASLt takes other than the result's, with a float8_e4m3fn result
#: (cublasLt.h, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE)
FP8_AUX_TYPES = ("float8_e4m3fn", "float16")
#: the key under which the epilog input AUX_SCALE_INPUT (an FP8 gelu_aux's scale) is kept
#: with the FP8 scales (which is also how errors name it)
AUX_SCALE = f"epilog_inputs[{AUX_SCALE_INPUT!r}]"


def scale_what(k: str) -> str:
    """How errors name the scale ``k``: ``quantization_scales[k]`` or the epilog input."""
    return k if k == AUX_SCALE else f"quantization_scales[{k!r}]"


def split_aux_scale(epilog_inputs):
    """``(aux_quantization_scale or None, the other epilog inputs)`` of a call's
    ``epilog_inputs`` (left as they are when not a dict: wrapping them reports that)."""
    if not isinstance(epilog_inputs, dict) or AUX_SCALE_INPUT not in epilog_inputs:
        return None, epilog_inputs
    rest = dict(epilog_inputs)
    return rest.pop(AUX_SCALE_INPUT), rest


def aux_dtype(epilog, spec, d: DType, prefs) -> DType | None:
    """The dtype of the epilog's ``gelu_aux`` output (None without one), from
    ``preferences.epilog`` (a checked :class:`MatmulEpilogPreferences`) and the result's ``d``."""
    aux_type = prefs.aux_type if prefs is not None else None
    amax = bool(prefs.aux_amax) if prefs is not None else False
    if spec.aux_output != "gelu_aux":
        for name, given in (("aux_type", aux_type is not None), ("aux_amax", amax)):
            if given:
                raise ValueError(
                    f"preferences.epilog.{name}: only for the epilogs with a gelu_aux output "
                    f"(GELU_AUX, GELU_AUX_BIAS); the epilog is {epilog.name}"
                )
        return None
    if d.kind == "f8":
        # cuBLASLt 13 (measured on an H100): GELU_AUX with an FP8 result runs with an explicit
        # float8_e4m3fn or float16 gelu_aux next to a float8_e4m3fn result, and a float16 C
        # and bias; its default gelu_aux there is not D's type, so it is not offered.
        if aux_type is None or d.name != "float8_e4m3fn":
            raise ValueError(
                f"preferences.epilog.aux_type: {epilog.name} with an FP8 result ({d.name}) needs "
                f"the gelu_aux type given: {' or '.join(FP8_AUX_TYPES)}, with a float8_e4m3fn "
                "result (an FP8 one also takes the epilog input aux_quantization_scale)"
            )
    aux = d if aux_type is None else dtype_of_name(aux_type, "preferences.epilog.aux_type")
    if aux.name != d.name and not (d.name == "float8_e4m3fn" and aux.name in FP8_AUX_TYPES):
        raise ValueError(
            f"preferences.epilog.aux_type: {aux.name}; cuBLASLt stores gelu_aux in the result's "
            f"type ({d.name}), or, for a float8_e4m3fn result, in {' or '.join(FP8_AUX_TYPES)}"
        )
    if amax and aux.kind != "f8":
        raise ValueError(
            f"preferences.epilog.aux_amax: cuBLASLt computes the amax of an FP8 gelu_aux only; "
            f"gelu_aux is {aux.name} (set preferences.epilog.aux_type to float8_e4m3fn)"
        )
    return aux


def fp8_operands(at: DType, bt: DType) -> bool:
    """Whether the operands are FP8; ValueError (naming ``b``) for a pair cuBLASLt refuses."""
    if at.kind == "f8" or bt.kind == "f8":
        if at.kind != "f8" or bt.kind != "f8":
            raise ValueError(f"b: dtype pair ({at.name}, {bt.name}) is not supported")
        if at.name == bt.name == "float8_e5m2":
            raise ValueError("b: float8_e5m2 x float8_e5m2 is not supported by cuBLASLt")
        return True
    if at.name != bt.name:
        raise ValueError(f"b: dtype {bt.name} differs from a's {at.name}")
    return False


def result_dtype(at: DType, bt: DType, c_dtype: DType | None, result_type) -> DType:
    """The result's dtype: ``options.result_type`` checked, or the default for the operands."""
    fp8 = at.kind == "f8"
    if result_type is None:
        if not fp8:
            return at
        # nvmath-python's default: c's dtype when c is given, else a's (an FP8 result)
        rt = c_dtype if c_dtype is not None else at
    else:
        rt = dtype_of_name(str(getattr(result_type, "name", result_type)), "options.result_type")
        if not fp8 and rt.name != at.name:
            raise ValueError(
                f"options.result_type: {rt.name} is only allowed for FP8 operands "
                f"(the result of {at.name} operands is {at.name})"
            )
        if fp8 and rt.name not in FP8_RESULTS:
            raise ValueError(f"options.result_type: {rt.name}; FP8 allows {FP8_RESULTS}")
    if rt.name == "float8_e5m2" and at.name == bt.name == "float8_e4m3fn":
        raise ValueError(
            "options.result_type: float8_e5m2 results need a float8_e5m2 operand; cuBLASLt "
            "allows float8_e4m3fn x float8_e4m3fn only float8_e4m3fn, bfloat16, float16 or "
            "float32 results"
        )
    return rt


def check_c_dtype(c_dtype: DType, d: DType) -> None:
    """ValueError unless cuBLASLt takes a ``c`` of ``c_dtype`` next to a result of ``d``."""
    if d.kind == "f8":
        if c_dtype.name not in FP8_C_TYPES:
            raise ValueError(
                f"c: dtype {c_dtype.name}; with an FP8 result ({d.name}) cuBLASLt "
                f"takes c only in {' or '.join(FP8_C_TYPES)}"
            )
    elif c_dtype.name != d.name:
        raise ValueError(f"c: dtype {c_dtype.name} differs from the result's {d.name}")


def c_matrix_dtype(c_dtype: DType | None, d: DType, bias_dtype: DType | None) -> DType:
    """The type of cuBLASLt's C matrix.

    Without ``c`` it is never read (beta = 0) but must still be a type cuBLASLt accepts next
    to D: D's own type, or for an FP8 D the bias type (the table pairs C and bias types) or
    bfloat16.
    """
    if c_dtype is not None:
        return c_dtype
    if d.kind == "f8":
        if bias_dtype is not None and bias_dtype.name in FP8_C_TYPES:
            return bias_dtype
        return DTYPES["bfloat16"]
    return d


def compute_type(at: DType, requested) -> MatmulComputeType:
    """``options.compute_type`` checked against the operands' dtype, or its default."""
    default, allowed = COMPUTE_TYPES[at.name]
    if requested is None:
        return default
    try:
        ct = MatmulComputeType(requested)
    except ValueError:
        raise ValueError(f"options.compute_type: unknown value {requested!r}") from None
    if ct not in allowed:
        raise ValueError(
            f"options.compute_type: {ct.name} is not supported for {at.name} operands; "
            f"allowed: {sorted(x.name for x in allowed)}"
        )
    return ct


def scale_type(ct: MatmulComputeType, at: DType) -> tuple[lt.DataType, type]:
    """cuBLASLt's scale type (of alpha and beta) and its NumPy type."""
    if ct in (CT.COMPUTE_16F, CT.COMPUTE_16F_PEDANTIC):
        return lt.DataType.R_16F, np.float16
    cplx = at.kind == "c"
    if ct in _F64:
        return (lt.DataType.C_64F, np.complex128) if cplx else (lt.DataType.R_64F, np.float64)
    return (lt.DataType.C_32F, np.complex64) if cplx else (lt.DataType.R_32F, np.float32)


def check_epilog(epilog: MatmulEpilog, at: DType, d: DType) -> None:
    """ValueError unless cuBLASLt fuses ``epilog`` for these operand and result types."""
    spec = EPILOGS[epilog]
    if spec != EPILOGS[MatmulEpilog.DEFAULT] and at.kind == "c":
        raise ValueError(f"epilog: {epilog.name} is not supported for complex operands")
    if d.kind == "f8" and epilog.name not in FP8_RESULT_EPILOGS:
        what = "bgrad output" if spec.bgrad else "gelu_aux"
        raise ValueError(
            f"epilog: {epilog.name} is not supported with an FP8 result ({d.name}): its "
            f"{what} would be FP8, which cuBLASLt does not offer for it; allowed with FP8 "
            f"results: {list(FP8_RESULT_EPILOGS)} (or use a 16/32-bit options.result_type)"
        )


def check_result_options(options, fp8: bool, d: DType, has_c: bool) -> None:
    """``options.inplace`` and ``options.result_amax`` against the types."""
    if options.inplace and not has_c:
        raise ValueError("options.inplace: requires c")
    if options.result_amax and not fp8:
        raise ValueError("options.result_amax: only for FP8 operands")
    # cuBLASLt computes amax(|D|) only when D itself is FP8 (CUDA 12.4 Update 1 release
    # notes: AMAX_D_POINTER "is currently supported only for FP8 Matmul when the output data
    # type is also FP8"); its heuristic refuses amax with a 16/32-bit result.
    if options.result_amax and d.kind != "f8":
        raise ValueError(
            f"options.result_amax: cuBLASLt computes amax only for FP8 results "
            f"(float8_e4m3fn, float8_e5m2); the result is {d.name}: set "
            "options.result_type to an FP8 type or leave result_amax off"
        )
    if options.inplace and d.kind == "f8":
        raise ValueError(
            f"options.inplace: an FP8 result ({d.name}) cannot be written into c: "
            f"cuBLASLt takes c only in {' or '.join(FP8_C_TYPES)} with an FP8 result, and "
            "in place needs c and the result to share one type"
        )


def bias_dtypes(fp8: bool, d: DType, c_dtype: DType | None) -> tuple[tuple[str, ...], str | None]:
    """The bias dtypes cuBLASLt takes, and why (or None), for a result of ``d``.

    cuBLASLt's FP8 table: the bias has D's type for a 16-bit D, bfloat16 for a float32 D, and
    C's type (float16 or bfloat16) for an FP8 D; without FP8 operands it has D's type.
    """
    if not fp8:
        return (d.name,), None
    if d.kind == "f8":
        if c_dtype is not None:
            return (c_dtype.name,), "the type of c"
        return FP8_C_TYPES, "it sets C's type"
    return (("bfloat16",) if d.name == "float32" else (d.name,)), None


def check_fp8_layout(trans_a, trans_b, a_strides, b_strides) -> None:
    """FP8 runs only as "TN": cuBLASLt's A transposed, its B not."""
    if not (trans_a == lt.Operation.T and trans_b == lt.Operation.N):
        raise ValueError(
            "b: FP8 needs a row-major (C-ordered) a and a column-major (F-ordered) b, "
            f"e.g. b = w.T for a C-ordered w; got a strides {a_strides}, b strides "
            f"{b_strides}"
        )


def fp8_aux_c_type(c: DType | None, bias: DType | None) -> DType:
    """The C matrix type next to an FP8 result's own-typed gelu_aux: float16, the type cuBLASLt
    13's heuristic takes there (bfloat16 is refused); ``c`` and the bias must be float16."""
    for what, t in (("c", c), ("epilog_inputs['bias']", bias)):
        if t is not None and t.name != "float16":
            raise ValueError(
                f"{what}: dtype {t.name}; with an FP8 result and preferences.epilog.aux_type, "
                "cuBLASLt takes it only in float16"
            )
    return DTYPES["float16"]


def check_aux_scale(scales, aux: DType | None) -> None:
    """The epilog input ``"aux_quantization_scale"`` (``scales[AUX_SCALE]``) against the
    ``gelu_aux`` type: required for an FP8 one (which only an explicit ``aux_type`` makes,
    see :func:`aux_dtype`), refused otherwise."""
    what = scale_what(AUX_SCALE)
    if AUX_SCALE in scales and (aux is None or aux.kind != "f8"):
        raise ValueError(
            f"{what}: scales an FP8 gelu_aux output; "
            + (f"gelu_aux is {aux.name}" if aux is not None else "this epilog has no gelu_aux output")
        )
    if aux is not None and aux.kind == "f8" and AUX_SCALE not in scales:
        raise ValueError(
            f"{what}: required with preferences.epilog.aux_type {aux.name} (the scale of the "
            "stored gelu_aux)"
        )


def check_scales(scales, fp8: bool, d: DType) -> None:
    """The keys of ``quantization_scales`` against the operand and result types."""
    scales = {k: v for k, v in scales.items() if k != AUX_SCALE}  # check_aux_scale's
    bad = [k for k in scales if k not in ("a", "b", "c", "d")]
    if bad:
        raise ValueError(
            f"quantization_scales: unknown keys {bad}; allowed a, b and, for an FP8 result, d"
        )
    if "c" in scales:
        # cuBLASLt accepts C_SCALE_POINTER only for an FP8 C, and its FP8 table has no FP8 C
        # (C is float16, bfloat16 or float32); nvmath-python and XLA refuse it likewise.
        raise ValueError(
            "quantization_scales: 'c' is not supported: cuBLASLt takes a C scale only for an "
            "FP8 C matrix, and its FP8 table has none (C is float16, bfloat16 or float32); "
            "scale c through beta instead"
        )
    if scales and not fp8:
        raise ValueError("quantization_scales: only for FP8 operands")
    if "d" in scales and d.kind != "f8":
        raise ValueError(f"quantization_scales: 'd' scales an FP8 result; the result is {d.name}")
    if fp8:
        need = ["a", "b"] + (["d"] if d.kind == "f8" else [])
        missing = [k for k in need if k not in scales]
        if missing:
            why = (
                f" (the result is {d.name}, and an FP8 result needs 'd'; without c or "
                "options.result_type the result has a's dtype, as in nvmath-python; "
                "options.result_type='bfloat16', 'float16' or 'float32' needs no 'd')"
                if "d" in missing
                else ""
            )
            raise ValueError(
                f"quantization_scales: FP8 operands need scales for {need}; missing "
                f"{missing}{why}"
            )


NUMBER = (int, float, complex, np.number)


def scalar(v, what: str, scale_np):
    """alpha/beta ``v`` as a Python number of the matmul's scale type (complex only for
    complex operands), or TypeError/ValueError naming ``what``."""
    if not isinstance(v, NUMBER) or isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{what}: expected a number; got {type(v).__name__}")
    try:
        if np.dtype(scale_np).kind == "c":
            return complex(v)
        if isinstance(v, (complex, np.complexfloating)):
            if v.imag != 0:
                raise ValueError(f"{what}: {v!r} is complex; the operands are real")
            v = v.real
        return float(v)
    except (OverflowError, TypeError):
        raise ValueError(f"{what}: {v!r} is not representable as a float") from None
