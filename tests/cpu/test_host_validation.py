# SPDX-License-Identifier: Apache-2.0
"""Bad input raises TypeError/ValueError naming the argument, before any CUDA call.

GPU packages are stood in for by minimal fakes exposing only the protocol nvmath_host reads
(``__cuda_array_interface__`` for CuPy, tensor attributes for torch); every case below fails
in validation, so nothing reaches CUDA (no GPU here).
"""

import importlib
import pickle
from types import SimpleNamespace

import numpy as np
import pytest

import mathdx_operands
from nvmath_host import (
    Algorithm,
    Matmul,
    MatmulComputeType,
    MatmulEpilog,
    MatmulOptions,
    _gpu,
    matmul,
    matrix_qualifiers_dtype,
)
from nvmath_host._cpu import CPUExecutionWarning
from nvmath_host._cublaslt import Operation
from nvmath_host._function import plan_key
from nvmath_host._options import check_qualifiers
from nvmath_host._problem import Problem
from nvmath_host._wrap import wrap_call

pytestmark = pytest.mark.filterwarnings("ignore::nvmath_host.CPUExecutionWarning")
E = MatmulEpilog


@pytest.fixture(autouse=True)
def _cpu_only(monkeypatch):
    monkeypatch.setattr(_gpu, "PRETEND", False)


class FakeCupy:
    """Looks like a cupy.ndarray to nvmath_host (module name + CAI + .device.id)."""

    __module__ = "cupy._core.fake"

    def __init__(self, shape, typestr="<f4", device=0, ptr=0x7F0000000000):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": typestr,
            "data": (ptr, False),
            "strides": None,
            "version": 3,
        }
        self.device = SimpleNamespace(id=device)


class FakeTorch:
    """Looks like a CUDA torch.Tensor to nvmath_host."""

    __module__ = "torch.fake"
    is_cuda = True

    def __init__(self, shape, dtype="float8_e4m3fn", strides=None, device=0, ptr=0x7F0000000000,
                 conj=False, neg=False, requires_grad=False):
        self._conj, self._neg, self.requires_grad = conj, neg, requires_grad
        self.shape = tuple(shape)
        self.dtype = SimpleNamespace(__str__=None)
        self._dtype = f"torch.{dtype}"
        self.device = SimpleNamespace(index=device)
        self._ptr = ptr
        if strides is None:
            strides = tuple(int(np.prod(shape[i + 1 :])) for i in range(len(shape)))
        self._strides = strides

    def __getattribute__(self, name):
        if name == "dtype":
            return object.__getattribute__(self, "_dtype")
        return object.__getattribute__(self, name)

    def data_ptr(self):
        return self._ptr

    def get_device(self):
        return self.device.index

    def is_conj(self):
        return self._conj

    def is_neg(self):
        return self._neg

    def stride(self):
        return self._strides


def _numbered_f32(shape):
    return (np.arange(np.prod(shape)) % 7 - 3).astype(np.float32).reshape(shape)


def f32(*shape):
    return np.ones(shape, np.float32)


def fp8_b(k, n):  # F-ordered (k, n)
    return FakeTorch((k, n), strides=(1, k))


