# SPDX-License-Identifier: Apache-2.0
"""The cuBLASLt calls nvmath_host uses, through ctypes.

Every enum value here mirrors ``cublasLt.h`` / ``cublas_api.h`` / ``library_types.h`` of the
nvidia-cublas wheel; ``tests/cpu/test_host_cublaslt.py`` parses those headers and fails on any
difference. The library is loaded on the first call (never at import), found through
``cuda.pathfinder``. A status other than ``CUBLAS_STATUS_SUCCESS`` raises :class:`CublasLtError`
naming the call and the status.
"""

from __future__ import annotations

import ctypes
import enum
import threading

__all__ = ["CublasLtError"]


class CublasLtError(RuntimeError):
    """A cuBLASLt call returned a status other than ``CUBLAS_STATUS_SUCCESS``.

    Attributes
    ----------
    call : str
        The name of the cuBLASLt function.
    status : int
        The ``cublasStatus_t`` value it returned.
    """

    def __init__(self, call: str, status: int, detail: str = ""):
        self.call = call
        self.status = int(status)
        try:
            name = Status(self.status).name
        except ValueError:
            name = "UNKNOWN"
        msg = f"{call} returned CUBLAS_STATUS_{name} ({self.status})"
        if detail:
            msg += f": {detail}"
        super().__init__(msg)


# ----------------------------------------------------------------------------------- enums


class Status(enum.IntEnum):
    """``cublasStatus_t`` (cublas_api.h)."""

    SUCCESS = 0
    NOT_INITIALIZED = 1
    ALLOC_FAILED = 3
    INVALID_VALUE = 7
    ARCH_MISMATCH = 8
    MAPPING_ERROR = 11
    EXECUTION_FAILED = 13
    INTERNAL_ERROR = 14
    NOT_SUPPORTED = 15
    LICENSE_ERROR = 16


class DataType(enum.IntEnum):
    """``cudaDataType_t`` (library_types.h), the members nvmath_host uses."""

    R_16F = 2
    C_16F = 6
    R_16BF = 14
    R_32F = 0
    C_32F = 4
    R_64F = 1
    C_64F = 5
    R_8I = 3
    R_32I = 10
    R_8F_E4M3 = 28
    R_8F_E5M2 = 29


class ComputeType(enum.IntEnum):
    """``cublasComputeType_t`` (cublas_api.h)."""

    COMPUTE_16F = 64
    COMPUTE_16F_PEDANTIC = 65
    COMPUTE_32F = 68
    COMPUTE_32F_PEDANTIC = 69
    COMPUTE_32F_FAST_16F = 74
    COMPUTE_32F_FAST_16BF = 75
    COMPUTE_32F_FAST_TF32 = 77
    COMPUTE_64F = 70
    COMPUTE_64F_PEDANTIC = 71
    COMPUTE_32I = 72
    COMPUTE_32I_PEDANTIC = 73


class Operation(enum.IntEnum):
    """``cublasOperation_t`` (cublas_api.h)."""

    N = 0
    T = 1
    C = 2


class Epilogue(enum.IntEnum):
    """``cublasLtEpilogue_t`` (cublasLt.h)."""

    DEFAULT = 1
    RELU = 2
    RELU_AUX = 2 | 128
    BIAS = 4
    RELU_BIAS = 2 | 4
    RELU_AUX_BIAS = 2 | 128 | 4
    DRELU = 8 | 128
    DRELU_BGRAD = 8 | 128 | 16
    GELU = 32
    GELU_AUX = 32 | 128
    GELU_BIAS = 32 | 4
    GELU_AUX_BIAS = 32 | 128 | 4
    DGELU = 64 | 128
    DGELU_BGRAD = 64 | 128 | 16
    BGRADA = 256
    BGRADB = 512


class Order(enum.IntEnum):
    """``cublasLtOrder_t`` (cublasLt.h), the members used."""

    COL = 0
    ROW = 1


