# SPDX-License-Identifier: Apache-2.0
"""cuBLASLt matmul with fused epilogs: the stateful :class:`Matmul` and the :func:`matmul` function.

How a problem reaches cuBLASLt (column-major only): a C-ordered (row-major) result ``D`` of
shape ``(M, N)`` is handed over as the column-major ``N x M`` matrix ``D^T = B^T A^T``, so
cuBLASLt's "A" is our ``b`` and its "B" our ``a``; an F-ordered result is handed over as is.
Each operand's own layout (C, F, transposed view) becomes a ``TRANSA``/``TRANSB`` flag and a
leading dimension, never a copy. cuBLASLt's bias is a vector along its rows, i.e. along ``N``
for a C-ordered result: that is why a ``(N,)`` bias gives a C-ordered result and a ``(M, 1)``
bias an F-ordered one.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import math
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _cublaslt as lt
from ._operands import (
    DTYPES,
    UINT8,
    DType,
    Operand,
    dtype_of_name,
    gpu_available,
    host_array,
    numpy_dtype,
    package,
    stream_handle,
    wrap,
)
from .epilogs import EPILOGS, EpilogSpec, MatmulEpilog, _as_epilog, reference

__all__ = [
    "Matmul",
    "matmul",
    "MatmulComputeType",
    "MatmulOptions",
    "MatmulPlanPreferences",
    "Algorithm",
    "CPUExecutionWarning",
]


class MatmulComputeType(int, __import__("enum").Enum):
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


CT = MatmulComputeType
_F32 = {CT.COMPUTE_32F, CT.COMPUTE_32F_PEDANTIC}
_F32_FAST = {CT.COMPUTE_32F_FAST_16F, CT.COMPUTE_32F_FAST_16BF, CT.COMPUTE_32F_FAST_TF32}
_F64 = {CT.COMPUTE_64F, CT.COMPUTE_64F_PEDANTIC}
#: operand dtype -> (default compute type, allowed compute types)
_COMPUTE_TYPES = {
    "float16": (CT.COMPUTE_32F, _F32 | {CT.COMPUTE_16F, CT.COMPUTE_16F_PEDANTIC}),
    "bfloat16": (CT.COMPUTE_32F, _F32),
    "float32": (CT.COMPUTE_32F, _F32 | _F32_FAST),
    "float64": (CT.COMPUTE_64F, _F64),
    "complex64": (CT.COMPUTE_32F, _F32 | _F32_FAST),
    "complex128": (CT.COMPUTE_64F, _F64),
    "float8_e4m3fn": (CT.COMPUTE_32F, _F32),
    "float8_e5m2": (CT.COMPUTE_32F, _F32),
}
_FP8 = ("float8_e4m3fn", "float8_e5m2")
_FP8_RESULTS = ("float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2")
# cuBLASLt's FP8 type table (cuBLAS docs, cublasLtMatmul, "FP8" data types; the same list is in
# nvmath-python's FP8 tests): an FP8 result D takes a C matrix (and a bias) of float16 or
# bfloat16 only, never C == D's type; float8_e5m2 results need one float8_e5m2 operand
# (e4m3 x e4m3 gives e4m3, bf16, fp16 or fp32 only); e5m2 x e5m2 is not supported at all.
_FP8_C_TYPES = ("float16", "bfloat16")
#: epilogs allowed with an FP8 result: those whose auxiliary data does not take D's (FP8)
#: type. GELU_AUX*/DGELU* (gelu_aux) and the BGRAD ones (bgrad) would be FP8 and need
#: cuBLASLt's auxiliary scale/amax, which nvmath_host does not pass.
_FP8_RESULT_EPILOGS = (
    "DEFAULT",
    "RELU",
    "RELU_AUX",
    "BIAS",
    "RELU_BIAS",
    "RELU_AUX_BIAS",
    "DRELU",
    "GELU",
    "GELU_BIAS",
)


class CPUExecutionWarning(UserWarning):
    """Issued when NumPy operands are computed on the CPU because no CUDA device is present."""


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
        bfloat16 (their default, or ``c``'s type when ``c`` is given), float16, float32,
        float8_e4m3fn, or float8_e5m2 (this one needs a float8_e5m2 operand). An FP8 result
        needs ``quantization_scales["d"]``; its ``c``, if any, must be float16 or bfloat16
        (cuBLASLt's FP8 type table); it is rounded to nearest and saturated to the FP8 range.
        Epilogs whose auxiliary data would be FP8 (GELU_AUX*, DGELU*, the BGRAD ones) are
        refused with an FP8 result.
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
    """

    compute_type: MatmulComputeType | None = None
    result_type: str | None = None
    result_order: str | None = None
    inplace: bool | None = None
    result_amax: bool | None = None
    fast_accumulation: bool | None = None
    device_id: int | None = None


@dataclass
class MatmulPlanPreferences:
    """Preferences for :meth:`Matmul.plan`.

    Attributes
    ----------
    limit : int
        How many algorithms to ask cuBLASLt's heuristic for (default 8).
    max_workspace : int
        Workspace limit in bytes (default 32 MiB).
    """

    limit: int = 8
    max_workspace: int = 32 * 1024 * 1024


def _as_dataclass(value, cls, what):
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


def _check_options(o: MatmulOptions) -> MatmulOptions:
    """``o`` with its field types checked (TypeError/ValueError naming the field) and a
    compute type given by name or value made a :class:`MatmulComputeType` (a copy then)."""
    ct = o.compute_type
    if ct is not None and type(ct) is not MatmulComputeType:
        allowed = [x.name for x in MatmulComputeType]
        if isinstance(ct, str):
            new = MatmulComputeType.__members__.get(ct.upper())
            if new is None:
                raise ValueError(
                    f"options.compute_type: unknown name {ct!r}; allowed (case-insensitive): "
                    f"{allowed}"
                )
        elif isinstance(ct, (int, np.integer)) and not isinstance(ct, (bool, np.bool_)):
            try:
                new = MatmulComputeType(int(ct))
            except ValueError:
                raise ValueError(
                    f"options.compute_type: unknown value {ct!r}; allowed: {allowed}"
                ) from None
        else:
            raise TypeError(
                f"options.compute_type: expected a MatmulComputeType, its name or None; got "
                f"{type(ct).__qualname__}; allowed: {allowed}"
            )
        o = dataclasses.replace(o, compute_type=new)
    rt = o.result_type
    if rt is not None and not isinstance(rt, str):
        try:
            name = np.dtype(rt).name
        except Exception:
            name = getattr(rt, "name", None)
            if not isinstance(name, str):
                raise TypeError(
                    f"options.result_type: expected a dtype name (str), a NumPy dtype or None; "
                    f"got {type(rt).__qualname__}; supported: {', '.join(DTYPES)}"
                ) from None
        o = dataclasses.replace(o, result_type=name)
    if o.result_order is not None and (
        not isinstance(o.result_order, str) or o.result_order not in ("C", "F")
    ):
        raise ValueError(f"options.result_order: {o.result_order!r}; allowed 'C', 'F' or None")
    for f in _BOOL_OPTIONS:
        v = getattr(o, f)
        if v is not None and not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"options.{f}: expected True, False or None; got {v!r}")
    d = o.device_id
    if d is not None:
        if not isinstance(d, (int, np.integer)) or isinstance(d, (bool, np.bool_)):
            raise TypeError(f"options.device_id: expected a device ordinal (int); got {d!r}")
        if d < 0:
            raise ValueError(f"options.device_id: {d}; must be >= 0")
    return o


def _check_preferences(p: MatmulPlanPreferences) -> MatmulPlanPreferences:
    """``p`` with its fields checked (TypeError/ValueError naming the field)."""
    for f, least in (("limit", 1), ("max_workspace", 0)):
        v = getattr(p, f)
        if not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)):
            raise TypeError(f"preferences.{f}: expected an int; got {v!r}")
        if v < least:
            raise ValueError(f"preferences.{f}: {v}; must be >= {least}")
    return p


_NUMBER = (int, float, complex, np.number)


def _scalar(v, what: str, scale_np):
    """alpha/beta ``v`` as a Python number of the matmul's scale type (complex only for
    complex operands), or TypeError/ValueError naming ``what``."""
    if not isinstance(v, _NUMBER) or isinstance(v, (bool, np.bool_)):
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


class Algorithm:
    """One cuBLASLt algorithm (``cublasLtMatmulAlgo_t``) for a planned matmul; picklable.

    Pass a list of them to :meth:`Matmul.plan` (``algorithms=``) to skip the heuristic; they
    are only valid for the same problem and the same cuBLASLt version.

    Attributes
    ----------
    workspace_size : int
        Workspace bytes the algorithm needs.
    waves_count : float
        cuBLASLt's device-utilisation estimate.
    time_ms : float or None
        Measured by :meth:`Matmul.autotune`.
    """

    def __init__(self, data: bytes, workspace_size: int, waves_count: float = 0.0, version=None):
        if len(data) != ctypes.sizeof(lt.MatmulAlgo):
            raise ValueError("data: a cublasLtMatmulAlgo_t is 64 bytes")
        self.data = bytes(data)
        self.workspace_size = int(workspace_size)
        self.waves_count = float(waves_count)
        self.version = version
        self.time_ms: float | None = None
        self._algo = lt.MatmulAlgo.from_buffer_copy(self.data)

    @classmethod
    def _from_result(cls, r: lt.HeuristicResult, version: int) -> Algorithm:
        return cls(bytes(r.algo), r.workspaceSize, r.wavesCount, version)

    def __reduce__(self):
        return (Algorithm, (self.data, self.workspace_size, self.waves_count, self.version))

    def __repr__(self):
        t = f", time_ms={self.time_ms:.4f}" if self.time_ms is not None else ""
        return f"Algorithm(workspace_size={self.workspace_size}, waves_count={self.waves_count:.2f}{t})"


# --------------------------------------------------------------------------- problem (pure)


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _matrix_memory(rows, cols, sr, sc, what):
    """How a (rows, cols) matrix with element strides (sr, sc) sits in memory.

    Returns ("row", ld) when it is row-major (col-major ``cols x rows`` with ``ld``), or
    ("col", ld) when it is col-major ``rows x cols``.
    """
    if (sc == 1 or cols == 1) and (rows == 1 or sr >= cols):
        return "row", (sr if rows > 1 else cols)
    if (sr == 1 or rows == 1) and (cols == 1 or sc >= rows):
        return "col", (sc if cols > 1 else rows)
    raise ValueError(
        f"{what}: strides {(sr, sc)} (in elements) of a {rows}x{cols} matrix cannot be expressed "
        "to cuBLASLt: one of the last two axes must have unit stride and the other a stride "
        "no smaller than the matrix extent (make it contiguous first)"
    )