CASES = [
    # (callable, exception, message regex)
    (lambda: matmul(f32(4, 3), f32(5, 2)), ValueError, r"^b: K mismatch"),
    (lambda: matmul(f32(4, 3), FakeCupy((3, 2))), TypeError, r"^b: a cupy array; a is a numpy"),
    (
        lambda: matmul(FakeCupy((4, 3)), FakeCupy((3, 2), device=1)),
        ValueError,
        r"^b: on device 1; a is on device 0",
    ),
    (lambda: matmul(f32(4, 3), f32(3, 2), FakeCupy((4, 2))), TypeError, r"^c: a cupy array"),
    (
        lambda: matmul(np.ones((4, 3), np.int32), f32(3, 2)),
        ValueError,
        r"^a: unsupported dtype 'int32'",
    ),
    (lambda: matmul(f32(4, 3), np.ones((3, 2))), ValueError, r"^b: dtype float64 differs"),
    (
        lambda: matmul([[1.0]], f32(1, 1)),
        TypeError,
        r"^a: unsupported operand of type builtins.list",
    ),
    (lambda: matmul(f32(4), f32(4, 2)), ValueError, r"^a: expected at least 2 dimensions"),
    (
        lambda: matmul(f32(2, 4, 3), f32(3, 3, 2)),
        ValueError,
        r"^b: batch shape \(3,\) does not match",
    ),
    (
        lambda: matmul(f32(4, 6)[:, ::2], f32(3, 2)),
        ValueError,
        r"^a: strides \(6, 2\).*cannot be expressed",
    ),
    (
        lambda: matmul(f32(4, 3), f32(3, 2), epilog=E.BIAS, epilog_inputs={"bias": f32(3)}),
        ValueError,
        r"^epilog_inputs\['bias'\]: shape \(3,\)",
    ),
    (
        lambda: matmul(f32(4, 3), f32(3, 2), epilog=E.BIAS, epilog_inputs={"bias": np.ones(2)}),
        ValueError,
        r"^epilog_inputs\['bias'\]: dtype float64 differs",
    ),
    (
        lambda: matmul(f32(4, 3), f32(3, 2), epilog=E.RELU_BIAS),
        ValueError,
        r"^epilog_inputs: RELU_BIAS requires \['bias'\]; missing \['bias'\]",
    ),
    (
        lambda: matmul(f32(4, 3), f32(3, 2), epilog=E.RELU, epilog_inputs={"bias": f32(2)}),
        ValueError,
        r"^epilog_inputs: unexpected \['bias'\] for RELU",
    ),
    (
        lambda: matmul(f32(4, 3), f32(3, 2), epilog=E.GELU, epilog_inputs=[1]),
        TypeError,
        r"^epilog_inputs: expected a dict",
    ),
    (
        lambda: matmul(f32(4, 3), f32(3, 2), epilog=12345),
        ValueError,
        r"^epilog: unknown value 12345",
    ),
    (
        lambda: matmul(f32(2, 4, 3), f32(3, 2), f32(4, 2), options={"inplace": True}),
        ValueError,
        r"^c: in-place needs c of the result's full shape",
    ),
    (
        lambda: matmul(f32(4, 3), f32(3, 2), options={"inplace": True}),
        ValueError,
        r"^options.inplace",
    ),
    (lambda: matmul(f32(4, 3), f32(3, 2), f32(4, 3)), ValueError, r"^c: shape \(4, 3\)"),
    (lambda: matmul(f32(4, 3), f32(3, 2), np.ones((4, 2))), ValueError, r"^c: dtype float64"),
    (lambda: matmul(f32(4, 3), f32(3, 2), beta=1.0), ValueError, r"^beta: given without c"),
    (lambda: matmul(f32(4, 3), f32(3, 2), alpha="2"), TypeError, r"^alpha: expected a number"),
    (
        lambda: matmul(
            f32(4, 3),
            f32(3, 2),
            np.asfortranarray(f32(4, 2)),
            epilog=E.BIAS,
            epilog_inputs={"bias": f32(2)},
        ),
        ValueError,
        r"^c: it is F-ordered but the result is C-ordered \(set by the bias shape\)",
    ),
    (
        lambda: matmul(
            f32(4, 3),
            f32(3, 2),
            options={"result_order": "F"},
            epilog=E.BIAS,
            epilog_inputs={"bias": f32(2)},
        ),
        ValueError,
        r"^epilog_inputs\['bias'\]: shape \(2,\) needs a C-ordered result",
    ),
    (
        lambda: matmul(f32(4, 3), f32(3, 2), options={"result_order": "X"}),
        ValueError,
        r"^options.result_order",
    ),
    (
        lambda: matmul(f32(4, 3), f32(3, 2), options={"bogus": 1}),
        ValueError,
        r"^options: unknown field",
    ),
    (
        lambda: matmul(f32(4, 3), f32(3, 2), options=3),
        TypeError,
        r"^options: expected MatmulOptions",
    ),
    (
        lambda: matmul(f32(4, 3), f32(3, 2), options={"result_type": "float16"}),
        ValueError,
        r"^options.result_type: float16 is only allowed for FP8",
    ),
    (
        lambda: matmul(
            np.ones((4, 3)),
            np.ones((3, 2)),
            options=MatmulOptions(compute_type=MatmulComputeType.COMPUTE_32F),
        ),
        ValueError,
        r"^options.compute_type: COMPUTE_32F is not supported for float64",
    ),
    (
        lambda: matmul(np.ones((4, 3), np.complex64), np.ones((3, 2), np.complex64), epilog=E.RELU),
        ValueError,
        r"^epilog: RELU is not supported for complex",
    ),
    (
        lambda: matmul(
            f32(4, 3),
            f32(3, 2),
            epilog=E.DRELU,
            epilog_inputs={"relu_aux": np.zeros((4, 2), np.uint8)},
        ),
        ValueError,
        r"^epilog_inputs\['relu_aux'\]: shape \(4, 2\); expected \(\.\.\., 4, 16\)",
    ),
    (
        lambda: matmul(
            f32(4, 3), f32(3, 2), epilog=E.DRELU, epilog_inputs={"relu_aux": f32(4, 16)}
        ),
        ValueError,
        r"^epilog_inputs\['relu_aux'\]: dtype float32; expected uint8",
    ),
    (
        lambda: matmul(f32(4, 3), f32(3, 5), epilog=E.DGELU, epilog_inputs={"gelu_aux": f32(4, 5)}),
        ValueError,
        r"^epilog_inputs\['gelu_aux'\]: strides \(5, 1\).*divisible by 8",
    ),
    (
        lambda: matmul(
            f32(4, 3), f32(3, 5), epilog=E.DGELU, epilog_inputs={"gelu_aux": np.ones((4, 8))[:, :5]}
        ),
        ValueError,
        r"^epilog_inputs\['gelu_aux'\]: dtype float64 differs",
    ),
    (
        lambda: matmul(
            f32(3, 4, 3), f32(3, 2), epilog=E.BIAS, epilog_inputs={"bias": f32(2, 1, 2)}
        ),
        ValueError,
        r"^epilog_inputs\['bias'\]: batch shape \(2,\) does not match the result's \(3,\)",
    ),
    (
        lambda: matmul(f32(4, 3), f32(3, 2), epilog=E.BGRADA),
        ValueError,
        r"^a: BGRADA needs a column-major \(F-ordered\) a",
    ),
    (
        lambda: matmul(f32(4, 3), np.asfortranarray(f32(3, 2)), epilog=E.BGRADB),
        ValueError,
        r"^b: BGRADB needs a row-major \(C-ordered\) b",
    ),
    (
        lambda: Matmul(f32(4, 3), f32(3, 2), options={"sm_count_target": -1}),
        ValueError,
        r"^options.sm_count_target: -1; expected an int >= 0 or None",
    ),
    (
        lambda: Matmul(f32(4, 3), f32(3, 2), options={"blocking": False}),
        ValueError,
        r"^options.blocking: False; allowed True, 'auto' or None",
    ),
    (
        lambda: Matmul(f32(4, 3), f32(3, 2)).plan(preferences={"reduction_scheme_mask": 8}),
        ValueError,
        r"^preferences.reduction_scheme_mask: 8; expected a mask of 0x7 or less",
    ),
    (
        lambda: Matmul(f32(4, 3), f32(3, 2)).plan(preferences={"numerical_impl_mask": -1}),
        ValueError,
        r"^preferences.numerical_impl_mask: -1; expected a mask of 0xffffffffffffffff or less",
    ),
    (
        lambda: Matmul(f32(4, 3), f32(3, 2)).plan(preferences={"max_waves_count": float("nan")}),
        ValueError,
        r"^preferences.max_waves_count: nan; expected a number >= 0 \(0: no limit\)",
    ),
    (
        lambda: matmul(f32(4, 3), f32(3, 2), algorithm="fastest"),
        TypeError,
        r"^algorithm: expected an nvmath_host.Algorithm or None; got str",
    ),
    (
        lambda: matmul(f32(4, 3), f32(3, 2), stream="s"),
        TypeError,
        r"^stream: expected an int handle",
    ),
    # torch views whose memory does not hold the values they show (lazy conjugate / negation)
    (  # a's and b's conjugate bit is read as a qualifier; c's cannot be (cuBLASLt conjugates a, b only)
        lambda: Matmul(FakeTorch((4, 16), "complex64"), FakeTorch((16, 8), "complex64"),
                       FakeTorch((4, 8), "complex64", conj=True)),
        ValueError,
        r"^c: a torch tensor with the conjugate bit set \(a lazy \.conj\(\) view\) is not supported: "
        r"its memory holds the unconjugated values; pass \.resolve_conj\(\) of it",
    ),
    (
        lambda: matmul(FakeTorch((4, 16), "float32"), FakeTorch((16, 8), "float32", neg=True)),
        ValueError,
        r"^b: a torch tensor with the negative bit set \(a lazily negated view, e\.g\. \.conj\(\)\.imag\) "
        r"is not supported: its memory holds the values unnegated; pass \.resolve_neg\(\) of it",
    ),
    # FP8 (torch stand-ins): scales, layouts, pairs
    (
        lambda: Matmul(FakeTorch((4, 16)), fp8_b(16, 8), options={"result_type": "float16"}),
        ValueError,
        r"^quantization_scales: FP8 operands need scales for \['a', 'b'\]; missing \['a', 'b'\]$",
    ),
    (  # an FP8 result with its "d" scale is valid (next step needs torch itself)
        lambda: Matmul(
            FakeTorch((4, 16)),
            fp8_b(16, 8),
            quantization_scales={"a": 1, "b": 1, "d": 1},
            options={"result_type": "float8_e4m3fn", "result_amax": True},
        ),
        None,
        None,
    ),
    (
        lambda: Matmul(
            FakeTorch((4, 16)),
            fp8_b(16, 8),
            quantization_scales={"a": 1, "b": 1},
            options={"result_type": "float8_e4m3fn"},
        ),
        ValueError,
        r"^quantization_scales: FP8 operands need scales for \['a', 'b', 'd'\]; missing \['d'\]",
    ),
    (
        lambda: Matmul(
            FakeTorch((4, 16)),
            fp8_b(16, 8),
            quantization_scales={"a": 1, "b": 1, "d": 1},
            options={"result_type": "float8_e5m2"},
        ),
        ValueError,
        r"^options.result_type: float8_e5m2 results need a float8_e5m2 operand; cuBLASLt "
        r"allows float8_e4m3fn x float8_e4m3fn only float8_e4m3fn, bfloat16, float16 or float32",
    ),
    (  # e4m3 x e5m2 may give an e5m2 result
        lambda: Matmul(
            FakeTorch((4, 16)),
            FakeTorch((16, 8), "float8_e5m2", (1, 16)),
            quantization_scales={"a": 1, "b": 1, "d": 1},
            options={"result_type": "float8_e5m2"},
        ),
        None,
        None,
    ),
    (
        lambda: Matmul(
            FakeTorch((4, 16)),
            fp8_b(16, 8),
            FakeTorch((4, 8), "float32"),
            quantization_scales={"a": 1, "b": 1, "d": 1},
            options={"result_type": "float8_e4m3fn"},
        ),
        ValueError,
        r"^c: dtype float32; with an FP8 result \(float8_e4m3fn\) cuBLASLt takes c only in "
        r"float16 or bfloat16",
    ),
    (
        lambda: Matmul(
            FakeTorch((4, 16)),
            fp8_b(16, 8),
            FakeTorch((4, 8), "bfloat16"),
            quantization_scales={"a": 1, "b": 1, "d": 1},
            options={"result_type": "float8_e4m3fn", "inplace": True},
        ),
        ValueError,
        r"^options.inplace: an FP8 result \(float8_e4m3fn\) cannot be written into c",
    ),
    (
        lambda: Matmul(
            FakeTorch((4, 16)), fp8_b(16, 8), quantization_scales={"a": 1, "b": 1, "c": 1}
        ),
        ValueError,
        r"^quantization_scales: 'c' is not supported: cuBLASLt takes a C scale only for an FP8 C",
    ),
    (
        lambda: Matmul(
            FakeTorch((4, 16)),
            fp8_b(16, 8),
            quantization_scales={"a": 1, "b": 1, "d": 1},
            options={"result_type": "bfloat16"},
        ),
        ValueError,
        r"^quantization_scales: 'd' scales an FP8 result; the result is bfloat16",
    ),
    (
        lambda: Matmul(
            FakeTorch((4, 16)),
            fp8_b(16, 8),
            quantization_scales={"a": 1, "b": 1},
            options={"result_amax": True, "result_type": "bfloat16"},
        ),
        ValueError,
        r"^options.result_amax: cuBLASLt computes amax only for FP8 results \(float8_e4m3fn, "
        r"float8_e5m2\); the result is bfloat16",
    ),
    (
        lambda: (
            Matmul(
                FakeTorch((4, 16)),
                fp8_b(16, 8),
                quantization_scales={"a": 1.0, "b": 1.0},
                options={"result_type": "bfloat16"},
            ).options
        ),
        None,
        None,
    ),
    (
        lambda: Matmul(
            FakeTorch((4, 16)), FakeTorch((16, 8)), quantization_scales={"a": 1, "b": 1}
        ),
        ValueError,
        r"^b: FP8 needs a row-major \(C-ordered\) a and a column-major \(F-ordered\) b",
    ),
    (
        lambda: Matmul(
            FakeTorch((4, 16), "float8_e5m2"),
            fp8_b(16, 8).__class__((16, 8), "float8_e5m2", (1, 16)),
        ),
        ValueError,
        r"^b: float8_e5m2 x float8_e5m2 is not supported",
    ),
    (
        lambda: Matmul(FakeTorch((4, 16)), FakeTorch((16, 8), "float16")),
        ValueError,
        r"^b: dtype pair \(float8_e4m3fn, float16\)",
    ),
    (
        lambda: Matmul(
            FakeTorch((4, 16), "float16"),
            FakeTorch((16, 8), "float16"),
            quantization_scales={"a": 1.0},
        ),
        ValueError,
        r"^quantization_scales: only for FP8",
    ),
    (
        lambda: Matmul(
            FakeTorch((4, 16)),
            fp8_b(16, 8),
            quantization_scales={"a": 1, "b": 1, "x": 1},
            options={"result_type": "float16"},
        ),
        ValueError,
        r"^quantization_scales: unknown keys \['x'\]",
    ),
    (
        lambda: Matmul(
            FakeTorch((4, 16)),
            fp8_b(16, 8),
            quantization_scales={"a": 1, "b": 1},
            options={"result_type": "float64"},
        ),
        ValueError,
        r"^options.result_type: float64; FP8 allows",
    ),
]


