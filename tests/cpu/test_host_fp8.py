# SPDX-License-Identifier: Apache-2.0
"""FP8 results and amax without a GPU: what nvmath_host hands cuBLASLt, and the CPU path.

cuBLASLt's FP8 type table: an FP8 result D takes a float16/bfloat16 C (and bias), never an
FP8 C; amax is computed only for an FP8 D. cuBLASLt 13 also rejects a C pointer equal to D's
when C's layout differs from D's, so without ``c`` nvmath_host points C at cuBLASLt's A
operand (never read, beta = 0). These tests check the planned layouts and the argument list
of ``cublasLtMatmul`` (``_execute.LaunchArgs``, launched through a recording stand-in), the
validation errors that need an epilog (raised by ``_problem.Problem``), and the NumPy CPU path
(``ml_dtypes`` FP8 arrays).
"""

from types import SimpleNamespace

import numpy as np
import pytest

import mathdx_operands
from nvmath_host import Algorithm, Matmul, MatmulEpilog, MatmulOptions, _gpu
from nvmath_host._cublaslt import MatmulDescAttribute
from nvmath_host._execute import LaunchArgs
from nvmath_host._options import check_options
from nvmath_host._problem import Problem
from tests.cpu.test_host_validation import FakeTorch  # a CUDA torch.Tensor look-alike

pytestmark = pytest.mark.filterwarnings("ignore::nvmath_host.CPUExecutionWarning")
E = MatmulEpilog
M, K, N = 32, 64, 48


@pytest.fixture(autouse=True)
def _cpu_only(monkeypatch):
    monkeypatch.setattr(_gpu, "PRETEND", False)


A_PTR, B_PTR, C_PTR, BIAS_PTR = 0x7F0000000000, 0x7F0000100000, 0x7F0000200000, 0x7F0000300000


def fp8_a(dtype="float8_e4m3fn"):
    return FakeTorch((M, K), dtype, ptr=A_PTR)


def fp8_b(dtype="float8_e4m3fn"):  # column-major (K, N), as FP8 needs
    return FakeTorch((K, N), dtype, strides=(1, K), ptr=B_PTR)


def problem(a=None, b=None, c=None, epilog=None, inputs=None, scales=("a", "b", "d"), **opts):
    w = mathdx_operands.wrap
    return Problem(
        w(a if a is not None else fp8_a(), "a"),
        w(b if b is not None else fp8_b(), "b"),
        w(c, "c") if c is not None else None,
        MatmulOptions(**opts),
        epilog,
        {k: w(v, k) for k, v in (inputs or {}).items()},
        dict.fromkeys(scales),
    )


# ----------------------------------------------------------------------------- planned layouts


def test_fp8_result_describes_c_as_bfloat16_and_points_c_away_from_d():
    p = problem(result_type="float8_e4m3fn")
    assert p.d_dtype.name == "float8_e4m3fn"
    assert p.layout_d.dtype.name == "float8_e4m3fn"
    assert p.layout_c.dtype.name == "bfloat16"  # the FP8 table's C type, not D's
    lc, ld = p.layout_c, p.layout_d
    assert (lc.rows, lc.cols, lc.ld, lc.batch, lc.stride) == (
        ld.rows,
        ld.cols,
        ld.ld,
        ld.batch,
        ld.stride,
    )
    assert p.c_ptr_from == "lt_a"


def test_fp8_result_takes_c_type_from_bias():
    bias = FakeTorch((N,), "float16", ptr=BIAS_PTR)
    p = problem(epilog=E.BIAS, inputs={"bias": bias}, result_type="float8_e4m3fn")
    assert p.layout_c.dtype.name == "float16" and p.c_ptr_from == "lt_a"
    bias = FakeTorch((N,), "bfloat16", ptr=BIAS_PTR)
    p = problem(epilog=E.RELU_BIAS, inputs={"bias": bias}, result_type="float8_e4m3fn")
    assert p.layout_c.dtype.name == "bfloat16"


