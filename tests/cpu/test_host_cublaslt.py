# SPDX-License-Identifier: Apache-2.0
"""nvmath_host's cuBLASLt binding against the real headers and library (no GPU needed)."""

import ctypes
import os
import re
import subprocess
import sys

import pytest

from nvmath_host import (
    MatmulComputeType,
    MatmulEpilog,
    MatmulNumericalImplFlags,
    MatmulPlanPreferences,
    MatmulReductionScheme,
)
from nvmath_host import _cublaslt as lt
from nvmath_host._plan import make_preference


def _include_dir():
    from cuda.pathfinder import find_nvidia_header_directory

    d = find_nvidia_header_directory("cublas")
    assert d and os.path.exists(os.path.join(d, "cublasLt.h")), (
        "cublasLt.h not found: nvidia-cublas (a dependency) must be installed"
    )
    return d


def _strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _parse_enums(*headers):
    """{enum typedef name: {member: value}} from C headers, evaluating `A | 128` style values."""
    values, enums = {}, {}
    for h in headers:
        text = _strip_comments(open(os.path.join(_include_dir(), h)).read())
        for body, name in re.findall(r"typedef\s+enum\s*\w*\s*\{(.*?)\}\s*(\w+)\s*;", text, re.S):
            members, nxt = {}, 0
            for item in body.split(","):
                item = item.strip()
                if not item:
                    continue
                if "=" in item:
                    k, expr = (x.strip() for x in item.split("=", 1))
                    expr = re.sub(r"\b([A-Za-z_]\w*)\b", lambda m: str(values[m.group(1)]), expr)
                    assert re.fullmatch(r"[0-9xXa-fA-F()|&<>+\- ]+", expr), expr
                    v = eval(expr)  # noqa: S307 (digits and operators only, checked above)
                else:
                    k, v = item, nxt
                members[k] = values[k] = v
                nxt = v + 1
            enums[name] = members
    return enums


@pytest.fixture(scope="module")
def enums():
    return _parse_enums("library_types.h", "cublas_api.h", "cublasLt.h")


@pytest.mark.parametrize(
    "ours, header_enum, prefix",
    [
        (lt.Status, "cublasStatus_t", "CUBLAS_STATUS_"),
        (lt.DataType, "cudaDataType", "CUDA_"),
        (lt.ComputeType, "cublasComputeType_t", "CUBLAS_"),
        (MatmulComputeType, "cublasComputeType_t", "CUBLAS_"),
        (lt.Operation, "cublasOperation_t", "CUBLAS_OP_"),
        (lt.Epilogue, "cublasLtEpilogue_t", "CUBLASLT_EPILOGUE_"),
        (MatmulEpilog, "cublasLtEpilogue_t", "CUBLASLT_EPILOGUE_"),
        (lt.Order, "cublasLtOrder_t", "CUBLASLT_ORDER_"),
        (lt.MatmulDescAttribute, "cublasLtMatmulDescAttributes_t", "CUBLASLT_MATMUL_DESC_"),
        (lt.MatrixLayoutAttribute, "cublasLtMatrixLayoutAttribute_t", "CUBLASLT_MATRIX_LAYOUT_"),
        (lt.PreferenceAttribute, "cublasLtMatmulPreferenceAttributes_t", "CUBLASLT_MATMUL_PREF_"),
        (MatmulReductionScheme, "cublasLtReductionScheme_t", "CUBLASLT_REDUCTION_SCHEME_"),
    ],
)
def test_enum_values_match_header(enums, ours, header_enum, prefix):
    header = enums[header_enum]
    for member in ours:
        cname = prefix + member.name
        assert cname in header, f"{cname} not in {header_enum}"
        assert int(member) == header[cname], f"{ours.__name__}.{member.name}"


def test_numerical_impl_flags_match_the_header_s_defines():
    """nvmath-python's names (OP_TYPE_FMA, INPUT_TYPE_16F, ...) for cublasLt.h's
    CUBLASLT_NUMERICAL_IMPL_FLAGS_* (FMA, INPUT_16F, ...), every one of them."""
    text = _strip_comments(open(os.path.join(_include_dir(), "cublasLt.h")).read())
    defines = {k: eval(v.replace("ull", ""))  # noqa: S307 (hex literals and shifts, matched below)
               for k, v in re.findall(r"#define CUBLASLT_NUMERICAL_IMPL_FLAGS_(\w+)\s+\(([0-9xa-fA-Ful <]+)\)", text)}
    assert len(defines) >= 20

    def cname(name):
        for ours, theirs in (("OP_TYPE_TENSOR_MASK", "TENSOR_OP_MASK"), ("OP_TYPE_TENSOR_", ""), ("OP_TYPE_FMA", "FMA"),
                             ("INPUT_TYPE_MASK", "OP_INPUT_TYPE_MASK"), ("INPUT_TYPE_", "INPUT_")):
            if name.startswith(ours):
                return theirs + name[len(ours):]
        return name

    members = MatmulNumericalImplFlags.__members__  # (iterating a flag class skips its masks)
    named = {cname(k): int(m) for k, m in members.items() if k != "ALL"}
    assert named == defines
    assert MatmulNumericalImplFlags.ALL == (1 << 64) - 1  # cuBLASLt's default mask, uint64_t(-1)