@pytest.mark.parametrize("case, exc, msg", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_bad_input(case, exc, msg):
    if exc is None:
        # a valid FP8 description: validation passes, and the next step needs torch itself
        with pytest.raises(KeyError, match="torch"):
            case()
        return
    with pytest.raises(exc, match=msg):
        case()


def test_reset_operands_checks_shape_dtype_package():
    a, b = f32(4, 3), f32(3, 2)
    with Matmul(a, b) as mm:
        mm.plan()
        with pytest.raises(ValueError, match=r"^a: numpy float32 shape \(5, 3\)"):
            mm.reset_operands(a=f32(5, 3))
        with pytest.raises(ValueError, match=r"^b: numpy float64"):
            mm.reset_operands(b=np.ones((3, 2)))
        with pytest.raises(TypeError, match=r"^a: unsupported operand"):
            mm.reset_operands(a=[1])
        with pytest.raises(ValueError, match=r"^c: this Matmul was created without c"):
            mm.reset_operands(c=f32(4, 2))
        with pytest.raises(ValueError, match=r"^beta: this Matmul has no c"):
            mm.reset_operands(beta=2.0)
        with pytest.raises(ValueError, match=r"^epilog_inputs\['bias'\]: not an input"):
            mm.reset_operands(epilog_inputs={"bias": f32(2)})
    with pytest.raises(RuntimeError, match="freed"):
        mm.execute()


def test_the_logger_hears_of_creation_planning_and_conjugation(caplog):
    """options.logger (else the root logger) gets one INFO line at creation and one per plan."""
    import logging

    lg = logging.getLogger("nvmath_host_test_user")
    a = np.ones((5, 3), np.complex64)
    with caplog.at_level(logging.INFO, logger="nvmath_host_test_user"):
        with Matmul(a, np.ones((3, 2), np.complex64), qualifiers=_conjugating("a"), options={"logger": lg}) as mm:
            mm.plan()
    lines = [r.getMessage() for r in caplog.records if r.name == "nvmath_host_test_user"]
    assert lines == [
        "nvmath_host.Matmul: numpy complex64 x complex64 (no c, batch none, M=5 N=2 K=3), compute "
        "COMPUTE_32F, F result of complex64, a conjugated",
        "nvmath_host.Matmul: planned epilog DEFAULT on the CPU (NumPy, no GPU)",
    ]
    with pytest.raises(TypeError, match=r"^options.logger: expected a logging.Logger or None; got str"):
        Matmul(a, np.ones((3, 2), np.complex64), options={"logger": "stdout"})


def test_plan_preferences_validated():
    with Matmul(f32(4, 3), f32(3, 2)) as mm:
        with pytest.raises(ValueError, match=r"^preferences.limit"):
            mm.plan(preferences={"limit": 0})
        with pytest.raises(ValueError, match=r"^iterations"):
            mm.autotune(iterations=0)


# ----------------------------------------------------------------------------- plan cache keys


def _key(a, b, c=None, **kw):
    oa, ob, oc, inputs = wrap_call(a, b, c, kw.get("epilog_inputs"))
    return plan_key(
        oa,
        ob,
        oc,
        kw.get("epilog"),
        inputs,
        kw.get("options"),
        kw.get("alpha"),
        kw.get("beta"),
        kw.get("stream", 0),
        kw.get("preferences"),
        check_qualifiers(kw.get("qualifiers"), oa, ob),
    )


def test_plan_cache_key_ignores_data_not_shape():
    a, b = np.zeros((256, 64), np.float32), np.zeros((64, 32), np.float32)
    a2, b2 = np.ones((256, 64), np.float32), np.ones((64, 32), np.float32)
    ac, bc = a.astype(np.complex64), b.astype(np.complex64)
    assert _key(a, b) == _key(a2, b2)
    assert _key(ac, bc) == _key(ac, bc, qualifiers=_conjugating())  # no flag set: the plain plan
    assert _key(a, b) == _key(a, b, qualifiers=_conjugating("a", "b"))  # real: its own conjugate
    bias = np.zeros(32, np.float32)
    e = {"epilog": E.RELU_BIAS, "epilog_inputs": {"bias": bias}}
    assert _key(a, b, **e) == _key(a2, b2, epilog=E.RELU_BIAS, epilog_inputs={"bias": bias + 1})
    variants = [
        _key(a, b),
        _key(a.astype(np.float64), b.astype(np.float64)),  # dtype
        _key(np.asfortranarray(a), b),  # strides
        _key(a[:128], b),  # shape
        _key(a, b, **e),  # epilog
        _key(a, b, epilog=E.RELU),
        _key(a, b, options={"compute_type": MatmulComputeType.COMPUTE_32F_FAST_TF32}),
        _key(a, b, alpha=2.0),  # given vs default alpha
        _key(a, b, np.zeros((256, 32), np.float32)),  # c
        _key(a, b, stream=7),  # the stream a plan's workspace is ordered on
        _key(a, b, preferences={"limit": 1}),
        _key(a, b, epilog=E.RELU_AUX_BIAS, epilog_inputs={"bias": bias}),
        _key(a, b, epilog=E.DRELU_BGRAD, epilog_inputs={"relu_aux": bias.view(np.uint8)}),
        _key(a, b, np.zeros((256, 32), np.float32), **e),  # c and an input
        _key(a, b, epilog=E.RELU_BIAS, epilog_inputs={"bias": bias[:16]}),  # an input's shape
        _key(ac, bc),
        _key(ac, bc, qualifiers=_conjugating("a")),  # which operand cuBLASLt conjugates
        _key(ac, bc, qualifiers=_conjugating("b")),
    ]
    assert len(set(variants)) == len(variants)
    # the inputs' order in the dict is not part of the key
    aux = np.zeros(64, np.uint8)
    two = {"epilog": E.DGELU_BGRAD}
    assert _key(a, b, **two, epilog_inputs={"gelu_aux": a, "bias": bias}) == _key(
        a, b, **two, epilog_inputs={"bias": bias, "gelu_aux": a}
    )
    assert _key(a, b, **two, epilog_inputs={"gelu_aux": a, "bias": bias}) != _key(
        a, b, **two, epilog_inputs={"gelu_aux": a, "bias": aux.view(np.float32)[:32]}
    )
    # pointer alignment is part of the key (cuBLASLt picks kernels by it)
    buf = np.zeros(256 * 64 + 1, np.float32)
    assert _key(buf[:-1].reshape(256, 64), b) != _key(buf[1:].reshape(256, 64), b)


# ----------------------------------------------------------------------------- cuBLASLt mapping


def _conjugating(*names):
    q = np.zeros(3, dtype=matrix_qualifiers_dtype)
    for n in names:
        q["abc".index(n)]["is_conjugate"] = 1
    return q


def _cplx(shape, order="C"):
    return np.zeros(shape, np.complex64, order=order)


@pytest.mark.parametrize("a_order", ["C", "F"])
@pytest.mark.parametrize("b_order", ["C", "F"])
@pytest.mark.parametrize("conj", [("a",), ("b",), ("a", "b")])
def test_a_conjugated_operand_takes_the_conjugate_transpose(a_order, b_order, conj):
    """cuBLASLt conjugates only with a transpose (OP_C): a conjugated operand that is row-major
    needs an F-ordered result (handed over as is: its op would be T), a column-major one a
    C-ordered result (handed over transposed); with nothing else fixing the order, the result
    takes the order the conjugated operands need, and only their ops become C. Two that need
    different orders are refused, naming the second."""
    M, K, N = 6, 4, 10
    a, b = _cplx((M, K), a_order), _cplx((K, N), b_order)
    ca, cb = "a" in conj, "b" in conj
    need = {"a": "F" if a_order == "C" else "C", "b": "F" if b_order == "C" else "C"}
    needs = {need[n] for n in conj}
    w = mathdx_operands.wrap
    if len(needs) > 1:
        with pytest.raises(ValueError, match=r"^b: conjugated and (row|col)-major, which cuBLASLt can "
                                             r"conjugate only for a (C|F)-ordered result .*\(a, conjugated too\)"):
            Problem(w(a, "a"), w(b, "b"), None, MatmulOptions(), None, {}, {}, (ca, cb))
        return
    p = Problem(w(a, "a"), w(b, "b"), None, MatmulOptions(), None, {}, {}, (ca, cb))
    plain = _problem(a, b, result_order=needs.pop())
    assert p.order == plain.order
    # cuBLASLt's A is our b when the result is handed over transposed (C order)
    conj_lt = (cb, ca) if p.swap else (ca, cb)
    for got, was, c in zip((p.trans_a, p.trans_b), (plain.trans_a, plain.trans_b), conj_lt):
        assert got == (Operation.C if c else was) and (not c or was == Operation.T)
    assert (p.layout_a, p.layout_b, p.layout_d) == (plain.layout_a, plain.layout_b, plain.layout_d)


def test_a_conjugated_operand_whose_order_is_fixed_otherwise_is_refused():
    M, K, N = 6, 4, 10
    a, b = _cplx((M, K)), _cplx((K, N))
    w = mathdx_operands.wrap

    def problem(c=None, **opts):
        return Problem(w(a, "a"), w(b, "b"), None if c is None else w(c, "c"), MatmulOptions(**opts), None,
                       {}, {}, (True, False))

    assert problem().order == "F"
    with pytest.raises(ValueError, match=r"^a: conjugated and row-major, .* for a F-ordered result \(as a "
                                         r"conjugate transpose\), but the result is C-ordered "
                                         r"\(options.result_order\); pass a in the other memory order"):
        problem(result_order="C")
    with pytest.raises(ValueError, match=r"^a: conjugated .* C-ordered \(c's order\)"):
        problem(c=_cplx((M, N)))
    assert problem(c=_cplx((M, N), "F")).order == "F"


def test_qualifiers_conjugate_against_the_operands_own_conjugate_bit():
    """A qualifier conjugates the operand's values: a torch tensor with the conjugate bit holds
    the conjugates in memory, so a qualifier on it gives the memory's values (no flag); real
    dtypes are their own conjugates; c cannot be conjugated; the array is checked."""
    def op(dtype="complex64", conj=False):
        return mathdx_operands.wrap(FakeTorch((4, 4), dtype, conj=conj), "x", conj=True)

    assert check_qualifiers(None, op(), op()) == (False, False)
    assert check_qualifiers(None, op(conj=True), op()) == (True, False)
    assert check_qualifiers(_conjugating("b"), op(), op()) == (False, True)
    assert check_qualifiers(_conjugating("a", "b"), op(conj=True), op()) == (False, True)
    assert check_qualifiers(_conjugating("a", "b"), op("float32"), op("float64")) == (False, False)
    with pytest.raises(ValueError, match=r"^qualifiers\[2\]\['is_conjugate'\] \(c\): conjugating c is not"):
        check_qualifiers(_conjugating("c"), op(), op())
    with pytest.raises(ValueError, match=r"^qualifiers: shape \(2,\); expected \(3,\)"):
        check_qualifiers(np.zeros(2, matrix_qualifiers_dtype), op(), op())
    with pytest.raises(TypeError, match=r"^qualifiers: expected a NumPy array of nvmath_host.matrix_qualifiers"
                                        r"_dtype .*; got int32"):
        check_qualifiers(np.zeros(3, np.int32), op(), op())
    q = _conjugating()
    q[1]["structure"] = "tr"
    with pytest.raises(ValueError, match=r"^qualifiers\[1\]\['structure'\] \(b\): 'tr'; only general"):
        check_qualifiers(q, op(), op())


def test_conjugated_numpy_operands_on_the_cpu_and_a_reset_keeps_the_conjugate_bit(monkeypatch):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((5, 3)) + 1j * rng.standard_normal((5, 3))).astype(np.complex64)
    b = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex64)
    if _gpu.available():
        pytest.skip("the CPU path runs where no GPU is")
    with pytest.warns(CPUExecutionWarning):
        d = matmul(a, b, qualifiers=_conjugating("a"))
    np.testing.assert_allclose(d, a.conj() @ b, rtol=1e-6)
    assert d.flags.f_contiguous  # a row-major conjugated a: an F-ordered result
    with pytest.warns(CPUExecutionWarning):
        d = matmul(a, np.asfortranarray(b), qualifiers=_conjugating("b"))
    np.testing.assert_allclose(d, a @ b.conj(), rtol=1e-6)
    assert d.flags.c_contiguous
    module = importlib.import_module("nvmath_host.matmul")  # (the package's `matmul` is the function)
    monkeypatch.setattr(module, "package", lambda name: SimpleNamespace(name=name))  # no torch here
    mm = Matmul(FakeTorch((4, 16), "complex64", conj=True), FakeTorch((16, 8), "complex64"))
    with pytest.raises(ValueError, match=r"^a: torch complex64 shape \(4, 16\) strides \(16, 1\) on device 0 "
                                         r"does not match the planned torch complex64 shape \(4, 16\) "
                                         r"strides \(16, 1\) on device 0 \(conjugate bit set\)$"):
        mm.reset_operands(a=FakeTorch((4, 16), "complex64"))