@pytest.mark.parametrize("ctype", ["float16", "bfloat16"])
def test_fp8_result_with_c_uses_c_and_its_type(ctype):
    c = FakeTorch((M, N), ctype, ptr=C_PTR)
    p = problem(c=c, result_type="float8_e4m3fn")
    assert p.layout_c.dtype.name == ctype and p.layout_d.dtype.name == "float8_e4m3fn"
    assert p.c_ptr_from == "c"


@pytest.mark.parametrize("rtype", ["bfloat16", "float16", "float32"])
def test_16_32_bit_result_keeps_c_as_d(rtype):
    p = problem(result_type=rtype, scales=("a", "b"))
    assert p.layout_c.dtype.name == rtype and p.c_ptr_from == "d"


def test_default_fp8_result_is_a_dtype_and_c_type_follows_c():
    # nvmath-python's rule: without result_type the result has c's dtype, else a's
    assert problem().d_dtype.name == "float8_e4m3fn"
    p = problem(fp8_a("float8_e5m2"), fp8_b("float8_e4m3fn"))
    assert p.d_dtype.name == "float8_e5m2" and p.layout_c.dtype.name == "bfloat16"
    assert problem(fp8_a("float8_e4m3fn"), fp8_b("float8_e5m2")).d_dtype.name == "float8_e4m3fn"
    c = FakeTorch((M, N), "float16", ptr=C_PTR)
    assert problem(c=c, scales=("a", "b")).d_dtype.name == "float16"


def test_default_fp8_result_without_d_scale_is_refused_naming_result_type():
    with pytest.raises(
        ValueError,
        match=r"^quantization_scales: FP8 operands need scales for \['a', 'b', 'd'\]; missing "
        r"\['d'\] \(the result is float8_e4m3fn, .* as in nvmath-python; "
        r"options.result_type='bfloat16'",
    ):
        problem(scales=("a", "b"))
    assert problem(scales=("a", "b"), result_type="bfloat16").d_dtype.name == "bfloat16"


def test_mixed_fp8_operands_allow_e5m2_result():
    for a, b in (("float8_e4m3fn", "float8_e5m2"), ("float8_e5m2", "float8_e4m3fn")):
        for r in ("float8_e4m3fn", "float8_e5m2"):
            p = problem(fp8_a(a), fp8_b(b), result_type=r)
            assert p.layout_d.dtype.name == r and p.layout_c.dtype.name == "bfloat16"


def test_result_amax_is_a_float32_output():
    p = problem(result_type="float8_e4m3fn", result_amax=True)
    (o,) = [o for o in p.outputs if o.name == "result_amax"]
    assert o.dtype.name == "float32" and o.shape == (1,) and o.nelems == 1
    p = problem(
        result_type="float8_e4m3fn", result_amax=True, epilog=E.RELU_AUX
    )  # epilog output + amax
    assert [o.name for o in p.outputs] == ["relu_aux", "result_amax"]


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "epilog",
    [E.DGELU, E.DGELU_BGRAD, E.DRELU_BGRAD, E.BGRADA, E.BGRADB],
    ids=lambda e: e.name,
)
def test_epilogs_with_fp8_aux_data_are_refused_for_fp8_results(epilog):
    with pytest.raises(
        ValueError,
        match=rf"^epilog: {epilog.name} is not supported with an FP8 result \(float8_e4m3fn\): "
        r"its (gelu_aux|bgrad output) would be FP8.*allowed with FP8 results: \['DEFAULT'",
    ):
        problem(epilog=epilog, result_type="float8_e4m3fn")