class MatmulDescAttribute(enum.IntEnum):
    """``cublasLtMatmulDescAttributes_t`` (cublasLt.h), the members used."""

    COMPUTE_TYPE = 0
    SCALE_TYPE = 1
    POINTER_MODE = 2
    TRANSA = 3
    TRANSB = 4
    TRANSC = 5
    EPILOGUE = 7
    BIAS_POINTER = 8
    BIAS_BATCH_STRIDE = 10
    EPILOGUE_AUX_POINTER = 11
    EPILOGUE_AUX_LD = 12
    EPILOGUE_AUX_BATCH_STRIDE = 13
    A_SCALE_POINTER = 17
    B_SCALE_POINTER = 18
    C_SCALE_POINTER = 19
    D_SCALE_POINTER = 20
    AMAX_D_POINTER = 21
    EPILOGUE_AUX_DATA_TYPE = 22
    EPILOGUE_AUX_SCALE_POINTER = 23
    EPILOGUE_AUX_AMAX_POINTER = 24
    SM_COUNT_TARGET = 15
    FAST_ACCUM = 25
    BIAS_DATA_TYPE = 26


class MatrixLayoutAttribute(enum.IntEnum):
    """``cublasLtMatrixLayoutAttribute_t`` (cublasLt.h), the members used."""

    TYPE = 0
    ORDER = 1
    ROWS = 2
    COLS = 3
    LD = 4
    BATCH_COUNT = 5
    STRIDED_BATCH_OFFSET = 6


class PreferenceAttribute(enum.IntEnum):
    """``cublasLtMatmulPreferenceAttributes_t`` (cublasLt.h), the members used."""

    SEARCH_MODE = 0
    MAX_WORKSPACE_BYTES = 1
    REDUCTION_SCHEME_MASK = 3
    MIN_ALIGNMENT_A_BYTES = 5
    MIN_ALIGNMENT_B_BYTES = 6
    MIN_ALIGNMENT_C_BYTES = 7
    MIN_ALIGNMENT_D_BYTES = 8
    MAX_WAVES_COUNT = 9
    IMPL_MASK = 12


class AlgoCapAttribute(enum.IntEnum):
    """``cublasLtMatmulAlgoCapAttributes_t`` (cublasLt.h of cuBLASLt 13)."""

    SPLITK_SUPPORT = 0
    REDUCTION_SCHEME_MASK = 1
    CTA_SWIZZLING_SUPPORT = 2
    STRIDED_BATCH_SUPPORT = 3
    OUT_OF_PLACE_RESULT_SUPPORT = 4
    UPLO_SUPPORT = 5
    TILE_IDS = 6
    CUSTOM_OPTION_MAX = 7
    CUSTOM_MEMORY_ORDER = 10
    POINTER_MODE_MASK = 11
    EPILOGUE_MASK = 12
    STAGES_IDS = 13
    LD_NEGATIVE = 14
    NUMERICAL_IMPL_FLAGS = 15
    MIN_ALIGNMENT_A_BYTES = 16
    MIN_ALIGNMENT_B_BYTES = 17
    MIN_ALIGNMENT_C_BYTES = 18
    MIN_ALIGNMENT_D_BYTES = 19
    POINTER_ARRAY_BATCH_SUPPORT = 21
    FLOATING_POINT_EMULATION_SUPPORT = 22
    POINTER_ARRAY_GROUPED_SUPPORT = 23


class AlgoConfigAttribute(enum.IntEnum):
    """``cublasLtMatmulAlgoConfigAttributes_t`` (cublasLt.h)."""

    ID = 0
    TILE_ID = 1
    SPLITK_NUM = 2
    REDUCTION_SCHEME = 3
    CTA_SWIZZLING = 4
    CUSTOM_OPTION = 5
    STAGES_ID = 6
    INNER_SHAPE_ID = 7
    CLUSTER_SHAPE_ID = 8