def _problem(a, b, c=None, epilog=None, inputs=None, **opts):
    w = mathdx_operands.wrap
    return Problem(
        w(a, "a"),
        w(b, "b"),
        w(c, "c") if c is not None else None,
        MatmulOptions(**opts),
        epilog,
        {k: w(v, k) for k, v in (inputs or {}).items()},
        {},
    )


@pytest.mark.parametrize("a_order", ["C", "F"])
@pytest.mark.parametrize("b_order", ["C", "F"])
def test_row_major_result_is_handed_over_transposed(a_order, b_order):
    M, K, N = 6, 4, 10
    a = np.zeros((M, K), np.float32, order=a_order)
    b = np.zeros((K, N), np.float32, order=b_order)
    p = _problem(a, b)
    assert p.order == "C" and p.swap
    # cuBLASLt computes D^T (N x M) = op(B_lt) op(A_lt) with A_lt = our b, B_lt = our a
    la, lb, ld = p.layout_a, p.layout_b, p.layout_d
    assert (ld.rows, ld.cols, ld.ld) == (N, M, N)
    if b_order == "C":  # b row-major == b^T col-major (N x K): no transpose
        assert p.trans_a == Operation.N and (la.rows, la.cols, la.ld) == (N, K, N)
    else:
        assert p.trans_a == Operation.T and (la.rows, la.cols, la.ld) == (K, N, K)
    if a_order == "C":
        assert p.trans_b == Operation.N and (lb.rows, lb.cols, lb.ld) == (K, M, K)
    else:
        assert p.trans_b == Operation.T and (lb.rows, lb.cols, lb.ld) == (M, K, M)