def test_preferences_and_sm_count_target_reach_cublaslt():
    """The plan's preference object carries every field of MatmulPlanPreferences, the
    descriptor the SM count target (read back from cuBLASLt, no GPU needed)."""
    prefs = MatmulPlanPreferences(max_workspace=1 << 20, reduction_scheme_mask=MatmulReductionScheme.INPLACE
                                  | MatmulReductionScheme.OUTPUT_TYPE, max_waves_count=1.5,
                                  numerical_impl_mask=MatmulNumericalImplFlags.OP_TYPE_FMA)
    P = lt.PreferenceAttribute
    pref = make_preference(prefs)
    try:
        assert pref.get(P.MAX_WORKSPACE_BYTES) == 1 << 20
        assert pref.get(P.REDUCTION_SCHEME_MASK) == 5
        assert pref.get(P.MAX_WAVES_COUNT) == 1.5
        assert pref.get(P.IMPL_MASK) == 1
    finally:
        pref.destroy()
    pref = make_preference(MatmulPlanPreferences())
    try:
        assert pref.get(P.REDUCTION_SCHEME_MASK) == 7 and pref.get(P.IMPL_MASK) == (1 << 64) - 1
        assert pref.get(P.MAX_WAVES_COUNT) == 0.0
    finally:
        pref.destroy()
    desc = lt.MatmulDesc(lt.ComputeType.COMPUTE_32F, lt.DataType.R_32F)
    try:
        desc.set(lt.MatmulDescAttribute.SM_COUNT_TARGET, 66)
        assert desc.get(lt.MatmulDescAttribute.SM_COUNT_TARGET) == 66
    finally:
        desc.destroy()


def test_every_header_epilogue_is_exposed(enums):
    header = {k.removeprefix("CUBLASLT_EPILOGUE_") for k in enums["cublasLtEpilogue_t"]}
    assert header == {e.name for e in MatmulEpilog}


def test_struct_sizes_match_header():
    text = _strip_comments(open(os.path.join(_include_dir(), "cublasLt.h")).read())
    m = re.search(r"typedef struct \{\s*uint64_t data\[(\d+)\];\s*\}\s*cublasLtMatmulAlgo_t;", text)
    assert m and ctypes.sizeof(lt.MatmulAlgo) == 8 * int(m.group(1))
    body = re.search(r"typedef struct \{([^{}]*)\}\s*cublasLtMatmulHeuristicResult_t;", text)
    fields = [f.split()[-1].split("[")[0] for f in body.group(1).split(";") if f.strip()]
    assert fields == [f[0] for f in lt.HeuristicResult._fields_]


def test_import_loads_nothing():
    code = (
        "import sys, nvmath_host, nvmath_host.matmul;"
        "assert 'cupy' not in sys.modules and 'torch' not in sys.modules, 'imported';"
        "assert nvmath_host._cublaslt._lib is None, 'loaded cuBLASLt';"
        "maps = open('/proc/self/maps').read();"
        "assert 'cublasLt' not in maps, 'mapped'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_descriptors_without_gpu_roundtrip():
    """Host-only cuBLASLt calls work without a driver: set and read back attributes."""
    A = lt.MatmulDescAttribute
    desc = lt.MatmulDesc(lt.ComputeType.COMPUTE_32F, lt.DataType.R_32F)
    try:
        desc.set(A.EPILOGUE, int(lt.Epilogue.GELU_AUX_BIAS))
        desc.set(A.TRANSA, int(lt.Operation.T))
        desc.set(A.EPILOGUE_AUX_LD, 1024)
        desc.set_pointer(A.BIAS_POINTER, 0x1000)
        assert desc.get(A.EPILOGUE) == lt.Epilogue.GELU_AUX_BIAS
        assert desc.get(A.TRANSA) == lt.Operation.T
        assert desc.get(A.EPILOGUE_AUX_LD) == 1024
        assert desc.get(A.BIAS_POINTER) == 0x1000
        assert desc.get(A.COMPUTE_TYPE) == lt.ComputeType.COMPUTE_32F
    finally:
        desc.destroy()
    lay = lt.MatrixLayout(lt.DataType.R_16F, 64, 32, 128, batch=3, stride=128 * 32)
    try:
        L = lt.MatrixLayoutAttribute
        assert lay.get(L.ROWS) == 64 and lay.get(L.COLS) == 32 and lay.get(L.LD) == 128
        assert lay.get(L.BATCH_COUNT) == 3 and lay.get(L.STRIDED_BATCH_OFFSET) == 128 * 32
        assert lay.get(L.TYPE) == lt.DataType.R_16F
    finally:
        lay.destroy()


def test_bad_status_raises_naming_call():
    desc = lt.MatmulDesc(lt.ComputeType.COMPUTE_32F, lt.DataType.R_32F)
    try:
        buf = ctypes.c_int64(1)  # EPILOGUE is a uint32: wrong size -> INVALID_VALUE
        with pytest.raises(lt.CublasLtError, match="cublasLtMatmulDescSetAttribute.*INVALID_VALUE"):
            lt.check(
                "cublasLtMatmulDescSetAttribute",
                lt.lib().raw_cublasLtMatmulDescSetAttribute(
                    desc.ptr, int(lt.MatmulDescAttribute.EPILOGUE), ctypes.byref(buf), 8
                ),
            )
    finally:
        desc.destroy()
    err = lt.CublasLtError("cublasLtMatmul", 15)
    assert err.call == "cublasLtMatmul" and err.status == 15 and "NOT_SUPPORTED" in str(err)


def test_version_is_cuda13():
    assert lt.version() >= 130000