@pytest.mark.parametrize(
    "rtype, btype, c, msg",
    [
        ("float32", "float16", None, r"float32 result cuBLASLt takes a bfloat16 bias$"),
        ("bfloat16", "float16", None, r"bfloat16 result cuBLASLt takes a bfloat16 bias$"),
        ("float16", "bfloat16", None, r"float16 result cuBLASLt takes a float16 bias$"),
        (
            "float8_e4m3fn",
            "float32",
            None,
            r"float8_e4m3fn result cuBLASLt takes a float16 or bfloat16 bias \(it sets C's type\)$",
        ),
        (
            "float8_e4m3fn",
            "float16",
            "bfloat16",
            r"float8_e4m3fn result cuBLASLt takes a bfloat16 bias \(the type of c\)$",
        ),
    ],
)
def test_fp8_bias_type_follows_the_fp8_table(rtype, btype, c, msg):
    bias = FakeTorch((N,), btype, ptr=BIAS_PTR)
    cc = FakeTorch((M, N), c, ptr=C_PTR) if c else None
    scales = ("a", "b", "d") if rtype.startswith("float8") else ("a", "b")
    with pytest.raises(ValueError, match=rf"^epilog_inputs\['bias'\]: dtype {btype}; with FP8 "):
        problem(c=cc, epilog=E.BIAS, inputs={"bias": bias}, result_type=rtype, scales=scales)
    with pytest.raises(ValueError, match=msg):
        problem(c=cc, epilog=E.BIAS, inputs={"bias": bias}, result_type=rtype, scales=scales)


def test_result_amax_needs_an_fp8_result():
    for rtype in ("bfloat16", "float16", "float32"):
        with pytest.raises(
            ValueError, match=rf"^options.result_amax: .* the result is {rtype}: set options"
        ):
            problem(result_type=rtype, result_amax=True, scales=("a", "b"))


def test_d_scale_needs_an_fp8_result():
    with pytest.raises(ValueError, match=r"^quantization_scales: 'd' scales an FP8 result"):
        problem(result_type="float32")


# ----------------------------------------------------------------------------- cublasLtMatmul args


def _launch_args(p):
    """cublasLtMatmul's arguments of problem ``p`` pointed at its operands (fake handles)."""
    args = LaunchArgs(
        0x2000,
        0x1000,
        0x5000,
        0x5008,
        [0x3000 + i for i in range(4)],
        Algorithm(bytes(64), 0),
        0,
        0,
    )
    args.point_at(p, {"a": p.a, "b": p.b, "c": p.c})
    return args


def _launch(args, d, stream):
    """Launch ``args`` into ``d`` through a recording cublasLtMatmul; its positional args."""
    calls = []
    args.launch(lambda *a: calls.append(a) or 0, d, stream)
    (call,) = calls
    assert call == args.values()  # the named fields, in cublasLtMatmul's order
    return call


D_PTR, AMAX_PTR = 0x7F0000400000, 0x7F0000500000


def test_fp8_result_never_passes_d_as_c():
    p = problem(result_type="float8_e4m3fn", result_amax=True)
    assert p.swap  # C-ordered result: cuBLASLt's A is our b
    args = _launch_args(p)
    call = _launch(args, D_PTR, 7)
    assert call[10] == args.d == D_PTR  # D
    assert args.c == B_PTR == args.a  # C: cuBLASLt's A operand, not D
    assert call[8] == args.c and args.c != args.d
    assert call[15] == args.stream == 7
    # the amax output's pointer goes to AMAX_D_POINTER at each launch
    (amax,) = p.outputs
    assert amax.name == "result_amax" and amax.attr == int(MatmulDescAttribute.AMAX_D_POINTER)


def test_fp8_result_f_ordered_points_c_at_our_a():
    bias = FakeTorch((M, 1), "bfloat16", ptr=BIAS_PTR)  # (M, 1) bias: F-ordered result
    p = problem(epilog=E.BIAS, inputs={"bias": bias}, result_type="float8_e4m3fn")
    assert p.order == "F" and not p.swap  # cuBLASLt's A is our a
    assert p.layout_c.dtype.name == "bfloat16"
    args = _launch_args(p)
    _launch(args, D_PTR, 0)
    assert args.c == args.a == A_PTR and args.b == B_PTR
    assert args.d == D_PTR


def test_16_bit_result_passes_d_as_c():
    p = problem(result_type="bfloat16", scales=("a", "b"))
    args = _launch_args(p)
    _launch(args, D_PTR, 0)
    assert args.c == args.d == D_PTR
    _launch(args, D_PTR + 256, 0)  # C follows D at each launch
    assert args.c == args.d == D_PTR + 256