def test_column_bias_hands_over_as_is_and_swaps_bgrad_sides():
    M, K, N = 6, 4, 10
    a, b = np.zeros((M, K), np.float32), np.zeros((K, N), np.float32)
    p = _problem(a, b, epilog=E.BIAS, inputs={"bias": np.zeros((M, 1), np.float32)})
    assert p.order == "F" and not p.swap
    assert p.trans_a == Operation.T and p.trans_b == Operation.T
    assert (p.layout_d.rows, p.layout_d.cols, p.layout_d.ld) == (M, N, M)
    assert p.d_out.strides == (1, M)
    # our BGRADA is cuBLASLt's BGRADB when the result is handed over transposed
    af = np.asfortranarray(a)
    assert _problem(af, b, epilog=E.BGRADA).lt_epilog.name == "BGRADB"
    assert _problem(af, b, epilog=E.BGRADA, result_order="F").lt_epilog.name == "BGRADA"
    assert _problem(a, b, epilog=E.BGRADB).lt_epilog.name == "BGRADA"
    assert _problem(a, b, epilog=E.BGRADB, result_order="F").lt_epilog.name == "BGRADB"


def test_batched_strides_and_broadcast():
    a = np.zeros((3, 2, 6, 4), np.float32)
    b = np.zeros((4, 10), np.float32)
    p = _problem(a, b, c=np.zeros((6, 10), np.float32))
    assert p.batch == 6
    assert p.layout_b.stride == 24 and p.layout_a.stride == 0  # cuBLASLt's B is our a
    assert p.layout_c.stride == 0 and p.layout_d.stride == 60
    with pytest.raises(ValueError, match="one batch stride"):
        _problem(a[:, :, :, :].transpose(1, 0, 2, 3), b)
    # a device operand's reversed batch (negative stride) is refused by name, not handed to
    # cuBLASLt; a NumPy one is mirrored in memory order, so it is fine (checked on the CPU path)
    rev = FakeCupy((3, 4, 5))
    rev.__cuda_array_interface__["strides"] = (-80, 20, 4)
    with pytest.raises(ValueError, match=r"^a: batch axes of shape \(3,\) .* run backwards"):
        Matmul(rev, FakeCupy((5, 2)))
    ha, hb = _numbered_f32((3, 4, 5)), _numbered_f32((5, 2))
    np.testing.assert_allclose(matmul(ha[::-1], hb), ha[::-1] @ hb, rtol=1e-6)


