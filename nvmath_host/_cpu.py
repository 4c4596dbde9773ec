# SPDX-License-Identifier: Apache-2.0
"""NumPy operands without a GPU: the epilogs' NumPy reference, with cuBLASLt's FP8 rules."""

from __future__ import annotations

import numpy as np

from mathdx_operands import host_array, numpy_dtype

from ._rules import AUX_SCALE, scale_what
from .epilogs import reference


class CPUExecutionWarning(UserWarning):
    """Issued when NumPy operands are computed on the CPU because no CUDA device is present."""


def host_scale(v, k) -> float:
    """A quantization scale on the CPU path: a number or a one-element float32 NumPy array."""
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, np.ndarray) and v.dtype == np.float32 and v.shape in ((1,), ()):
        return float(v.reshape(-1)[0])
    raise ValueError(
        f"{scale_what(k)}: expected a float or a one-element float32 NumPy array "
        f"(NumPy operands on the CPU); got {type(v).__module__}.{type(v).__qualname__}"
    )


def quantize_fp8(x: np.ndarray, name: str) -> np.ndarray:
    """``x`` (float32) rounded to the FP8 type ``name`` as cuBLASLt writes an FP8 result.

    Round to nearest even, saturating to the largest finite value (cuBLASLt clamps FP8
    results, it does not overflow to NaN/inf); NaN stays NaN. The memory layout is kept.
    """
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - NumPy FP8 operands need ml_dtypes anyway
        raise ValueError(f"options.result_type: {name} results on the CPU need ml_dtypes") from None
    dt = np.dtype(getattr(ml_dtypes, name))
    big = float(ml_dtypes.finfo(dt).max)
    return np.clip(x, -big, big).astype(dt)


def execute(p, a, b, c, inputs: dict, alpha, beta, scales: dict):
    """Problem ``p`` on the NumPy arrays ``a``, ``b``, ``c`` (or None) and ``inputs``, with the
    host ``scales`` of FP8 operands; returns what :meth:`Matmul.execute` returns."""
    if p.conj_a:
        a = np.conj(a)
    if p.conj_b:
        b = np.conj(b)
    if p.fp8:  # dequantise as cuBLASLt does: scale_a * a, scale_b * b, accumulate in float32
        a = a.astype(np.float32) * np.float32(scales["a"])
        b = b.astype(np.float32) * np.float32(scales["b"])
    fp8_result = p.d_dtype.kind == "f8"
    d, outs = reference(
        a,
        b,
        c=c,
        alpha=alpha,
        beta=beta,
        epilog=p.epilog,
        epilog_inputs=inputs,
        result_dtype=np.float32 if fp8_result else numpy_dtype(p.d_dtype),
        order=p.order,
    )
    if p.spec.aux_output == "gelu_aux":  # in the padded layout cuBLASLt writes
        o = next(x for x in p.outputs if x.name == "gelu_aux")
        aux = outs["gelu_aux"]
        if o.dtype.kind == "f8":  # amax before the aux scale (as EPILOGUE_AUX_AMAX), then quantised
            if p.aux_amax:
                outs["gelu_aux_amax"] = np.array([np.abs(aux).max()], np.float32)
            aux = quantize_fp8(aux.astype(np.float32) * np.float32(scales.get(AUX_SCALE, 1.0)), o.dtype.name)
        arr = host_array(o.dtype, o.shape, o.strides, o.nelems)
        arr = arr.view(numpy_dtype(o.dtype)) if arr.dtype != numpy_dtype(o.dtype) else arr
        arr[...] = aux
        outs["gelu_aux"] = arr
    if fp8_result:
        # amax of the result before the D scale (as cuBLASLt's AMAX_D), then D quantised
        if p.options.result_amax:
            outs["result_amax"] = np.array([np.abs(d).max()], np.float32)
        d = quantize_fp8(d * np.float32(scales["d"]), p.d_dtype.name)
    if p.inplace:
        c[...] = d
        d = c
    return (d, outs) if p.outputs else d