# C type of each attribute value (from the comments of cublasLt.h).
_DESC_ATTR_CTYPE = {
    MatmulDescAttribute.COMPUTE_TYPE: ctypes.c_int32,
    MatmulDescAttribute.SCALE_TYPE: ctypes.c_int32,
    MatmulDescAttribute.POINTER_MODE: ctypes.c_int32,
    MatmulDescAttribute.TRANSA: ctypes.c_int32,
    MatmulDescAttribute.TRANSB: ctypes.c_int32,
    MatmulDescAttribute.TRANSC: ctypes.c_int32,
    MatmulDescAttribute.EPILOGUE: ctypes.c_uint32,
    MatmulDescAttribute.BIAS_POINTER: ctypes.c_void_p,
    MatmulDescAttribute.BIAS_BATCH_STRIDE: ctypes.c_int64,
    MatmulDescAttribute.EPILOGUE_AUX_POINTER: ctypes.c_void_p,
    MatmulDescAttribute.EPILOGUE_AUX_LD: ctypes.c_int64,
    MatmulDescAttribute.EPILOGUE_AUX_BATCH_STRIDE: ctypes.c_int64,
    MatmulDescAttribute.A_SCALE_POINTER: ctypes.c_void_p,
    MatmulDescAttribute.B_SCALE_POINTER: ctypes.c_void_p,
    MatmulDescAttribute.C_SCALE_POINTER: ctypes.c_void_p,
    MatmulDescAttribute.D_SCALE_POINTER: ctypes.c_void_p,
    MatmulDescAttribute.AMAX_D_POINTER: ctypes.c_void_p,
    MatmulDescAttribute.EPILOGUE_AUX_DATA_TYPE: ctypes.c_int32,
    MatmulDescAttribute.EPILOGUE_AUX_SCALE_POINTER: ctypes.c_void_p,
    MatmulDescAttribute.EPILOGUE_AUX_AMAX_POINTER: ctypes.c_void_p,
    MatmulDescAttribute.SM_COUNT_TARGET: ctypes.c_int32,
    MatmulDescAttribute.FAST_ACCUM: ctypes.c_int8,
    MatmulDescAttribute.BIAS_DATA_TYPE: ctypes.c_int32,
}

_LAYOUT_ATTR_CTYPE = {
    MatrixLayoutAttribute.TYPE: ctypes.c_uint32,
    MatrixLayoutAttribute.ORDER: ctypes.c_int32,
    MatrixLayoutAttribute.ROWS: ctypes.c_uint64,
    MatrixLayoutAttribute.COLS: ctypes.c_uint64,
    MatrixLayoutAttribute.LD: ctypes.c_int64,
    MatrixLayoutAttribute.BATCH_COUNT: ctypes.c_int32,
    MatrixLayoutAttribute.STRIDED_BATCH_OFFSET: ctypes.c_int64,
}

_PREF_ATTR_CTYPE = {
    PreferenceAttribute.SEARCH_MODE: ctypes.c_uint32,
    PreferenceAttribute.MAX_WORKSPACE_BYTES: ctypes.c_uint64,
    PreferenceAttribute.MIN_ALIGNMENT_A_BYTES: ctypes.c_uint32,
    PreferenceAttribute.MIN_ALIGNMENT_B_BYTES: ctypes.c_uint32,
    PreferenceAttribute.MIN_ALIGNMENT_C_BYTES: ctypes.c_uint32,
    PreferenceAttribute.MIN_ALIGNMENT_D_BYTES: ctypes.c_uint32,
    PreferenceAttribute.REDUCTION_SCHEME_MASK: ctypes.c_uint32,
    PreferenceAttribute.MAX_WAVES_COUNT: ctypes.c_float,
    PreferenceAttribute.IMPL_MASK: ctypes.c_uint64,
}


_A = AlgoCapAttribute
# the two array-valued capabilities (uint32 arrays) are absent: algo_cap reads them by size
_CAP_CTYPE = {a: ctypes.c_int32 for a in _A if a not in (_A.TILE_IDS, _A.STAGES_IDS)}
for _a in (_A.REDUCTION_SCHEME_MASK, _A.CTA_SWIZZLING_SUPPORT, _A.POINTER_MODE_MASK, _A.EPILOGUE_MASK,
           _A.MIN_ALIGNMENT_A_BYTES, _A.MIN_ALIGNMENT_B_BYTES, _A.MIN_ALIGNMENT_C_BYTES,
           _A.MIN_ALIGNMENT_D_BYTES):
    _CAP_CTYPE[_a] = ctypes.c_uint32
_CAP_CTYPE[_A.NUMERICAL_IMPL_FLAGS] = ctypes.c_uint64