def test_a_column_c_is_broadcast_along_n_with_leading_dimension_0():
    """nvmath-python's (..., M, 1) ``c``: added to each of the N columns, handed to cuBLASLt
    as a column-major M x N matrix of leading dimension 0, so the result is F-ordered."""
    M, K, N = 6, 4, 10
    a, b = np.zeros((M, K), np.float32), np.zeros((K, N), np.float32)
    p = _problem(a, b, c=np.zeros((M, 1), np.float32))
    assert p.order == "F" and not p.swap and p.c_ptr_from == "c"
    lc, ld = p.layout_c, p.layout_d
    assert (lc.rows, lc.cols, lc.ld, lc.stride) == (M, N, 0, 0)
    assert (ld.rows, ld.cols, ld.ld) == (M, N, M)
    # batched: one column per batch matrix, M elements apart
    p = _problem(np.zeros((3, M, K), np.float32), b, c=np.zeros((3, M, 1), np.float32))
    assert (p.layout_c.ld, p.layout_c.stride, p.layout_c.batch) == (0, M, 3)
    # a column bias keeps the F order; N == 1 is the plain (M, N) case
    p = _problem(a, b, c=np.zeros((M, 1), np.float32), epilog=E.BIAS, inputs={"bias": np.zeros((M, 1), np.float32)})
    assert p.order == "F" and p.layout_c.ld == 0
    p = _problem(a, b[:, :1].copy(), c=np.zeros((M, 1), np.float32))
    assert p.layout_c.ld == p.layout_d.ld > 0