def _batch_stride(shape, strides, what) -> int:
    """One stride for all batch axes, or ValueError naming ``what``."""
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]
    if not dims:
        return 0
    for (_, s0), (n1, s1) in zip(dims, dims[1:]):
        if s0 != s1 * n1:
            raise ValueError(
                f"{what}: batch axes of shape {tuple(shape)} with strides {tuple(strides)} cannot "
                "be expressed as one batch stride"
            )
    return dims[-1][1]


@dataclass
class _Layout:
    dtype: DType
    rows: int
    cols: int
    ld: int
    batch: int
    stride: int


@dataclass
class _OutSpec:
    name: str
    dtype: DType
    shape: tuple
    strides: tuple
    nelems: int


class _Problem:
    """Everything about a matmul that does not depend on pointers, validated; no CUDA here."""

    def __init__(
        self,
        a: Operand,
        b: Operand,
        c: Operand | None,
        options: MatmulOptions,
        epilog,
        inputs: dict[str, Operand],
        scales: dict,
    ):
        self.options = options
        self.a, self.b, self.c = a, b, c
        if a.ndim < 2:
            raise ValueError(f"a: expected at least 2 dimensions (..., M, K); got shape {a.shape}")
        if b.ndim < 2:
            raise ValueError(f"b: expected at least 2 dimensions (..., K, N); got shape {b.shape}")
        M, K = a.shape[-2:]
        K2, N = b.shape[-2:]
        if K != K2:
            raise ValueError(
                f"b: K mismatch: a has shape {a.shape} (K={K}), b has {b.shape} (K={K2})"
            )
        if min(M, N, K) < 1:
            raise ValueError(f"a, b: empty matrices are not supported (M={M}, N={N}, K={K})")
        self.M, self.N, self.K = M, N, K
        # ---- batch
        ba, bb = a.shape[:-2], b.shape[:-2]
        if ba and bb and ba != bb:
            raise ValueError(
                f"b: batch shape {bb} does not match a's {ba} (one operand may have no batch axes)"
            )
        self.batch_shape = ba or bb
        self.batch = math.prod(self.batch_shape)
        if self.batch < 1:
            raise ValueError(
                f"{'a' if ba else 'b'}: empty batches are not supported (batch shape "
                f"{self.batch_shape})"
            )
        # ---- dtypes
        at, bt = a.dtype, b.dtype
        if at.kind == "f8" or bt.kind == "f8":
            if at.kind != "f8" or bt.kind != "f8":
                raise ValueError(f"b: dtype pair ({at.name}, {bt.name}) is not supported")
            if at.name == bt.name == "float8_e5m2":
                raise ValueError("b: float8_e5m2 x float8_e5m2 is not supported by cuBLASLt")
        elif at.name != bt.name:
            raise ValueError(f"b: dtype {bt.name} differs from a's {at.name}")
        self.fp8 = at.kind == "f8"
        rt = options.result_type
        if rt is None:
            if self.fp8:
                rt_d = c.dtype if c is not None else DTYPES["bfloat16"]
            else:
                rt_d = at
        else:
            rt_d = dtype_of_name(str(getattr(rt, "name", rt)), "options.result_type")
            if not self.fp8 and rt_d.name != at.name:
                raise ValueError(
                    f"options.result_type: {rt_d.name} is only allowed for FP8 operands "
                    f"(the result of {at.name} operands is {at.name})"
                )
            if self.fp8 and rt_d.name not in _FP8_RESULTS:
                raise ValueError(f"options.result_type: {rt_d.name}; FP8 allows {_FP8_RESULTS}")
        if rt_d.name == "float8_e5m2" and at.name == bt.name == "float8_e4m3fn":
            raise ValueError(
                "options.result_type: float8_e5m2 results need a float8_e5m2 operand; cuBLASLt "
                "allows float8_e4m3fn x float8_e4m3fn only float8_e4m3fn, bfloat16, float16 or "
                "float32 results"
            )
        self.d_dtype = rt_d
        if c is not None:
            if rt_d.kind == "f8":
                if c.dtype.name not in _FP8_C_TYPES:
                    raise ValueError(
                        f"c: dtype {c.dtype.name}; with an FP8 result ({rt_d.name}) cuBLASLt "
                        f"takes c only in {' or '.join(_FP8_C_TYPES)}"
                    )
            elif c.dtype.name != rt_d.name:
                raise ValueError(f"c: dtype {c.dtype.name} differs from the result's {rt_d.name}")
        # The type of cuBLASLt's C matrix. Without c it is never read (beta = 0) but must still
        # be a type cuBLASLt accepts next to D: D's own type, or for an FP8 D the bias type
        # (the table pairs C and bias types) or bfloat16.
        bias_in = inputs.get("bias")
        if c is not None:
            self.c_dtype = c.dtype
        elif rt_d.kind == "f8":
            if bias_in is not None and bias_in.dtype.name in _FP8_C_TYPES:
                self.c_dtype = bias_in.dtype
            else:
                self.c_dtype = DTYPES["bfloat16"]
        else:
            self.c_dtype = rt_d
        default_ct, allowed = _COMPUTE_TYPES[at.name]
        ct = options.compute_type
        if ct is None:
            ct = default_ct
        else:
            try:
                ct = MatmulComputeType(ct)
            except ValueError:
                raise ValueError(f"options.compute_type: unknown value {ct!r}") from None
            if ct not in allowed:
                raise ValueError(
                    f"options.compute_type: {ct.name} is not supported for {at.name} operands; "
                    f"allowed: {sorted(x.name for x in allowed)}"
                )
        self.compute_type = ct
        if ct in (CT.COMPUTE_16F, CT.COMPUTE_16F_PEDANTIC):
            self.scale_type, self.scale_np = lt.DataType.R_16F, np.float16
        elif ct in _F64:
            cplx = at.kind == "c"
            self.scale_type = lt.DataType.C_64F if cplx else lt.DataType.R_64F
            self.scale_np = np.complex128 if cplx else np.float64
        else:
            cplx = at.kind == "c"
            self.scale_type = lt.DataType.C_32F if cplx else lt.DataType.R_32F
            self.scale_np = np.complex64 if cplx else np.float32
        # ---- epilog
        epilog = _as_epilog(epilog)
        self.epilog = epilog
        spec: EpilogSpec = EPILOGS[epilog]
        self.spec = spec
        if spec != EPILOGS[MatmulEpilog.DEFAULT] and at.kind == "c":
            raise ValueError(f"epilog: {epilog.name} is not supported for complex operands")
        if rt_d.kind == "f8" and epilog.name not in _FP8_RESULT_EPILOGS:
            what = "bgrad output" if spec.bgrad else "gelu_aux"
            raise ValueError(
                f"epilog: {epilog.name} is not supported with an FP8 result ({rt_d.name}): its "
                f"{what} would be FP8, which needs cuBLASLt's auxiliary scale that nvmath_host "
                f"does not pass; allowed with FP8 results: {list(_FP8_RESULT_EPILOGS)} (or use a "
                "16/32-bit options.result_type)"
            )
        missing = [n for n in spec.inputs if n not in inputs]
        extra = [n for n in inputs if n not in spec.inputs]
        if extra:  # first: a misspelt key is also a missing one, and the misspelling is the news
            takes = f"it takes {list(spec.inputs)}" if spec.inputs else "it takes none"
            raise ValueError(
                f"epilog_inputs: unexpected {extra} for {epilog.name} ({takes}"
                + (f"; missing {missing})" if missing else ")")
            )
        if missing:
            raise ValueError(
                f"epilog_inputs: {epilog.name} requires {list(spec.inputs)}; missing {missing}"
            )
        self.inputs = inputs
        # ---- options
        self.inplace = bool(options.inplace)
        if self.inplace and c is None:
            raise ValueError("options.inplace: requires c")
        if options.result_amax and not self.fp8:
            raise ValueError("options.result_amax: only for FP8 operands")
        # cuBLASLt computes amax(|D|) only when D itself is FP8 (CUDA 12.4 Update 1 release
        # notes: AMAX_D_POINTER "is currently supported only for FP8 Matmul when the output data
        # type is also FP8"); measured on cuBLASLt 13.1 / H200: the heuristic answers
        # INVALID_VALUE for amax with a 16/32-bit result.
        if options.result_amax and self.d_dtype.kind != "f8":
            raise ValueError(
                f"options.result_amax: cuBLASLt computes amax only for FP8 results "
                f"(float8_e4m3fn, float8_e5m2); the result is {self.d_dtype.name}: set "
                "options.result_type to an FP8 type or leave result_amax off"
            )
        if self.inplace and self.d_dtype.kind == "f8":
            raise ValueError(
                f"options.inplace: an FP8 result ({self.d_dtype.name}) cannot be written into c: "
                f"cuBLASLt takes c only in {' or '.join(_FP8_C_TYPES)} with an FP8 result, and "
                "in place needs c and the result to share one type"
            )
        # ---- orientation of the result
        self.order = self._choose_order()
        self._layouts()
        self._epilog_layouts()
        # ---- FP8 scales
        self.scales = scales
        if self.fp8:
            need = ["a", "b"] + (["d"] if self.d_dtype.kind == "f8" else [])
            missing = [k for k in need if k not in scales]
            if missing:
                raise ValueError(
                    f"quantization_scales: FP8 operands need scales for {need}; missing {missing}"
                )
        bad = [k for k in scales if k not in ("a", "b", "c", "d")]
        if bad:
            raise ValueError(
                f"quantization_scales: unknown keys {bad}; allowed a, b and, for an FP8 result, d"
            )
        if "d" in scales and self.d_dtype.kind != "f8":
            raise ValueError(
                f"quantization_scales: 'd' scales an FP8 result; the result is {self.d_dtype.name}"
            )
        if scales and not self.fp8:
            raise ValueError("quantization_scales: only for FP8 operands")
        if "c" in scales:
            # cuBLASLt accepts C_SCALE_POINTER only for an FP8 C, and its FP8 table has no FP8 C
            # (C is float16, bfloat16 or float32); nvmath-python and XLA refuse it likewise.
            raise ValueError(
                "quantization_scales: 'c' is not supported: cuBLASLt takes a C scale only for an "
                "FP8 C matrix, and its FP8 table has none (C is float16, bfloat16 or float32); "
                "scale c through beta instead"
            )

    # ------------------------------------------------------------------ order
    def _choose_order(self) -> str:
        M, N = self.M, self.N
        o = self.options.result_order
        if o is not None and o not in ("C", "F"):
            raise ValueError(f"options.result_order: {o!r}; allowed 'C', 'F' or None")
        bias = self.inputs.get("bias")
        bias_order = None
        if bias is not None:
            s = bias.shape
            if len(s) == 1 and s[0] == N:
                bias_order = "C"
            elif len(s) >= 2 and s[-2:] == (1, N):
                bias_order = "C"
            elif len(s) >= 2 and s[-2:] == (M, 1):
                bias_order = "F"
            else:
                raise ValueError(
                    f"epilog_inputs['bias']: shape {s}; expected (N,)=({N},), (1, N)=(1, {N}) or "
                    f"(M, 1)=({M}, 1), optionally with leading batch axes"
                )
        c_order = None
        if self.c is not None:
            c = self.c
            if c.ndim < 2 or c.shape[-2:] != (M, N):
                raise ValueError(f"c: shape {c.shape}; expected (..., M, N) = (..., {M}, {N})")
            c_order = "C" if _matrix_memory(M, N, *c.strides[-2:], "c")[0] == "row" else "F"
            if M == 1 or N == 1:
                c_order = None  # a vector fits either order
        g = self.inputs.get("gelu_aux")
        g_order = None
        if g is not None and g.ndim >= 2 and g.shape[-2:] == (M, N):
            sr, sc = g.strides[-2:]
            g_order = "C" if sc == 1 else ("F" if sr == 1 else None)
        r = self.inputs.get("relu_aux")
        r_order = None
        if r is not None and r.ndim >= 2:
            from .epilogs import relu_aux_shape

            fits = [x for x in ("C", "F") if r.shape[-2:] == relu_aux_shape(M, N, x)]
            r_order = fits[0] if len(fits) == 1 else None
        order = o or bias_order or c_order or g_order or r_order or "C"
        if bias_order and bias_order != order:
            raise ValueError(
                f"epilog_inputs['bias']: shape {bias.shape} needs a {bias_order}-ordered result, "
                f"but the result is {order}-ordered (options.result_order)"
            )
        if c_order and c_order != order:
            raise ValueError(
                f"c: it is {c_order}-ordered but the result is {order}-ordered"
                + (" (set by the bias shape)" if bias_order else " (options.result_order)")
                + "; cuBLASLt cannot transpose c: pass c in the result's order"
            )
        return order

    # ------------------------------------------------------------------ layouts
    def _layouts(self):
        a, b, M, N = self.a, self.b, self.M, self.N
        swap = self.order == "C"
        self.swap = swap
        # The operands cuBLASLt calls A and B, and the matrix each must become.
        first, second = (b, a) if swap else (a, b)
        names = ("b", "a") if swap else ("a", "b")
        layouts, ops = [], []
        self.mem = {}
        for op, name in zip((first, second), names):
            r, cdim = op.shape[-2:]
            mem, ld = _matrix_memory(r, cdim, *op.strides[-2:], name)
            self.mem[name] = mem
            # the col-major matrix in memory: X ("col") or X^T ("row")
            rows, cols = (r, cdim) if mem == "col" else (cdim, r)
            # cuBLASLt needs op(Y) = X (F order) or X^T (C order)
            want_transposed = swap
            is_transposed = mem == "row"
            ops.append(lt.Operation.N if want_transposed == is_transposed else lt.Operation.T)
            bs = _batch_stride(op.shape[:-2], op.strides[:-2], name) if op.ndim > 2 else 0
            layouts.append(_Layout(op.dtype, rows, cols, ld, self.batch, bs))
        self.layout_a, self.layout_b = layouts
        self.trans_a, self.trans_b = ops
        if self.fp8 and not (self.trans_a == lt.Operation.T and self.trans_b == lt.Operation.N):
            raise ValueError(
                "b: FP8 needs a row-major (C-ordered) a and a column-major (F-ordered) b, "
                f"e.g. b = w.T for a C-ordered w; got a strides {a.strides[-2:]}, b strides "
                f"{b.strides[-2:]}"
            )
        d_rows, d_cols = (N, M) if swap else (M, N)
        batch_strides_c = [0] * len(self.batch_shape)
        # result D
        if swap:
            d_strides = (N, 1)
        else:
            d_strides = (1, M)
        mat = M * N
        acc = mat
        for i in reversed(range(len(self.batch_shape))):
            batch_strides_c[i] = acc
            acc *= self.batch_shape[i]
        c = self.c
        if self.inplace:
            if c.shape[:-2] != self.batch_shape:
                raise ValueError(
                    f"c: in-place needs c of the result's full shape {self.batch_shape + (M, N)}; "
                    f"got {c.shape} (broadcast c cannot be written in place)"
                )
            _, ld = _matrix_memory(M, N, *c.strides[-2:], "c")
            bs = _batch_stride(c.shape[:-2], c.strides[:-2], "c") if c.ndim > 2 else 0
            if self.batch > 1 and bs < ld * d_cols:
                raise ValueError("c: in-place needs non-overlapping batches")
            self.layout_d = _Layout(self.d_dtype, d_rows, d_cols, ld, self.batch, bs)
            self.d_out = None
        else:
            self.layout_d = _Layout(self.d_dtype, d_rows, d_cols, d_rows, self.batch, mat)
            self.d_out = _OutSpec(
                "d",
                self.d_dtype,
                self.batch_shape + (M, N),
                tuple(batch_strides_c) + d_strides,
                acc,
            )
        if c is not None and not self.inplace:
            cb = c.shape[:-2]
            if cb and cb != self.batch_shape:
                raise ValueError(
                    f"c: batch shape {cb} does not match the result's {self.batch_shape}"
                )
            _, ld = _matrix_memory(M, N, *c.strides[-2:], "c")
            bs = _batch_stride(cb, c.strides[:-2], "c") if cb else 0
            self.layout_c = _Layout(c.dtype, d_rows, d_cols, ld, self.batch, bs)
        else:
            self.layout_c = dataclasses.replace(self.layout_d, dtype=self.c_dtype)
        # Where cuBLASLt's C pointer comes from: "c" (the user's c; in place also D), "d" (no c,
        # C described exactly as D: D's own buffer, beta = 0), or "lt_a" (no c and C's type
        # differs from D's, i.e. an FP8 D). cuBLASLt 13 rejects C == D unless their layouts
        # match (cublasLtMatmul returned INVALID_VALUE on the H200), so then C points at
        # cuBLASLt's A operand instead: valid device memory, never read with beta = 0, as
        # PyTorch's scaled_gemm does ("cublasLtMatmul requires a C pointer that is not
        # result_ptr or nullptr").
        if c is not None:
            self.c_ptr_from = "c"
        elif self.layout_c.dtype.name == self.layout_d.dtype.name:
            self.c_ptr_from = "d"
        else:
            self.c_ptr_from = "lt_a"

    # ------------------------------------------------------------------ epilog inputs/outputs
    def _epilog_layouts(self):
        spec, M, N = self.spec, self.M, self.N
        swap = self.swap
        lt_epilog = lt.Epilogue(int(self.epilog))
        if swap and spec.bgrad in ("a", "b"):
            lt_epilog = lt.Epilogue.BGRADB if spec.bgrad == "a" else lt.Epilogue.BGRADA
        # Measured on cuBLASLt 13.1 (H200): its BGRADA runs only with TRANSA=N and its BGRADB
        # only with TRANSB=T (else the heuristic answers NOT_SUPPORTED). In our terms, in
        # either result order: BGRADA needs a column-major a, BGRADB a row-major b.
        if spec.bgrad == "a" and self.mem["a"] != "col" and self.K > 1 and self.M > 1:
            raise ValueError(
                "a: BGRADA needs a column-major (F-ordered) a, e.g. x.T for a C-ordered x "
                f"(cuBLASLt's restriction); got strides {self.a.strides[-2:]}"
            )
        if spec.bgrad == "b" and self.mem["b"] != "row" and self.K > 1 and self.N > 1:
            raise ValueError(
                "b: BGRADB needs a row-major (C-ordered) b (cuBLASLt's restriction); got strides "
                f"{self.b.strides[-2:]}"
            )
        self.lt_epilog = lt_epilog
        self.bias_batch_stride = 0
        self.aux_ld = None
        self.aux_batch_stride = 0
        self.outputs: list[_OutSpec] = []
        bshape = self.batch_shape
        nb = len(bshape)
        if "bias" in self.inputs:
            bias = self.inputs["bias"]
            if self.fp8:
                # cuBLASLt's FP8 table: the bias has D's type for a 16-bit D, bfloat16 for a
                # float32 D, and C's type (float16 or bfloat16) for an FP8 D.
                d = self.d_dtype.name
                if self.d_dtype.kind == "f8":
                    allowed = (self.c.dtype.name,) if self.c is not None else _FP8_C_TYPES
                    why = "the type of c" if self.c is not None else "it sets C's type"
                else:
                    allowed = ("bfloat16",) if d == "float32" else (d,)
                    why = None
                if bias.dtype.name not in allowed:
                    raise ValueError(
                        f"epilog_inputs['bias']: dtype {bias.dtype.name}; with FP8 operands and a "
                        f"{d} result cuBLASLt takes a {' or '.join(allowed)} bias"
                        + (f" ({why})" if why else "")
                    )
            elif bias.dtype.name != self.d_dtype.name:
                raise ValueError(
                    f"epilog_inputs['bias']: dtype {bias.dtype.name} differs from the result's "
                    f"{self.d_dtype.name}"
                )
            n = N if self.order == "C" else M
            axis = -1 if (self.order == "C") else -2
            if n > 1 and bias.strides[axis] != 1:
                raise ValueError("epilog_inputs['bias']: the bias vector must be contiguous")
            bb = bias.shape[:-2] if bias.ndim >= 2 else ()
            if bb and bb != bshape:
                raise ValueError(
                    f"epilog_inputs['bias']: batch shape {bb} does not match the result's {bshape}"
                )
            self.bias_batch_stride = (
                _batch_stride(bb, bias.strides[:-2], "epilog_inputs['bias']") if bb else 0
            )
        if "relu_aux" in self.inputs:
            aux = self.inputs["relu_aux"]
            what = "epilog_inputs['relu_aux']"
            if aux.dtype.name != "uint8":
                raise ValueError(f"{what}: dtype {aux.dtype.name}; expected uint8 (a bit-mask)")
            from .epilogs import relu_aux_shape

            ms = relu_aux_shape(M, N, self.order)
            if aux.ndim < 2 or aux.shape[-2:] != ms:
                raise ValueError(
                    f"{what}: shape {aux.shape}; expected (..., {ms[0]}, {ms[1]}) for a "
                    f"{self.order}-ordered ({M}, {N}) result (as RELU_AUX returns it)"
                )
            self._aux_in(aux, what, ms, 128 // 8, bits=8)
        if "gelu_aux" in self.inputs:
            aux = self.inputs["gelu_aux"]
            what = "epilog_inputs['gelu_aux']"
            if aux.dtype.name != self.d_dtype.name:
                raise ValueError(
                    f"{what}: dtype {aux.dtype.name} differs from the result's {self.d_dtype.name}"
                )
            if aux.ndim < 2 or aux.shape[-2:] != (M, N):
                raise ValueError(f"{what}: shape {aux.shape}; expected (..., {M}, {N})")
            self._aux_in(aux, what, (M, N), 8, bits=1)
        if spec.aux_output == "relu_aux":
            from .epilogs import relu_aux_shape

            r, c = relu_aux_shape(M, N, self.order)
            mat = r * c
            strides = (c, 1) if self.order == "C" else (1, r)
            self.aux_ld = (c if self.order == "C" else r) * 8
            self.aux_batch_stride = mat * 8
            self.outputs.append(self._out("relu_aux", UINT8, (r, c), strides, mat))
        elif spec.aux_output == "gelu_aux":
            if self.order == "C":
                ld = _round_up(N, 8)
                strides, mat = (ld, 1), M * ld
            else:
                ld = _round_up(M, 8)
                strides, mat = (1, ld), N * ld
            self.aux_ld, self.aux_batch_stride = ld, mat
            self.outputs.append(self._out("gelu_aux", self.d_dtype, (M, N), strides, mat))
        if spec.bgrad:
            if spec.bgrad == "d":
                shape = (N,) if self.order == "C" else (M, 1)
            else:
                shape = (M,) if spec.bgrad == "a" else (N,)
            length = shape[0]
            self.bias_batch_stride = length
            strides = (1,) if len(shape) == 1 else (1, 1)
            self.outputs.append(self._out("bgrad", self.d_dtype, shape, strides, length))
        if self.options.result_amax:
            self.outputs.append(_OutSpec("result_amax", DTYPES["float32"], (1,), (1,), 1))
        del nb

    def _out(self, name, dtype, mshape, mstrides, mat):
        bshape = self.batch_shape
        bstrides, acc = [], mat
        for n in reversed(bshape):
            bstrides.append(acc)
            acc *= n
        return _OutSpec(
            name, dtype, bshape + tuple(mshape), tuple(reversed(bstrides)) + tuple(mstrides), acc
        )

    def _aux_in(self, aux: Operand, what, mshape, align, bits):
        r, c = mshape
        sr, sc = aux.strides[-2:]
        if self.order == "C":
            inner, ld, extent = sc, sr, c
        else:
            inner, ld, extent = sr, sc, r
        if inner != 1 or ld < extent or ld % align:
            raise ValueError(
                f"{what}: strides {aux.strides}: the {self.order}-ordered layout needs a unit inner "
                f"stride and a leading dimension >= {extent} divisible by {align}"
            )
        ab = aux.shape[:-2]
        if ab and ab != self.batch_shape:
            raise ValueError(
                f"{what}: batch shape {ab} does not match the result's {self.batch_shape}"
            )
        bs = _batch_stride(ab, aux.strides[:-2], what) if ab else 0
        if bs % align:
            raise ValueError(f"{what}: batch stride {bs} must be divisible by {align}")
        self.aux_ld = ld * bits
        self.aux_batch_stride = bs * bits

    # ------------------------------------------------------------------ key
    def key(self) -> tuple:
        """Everything a plan depends on (the plan-cache key)."""
        return (
            self.a.signature(),
            self.b.signature(),
            self.c.signature() if self.c is not None else None,
            int(self.epilog),
            tuple(sorted((k, v.signature()) for k, v in self.inputs.items())),
            dataclasses.astuple(self.options),
            tuple(sorted(self.scales)),
        )


# --------------------------------------------------------------------------- GPU state

_handles: dict[int, lt.Handle] = {}
_handles_lock = threading.Lock()


def _handle(device: int) -> lt.Handle:
    h = _handles.get(device)
    if h is None:
        with _handles_lock:
            h = _handles.get(device)
            if h is None:
                h = _handles[device] = lt.Handle()
    return h


_DEVICE_COUNT = None


def _device_count() -> int:
    global _DEVICE_COUNT
    if _DEVICE_COUNT is None:
        _DEVICE_COUNT = _rt_check(_rt().cudaGetDeviceCount(), "cudaGetDeviceCount")
    return _DEVICE_COUNT


def _alignment(ptr: int) -> int:
    """Alignment of ``ptr`` in bytes, capped at 16 (the most any cuBLASLt kernel needs)."""
    return _ALIGN16[ptr & 15]


# _alignment by the pointer's 4 low bits: 16 (all zero), 1, 2, 1, 4, 1, 2, 1, 8, 1, 2, ...
_ALIGN16 = (16,) + tuple(i & -i for i in range(1, 16))


def _rt():
    from cuda.bindings import runtime

    return runtime


def _rt_check(result, call):
    err = result[0]
    if int(err) != 0:
        raise RuntimeError(f"{call} failed: {err}")
    return result[1] if len(result) == 2 else result[1:]


class _DeviceScope:
    """Make ``device`` current for the block (cheap when it already is)."""

    __slots__ = ("device", "prev")

    def __init__(self, device):
        self.device = device
        self.prev = None

    def __enter__(self):
        rt = _rt()
        cur = _rt_check(rt.cudaGetDevice(), "cudaGetDevice")
        if cur != self.device:
            self.prev = cur
            _rt_check(rt.cudaSetDevice(self.device), "cudaSetDevice")
        return self

    def __exit__(self, *exc):
        if self.prev is not None:
            _rt().cudaSetDevice(self.prev)
            self.prev = None


@functools.cache  # on execute's path: one dict lookup instead of the enum lookups
def _out_attr(name: str) -> int:
    """The descriptor attribute that takes the pointer of the auxiliary output ``name``."""
    A = lt.MatmulDescAttribute
    if name == "bgrad":
        return int(A.BIAS_POINTER)
    if name == "result_amax":
        return int(A.AMAX_D_POINTER)
    return int(A.EPILOGUE_AUX_POINTER)


# --------------------------------------------------------------------------- Matmul


class Matmul:
    """A stateful cuBLASLt matmul ``D = epilog(alpha * a @ b + beta * c)``.

    Create once, :meth:`plan` once (optionally :meth:`autotune`), then :meth:`execute` many
    times, swapping data with :meth:`reset_operands`. Use as a context manager or call
    :meth:`free`.

    Parameters
    ----------
    a, b : array
        ``(..., M, K)`` and ``(..., K, N)`` NumPy, CuPy, PyTorch (CUDA) or Numba device
        arrays, all of one package and device. Any C/F order or transposed view with a unit
        stride in one of the two last axes; leading axes are a strided batch (one operand may
        have none: it is broadcast).
    c : array, optional
        ``(M, N)`` or ``(..., M, N)``, added as ``beta * c``; broadcast over the batch unless
        ``options.inplace``. Of the result's dtype, except with an FP8 result: then float16
        or bfloat16 (cuBLASLt never takes an FP8 ``c``), and not in place.
    alpha, beta : scalar, optional
        Default ``1`` and, when ``c`` is given, ``1`` (else ``0``).
    quantization_scales : dict, optional
        FP8 only: ``{"a": ..., "b": ...}``, plus ``"d"`` for an FP8 result, each a float or a
        one-element float32 device array of the operands' package (a NumPy array on the CPU
        path): the dequantisation scales of ``a``/``b`` and the quantisation scale of the
        result, ``D = scale_d * epilog(alpha * (scale_a a) @ (scale_b b) + beta * c)``.
        ``"d"`` is refused for a 16/32-bit result and ``"c"`` always (cuBLASLt scales only
        an FP8 C, and takes none). FP8 needs a row-major ``a`` and a column-major ``b`` and
        compute capability >= 8.9.
    options : MatmulOptions or dict, optional
        See :class:`MatmulOptions`.
    stream : stream, optional
        Stream used by :meth:`execute` and :meth:`autotune` when they get none: an int handle,
        an object with ``__cuda_stream__``, or a CuPy/torch/Numba stream. Default: the
        operands' package's current stream, read at each call.

    Notes
    -----
    GPU operands are never synchronised: :meth:`execute` only enqueues work on the stream.
    NumPy operands are copied to the GPU and back (blocking). Without a GPU, NumPy operands
    are computed on the CPU by :func:`nvmath_host.epilogs.reference` (a
    :class:`CPUExecutionWarning` says so); NumPy FP8 operands (``ml_dtypes``) get the same
    scales, FP8 rounding, saturation and ``result_amax`` there.
    """

    def __init__(
        self,
        a: Any,
        b: Any,
        c: Any = None,
        *,
        alpha: float | complex | None = None,
        beta: float | complex | None = None,
        quantization_scales: dict | None = None,
        options: MatmulOptions | dict | None = None,
        stream: Any = None,
        _stacklevel: int = 2,
    ):
        self.options = _check_options(_as_dataclass(options, MatmulOptions, "options"))
        if quantization_scales is not None and not isinstance(quantization_scales, dict):
            raise TypeError(
                "quantization_scales: expected a dict such as {'a': 1.0, 'b': 1.0} or None; got "
                f"{type(quantization_scales).__name__}"
            )
        self._free_list = []
        self._planned = False
        oa, ob = wrap(a, "a"), wrap(b, "b")
        oc = wrap(c, "c") if c is not None else None
        for name, op in (("b", ob), ("c", oc)):
            if op is None:
                continue
            if op.package != oa.package:
                raise TypeError(
                    f"{name}: a {op.package} array; a is a {oa.package} array (mixing packages "
                    "is not supported)"
                )
            if op.device != oa.device:
                raise ValueError(f"{name}: on device {op.device}; a is on device {oa.device}")
        if beta is not None and c is None:
            raise ValueError("beta: given without c")
        for nm, v in (("alpha", alpha), ("beta", beta)):
            if v is not None and (not isinstance(v, _NUMBER) or isinstance(v, (bool, np.bool_))):
                raise TypeError(f"{nm}: expected a number; got {type(v).__name__}")
        self.package_name = oa.package
        self._host = oa.package == "numpy"
        if self._host and self.options.inplace and oc is not None and not c.flags.writeable:
            raise ValueError("c: a read-only array; options.inplace writes the result into c")
        self._user = {"a": oa, "b": ob, "c": oc}
        self._user_inputs: dict[str, Operand] = {}
        self._scales_in = dict(quantization_scales or {})
        self.algorithms: list[Algorithm] = []
        # Validate everything that can be before plan (shapes, dtypes, layouts), before any
        # CUDA call.
        self._problem: _Problem | None = _Problem(
            oa, ob, oc, self.options, None, {}, dict.fromkeys(self._scales_in)
        )
        sc = self._problem.scale_np
        self.alpha = 1.0 if alpha is None else _scalar(alpha, "alpha", sc)
        self.beta = (0.0 if c is None else 1.0) if beta is None else _scalar(beta, "beta", sc)
        self._stream = stream_handle(stream) if stream is not None else None
        self._cpu = self._host and (self.options.device_id is None and not gpu_available())
        if self._host and self.options.device_id is not None and not gpu_available():
            raise ValueError("options.device_id: no CUDA device is available")
        if self._cpu:
            warnings.warn(
                "nvmath_host: no CUDA device; computing the matmul of NumPy operands on the CPU "
                "with NumPy (nvmath_host.epilogs.reference)",
                CPUExecutionWarning,
                stacklevel=_stacklevel,
            )
            self.device = None
        elif self._host:
            self.device = (
                self.options.device_id
                if self.options.device_id is not None
                else _rt_check(_rt().cudaGetDevice(), "cudaGetDevice")
            )
        else:
            self.device = oa.device
        # NumPy FP8 operands (ml_dtypes) on the CPU path: scales are host floats
        self._cpu_scales = (
            {k: _host_scale(v, k) for k, v in self._scales_in.items()} if self._cpu else {}
        )
        self._pkg = None if self._cpu else package(self.package_name)
        if not self._cpu:
            self._mirror_host_operands()

    # ------------------------------------------------------------------ helpers
    def _mirror_host_operands(self):
        """NumPy operands on a GPU: device copies (CuPy), kept for the object's life."""
        self._ops = dict(self._user)
        if not self._host:
            return
        for k, op in self._user.items():
            if op is not None:
                self._ops[k] = self._mirror(op)

    def _mirror(self, op: Operand) -> Operand:
        """The device copy (CuPy) of the NumPy operand ``op``, in ``op``'s memory order."""
        dev = self._pkg.to_device(op.obj.view(op.dtype.storage), self.device)
        strides = tuple(s // dev.itemsize for s in dev.strides)
        return Operand(dev, "numpy", dev.data.ptr, op.shape, strides, op.dtype, self.device)

    def _make_problem(self, epilog, inputs, ops) -> _Problem:
        scales = dict.fromkeys(self._scales_in)
        return _Problem(ops["a"], ops["b"], ops["c"], self.options, epilog, inputs, scales)

    def _wrap_inputs(self, epilog_inputs) -> dict[str, Operand]:
        if epilog_inputs is None:
            return {}
        if not isinstance(epilog_inputs, dict):
            raise TypeError(f"epilog_inputs: expected a dict; got {type(epilog_inputs).__name__}")
        out = {}
        for k, v in epilog_inputs.items():
            what = _input_what(k)
            if k == "relu_aux":
                op = _wrap_aux(v, what)
            else:
                op = wrap(v, what)
            if op.package != self.package_name:
                raise TypeError(
                    f"{what}: a {op.package} array; the operands are {self.package_name} arrays"
                )
            if not self._cpu and not self._host and op.device != self.device:
                raise ValueError(
                    f"{what}: on device {op.device}; the operands are on {self.device}"
                )
            out[k] = op
        return out

    def _device_inputs(self, inputs: dict[str, Operand]) -> dict[str, Operand]:
        if not self._host or self._cpu:
            return inputs
        return {k: self._mirror(op) for k, op in inputs.items()}

    # ------------------------------------------------------------------ plan
    def plan(
        self,
        preferences: MatmulPlanPreferences | dict | None = None,
        algorithms: list[Algorithm] | None = None,
        *,
        epilog: MatmulEpilog | None = None,
        epilog_inputs: dict | None = None,
    ) -> list[Algorithm]:
        """Choose the epilog and ask cuBLASLt's heuristic for algorithms.

        Parameters
        ----------
        preferences : MatmulPlanPreferences or dict, optional
            How many algorithms and how much workspace.
        algorithms : list of Algorithm, optional
            Reuse algorithms (e.g. unpickled from an earlier autotune) instead of the heuristic.
        epilog : MatmulEpilog or str, optional
            The fused epilog, or its name (case-insensitive, e.g. ``"gelu_bias"``); default:
            none.
        epilog_inputs : dict, optional
            The epilog's inputs by name (``"bias"``, ``"relu_aux"``, ``"gelu_aux"``), arrays of
            the operands' package. The bias has the result's dtype, except with FP8 operands
            (cuBLASLt's FP8 table): bfloat16 for a float32 result, and for an FP8 result
            float16 or bfloat16 (``c``'s dtype when ``c`` is given).

        Returns
        -------
        list of Algorithm
            Best first (empty on the CPU path).
        """
        prefs = _check_preferences(_as_dataclass(preferences, MatmulPlanPreferences, "preferences"))
        user_inputs = self._wrap_inputs(epilog_inputs)
        if self._problem is None:
            raise RuntimeError("this Matmul was freed")
        problem = self._make_problem(epilog, user_inputs, self._user)  # validates
        if self._host and not self._cpu:
            problem = self._make_problem(epilog, self._device_inputs(user_inputs), self._ops)
        self._release_gpu()
        self._problem = problem
        self._user_inputs = user_inputs
        if self._cpu:
            self._planned = True
            self.algorithms = []
            return []
        with _DeviceScope(self.device):
            self._plan_gpu(problem, prefs, algorithms)
        self._planned = True
        return list(self.algorithms)

    def _plan_gpu(self, p: _Problem, prefs: MatmulPlanPreferences, algorithms):
        if p.fp8:
            rt = _rt()
            major = _rt_check(
                rt.cudaDeviceGetAttribute(
                    rt.cudaDeviceAttr.cudaDevAttrComputeCapabilityMajor, self.device
                ),
                "cudaDeviceGetAttribute",
            )
            minor = _rt_check(
                rt.cudaDeviceGetAttribute(
                    rt.cudaDeviceAttr.cudaDevAttrComputeCapabilityMinor, self.device
                ),
                "cudaDeviceGetAttribute",
            )
            if (major, minor) < (8, 9):
                raise ValueError(
                    f"a: FP8 needs compute capability >= 8.9; device {self.device} is {major}.{minor}"
                )
        handle = _handle(self.device)
        desc = lt.MatmulDesc(int(p.compute_type), int(p.scale_type))
        self._free_list.append(desc)
        A = lt.MatmulDescAttribute
        desc.set(A.TRANSA, int(p.trans_a))
        desc.set(A.TRANSB, int(p.trans_b))
        desc.set(A.EPILOGUE, int(p.lt_epilog))
        layouts = []
        for L in (p.layout_a, p.layout_b, p.layout_c, p.layout_d):
            lay = lt.MatrixLayout(int(L.dtype.cuda), L.rows, L.cols, L.ld, L.batch, L.stride)
            self._free_list.append(lay)
            layouts.append(lay)
        self._layouts = layouts
        ops = self._ops
        inputs = p.inputs
        # --- epilog attributes (pointers set now so the heuristic sees their alignment)
        if "bias" in inputs:
            desc.set_pointer(A.BIAS_POINTER, inputs["bias"].ptr)
            if p.fp8:
                desc.set(A.BIAS_DATA_TYPE, int(inputs["bias"].dtype.cuda))
        if p.bias_batch_stride:
            desc.set(A.BIAS_BATCH_STRIDE, p.bias_batch_stride)
        aux_in = inputs.get("relu_aux") or inputs.get("gelu_aux")
        if aux_in is not None:
            desc.set_pointer(A.EPILOGUE_AUX_POINTER, aux_in.ptr)
        if p.aux_ld is not None:
            desc.set(A.EPILOGUE_AUX_LD, p.aux_ld)
            desc.set(A.EPILOGUE_AUX_BATCH_STRIDE, p.aux_batch_stride)
        # --- FP8 scales (cuBLASLt's A is our b when the result is C-ordered)
        self._scale_arrays = {}
        if p.fp8:
            lt_name = {"a": "b", "b": "a"} if p.swap else {"a": "a", "b": "b"}
            attr = {
                "a": A.A_SCALE_POINTER,
                "b": A.B_SCALE_POINTER,
                "c": A.C_SCALE_POINTER,
                "d": A.D_SCALE_POINTER,
            }
            for k, v in self._scales_in.items():
                arr = self._scale_array(v, k)
                self._scale_arrays[k] = arr
                desc.set_pointer(attr[lt_name.get(k, k)], arr.ptr)
            if self.options.fast_accumulation:
                desc.set(A.FAST_ACCUM, 1)
        self._desc = desc
        # --- preference + heuristic
        pref = lt.Preference()
        self._free_list.append(pref)
        P = lt.PreferenceAttribute
        pref.set(P.MAX_WORKSPACE_BYTES, prefs.max_workspace)
        self._align = {
            "a": _alignment(ops["a"].ptr),
            "b": _alignment(ops["b"].ptr),
            "c": _alignment(ops["c"].ptr) if ops["c"] is not None else 16,
        }
        for k, v in inputs.items():
            self._align[k] = _alignment(v.ptr)
        first, second = ("b", "a") if p.swap else ("a", "b")
        pref.set(P.MIN_ALIGNMENT_A_BYTES, self._align[first])
        pref.set(P.MIN_ALIGNMENT_B_BYTES, self._align[second])
        dal = self._align["c"] if p.inplace else 16
        if ops["c"] is not None:
            c_align = min(self._align["c"], dal)
        elif p.c_ptr_from == "lt_a":  # C points at cuBLASLt's A operand (see _Problem)
            c_align = self._align[first]
        else:
            c_align = dal
        pref.set(P.MIN_ALIGNMENT_C_BYTES, c_align)
        pref.set(P.MIN_ALIGNMENT_D_BYTES, dal)
        # Outputs (aux, bgrad, amax) get their pointers at each execute; give the heuristic
        # real ones now so it picks algorithms that support them.
        _, dummy = self._alloc_outputs(self._default_stream())
        self._set_output_pointers(dummy)
        if algorithms is not None:
            algos = list(algorithms)
            if not algos or not all(isinstance(x, Algorithm) for x in algos):
                raise TypeError("algorithms: expected a non-empty list of Algorithm")
            for x in algos:
                if x.version is not None and x.version != lt.version():
                    raise ValueError(
                        f"algorithms: made with cuBLASLt {x.version}; this is {lt.version()}"
                    )
        else:
            results = lt.heuristic(handle, desc, *layouts, pref, prefs.limit)
            if not results:
                raise lt.CublasLtError(
                    "cublasLtMatmulAlgoGetHeuristic",
                    lt.Status.NOT_SUPPORTED,
                    f"no algorithm for {p.a.dtype.name} {p.batch_shape}x({p.M}x{p.K})@({p.K}x{p.N}) "
                    f"epilog {p.epilog.name}, compute {p.compute_type.name}",
                )
            algos = [Algorithm._from_result(r, lt.version()) for r in results]
        self.algorithms = algos
        ws = max(x.workspace_size for x in algos)
        self._workspace = None
        self._ws_ptr, self._ws_size = 0, ws
        self._ws_stream = self._default_stream()
        self._foreign_stream = False
        if ws:
            self._workspace = self._pkg.empty(UINT8, (ws,), (1,), ws, self.device, self._ws_stream)
            self._ws_ptr = self._pkg.ptr(self._workspace)
        # --- pre-built argument list of cublasLtMatmul
        sc = p.scale_np
        self._alpha_buf = np.array([self.alpha], dtype=sc)
        self._beta_buf = np.array([self.beta if ops["c"] is not None else 0], dtype=sc)
        self._algo_index = 0
        self._build_args()
        self._prepare_execute()

    def _scale_array(self, v, k):
        if isinstance(v, (int, float, np.floating)):
            arr = self._pkg.scalar_array(float(v), self.device)
            op = (
                wrap(arr, f"quantization_scales[{k!r}]")
                if not self._host
                else Operand(arr, "numpy", arr.data.ptr, (1,), (1,), DTYPES["float32"], self.device)
            )
        else:
            op = wrap(v, f"quantization_scales[{k!r}]")
            if op.dtype.name != "float32" or op.shape not in ((1,), ()):
                raise ValueError(
                    f"quantization_scales[{k!r}]: expected a float or a one-element float32 array"
                )
        return op

    def _default_stream(self):
        return self._stream if self._stream is not None else self._pkg.current_stream(self.device)

    def _build_args(self):
        p, ops = self._problem, self._ops
        la, lb, lc, ld = self._layouts
        first, second = (ops["b"], ops["a"]) if p.swap else (ops["a"], ops["b"])
        algo = self.algorithms[self._algo_index]
        if ops["c"] is not None:
            c_ptr = ops["c"].ptr
        elif p.c_ptr_from == "lt_a":
            c_ptr = first.ptr
        else:
            c_ptr = 0  # set to D's pointer at each launch
        self._c_from_d = p.c_ptr_from == "d"
        self._args = [
            _handle(self.device).ptr,
            self._desc.ptr,
            self._alpha_buf.ctypes.data,
            first.ptr,
            la.ptr,
            second.ptr,
            lb.ptr,
            self._beta_buf.ctypes.data,
            c_ptr,
            lc.ptr,
            0,
            ld.ptr,
            ctypes.addressof(algo._algo),
            self._ws_ptr,
            self._ws_size,
            0,
        ]
        self._algo_ref = algo  # keep the struct alive
        self._fn = lt.lib().raw_cublasLtMatmul
        self._rt = _rt()
        self._one_device = _device_count() == 1
        self._c_is_d = p.inplace

    def _prepare_execute(self):
        """What execute() needs, looked up once per plan: allocators of the result and of the
        auxiliary outputs (shape, dtype, device resolved) and the package's current-stream
        function (the stream itself is still read at each call)."""
        p, pkg, dev = self._problem, self._pkg, self.device
        o = p.d_out
        self._alloc_d = (
            pkg.allocator(o.dtype, o.shape, o.strides, o.nelems, dev) if o is not None else None
        )
        self._alloc_outs = tuple(
            (o.name, pkg.allocator(o.dtype, o.shape, o.strides, o.nelems, dev)) for o in p.outputs
        )
        self._get_stream = pkg.current_stream_getter()

    # ------------------------------------------------------------------ autotune
    def autotune(self, iterations: int = 10, prune: int | None = None) -> list[Algorithm]:
        """Time each planned algorithm and keep the fastest first.

        Runs each algorithm once to warm up, then ``iterations`` times round-robin on the
        plan's stream, flushing L2 before each run and timing it with CUDA events; waits for
        each timing (autotuning needs the times on the host). The results are discarded.

        Parameters
        ----------
        iterations : int
            Runs per algorithm (median taken).
        prune : int, optional
            Keep only this many algorithms.

        Returns
        -------
        list of Algorithm
            Fastest first, with ``time_ms`` set.
        """
        self._check_planned()
        if iterations < 1:
            raise ValueError(f"iterations: {iterations}; must be >= 1")
        if self._cpu:
            return []
        rt = _rt()
        with _DeviceScope(self.device):
            stream = self._default_stream()
            l2 = _rt_check(
                rt.cudaDeviceGetAttribute(rt.cudaDeviceAttr.cudaDevAttrL2CacheSize, self.device),
                "cudaDeviceGetAttribute",
            )
            flush_n = max(2 * l2, 1 << 20)
            flush = self._pkg.empty(UINT8, (flush_n,), (1,), flush_n, self.device, stream)
            flush_ptr = self._pkg.ptr(flush)
            d, outs = self._alloc_outputs(stream)
            start = _rt_check(rt.cudaEventCreate(), "cudaEventCreate")
            stop = _rt_check(rt.cudaEventCreate(), "cudaEventCreate")
            try:
                # Warm every algorithm once, then time them round-robin so that clock and
                # thermal drift during the search affect all of them alike.
                live = []
                for i, algo in enumerate(self.algorithms):
                    self._algo_index = i
                    self._build_args()
                    try:
                        self._launch(d, outs, stream)
                        live.append(i)
                    except lt.CublasLtError:
                        algo.time_ms = math.inf
                times = {i: [] for i in live}
                for it in range(iterations):
                    for i in live:
                        self._args[12] = ctypes.addressof(self.algorithms[i]._algo)
                        _rt_check(
                            rt.cudaMemsetAsync(flush_ptr, it & 0xFF, flush_n, stream),
                            "cudaMemsetAsync",
                        )
                        _rt_check(rt.cudaEventRecord(start, stream), "cudaEventRecord")
                        self._launch(d, outs, stream)
                        _rt_check(rt.cudaEventRecord(stop, stream), "cudaEventRecord")
                        _rt_check(rt.cudaEventSynchronize(stop), "cudaEventSynchronize")
                        times[i].append(
                            _rt_check(rt.cudaEventElapsedTime(start, stop), "cudaEventElapsedTime")
                        )
                for i in live:
                    self.algorithms[i].time_ms = float(np.median(times[i]))
            finally:
                rt.cudaEventDestroy(start)
                rt.cudaEventDestroy(stop)
                _rt_check(rt.cudaStreamSynchronize(stream), "cudaStreamSynchronize")
            self.algorithms.sort(key=lambda x: x.time_ms)
            if prune is not None:
                self.algorithms = self.algorithms[: max(1, prune)]
            self._algo_index = 0
            self._build_args()
            del flush
        return list(self.algorithms)

    # ------------------------------------------------------------------ execute
    def _check_planned(self):
        if not self._planned:
            if self._problem is None:
                raise RuntimeError("this Matmul was freed")
            self.plan()

    def _alloc_outputs(self, stream, current=False):
        p, pkg, dev = self._problem, self._pkg, self.device
        if p.d_out is not None:
            o = p.d_out
            d = pkg.empty(o.dtype, o.shape, o.strides, o.nelems, dev, stream, current)
        else:
            d = None
        outs = {}
        for o in p.outputs:
            outs[o.name] = pkg.empty(o.dtype, o.shape, o.strides, o.nelems, dev, stream, current)
        return d, outs

    def _launch(self, d, outs, stream):
        args = self._args
        ptr = self._pkg.ptr
        if d is not None:
            d_ptr = ptr(d)
            args[10] = d_ptr
            if self._c_from_d:
                args[8] = d_ptr
        else:
            args[10] = args[8]
        if outs:
            self._set_output_pointers(outs)
        args[15] = stream
        st = self._fn(*args)
        if st:
            raise lt.CublasLtError("cublasLtMatmul", st)

    def _set_output_pointers(self, outs):
        ptr, desc = self._pkg.ptr, self._desc
        for name, arr in outs.items():
            desc.set_pointer(_out_attr(name), ptr(arr))

    def execute(self, stream: Any = None):
        """Run the planned matmul (plans with no epilog first if :meth:`plan` was not called).

        Parameters
        ----------
        stream : stream, optional
            Where to enqueue it; default: the constructor's ``stream``, else the operands'
            package's current stream. Nothing is synchronised for GPU operands.

        Returns
        -------
        array, or (array, dict)
            The result, of the operands' package and device (``c`` itself with
            ``options.inplace``); with a dict of auxiliary outputs by name when there are
            some: the epilog's (``"relu_aux"``, ``"gelu_aux"``, ``"bgrad"``) and, with
            ``options.result_amax``, ``"result_amax"`` (one-element float32 array).
        """
        # The hot path: everything that does not change between calls was looked up by
        # _build_args (see there); the stream is resolved at each call.
        if not self._planned:
            self._check_planned()
        if self._cpu:
            return self._execute_cpu()
        current = False
        if stream is not None:
            s = stream_handle(stream)
        elif self._stream is not None:
            s = self._stream
        else:
            s = self._get_stream(self.device)
            current = True
        return self._run(s, current)

    def _run(self, s: int, current: bool):
        """execute() on the planned GPU path, with the stream handle resolved (``current``: it
        is the package's current stream)."""
        if s != self._ws_stream:
            self._foreign_stream = True
        # (as `with _DeviceScope(...)` around the block, only when another device is current)
        scope = None
        if not self._one_device and self._rt.cudaGetDevice()[1] != self.device:
            scope = _DeviceScope(self.device)
            scope.__enter__()
        try:
            # the result and auxiliary outputs (allocators prepared per plan), then the launch
            alloc_d = self._alloc_d
            d = alloc_d(s, current) if alloc_d is not None else None
            outs = {}
            for name, alloc in self._alloc_outs:
                outs[name] = alloc(s, current)
            self._launch(d, outs, s)
        finally:
            if scope is not None:
                scope.__exit__(None, None, None)
        if d is None:
            d = self._user["c"].obj if not self._host else self._ops["c"].obj
        if self._host:
            return self._to_host(d, outs, s)
        return (d, outs) if self._alloc_outs else d

    def _to_host(self, d, outs, stream):
        import cupy as cp

        with cp.cuda.ExternalStream(stream):
            p = self._problem
            dh = d.get().view(numpy_dtype(p.d_dtype)) if p.d_out is not None else None
            if p.d_out is None:
                host_c = self._user["c"].obj
                host_c[...] = d.get().view(host_c.dtype)
                dh = host_c
            oh = {}
            for o in p.outputs:
                arr = outs[o.name].get()
                oh[o.name] = arr.view(numpy_dtype(o.dtype)) if o.dtype.kind != "u" else arr
        return (dh, oh) if p.outputs else dh

    def _execute_cpu(self):
        p = self._problem
        u = self._user
        inputs = {k: v.obj for k, v in self._user_inputs.items()}
        a, b = u["a"].obj, u["b"].obj
        if p.fp8:  # dequantise as cuBLASLt does: scale_a * a, scale_b * b, accumulate in float32
            sc = self._cpu_scales
            a = a.astype(np.float32) * np.float32(sc["a"])
            b = b.astype(np.float32) * np.float32(sc["b"])
        fp8_result = p.d_dtype.kind == "f8"
        d, outs = reference(
            a,
            b,
            c=u["c"].obj if u["c"] is not None else None,
            alpha=self.alpha,
            beta=self.beta,
            epilog=p.epilog,
            epilog_inputs=inputs,
            result_dtype=np.float32 if fp8_result else numpy_dtype(p.d_dtype),
            order=p.order,
        )
        if p.spec.aux_output == "gelu_aux":
            o = next(x for x in p.outputs if x.name == "gelu_aux")
            arr = host_array(o.dtype, o.shape, o.strides, o.nelems)
            arr = arr.view(numpy_dtype(o.dtype)) if arr.dtype != numpy_dtype(o.dtype) else arr
            arr[...] = outs["gelu_aux"]
            outs["gelu_aux"] = arr
        if fp8_result:
            # amax of the result before the D scale (as cuBLASLt's AMAX_D), then D quantised
            if self.options.result_amax:
                outs["result_amax"] = np.array([np.abs(d).max()], np.float32)
            d = _quantize_fp8(d * np.float32(self._cpu_scales["d"]), p.d_dtype.name)
        if p.inplace:
            u["c"].obj[...] = d
            d = u["c"].obj
        return (d, outs) if p.outputs else d

    # ------------------------------------------------------------------ reset / free
    def _swap_pointers(self, oa, ob, oc, inputs, alpha, beta):
        """:func:`matmul`'s cheap reset: its cache key already matched all but the pointers."""
        p, args, ops, user = self._problem, self._args, self._ops, self._user
        user["a"] = ops["a"] = p.a = oa
        user["b"] = ops["b"] = p.b = ob
        first, second = (ob, oa) if p.swap else (oa, ob)
        args[3] = first.ptr
        args[5] = second.ptr
        if p.c_ptr_from == "lt_a":
            args[8] = first.ptr
        if oc is not None:
            user["c"] = ops["c"] = p.c = oc
            args[8] = oc.ptr
        if alpha is not None:
            self.alpha = self._alpha_buf[0] = _scalar(alpha, "alpha", p.scale_np)
        if beta is not None:
            self.beta = self._beta_buf[0] = _scalar(beta, "beta", p.scale_np)
        if inputs:
            A = lt.MatmulDescAttribute
            for k, op in inputs.items():
                if op.ptr != p.inputs[k].ptr:
                    attr = A.BIAS_POINTER if k == "bias" else A.EPILOGUE_AUX_POINTER
                    self._desc.set_pointer(attr, op.ptr)
                p.inputs[k] = op
            self._user_inputs.update(inputs)

    def reset_operands(
        self,
        a: Any = None,
        b: Any = None,
        c: Any = None,
        *,
        alpha: float | complex | None = None,
        beta: float | complex | None = None,
        epilog_inputs: dict | None = None,
    ) -> None:
        """Swap in new operands of the same shape, strides, dtype, package and device.

        Parameters
        ----------
        a, b, c : array, optional
            Replacements (``None`` keeps the current one).
        alpha, beta : scalar, optional
            New scales.
        epilog_inputs : dict, optional
            Replacements for some of the planned epilog inputs.
        """
        if self._problem is None:
            raise RuntimeError("this Matmul was freed")
        new = {}
        for name, v in (("a", a), ("b", b), ("c", c)):
            if v is None:
                continue
            old = self._user[name]
            if old is None:
                raise ValueError(f"{name}: this Matmul was created without {name}")
            op = wrap(v, name)
            if op.signature() != old.signature():
                raise ValueError(
                    f"{name}: {op.package} {op.dtype.name} shape {op.shape} strides {op.strides} "
                    f"on device {op.device} does not match the planned {old.package} "
                    f"{old.dtype.name} shape {old.shape} strides {old.strides} on device {old.device}"
                )
            new[name] = op
        new_inputs = {}
        if epilog_inputs is not None:
            wrapped = self._wrap_inputs(epilog_inputs)
            for k, op in wrapped.items():
                old = getattr(self, "_user_inputs", {}).get(k)
                if old is None:
                    raise ValueError(
                        f"epilog_inputs[{k!r}]: not an input of the planned epilog "
                        f"{self._problem.epilog.name} (it takes {list(self._problem.spec.inputs)})"
                    )
                if op.signature() != old.signature():
                    raise ValueError(f"epilog_inputs[{k!r}]: does not match the planned input")
                new_inputs[k] = op
        sc = self._problem.scale_np
        if alpha is not None:
            alpha = _scalar(alpha, "alpha", sc)
        if beta is not None:
            if self._user["c"] is None:
                raise ValueError("beta: this Matmul has no c")
            beta = _scalar(beta, "beta", sc)
        if alpha is not None:
            self.alpha = alpha
        if beta is not None:
            self.beta = beta
        self._user.update(new)
        if new_inputs:
            self._user_inputs = {**self._user_inputs, **new_inputs}
        if self._cpu:
            return
        if self._host:
            # new host data into the device mirrors; the signature check above (strides
            # included) means each has its mirror's memory order and size
            for name, op in new.items():
                self._pkg.write(self._ops[name].obj, op.obj)
            for k, op in new_inputs.items():
                self._pkg.write(self._problem.inputs[k].obj, op.obj)
        else:
            for name, op in new.items():
                self._check_alignment(name, op.ptr)
                self._ops[name] = op
            for k, op in new_inputs.items():
                self._check_alignment(k, op.ptr)
                self._problem.inputs[k] = op
                if self._planned:
                    A = lt.MatmulDescAttribute
                    attr = A.BIAS_POINTER if k == "bias" else A.EPILOGUE_AUX_POINTER
                    self._desc.set_pointer(attr, op.ptr)
        if self._planned:
            if alpha is not None:
                self._alpha_buf[0] = alpha
            if beta is not None:
                self._beta_buf[0] = beta
            p = self._problem
            p.a, p.b, p.c = self._ops["a"], self._ops["b"], self._ops["c"]
            self._build_args()

    def _check_alignment(self, name, ptr):
        need = getattr(self, "_align", {}).get(name)
        if need and ptr % need:
            raise ValueError(
                f"{name}: pointer {ptr:#x} is less aligned than the planned {need} bytes; plan again"
            )

    def _release_gpu(self):
        for obj in reversed(self._free_list):
            obj.destroy()
        self._free_list = []
        if getattr(self, "_workspace", None) is not None and self._foreign_stream:
            # The workspace goes back to its package's pool in the order of the stream it was
            # allocated on; it was also used on other streams, so wait for those first.
            with _DeviceScope(self.device):
                _rt_check(_rt().cudaDeviceSynchronize(), "cudaDeviceSynchronize")
        self._workspace = None
        self._planned = False

    def free(self) -> None:
        """Release the cuBLASLt descriptors and the workspace (the object is unusable after).

        Synchronises the device only if :meth:`execute` ran on a stream other than the one
        the workspace was allocated on (so the pool cannot hand it out while still in use).
        """
        self._release_gpu()
        self._problem = None
        self._ops = {}

    def __enter__(self) -> Matmul:
        return self

    def __exit__(self, *exc) -> None:
        self.free()

    def __del__(self):
        try:
            self._release_gpu()
        except Exception:
            pass


def _host_scale(v, k) -> float:
    """A quantization scale on the CPU path: a number or a one-element float32 NumPy array."""
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, np.ndarray) and v.dtype == np.float32 and v.shape in ((1,), ()):
        return float(v.reshape(-1)[0])
    raise ValueError(
        f"quantization_scales[{k!r}]: expected a float or a one-element float32 NumPy array "
        f"(NumPy operands on the CPU); got {type(v).__module__}.{type(v).__qualname__}"
    )


def _quantize_fp8(x: np.ndarray, name: str) -> np.ndarray:
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


def _wrap_aux(v, what) -> Operand:
    """Wrap a relu_aux bit-mask (uint8, which is no matmul dtype)."""
    pkg = type(v).__module__.split(".", 1)[0]
    if isinstance(v, np.ndarray) or pkg in ("cupy", "numba"):
        if isinstance(v, np.ndarray):
            dt, ptr, shape, st, dev, pk = v.dtype, v.ctypes.data, v.shape, v.strides, None, "numpy"
        else:
            cai = v.__cuda_array_interface__
            dt = np.dtype(cai["typestr"])
            ptr, shape = cai["data"][0], tuple(cai["shape"])
            st = cai.get("strides")
            if st is None:
                st = tuple(x * dt.itemsize for x in _c_strides_elems(shape))
            dev = v.device.id if pkg == "cupy" else wrap_device(ptr)
            pk = pkg
        if dt != np.uint8:
            raise ValueError(f"{what}: dtype {dt}; expected uint8 (a bit-mask)")
        return Operand(v, pk, ptr, shape, tuple(st), UINT8, dev)
    if pkg == "torch":
        if str(v.dtype) != "torch.uint8":
            raise ValueError(f"{what}: dtype {v.dtype}; expected uint8 (a bit-mask)")
        return Operand(v, "torch", v.data_ptr(), tuple(v.shape), v.stride(), UINT8, v.device.index)
    return wrap(v, what)


def _c_strides_elems(shape):
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def wrap_device(ptr):
    """CUDA device ordinal that owns the device pointer ``ptr``."""
    from ._operands import _pointer_device

    return _pointer_device(ptr)


# --------------------------------------------------------------------------- function form

_CACHE_SIZE = 32


class _PlanCache:
    """:func:`matmul`'s plans: an LRU of idle plans, each checked out by one caller at a time.

    :meth:`checkout` takes an idle plan out of the cache, so that no other thread can get it
    and neither eviction nor :meth:`clear` can free it while its caller uses it; a caller that
    finds none builds a fresh plan. :meth:`checkin` puts the plan back as the most recently
    used one and frees the plans that fall off the end. A plan checked out before a
    :meth:`clear` (or built after a checkout that preceded it) is freed when it comes back
    instead of being cached. Several plans may be cached under one key (threads that ran the
    same problem at once); ``capacity`` counts plans. Plans are any objects with ``free()``;
    they are freed outside the lock.
    """

    __slots__ = ("capacity", "_idle", "_size", "_generation", "_lock")

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._idle: OrderedDict = OrderedDict()  # key -> [plan, ...] (oldest first)
        self._size = 0
        self._generation = 0  # bumped by clear(): older checkouts are freed on checkin
        self._lock = threading.Lock()

    def checkout(self, key) -> tuple[Any, int]:
        """``(plan, ticket)``: an idle plan for ``key`` (now owned by the caller) or ``None``.

        Pass the ticket back to :meth:`checkin` with the plan (or with a fresh one built
        because there was none).
        """
        with self._lock:
            plans = self._idle.get(key)
            if plans:
                plan = plans.pop()
                if not plans:
                    del self._idle[key]
                self._size -= 1
                return plan, self._generation
            return None, self._generation

    def checkin(self, key, plan, ticket: int) -> None:
        """Return ``plan`` (checked out, or built, under ``ticket``) to the cache."""
        doomed = None
        with self._lock:
            if ticket != self._generation:
                doomed = [plan]  # cleared while it was out
            else:
                plans = self._idle.get(key)
                if plans is None:
                    self._idle[key] = [plan]
                else:
                    plans.append(plan)
                    self._idle.move_to_end(key)
                self._size += 1
                if self._size > self.capacity:
                    doomed = []
                    idle = self._idle
                    while self._size > self.capacity:
                        k = next(iter(idle))
                        plans = idle[k]
                        doomed.append(plans.pop(0))
                        if not plans:
                            del idle[k]
                        self._size -= 1
        if doomed:
            _free_all(doomed)

    def clear(self) -> None:
        """Free every idle plan; plans checked out now are freed when they come back."""
        with self._lock:
            doomed = [p for plans in self._idle.values() for p in plans]
            self._idle.clear()
            self._size = 0
            self._generation += 1
        _free_all(doomed)

    def info(self) -> dict:
        """``{"size", "capacity", "keys"}`` of the idle plans (a key once per plan)."""
        with self._lock:
            keys = [k for k, plans in self._idle.items() for _ in plans]
            return {"size": self._size, "capacity": self.capacity, "keys": keys}


def _free_all(plans) -> None:
    """``free()`` each plan; the first exception, if any, is raised after all were tried."""
    error = None
    for p in plans:
        try:
            p.free()
        except Exception as e:  # pragma: no cover - freeing a plan only fails on CUDA errors
            error = error or e
    if error is not None:
        raise error


_plans = _PlanCache(_CACHE_SIZE)


def plan_cache_info() -> dict:
    """Size and keys of :func:`matmul`'s plan cache (for tests and debugging).

    Only idle plans are counted; plans in use by a :func:`matmul` call are not in the cache.
    """
    return _plans.info()


def clear_plan_cache() -> None:
    """Free every plan cached by :func:`matmul`.

    Plans in use by a :func:`matmul` call running in another thread are not freed under it:
    they are freed when that call ends instead of going back into the cache.
    """
    _plans.clear()


_OPTION_FIELDS = tuple(f.name for f in dataclasses.fields(MatmulOptions))


def _options_key(options):
    if options is None:
        return None
    if isinstance(options, MatmulOptions):  # (dataclasses.astuple, without its deep copy)
        return tuple([getattr(options, f) for f in _OPTION_FIELDS])
    if isinstance(options, dict):
        return tuple(sorted(options.items()))
    return ("invalid", id(options))


def _key_of(oa, ob, oc, epilog, inputs, options, qscales, alpha, beta) -> tuple:
    al = _ALIGN16  # _alignment(ptr) == al[ptr & 15], inlined: this runs at every matmul()
    return (
        oa.signature(),
        ob.signature(),
        oc.signature() if oc is not None else None,
        None if epilog is None else int(epilog),
        tuple([(k, v.signature(), al[v.ptr & 15]) for k, v in sorted(inputs.items())])
        if inputs
        else (),
        None if options is None else _options_key(options),
        tuple(sorted(qscales)) if qscales else None,
        alpha is None,
        beta is None,
        al[oa.ptr & 15],
        al[ob.ptr & 15],
        al[oc.ptr & 15] if oc is not None else None,
    )


def _wrap_all(a, b, c, epilog_inputs):
    oa, ob = wrap(a, "a"), wrap(b, "b")
    oc = wrap(c, "c") if c is not None else None
    inputs = {}
    if epilog_inputs is not None:
        if not isinstance(epilog_inputs, dict):
            raise TypeError(f"epilog_inputs: expected a dict; got {type(epilog_inputs).__name__}")
        for k, v in epilog_inputs.items():
            what = _INPUT_WHAT.get(k) or _input_what(k)
            inputs[k] = _wrap_aux(v, what) if k == "relu_aux" else wrap(v, what)
    return oa, ob, oc, inputs


def _input_what(key) -> str:
    """``epilog_inputs[key]`` (how errors name the input), or TypeError for a non-str key."""
    if not isinstance(key, str):
        raise TypeError(
            f"epilog_inputs: keys are input names (str), e.g. 'bias', 'relu_aux', 'gelu_aux'; "
            f"got {key!r}"
        )
    return f"epilog_inputs[{key!r}]"


# the ``what`` of the usual epilog inputs, made once (matmul() wraps them at each call)
_INPUT_WHAT = {k: f"epilog_inputs[{k!r}]" for k in ("bias", "relu_aux", "gelu_aux")}


def _cache_key(a, b, c, alpha, beta, epilog, epilog_inputs, options, qscales) -> tuple:
    """The plan-cache key of a :func:`matmul` call (everything but the data)."""
    oa, ob, oc, inputs = _wrap_all(a, b, c, epilog_inputs)
    if epilog is not None:
        epilog = _as_epilog(epilog)
    return _key_of(oa, ob, oc, epilog, inputs, options, qscales, alpha, beta)


def matmul(
    a: Any,
    b: Any,
    c: Any = None,
    *,
    alpha: float | complex | None = None,
    beta: float | complex | None = None,
    epilog: MatmulEpilog | None = None,
    epilog_inputs: dict | None = None,
    quantization_scales: dict | None = None,
    options: MatmulOptions | dict | None = None,
    preferences: MatmulPlanPreferences | dict | None = None,
    stream: Any = None,
):
    """Compute ``epilog(alpha * a @ b + beta * c)`` in one call.

    Same arguments and result as :class:`Matmul` + :meth:`Matmul.plan` +
    :meth:`Matmul.execute`. GPU plans are kept in a small LRU cache keyed on everything but
    the data (shapes, strides, dtypes, package, device, pointer alignment, epilog, options,
    stream), so repeated calls with the same shapes on the same stream do not re-plan. A
    cached plan keeps a reference to the arrays of its latest call until it is reused or
    evicted. Thread-safe: a call takes its plan out of the cache while it uses it (a call
    from another thread meanwhile plans its own), so no plan is shared by two calls at once
    or freed while one runs.

    Parameters
    ----------
    a, b : array
        ``(..., M, K)`` and ``(..., K, N)`` NumPy, CuPy, PyTorch (CUDA) or Numba device arrays,
        as for :class:`Matmul`.
    c : array, optional
        Added as ``beta * c``.
    alpha, beta : scalar, optional
        Default ``1`` and, when ``c`` is given, ``1`` (else ``0``).
    epilog : MatmulEpilog or str, optional
        The epilog fused into the matmul, or its name (case-insensitive, e.g.
        ``"gelu_bias"``); default: none.
    epilog_inputs : dict, optional
        The epilog's inputs by name, e.g. ``{"bias": bias}`` or ``{"relu_aux": mask}``; a key
        the epilog does not take is an error.
    quantization_scales : dict, optional
        FP8 only: ``{"a": ..., "b": ...}``, plus ``"d"`` for an FP8 result; see
        :class:`Matmul`.
    options : MatmulOptions or dict, optional
        See :class:`MatmulOptions`.
    preferences : MatmulPlanPreferences or dict, optional
        See :class:`MatmulPlanPreferences`.
    stream : stream, optional
        An int handle, an object with ``__cuda_stream__``, or a CuPy/torch/Numba stream;
        default: the operands' package's current stream.

    Returns
    -------
    array or tuple
        ``d`` (same package, device and kind as ``a``), or ``(d, aux)`` when the epilog has
        auxiliary outputs or ``options.result_amax`` is set: ``aux`` a dict such as
        ``{"relu_aux": ...}``, ``{"bgrad": ...}`` or ``{"result_amax": ...}`` (a one-element
        float32 array: ``max |D|`` before the ``"d"`` scale).

    Examples
    --------
    >>> d = matmul(a, b, epilog=MatmulEpilog.RELU_BIAS, epilog_inputs={"bias": bias})  # doctest: +SKIP
    """
    oa, ob, oc, inputs = _wrap_all(a, b, c, epilog_inputs)
    qs = quantization_scales
    if oa.package == "numpy" or (qs is not None and (type(qs) is not dict or qs)):
        # host operands / FP8 scales: no cache (Matmul checks the type of the scales)
        with Matmul(
            a,
            b,
            c,
            alpha=alpha,
            beta=beta,
            quantization_scales=quantization_scales,
            options=options,
            stream=stream,
            _stacklevel=3,
        ) as mm:
            mm.plan(preferences, epilog=epilog, epilog_inputs=epilog_inputs)
            return mm.execute(stream=stream)
    if epilog is not None and type(epilog) is not MatmulEpilog:
        epilog = _as_epilog(epilog)
    # The stream is part of the key: a plan is reused only on the stream it ran on, in whose
    # order its workspace is then used (cuBLASLt's workspace must not be shared by work that
    # may run concurrently).
    try:
        if stream is None:
            s = package(oa.package).current_stream(oa.device)
            current = True
        else:
            s = stream_handle(stream)
            current = False
    except Exception:
        # bad arguments are reported before any CUDA error (Matmul validates them first)
        Matmul(a, b, c, alpha=alpha, beta=beta, options=options).free()
        raise
    try:
        key = _key_of(oa, ob, oc, epilog, inputs, options, None, alpha, beta) + (s,)
        if preferences is not None:
            key = key + (repr(preferences),)
        mm, ticket = _plans.checkout(key)
    except TypeError:  # options that cannot be a key (unhashable or unsortable values)
        _check_options(_as_dataclass(options, MatmulOptions, "options"))  # names the field
        raise TypeError(f"options: cannot be used as a cache key: {options!r}") from None
    # mm is this call's alone until checkin: no other thread swaps pointers into it, launches
    # it or frees it (eviction and clear_plan_cache() never see a checked-out plan)
    try:
        if mm is None:
            mm = Matmul(a, b, c, alpha=alpha, beta=beta, options=options, stream=s)
            mm.plan(preferences, epilog=epilog, epilog_inputs=epilog_inputs)
        else:
            # same key: same shapes, strides, dtypes, device, alignment; only pointers change
            mm._swap_pointers(oa, ob, oc, inputs, alpha, beta)
        result = mm._run(s, current)
    except BaseException:
        if mm is not None:  # not cached: its state may be half updated
            mm.free()
        raise
    _plans.checkin(key, mm, ticket)
    return result