def test_fp8_result_with_c_passes_c():
    c = FakeTorch((M, N), "bfloat16", ptr=C_PTR)
    p = problem(c=c, result_type="float8_e4m3fn")
    args = _launch_args(p)
    _launch(args, D_PTR, 0)
    assert args.c == C_PTR and args.d == D_PTR


# ----------------------------------------------------------------------------- CPU path

RNG = np.random.default_rng(7)


@pytest.fixture
def ml():
    return pytest.importorskip("ml_dtypes")


def _ints(shape, lo, hi, dtype, order="C"):
    """Small integers (exact in every FP8 type) as ``dtype``."""
    x = RNG.integers(lo, hi, size=shape).astype(np.float32)
    return np.asarray(x.astype(dtype), order=order)


def _quantize(ml, x, dtype):
    big = float(ml.finfo(dtype).max)
    return np.clip(x, -big, big).astype(dtype)


@pytest.mark.parametrize(
    "atype, btype, rtype",
    [
        ("float8_e4m3fn", "float8_e4m3fn", "float8_e4m3fn"),
        ("float8_e4m3fn", "float8_e5m2", "float8_e5m2"),
        ("float8_e5m2", "float8_e4m3fn", "float8_e4m3fn"),
    ],
)
def test_cpu_fp8_result_scales_rounds_and_returns_amax(ml, atype, btype, rtype):
    at, bt, rt = (np.dtype(getattr(ml, t)) for t in (atype, btype, rtype))
    a = _ints((M, K), -3, 4, at)
    b = _ints((K, N), -3, 4, bt, order="F")
    sa, sb, sd = 0.5, 2.0, 0.375
    d, aux = Matmul(
        a,
        b,
        quantization_scales={"a": sa, "b": np.array([sb], np.float32), "d": sd},
        options={"result_type": rtype, "result_amax": True},
    ).execute()
    x = (a.astype(np.float64) * sa) @ (b.astype(np.float64) * sb)  # exact in float32 too
    assert d.dtype == rt and d.shape == (M, N)
    assert np.array_equal(d.view(np.uint8), _quantize(ml, x * sd, rt).view(np.uint8))
    assert set(aux) == {"result_amax"}
    amax = aux["result_amax"]
    assert amax.dtype == np.float32 and amax.shape == (1,)
    assert amax[0] == np.abs(x).max()  # before the d scale


def test_cpu_fp8_result_saturates(ml):
    a = _ints((M, K), 1, 4, np.dtype(ml.float8_e4m3fn))
    b = -_ints((K, N), 1, 4, np.dtype(ml.float8_e4m3fn), order="F").astype(np.float32)
    b = np.asfortranarray(b.astype(ml.float8_e4m3fn))
    d = Matmul(
        a,
        b,
        quantization_scales={"a": 1.0, "b": 1.0, "d": 1e3},
        options={"result_type": "float8_e4m3fn"},
    ).execute()
    assert not np.isnan(d.astype(np.float32)).any()
    assert (d.astype(np.float32) == -448.0).all()


def test_cpu_fp8_result_with_c_bias_and_relu(ml):
    f8 = np.dtype(ml.float8_e4m3fn)
    a, b = _ints((M, K), -3, 4, f8), _ints((K, N), -3, 4, f8, order="F")
    c = _ints((M, N), -8, 8, np.dtype(ml.bfloat16))
    bias = _ints((N,), -8, 8, np.dtype(ml.bfloat16))
    sa, sb, sd, beta = 0.5, 0.25, 0.5, 2.0
    with Matmul(
        a,
        b,
        c,
        beta=beta,
        quantization_scales={"a": sa, "b": sb, "d": sd},
        options={"result_type": "float8_e4m3fn"},
    ) as mm:
        mm.plan(epilog=E.RELU_BIAS, epilog_inputs={"bias": bias})
        d = mm.execute()
    x = (a.astype(np.float64) * sa) @ (b.astype(np.float64) * sb)
    x = np.maximum(x + beta * c.astype(np.float64) + bias.astype(np.float64), 0)
    assert np.array_equal(d.view(np.uint8), _quantize(ml, x * sd, f8).view(np.uint8))