def test_a_column_c_in_a_c_ordered_result_or_in_place_is_refused_by_name():
    M, K, N = 6, 4, 10
    a, b, col = np.zeros((M, K), np.float32), np.zeros((K, N), np.float32), np.zeros((M, 1), np.float32)
    with pytest.raises(ValueError, match=r"^c: shape \(6, 1\) is broadcast along N, which cuBLASLt does only "
                       r"for an F-ordered result .*C-ordered \(options.result_order\); pass c of the full "
                       r"shape \(\.\.\., 6, 10\)$"):
        _problem(a, b, c=col, result_order="C")
    with pytest.raises(ValueError, match=r"^c: shape \(6, 1\) is broadcast .*C-ordered \(set by the bias shape\)"):
        _problem(a, b, c=col, epilog=E.BIAS, inputs={"bias": np.zeros(N, np.float32)})
    with pytest.raises(ValueError, match=r"^c: a \(6, 1\) column broadcast along N needs its 6 elements "
                       r"adjacent \(stride 1\); got strides \(2, 1\)"):
        _problem(a, b, c=np.zeros((M, 2), np.float32)[:, :1])
    with pytest.raises(ValueError, match=r"^c: in-place needs c of the result's full shape \(6, 10\); "
                       r"got \(6, 1\)"):
        _problem(a, b, c=col, inplace=True)
    with pytest.raises(ValueError, match=r"^c: shape \(6, 2\); expected \(\.\.\., M, N\) = \(\.\.\., 6, 10\), "
                       r"or \(\.\.\., M, 1\) broadcast along N$"):
        _problem(a, b, c=np.zeros((M, 2), np.float32))
    with pytest.raises(ValueError, match=r"^c: shape \(1, 10\); expected"):  # rows are never broadcast
        _problem(a, b, c=np.zeros((1, N), np.float32))