_C = AlgoConfigAttribute
_CONFIG_CTYPE = {a: ctypes.c_uint32 for a in _C}
_CONFIG_CTYPE.update({_C.ID: ctypes.c_int32, _C.SPLITK_NUM: ctypes.c_int32,
                      _C.INNER_SHAPE_ID: ctypes.c_uint16, _C.CLUSTER_SHAPE_ID: ctypes.c_uint16})

# ----------------------------------------------------------------------------------- structs


class MatmulAlgo(ctypes.Structure):
    """``cublasLtMatmulAlgo_t``: 8 x uint64, trivially serialisable (cublasLt.h)."""

    _fields_ = [("data", ctypes.c_uint64 * 8)]


class HeuristicResult(ctypes.Structure):
    """``cublasLtMatmulHeuristicResult_t`` (cublasLt.h)."""

    _fields_ = [
        ("algo", MatmulAlgo),
        ("workspaceSize", ctypes.c_size_t),
        ("state", ctypes.c_int),
        ("wavesCount", ctypes.c_float),
        ("reserved", ctypes.c_int * 4),
    ]


# ----------------------------------------------------------------------------------- library

_vp = ctypes.c_void_p
_PROTOTYPES = {
    "cublasLtCreate": [ctypes.POINTER(_vp)],
    "cublasLtDestroy": [_vp],
    "cublasLtMatmulDescCreate": [ctypes.POINTER(_vp), ctypes.c_int, ctypes.c_int],
    "cublasLtMatmulDescDestroy": [_vp],
    "cublasLtMatmulDescSetAttribute": [_vp, ctypes.c_int, _vp, ctypes.c_size_t],
    "cublasLtMatmulDescGetAttribute": [
        _vp,
        ctypes.c_int,
        _vp,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_size_t),
    ],
    "cublasLtMatrixLayoutCreate": [
        ctypes.POINTER(_vp),
        ctypes.c_int,
        ctypes.c_uint64,
        ctypes.c_uint64,
        ctypes.c_int64,
    ],
    "cublasLtMatrixLayoutDestroy": [_vp],
    "cublasLtMatrixLayoutSetAttribute": [_vp, ctypes.c_int, _vp, ctypes.c_size_t],
    "cublasLtMatrixLayoutGetAttribute": [
        _vp,
        ctypes.c_int,
        _vp,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_size_t),
    ],
    "cublasLtMatmulPreferenceCreate": [ctypes.POINTER(_vp)],
    "cublasLtMatmulPreferenceDestroy": [_vp],
    "cublasLtMatmulPreferenceSetAttribute": [_vp, ctypes.c_int, _vp, ctypes.c_size_t],
    "cublasLtMatmulPreferenceGetAttribute": [
        _vp,
        ctypes.c_int,
        _vp,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_size_t),
    ],
    "cublasLtMatmulAlgoGetHeuristic": [
        _vp,
        _vp,
        _vp,
        _vp,
        _vp,
        _vp,
        _vp,
        ctypes.c_int,
        ctypes.POINTER(HeuristicResult),
        ctypes.POINTER(ctypes.c_int),
    ],
    # handle, compute type, scale type, A/B/C/D types, requested count, ids, returned count
    "cublasLtMatmulAlgoGetIds": [_vp] + [ctypes.c_int] * 7 + [ctypes.POINTER(ctypes.c_int)] * 2,
    "cublasLtMatmulAlgoCapGetAttribute": [_vp, ctypes.c_int, _vp, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
    "cublasLtMatmulAlgoConfigSetAttribute": [_vp, ctypes.c_int, _vp, ctypes.c_size_t],
    "cublasLtMatmulAlgoConfigGetAttribute": [_vp, ctypes.c_int, _vp, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
    # A, B, C, D pointers, alpha/beta host pointers, stream: all void*.
    "cublasLtMatmul": [_vp] * 13 + [_vp, ctypes.c_size_t, _vp],
}

_lock = threading.Lock()
_lib = None


class _Lib:
    """The loaded library: one attribute per declared function, each checking its status."""

    def __init__(self, cdll):
        self.cdll = cdll
        cdll.cublasLtGetVersion.restype = ctypes.c_size_t
        cdll.cublasLtGetVersion.argtypes = []
        self.version = int(cdll.cublasLtGetVersion())
        for name, argtypes in _PROTOTYPES.items():
            fn = getattr(cdll, name)
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int
            setattr(self, "raw_" + name, fn)


def lib() -> _Lib:
    """Load libcublasLt (once, thread-safe) through ``cuda.pathfinder`` and declare its calls."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                from cuda.pathfinder import load_nvidia_dynamic_lib

                loaded = load_nvidia_dynamic_lib("cublasLt")
                _lib = _Lib(ctypes.CDLL(loaded.abs_path))
    return _lib


def version() -> int:
    """cuBLASLt's version number (e.g. 130102), from ``cublasLtGetVersion``."""
    return lib().version


def check(call: str, status: int) -> None:
    """Raise :class:`CublasLtError` naming ``call`` if ``status`` is not success."""
    if status != 0:
        raise CublasLtError(call, status)


def _call(name, *args):
    check(name, getattr(lib(), "raw_" + name)(*args))


# ----------------------------------------------------------------------------------- objects


class Handle:
    """A ``cublasLtHandle_t`` (needs a GPU: the create call fails without a driver)."""

    def __init__(self):
        self.ptr = _vp()
        _call("cublasLtCreate", ctypes.byref(self.ptr))

    def destroy(self):
        """Destroy the handle (idempotent)."""
        if self.ptr:
            _call("cublasLtDestroy", self.ptr)
            self.ptr = _vp()


class _Described:
    _attr_ctype: dict = {}
    _set_name = ""
    _get_name = ""
    _destroy_name = ""

    def set(self, attr, value):
        ctype = self._attr_ctype[attr]
        buf = ctype(value)
        _call(self._set_name, self.ptr, int(attr), ctypes.byref(buf), ctypes.sizeof(buf))

    def get(self, attr):
        ctype = self._attr_ctype[attr]
        buf = ctype()
        written = ctypes.c_size_t()
        _call(
            self._get_name,
            self.ptr,
            int(attr),
            ctypes.byref(buf),
            ctypes.sizeof(buf),
            ctypes.byref(written),
        )
        return buf.value

    def destroy(self):
        if self.ptr:
            _call(self._destroy_name, self.ptr)
            self.ptr = _vp()


class MatmulDesc(_Described):
    """A ``cublasLtMatmulDesc_t`` (host-only: works without a GPU)."""

    _attr_ctype = _DESC_ATTR_CTYPE
    _set_name = "cublasLtMatmulDescSetAttribute"
    _get_name = "cublasLtMatmulDescGetAttribute"
    _destroy_name = "cublasLtMatmulDescDestroy"

    def __init__(self, compute_type: int, scale_type: int):
        self.ptr = _vp()
        _call(
            "cublasLtMatmulDescCreate", ctypes.byref(self.ptr), int(compute_type), int(scale_type)
        )
        # Pre-built argument for the per-call pointer updates (no allocation on the hot path).
        self._ptr_buf = _vp()
        self._set_fn = lib().raw_cublasLtMatmulDescSetAttribute

    def set_pointer(self, attr: int, ptr: int) -> None:
        """Set a pointer attribute; the cheap call the execute path uses."""
        self._ptr_buf.value = ptr
        st = self._set_fn(self.ptr, attr, ctypes.byref(self._ptr_buf), 8)
        if st:
            raise CublasLtError(self._set_name, st)


class MatrixLayout(_Described):
    """A ``cublasLtMatrixLayout_t`` (host-only: works without a GPU)."""

    _attr_ctype = _LAYOUT_ATTR_CTYPE
    _set_name = "cublasLtMatrixLayoutSetAttribute"
    _get_name = "cublasLtMatrixLayoutGetAttribute"
    _destroy_name = "cublasLtMatrixLayoutDestroy"

    def __init__(self, dtype: int, rows: int, cols: int, ld: int, batch: int = 1, stride: int = 0):
        self.ptr = _vp()
        _call("cublasLtMatrixLayoutCreate", ctypes.byref(self.ptr), int(dtype), rows, cols, ld)
        if batch != 1:
            self.set(MatrixLayoutAttribute.BATCH_COUNT, batch)
            self.set(MatrixLayoutAttribute.STRIDED_BATCH_OFFSET, stride)


class Preference(_Described):
    """A ``cublasLtMatmulPreference_t`` (host-only)."""

    _attr_ctype = _PREF_ATTR_CTYPE
    _set_name = "cublasLtMatmulPreferenceSetAttribute"
    _get_name = "cublasLtMatmulPreferenceGetAttribute"
    _destroy_name = "cublasLtMatmulPreferenceDestroy"

    def __init__(self):
        self.ptr = _vp()
        _call("cublasLtMatmulPreferenceCreate", ctypes.byref(self.ptr))


def heuristic(handle, desc, a, b, c, d, pref, count: int) -> list[HeuristicResult]:
    """``cublasLtMatmulAlgoGetHeuristic``: up to ``count`` results, best first."""
    results = (HeuristicResult * count)()
    returned = ctypes.c_int()
    _call(
        "cublasLtMatmulAlgoGetHeuristic",
        handle.ptr,
        desc.ptr,
        a.ptr,
        b.ptr,
        c.ptr,
        d.ptr,
        pref.ptr,
        count,
        results,
        ctypes.byref(returned),
    )
    return [results[i] for i in range(returned.value) if results[i].state == 0]


def algo_ids(handle, compute_type: int, scale_type: int, types, count: int) -> list[int]:
    """``cublasLtMatmulAlgoGetIds``: up to ``count`` algorithm ids applicable to a matmul of
    these compute and scale types and A, B, C, D ``types`` (cuBLASLt's), in no order."""
    ids = (ctypes.c_int * count)()
    returned = ctypes.c_int()
    _call(
        "cublasLtMatmulAlgoGetIds",
        handle.ptr,
        compute_type,
        scale_type,
        *types,
        count,
        ids,
        ctypes.byref(returned),
    )
    return list(ids[: returned.value])


# ----------------------------------------------------------------------------------- algorithms


def algo_cap(algo: MatmulAlgo, attr: AlgoCapAttribute) -> int | list[int]:
    """``cublasLtMatmulAlgoCapGetAttribute``: one capability of an initialised ``algo`` (a
    list for TILE_IDS and STAGES_IDS); CublasLtError for an algo cuBLASLt does not know."""
    written = ctypes.c_size_t()
    ref = ctypes.byref(algo)
    if attr in (AlgoCapAttribute.TILE_IDS, AlgoCapAttribute.STAGES_IDS):
        _call("cublasLtMatmulAlgoCapGetAttribute", ref, int(attr), None, 0, ctypes.byref(written))
        n = written.value // ctypes.sizeof(ctypes.c_uint32)
        arr = (ctypes.c_uint32 * max(n, 1))()
        _call("cublasLtMatmulAlgoCapGetAttribute", ref, int(attr), arr, ctypes.sizeof(arr),
              ctypes.byref(written))
        return list(arr[:n])
    v = _CAP_CTYPE[attr]()
    _call("cublasLtMatmulAlgoCapGetAttribute", ref, int(attr), ctypes.byref(v), ctypes.sizeof(v),
          ctypes.byref(written))
    return int(v.value)


def algo_config(algo: MatmulAlgo, attr: AlgoConfigAttribute) -> int:
    """``cublasLtMatmulAlgoConfigGetAttribute``: one field of ``algo``'s configuration."""
    v = _CONFIG_CTYPE[attr]()
    written = ctypes.c_size_t()
    _call("cublasLtMatmulAlgoConfigGetAttribute", ctypes.byref(algo), int(attr), ctypes.byref(v),
          ctypes.sizeof(v), ctypes.byref(written))
    return int(v.value)


def set_algo_config(algo: MatmulAlgo, attr: AlgoConfigAttribute, value: int) -> None:
    """``cublasLtMatmulAlgoConfigSetAttribute``: set one field of ``algo``'s configuration."""
    v = _CONFIG_CTYPE[attr](value)
    _call("cublasLtMatmulAlgoConfigSetAttribute", ctypes.byref(algo), int(attr), ctypes.byref(v),
          ctypes.sizeof(v))