def test_cpu_fp8_operands_apply_scales_to_16_bit_results(ml):
    f8 = np.dtype(ml.float8_e4m3fn)
    a, b = _ints((M, K), -3, 4, f8), _ints((K, N), -3, 4, f8, order="F")
    d = Matmul(a, b, quantization_scales={"a": 0.5, "b": 4.0}, options={"result_type": "bfloat16"}).execute()
    x = (a.astype(np.float64) * 0.5) @ (b.astype(np.float64) * 4.0)
    assert d.dtype == np.dtype(ml.bfloat16)
    assert np.array_equal(d.astype(np.float64), x.astype(ml.bfloat16).astype(np.float64))


def test_cpu_fp8_default_result_is_a_dtype_scaled_by_d(ml):
    f8 = np.dtype(ml.float8_e4m3fn)
    a, b = _ints((M, K), -3, 4, f8), _ints((K, N), -3, 4, f8, order="F")
    d = Matmul(a, b, quantization_scales={"a": 0.5, "b": 4.0, "d": 0.125}).execute()
    x = (a.astype(np.float64) * 0.5) @ (b.astype(np.float64) * 4.0)
    assert d.dtype == f8
    assert np.array_equal(d.view(np.uint8), _quantize(ml, x * 0.125, f8).view(np.uint8))


def test_cpu_fp8_scales_reset_and_operands_released_and_given_again(ml):
    """On the CPU path too: reset_operands(quantization_scales=) changes the scales of the next
    execute (and is checked as the constructor's), and release_operands / reset_operands and the
    unchecked reset keep their contracts; there are no algorithms to choose or list."""
    f8 = np.dtype(ml.float8_e4m3fn)
    a, b = _ints((M, K), -3, 4, f8), _ints((K, N), -3, 4, f8, order="F")
    x = a.astype(np.float64) @ b.astype(np.float64)
    mm = Matmul(a, b, quantization_scales={"a": 0.5, "b": 4.0}, options={"result_type": "bfloat16"})
    assert np.array_equal(mm.execute().astype(np.float64), (2 * x).astype(ml.bfloat16).astype(np.float64))
    mm.reset_operands(quantization_scales={"b": 0.25})
    assert np.array_equal(mm.execute().astype(np.float64), (x / 8).astype(ml.bfloat16).astype(np.float64))
    with pytest.raises(ValueError, match=r"^quantization_scales\['a'\]: expected a float"):
        mm.reset_operands(quantization_scales={"a": "big"})
    with pytest.raises(ValueError, match=r"^quantization_scales: \['d'\] not planned"):
        mm.reset_operands_unchecked(quantization_scales={"d": 1.0})
    mm.release_operands()
    with pytest.raises(RuntimeError, match="were released"):
        mm.execute()
    a2 = _ints((M, K), -3, 4, f8)
    mm.reset_operands_unchecked(a=a2, b=b)
    x2 = a2.astype(np.float64) @ b.astype(np.float64)
    assert np.array_equal(mm.execute().astype(np.float64), (x2 / 8).astype(ml.bfloat16).astype(np.float64))
    assert mm.applicable_algorithm_ids() == []
    with pytest.raises(ValueError, match=r"^algorithm: not one .*empty on the CPU path\)$"):
        mm.execute(algorithm=Algorithm(bytes(64), 0))