def test_a_column_c_on_the_cpu_path_is_added_to_every_column():
    a, b = _numbered_f32((2, 5, 3)), _numbered_f32((3, 4))
    col = _numbered_f32((2, 5, 1))
    d = matmul(a, b, col, beta=0.5)
    assert d.flags.f_contiguous or d[0].flags.f_contiguous
    np.testing.assert_allclose(d, a @ b + 0.5 * col, rtol=1e-6)
    np.testing.assert_allclose(matmul(a, b, col[0], beta=2.0), a @ b + 2.0 * col[0], rtol=1e-6)


def test_algorithm_pickles():
    alg = Algorithm(bytes(range(64)), 1024, 0.5, version=130102)
    alg.time_ms = 1.0
    back = pickle.loads(pickle.dumps(alg))
    assert back.data == alg.data and back.workspace_size == 1024 and back.version == 130102
    assert bytes(back._algo) == bytes(range(64))
    with pytest.raises(ValueError, match="^data"):
        Algorithm(b"x", 0)


def test_stream_adapters():
    h = mathdx_operands.stream_handle
    assert h(0) == 0 and h(1234) == 1234
    assert h(SimpleNamespace(__cuda_stream__=lambda: (0, 77))) == 77
    assert h(SimpleNamespace(ptr=88)) == 88  # CuPy
    assert h(SimpleNamespace(cuda_stream=99)) == 99  # torch
    import ctypes

    assert h(SimpleNamespace(handle=ctypes.c_void_p(111))) == 111  # Numba
    assert h(SimpleNamespace(handle=ctypes.c_void_p(None))) == 0
    with pytest.raises(TypeError, match="^stream"):
        h(1.5)


def test_public_names_have_docstrings():
    import nvmath_host

    for name in nvmath_host.__all__:
        obj = getattr(nvmath_host, name)
        assert obj.__doc__ and len(obj.__doc__.strip()) > 20, name
    for meth in ("plan", "autotune", "execute", "reset_operands", "free"):
        assert getattr(Matmul, meth).__doc__, meth