def test_result_type_given_as_a_cuda_data_type_member():
    """nvmath-python's examples name result types by nvmath.CudaDataType members
    (CUDA_R_8F_E4M3, ...): nvmath_host.CudaDataType is that enum, and a member of any enum
    with such a name means the same dtype; a type nvmath_host does not compute with is refused."""
    import enum

    from nvmath_host import CudaDataType as T

    def rt(x):
        return check_options(MatmulOptions(result_type=x)).result_type

    assert (rt(T.CUDA_R_8F_E4M3), rt(T.CUDA_R_8F_E5M2)) == ("float8_e4m3fn", "float8_e5m2")
    assert (rt(T.CUDA_R_16BF), rt(T.CUDA_R_16F), rt(T.CUDA_R_32F)) == ("bfloat16", "float16", "float32")
    assert (rt(T.CUDA_R_64F), rt(T.CUDA_C_32F), rt(T.CUDA_C_64F)) == ("float64", "complex64", "complex128")
    assert T.CUDA_R_8F_UE4M3 is T.CUDA_R_8F_E4M3  # an alias, as in library_types.h
    other = enum.IntEnum("CudaDataType", {"CUDA_R_8F_E4M3": 28, "CUDA_R_16BF": 14})
    assert rt(other.CUDA_R_8F_E4M3) == "float8_e4m3fn" and rt(other.CUDA_R_16BF) == "bfloat16"
    assert rt(np.float16) == "float16"
    a, b = np.ones((4, 3), np.float32), np.ones((3, 2), np.float32)
    with pytest.raises(ValueError, match=r"^options.result_type: .*CUDA_R_8I"):
        Matmul(a, b, options={"result_type": T.CUDA_R_8I})


def test_cuda_data_type_matches_library_types_h():
    """Every cudaDataType_t enumerator of the CUDA headers the environment ships (nvidia's cu13
    include directory), with its value, is a CudaDataType member, and nothing else is."""
    import pathlib
    import re

    import nvidia

    from nvmath_host import CudaDataType

    heads = [p / "cu13" / "include" / "library_types.h" for p in map(pathlib.Path, nvidia.__path__)]
    head = next((h for h in heads if h.is_file()), None)
    if head is None:
        pytest.skip(f"no library_types.h under {heads}")
    text = head.read_text()
    body = text[text.index("typedef enum cudaDataType_t") :]
    body = body[: body.index("}")]
    values, want = {}, {}
    for name, value in re.findall(r"^\s*(CUDA_[RC]_\w+)\s*=\s*(\w+)", body, re.M):
        values[name] = int(value) if value.isdigit() else values[value]
        want[name] = values[name]
    got = {n: int(m) for n, m in CudaDataType.__members__.items()}
    assert got == want


def test_cpu_scale_must_be_a_host_number(ml):
    f8 = np.dtype(ml.float8_e4m3fn)
    a, b = _ints((M, K), -3, 4, f8), _ints((K, N), -3, 4, f8, order="F")
    with pytest.raises(ValueError, match=r"^quantization_scales\['a'\]: expected a float"):
        Matmul(a, b, quantization_scales={"a": [1.0], "b": 1.0, "d": 1.0})
    with pytest.raises(ValueError, match=r"^quantization_scales\['b'\]: expected a float"):
        Matmul(a, b, quantization_scales={"a": 1.0, "b": np.ones(2, np.float32), "d": 1.0})


# ------------------------------------------------ FP8 gelu_aux: preferences.epilog, its scale, amax

AUX_PREFS = {"aux_type": "float8_e4m3fn", "aux_amax": True}


def _aux_problem(epilog=E.GELU_AUX, prefs=None, scales=("a", "b", "d", "aux"), **opts):
    """A problem as Matmul.plan makes it: the checked preferences.epilog, and the epilog
    input "aux_quantization_scale" kept with the FP8 scales."""
    from nvmath_host import MatmulPlanPreferences
    from nvmath_host._options import check_preferences
    from nvmath_host._rules import AUX_SCALE

    e = check_preferences(MatmulPlanPreferences(epilog=prefs)).epilog
    w = mathdx_operands.wrap
    keys = [AUX_SCALE if k == "aux" else k for k in scales]
    return Problem(w(fp8_a(), "a"), w(fp8_b(), "b"), None, MatmulOptions(**opts), epilog, {},
                   dict.fromkeys(keys), (False, False), e)


def test_fp8_gelu_aux_takes_its_own_type_scale_and_amax():
    from nvmath_host import CudaDataType

    p = _aux_problem(prefs={"aux_type": CudaDataType.CUDA_R_8F_E4M3, "aux_amax": True})
    assert p.d_dtype.name == "float8_e4m3fn" and p.aux_dtype.name == "float8_e4m3fn"
    assert p.layout_c.dtype.name == "float16" and p.c_ptr_from == "lt_a"
    aux, amax = p.outputs
    assert (aux.name, aux.dtype.name, amax.name, amax.dtype.name) == ("gelu_aux", "float8_e4m3fn", "gelu_aux_amax", "float32")
    assert amax.attr == int(MatmulDescAttribute.EPILOGUE_AUX_AMAX_POINTER) and amax.shape == (1,)
    attrs = p.output_handlers[0].attrs
    assert attrs[int(MatmulDescAttribute.EPILOGUE_AUX_DATA_TYPE)] == 28  # CUDA_R_8F_E4M3
    assert attrs[int(MatmulDescAttribute.EPILOGUE_AUX_LD)] % 16 == 0  # 16-byte rows of FP8
    # float16 gelu_aux next to an e4m3 result, with a float16 bias
    bias = FakeTorch((N,), "float16", ptr=BIAS_PTR)
    w = mathdx_operands.wrap
    from nvmath_host import MatmulPlanPreferences
    from nvmath_host._options import check_preferences

    e = check_preferences(MatmulPlanPreferences(epilog={"aux_type": "float16"})).epilog
    p = Problem(w(fp8_a(), "a"), w(fp8_b(), "b"), None, MatmulOptions(), E.GELU_AUX_BIAS,
                {"bias": w(bias, "bias")}, dict.fromkeys("abd"), (False, False), e)
    assert p.outputs[0].dtype.name == "float16" and [o.name for o in p.outputs] == ["gelu_aux"]
    assert p.output_handlers[0].attrs[int(MatmulDescAttribute.EPILOGUE_AUX_DATA_TYPE)] == 2  # R_16F
    assert p.layout_c.dtype.name == "float16"  # cuBLASLt 13 takes these only next to a float16 C
    # no aux_type with an FP8 result: cuBLASLt's default gelu_aux there is not D's type
    with pytest.raises(ValueError, match=r"^preferences.epilog.aux_type: GELU_AUX with an FP8 result "
                       r"\(float8_e4m3fn\) needs the gelu_aux type given: float8_e4m3fn or float16"):
        _aux_problem(scales=("a", "b", "d"))
    bias = FakeTorch((N,), "bfloat16", ptr=BIAS_PTR)
    with pytest.raises(ValueError, match=r"^epilog_inputs\['bias'\]: dtype bfloat16; with an FP8 result and "
                       r"preferences.epilog.aux_type, cuBLASLt takes it only in float16$"):
        Problem(w(fp8_a(), "a"), w(fp8_b(), "b"), None, MatmulOptions(), E.GELU_AUX_BIAS,
                {"bias": w(bias, "bias")}, dict.fromkeys("abd"), (False, False), e)


@pytest.mark.parametrize(
    "kw, msg",
    [
        (dict(epilog=E.RELU, prefs={"aux_type": "float16"}, scales="abd"),
         r"^preferences.epilog.aux_type: only for the epilogs with a gelu_aux output .*the epilog is RELU$"),
        (dict(epilog=E.GELU, prefs={"aux_amax": True}, scales="abd"),
         r"^preferences.epilog.aux_amax: only for the epilogs with a gelu_aux output"),
        (dict(prefs={"aux_type": "bfloat16"}, scales="abd"),
         r"^preferences.epilog.aux_type: bfloat16; cuBLASLt stores gelu_aux in the result's type "
         r"\(float8_e4m3fn\), or, for a float8_e4m3fn result, in float8_e4m3fn or float16$"),
        (dict(prefs={"aux_type": "float8_e4m3fn"}, scales="ab", result_type="bfloat16"),
         r"^preferences.epilog.aux_type: float8_e4m3fn; .*result's type \(bfloat16\)"),
        (dict(prefs={"aux_type": "float16", "aux_amax": True}, scales="abd"),
         r"^preferences.epilog.aux_amax: cuBLASLt computes the amax of an FP8 gelu_aux only; "
         r"gelu_aux is float16"),
        (dict(prefs={"aux_type": "float8_e4m3fn"}, scales="abd"),
         r"^epilog_inputs\['aux_quantization_scale'\]: required with preferences.epilog.aux_type "
         r"float8_e4m3fn"),
        (dict(prefs={"aux_type": "float16"}, scales=("a", "b", "d", "aux")),
         r"^epilog_inputs\['aux_quantization_scale'\]: scales an FP8 gelu_aux output; gelu_aux is float16$"),
        (dict(epilog=E.GELU, scales=("a", "b", "d", "aux")),
         r"^epilog_inputs\['aux_quantization_scale'\]: .*this epilog has no gelu_aux output$"),
        (dict(prefs={"aux_type": 3.5}, scales="abd"),
         r"^preferences.epilog.aux_type: expected a dtype name"),
    ],
)
def test_fp8_gelu_aux_refusals_name_the_preference_or_input(kw, msg):
    exc = TypeError if "expected a dtype name" in msg else ValueError
    with pytest.raises(exc, match=msg):
        _aux_problem(**kw)


def test_the_aux_scale_points_cuBLASLt_s_epilogue_aux_scale_pointer():
    from nvmath_host._plan import point_scales
    from nvmath_host._rules import AUX_SCALE

    calls = []
    desc = SimpleNamespace(set_pointer=lambda attr, ptr: calls.append((attr, ptr)))
    arr = SimpleNamespace(data=SimpleNamespace(ptr=0x1000))
    pkg = SimpleNamespace(scalar_array=lambda v, device: arr)
    p = _aux_problem(prefs=AUX_PREFS)
    point_scales(desc, {}, p, {AUX_SCALE: 0.5}, pkg, 0, True)
    assert calls == [(MatmulDescAttribute.EPILOGUE_AUX_SCALE_POINTER, 0x1000)]


def test_cpu_fp8_gelu_aux_is_scaled_quantised_and_its_amax_returned(ml):
    from nvmath_host.epilogs import gelu

    f8 = np.dtype(ml.float8_e4m3fn)
    a, b = _ints((M, K), -3, 4, f8), _ints((K, N), -3, 4, f8, order="F")
    x = a.astype(np.float64) @ b.astype(np.float64)  # scales a, b = 1
    with Matmul(a, b, quantization_scales={"a": 1.0, "b": 1.0, "d": 0.5}) as mm:
        mm.plan(preferences={"epilog": AUX_PREFS}, epilog="gelu_aux",
                epilog_inputs={"aux_quantization_scale": 0.25})
        d, aux = mm.execute()
        assert list(aux) == ["gelu_aux", "gelu_aux_amax"]
        assert np.array_equal(d.view(np.uint8), _quantize(ml, gelu(x) * 0.5, f8).view(np.uint8))
        g = aux["gelu_aux"][:, :N]  # rows padded to 16 bytes
        assert g.dtype == f8 and np.array_equal(g.view(np.uint8), _quantize(ml, x * 0.25, f8).view(np.uint8))
        assert aux["gelu_aux_amax"][0] == np.abs(x).max()  # before the aux scale
        mm.reset_operands(epilog_inputs={"aux_quantization_scale": 2.0})
        g = mm.execute()[1]["gelu_aux"][:, :N]
        assert np.array_equal(g.view(np.uint8), _quantize(ml, x * 2.0, f8).view(np.uint8))
    with Matmul(a, b, quantization_scales={"a": 1.0, "b": 1.0, "d": 0.5}) as mm:
        mm.plan(epilog="gelu")
        with pytest.raises(ValueError, match=r"^epilog_inputs\['aux_quantization_scale'\]: the plan has no FP8 gelu_aux"):
            mm.reset_operands(epilog_inputs={"aux_quantization_scale": 2.0})
