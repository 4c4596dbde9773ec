# SPDX-License-Identifier: Apache-2.0
"""Hypothesis fuzzing of ``matmul(...)`` / ``Matmul(...)`` arguments on the CPU path.

NumPy operands without a GPU run on the CPU (CPUExecutionWarning). Three properties:

* a valid problem (dtypes, shapes, batch, layouts, c, alpha/beta, epilog by member or name,
  bias) gives the result of an independent NumPy float64 computation;
* one defect put into a valid problem raises ValueError/TypeError/NotImplementedError whose
  message starts with the name of the argument that holds the defect;
* garbage in several arguments at once raises one of those exceptions naming some argument.

Any other exception, or a warning other than CPUExecutionWarning, fails the test.
"""

import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvmath_host import (
    CPUExecutionWarning,
    Matmul,
    MatmulComputeType,
    MatmulEpilog,
    MatmulOptions,
    _gpu,
    matmul,
)

E = MatmulEpilog
FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
ARGS = (
    "a",
    "b",
    "c",
    "alpha",
    "beta",
    "epilog",
    "epilog_inputs",
    "quantization_scales",
    "options",
    "preferences",
    "stream",
)
OK_EXC = (ValueError, TypeError, NotImplementedError)
REAL = ("float16", "float32", "float64")
DTYPES = REAL + ("complex64", "complex128")
TOL = {"float16": 5e-3, "float32": 2e-5, "float64": 1e-12, "complex64": 2e-5, "complex128": 1e-12}
pytestmark = pytest.mark.filterwarnings("ignore::nvmath_host.CPUExecutionWarning")
EPILOGS = (None, E.RELU, E.BIAS, E.RELU_BIAS, E.GELU, E.GELU_BIAS)


@pytest.fixture(autouse=True)
def _cpu_only(monkeypatch):
    monkeypatch.setattr(_gpu, "PRETEND", False)


# ----------------------------------------------------------------------------- valid problems


def make(rng, shape, dtype, layout):
    """A ``shape`` array of ``dtype`` whose matrices are C-, F-ordered or a strided view."""
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    x = x.astype(dtype)
    if layout == "F":
        return np.swapaxes(np.ascontiguousarray(np.swapaxes(x, -1, -2)), -1, -2)
    if layout == "padded":  # rows padded: a unit inner stride and a larger leading one
        big = np.zeros(shape[:-1] + (shape[-1] + 3,), dtype)
        big[..., : shape[-1]] = x
        return big[..., : shape[-1]]
    return x


@st.composite
def problems(draw):
    """kwargs of a valid matmul plus what it should give."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtype = draw(st.sampled_from(DTYPES))
    m, n, k = (draw(st.integers(1, 6)) for _ in range(3))
    batch = draw(st.sampled_from([(), (2,), (2, 3)]))
    a_batch, b_batch = draw(st.sampled_from([(batch, batch), (batch, ()), ((), batch)]))
    lay = st.sampled_from(["C", "F", "padded"])
    a = make(rng, a_batch + (m, k), dtype, draw(lay))
    b = make(rng, b_batch + (k, n), dtype, draw(lay))
    kw = {}
    c = None
    if draw(st.booleans()):
        c = make(rng, (m, n), dtype, "C")  # broadcast over the batch
        if draw(st.booleans()):
            kw["beta"] = draw(st.sampled_from([0.5, -1, 2.0, np.float32(0.25)]))
    if draw(st.booleans()):
        kw["alpha"] = draw(st.sampled_from([2, -0.5, 1.0, np.float64(3.0)]))
    epilog = None if dtype not in REAL else draw(st.sampled_from(EPILOGS))
    bias = None
    if epilog is not None:
        form = draw(st.sampled_from(["member", "upper", "lower", "int"]))
        kw["epilog"] = {
            "member": epilog,
            "upper": epilog.name,
            "lower": epilog.name.lower(),
            "int": int(epilog),
        }[form]
        if "BIAS" in epilog.name:
            bias = make(rng, (n,), dtype, "C")
            kw["epilog_inputs"] = {"bias": bias}
    if draw(st.booleans()) and dtype in ("float32", "complex64"):
        ct = draw(st.sampled_from(["COMPUTE_32F", "compute_32f_pedantic", None]))
        kw["options"] = draw(
            st.sampled_from([{"compute_type": ct}, MatmulOptions(compute_type=ct)])
        )
    if draw(st.booleans()):
        kw["preferences"] = {"limit": draw(st.integers(1, 4))}
    want = expected(a, b, c, kw.get("alpha", 1), kw.get("beta", 1), epilog, bias)
    return a, b, c, kw, want


def expected(a, b, c, alpha, beta, epilog, bias):
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    x = alpha * (a.astype(wide) @ b.astype(wide))
    if c is not None:
        x = x + beta * c.astype(wide)
    name = epilog.name if epilog is not None else ""
    if "BIAS" in name:
        x = x + bias.astype(wide)
    if name.startswith("RELU"):
        x = np.maximum(x, 0)
    if name.startswith("GELU"):
        x = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return x


def run(form, a, b, c, kw):
    """matmul(...) or Matmul(...) + plan + execute with the same arguments."""
    if form == "function":
        return matmul(a, b, c, **kw)
    plan_kw = {k: kw[k] for k in ("epilog", "epilog_inputs") if k in kw}
    ctor = {k: v for k, v in kw.items() if k not in ("epilog", "epilog_inputs", "preferences")}
    with Matmul(a, b, c, **ctor) as mm:
        mm.plan(kw.get("preferences"), **plan_kw)
        return mm.execute()


def quiet():
    """Warnings are errors, except the CPU-path one."""
    cm = warnings.catch_warnings()
    cm.__enter__()
    warnings.simplefilter("error")
    warnings.filterwarnings("ignore", category=CPUExecutionWarning)
    return cm


@settings(FUZZ, max_examples=200)
@given(problems(), st.sampled_from(["function", "class"]))
def test_valid_problems_match_numpy(problem, form):
    a, b, c, kw, want = problem
    cm = quiet()
    try:
        d = run(form, a, b, c, kw)
    finally:
        cm.__exit__(None, None, None)
    assert isinstance(d, np.ndarray) and d.dtype == a.dtype and d.shape == want.shape
    scale = max(float(np.abs(want).max()), 1.0)
    err = float(np.abs(d.astype(want.dtype) - want).max()) / scale
    assert err < TOL[a.dtype.name], (err, a.dtype, kw)


# ----------------------------------------------------------------------------- one defect


def _first(x):
    """The first matrix of x."""
    return x.reshape((-1,) + x.shape[-2:])[0]


def _strided(x):
    """x as a view with no unit stride in its matrices; a matrix with one row or column is
    expressible with any strides (M = 0 then, another defect of a)."""
    if 1 in x.shape[-2:]:
        return x[..., :0, :]
    return np.repeat(np.repeat(x, 2, -1), 2, -2)[..., ::2, ::2]


def _other_dtype(x):
    if x.dtype.kind == "c":
        return x.astype(np.complex128 if x.dtype != np.complex128 else np.complex64)
    return x.astype(np.float64 if x.dtype != np.float64 else np.float32)


# (argument the message must name (regex alternatives), mutation of (a, b, c, kw))
DEFECTS = {
    "a is a list": ("a", lambda a, b, c, kw: (a.tolist(), b, c, kw)),
    "a is None": ("a", lambda a, b, c, kw: (None, b, c, kw)),
    "a is a scalar": ("a", lambda a, b, c, kw: (np.float32(1), b, c, kw)),
    "a is a str": ("a", lambda a, b, c, kw: ("a", b, c, kw)),
    "a is 1-D": ("a", lambda a, b, c, kw: (a.reshape(-1), b, c, kw)),
    "a is 0-D": ("a", lambda a, b, c, kw: (np.array(a.reshape(-1)[0]), b, c, kw)),
    "a is int32": ("a", lambda a, b, c, kw: (a.real.astype(np.int32), b, c, kw)),
    "a is bool": ("a", lambda a, b, c, kw: (a.real > 0, b, c, kw)),
    "a is object": ("a", lambda a, b, c, kw: (a.astype(object), b, c, kw)),
    "a is big-endian": ("a", lambda a, b, c, kw: (a.astype(a.dtype.newbyteorder(">")), b, c, kw)),
    "a has M = 0": ("a", lambda a, b, c, kw: (a[..., :0, :], b, c, kw)),
    "a has an empty batch": (
        "a|b",
        lambda a, b, c, kw: (np.zeros((0,) + a.shape[-2:], a.dtype), b, c, kw),
    ),
    "a is strided in both axes": (
        "a",
        lambda a, b, c, kw: (_strided(a), b, c, kw),
    ),
    "a is reversed": (
        "a",
        lambda a, b, c, kw: (
            np.ascontiguousarray(a)[..., ::-1, :] if a.shape[-2] > 1 else a[..., :0, :],
            b,
            c,
            kw,
        ),
    ),
    "b is a dict": ("b", lambda a, b, c, kw: (a, {"b": 1}, c, kw)),
    "b is 1-D": ("b", lambda a, b, c, kw: (a, b.reshape(-1), c, kw)),
    "b has another dtype": ("b", lambda a, b, c, kw: (a, _other_dtype(b), c, kw)),
    "b has another K": ("a|b", lambda a, b, c, kw: (a, np.concatenate([b, b], axis=-2), c, kw)),
    "b has N = 0": ("a|b", lambda a, b, c, kw: (a, b[..., :0], c, kw)),
    "b has another batch": (
        "b",
        lambda a, b, c, kw: (
            np.broadcast_to(_first(a), (4,) + a.shape[-2:]).copy(),
            np.broadcast_to(_first(b), (5,) + b.shape[-2:]).copy(),
            c,
            kw,
        ),
    ),
    "c has the wrong shape": (
        "c",
        lambda a, b, c, kw: (a, b, np.zeros(a.shape[-2:][:1] + (b.shape[-1] + 1,), a.dtype), kw),
    ),
    "c is 1-D": ("c", lambda a, b, c, kw: (a, b, np.zeros(b.shape[-1], a.dtype), kw)),
    "c has another dtype": (
        "c",
        lambda a, b, c, kw: (a, b, np.zeros((a.shape[-2], b.shape[-1]), _other_dtype(a).dtype), kw),
    ),
    "c is a str": ("c", lambda a, b, c, kw: (a, b, "c", kw)),
    "alpha is a str": ("alpha", lambda a, b, c, kw: (a, b, c, {**kw, "alpha": "2"})),
    "alpha is a list": ("alpha", lambda a, b, c, kw: (a, b, c, {**kw, "alpha": [2.0]})),
    "alpha is an array": ("alpha", lambda a, b, c, kw: (a, b, c, {**kw, "alpha": np.ones(2)})),
    "alpha is huge": ("alpha", lambda a, b, c, kw: (a, b, c, {**kw, "alpha": 10**400})),
    "alpha is bool": ("alpha", lambda a, b, c, kw: (a, b, c, {**kw, "alpha": True})),
    "beta is a str": (
        "beta",
        lambda a, b, c, kw: (
            a,
            b,
            np.zeros((a.shape[-2], b.shape[-1]), a.dtype),
            {**kw, "beta": "1"},
        ),
    ),
    "beta without c": ("beta", lambda a, b, c, kw: (a, b, None, {**kw, "beta": 0.5})),
    "epilog is misspelt": ("epilog", lambda a, b, c, kw: (a, b, c, {**kw, "epilog": "RELU_BAIS"})),
    "epilog is a float": ("epilog", lambda a, b, c, kw: (a, b, c, {**kw, "epilog": 2.0})),
    "epilog is unknown": ("epilog", lambda a, b, c, kw: (a, b, c, {**kw, "epilog": 777})),
    "epilog is a list": ("epilog", lambda a, b, c, kw: (a, b, c, {**kw, "epilog": ["RELU"]})),
    "epilog_inputs key misspelt": (
        "epilog_inputs|epilog",  # (epilog: complex operands take none)
        lambda a, b, c, kw: (
            a,
            b,
            c,
            {**kw, "epilog": "bias", "epilog_inputs": {"bais": np.zeros(b.shape[-1], a.dtype)}},
        ),
    ),
    "epilog_inputs missing": (
        "epilog_inputs|epilog",  # (epilog: complex operands take none)
        lambda a, b, c, kw: (a, b, c, {**kw, "epilog": "relu_bias", "epilog_inputs": None}),
    ),
    "epilog_inputs not a dict": (
        "epilog_inputs|epilog",  # (epilog: complex operands take none)
        lambda a, b, c, kw: (
            a,
            b,
            c,
            {**kw, "epilog": "bias", "epilog_inputs": [np.zeros(b.shape[-1], a.dtype)]},
        ),
    ),
    "epilog_inputs int key": (
        "epilog_inputs|epilog",  # (epilog: complex operands take none)
        lambda a, b, c, kw: (
            a,
            b,
            c,
            {**kw, "epilog": "bias", "epilog_inputs": {0: np.zeros(b.shape[-1], a.dtype)}},
        ),
    ),
    "bias has the wrong shape": (
        "epilog_inputs|epilog",  # (epilog: complex operands take none)
        lambda a, b, c, kw: (
            a,
            b,
            c,
            {**kw, "epilog": "BIAS", "epilog_inputs": {"bias": np.zeros(b.shape[-1] + 1, a.dtype)}},
        ),
    ),
    "bias is a str": (
        "epilog_inputs|epilog",  # (epilog: complex operands take none)
        lambda a, b, c, kw: (a, b, c, {**kw, "epilog": "BIAS", "epilog_inputs": {"bias": "bias"}}),
    ),
    "options unknown field": (
        "options",
        lambda a, b, c, kw: (a, b, c, {**kw, "options": {"fast": True}}),
    ),
    "options is a str": ("options", lambda a, b, c, kw: (a, b, c, {**kw, "options": "fast"})),
    "compute type misspelt": (
        "options",
        lambda a, b, c, kw: (a, b, c, {**kw, "options": {"compute_type": "COMPUTE_33F"}}),
    ),
    "compute type a list": (
        "options",
        lambda a, b, c, kw: (a, b, c, {**kw, "options": {"compute_type": [1]}}),
    ),
    "compute type a float": (
        "options",
        lambda a, b, c, kw: (a, b, c, {**kw, "options": {"compute_type": 1.5}}),
    ),
    "compute type for another dtype": (
        "options",
        lambda a, b, c, kw: (
            a,
            b,
            c,
            {
                **kw,
                "options": {
                    "compute_type": MatmulComputeType.COMPUTE_16F
                    if a.dtype != np.float16
                    else MatmulComputeType.COMPUTE_64F
                },
            },
        ),
    ),
    "result_order bad": (
        "options",
        lambda a, b, c, kw: (a, b, c, {**kw, "options": {"result_order": "c"}}),
    ),
    "result_order a list": (
        "options",
        lambda a, b, c, kw: (a, b, c, {**kw, "options": {"result_order": ["C"]}}),
    ),
    "inplace not a bool": (
        "options",
        lambda a, b, c, kw: (
            a,
            b,
            np.zeros((a.shape[-2], b.shape[-1]), a.dtype),
            {**kw, "options": {"inplace": "yes"}},
        ),
    ),
    "inplace without c": (
        "options",
        lambda a, b, c, kw: (
            a,
            b,
            None,
            {k: v for k, v in kw.items() if k != "beta"} | {"options": {"inplace": True}},
        ),
    ),
    "result_type of another dtype": (
        "options",
        lambda a, b, c, kw: (
            a,
            b,
            c,
            {**kw, "options": {"result_type": _other_dtype(a).dtype.name}},
        ),
    ),
    "result_type an object": (
        "options",
        lambda a, b, c, kw: (a, b, c, {**kw, "options": {"result_type": object()}}),
    ),
    "result_amax without FP8": (
        "options",
        lambda a, b, c, kw: (a, b, c, {**kw, "options": {"result_amax": True}}),
    ),
    "device_id a str": (
        "options",
        lambda a, b, c, kw: (a, b, c, {**kw, "options": {"device_id": "0"}}),
    ),
    "device_id without a GPU": (
        "options",
        lambda a, b, c, kw: (a, b, c, {**kw, "options": {"device_id": 0}}),
    ),
    "preferences limit 0": (
        "preferences",
        lambda a, b, c, kw: (a, b, c, {**kw, "preferences": {"limit": 0}}),
    ),
    "preferences limit a str": (
        "preferences",
        lambda a, b, c, kw: (a, b, c, {**kw, "preferences": {"limit": "8"}}),
    ),
    "preferences negative workspace": (
        "preferences",
        lambda a, b, c, kw: (a, b, c, {**kw, "preferences": {"max_workspace": -1}}),
    ),
    "preferences unknown field": (
        "preferences",
        lambda a, b, c, kw: (a, b, c, {**kw, "preferences": {"limits": 8}}),
    ),
    "preferences a list": (
        "preferences",
        lambda a, b, c, kw: (a, b, c, {**kw, "preferences": [8]}),
    ),
    "scales without FP8": (
        "quantization_scales",
        lambda a, b, c, kw: (a, b, c, {**kw, "quantization_scales": {"a": 1.0, "b": 1.0}}),
    ),
    "scales a list": (
        "quantization_scales",
        lambda a, b, c, kw: (a, b, c, {**kw, "quantization_scales": [1.0, 2.0]}),
    ),
    "scales a str": (
        "quantization_scales",
        lambda a, b, c, kw: (a, b, c, {**kw, "quantization_scales": "ab"}),
    ),
    "stream a str": ("stream", lambda a, b, c, kw: (a, b, c, {**kw, "stream": "s"})),
    "stream a float": ("stream", lambda a, b, c, kw: (a, b, c, {**kw, "stream": 1.5})),
}


def _named(exc, names):
    msg = str(exc)
    return any(msg.startswith(n) for n in names.split("|")) or msg.startswith("a, b:")


@settings(FUZZ, max_examples=500)
@given(problems(), st.sampled_from(sorted(DEFECTS)), st.sampled_from(["function", "class"]))
def test_one_defect_is_named(problem, defect, form):
    a, b, c, kw, _ = problem
    names, mutate = DEFECTS[defect]
    a, b, c, kw = mutate(a, b, c, dict(kw))
    if form == "class" and "preferences" not in names and "preferences" in kw:
        kw.pop("preferences")
    cm = quiet()
    try:
        with pytest.raises(OK_EXC) as info:
            run(form, a, b, c, kw)
    finally:
        cm.__exit__(None, None, None)
    assert _named(info.value, names), (defect, repr(info.value))


# ----------------------------------------------------------------------------- garbage

GARBAGE = [
    None,
    0,
    -1,
    1.5,
    1j,
    True,
    "RELU",
    "",
    b"x",
    [],
    [1, 2],
    (3, 4),
    {},
    {"bias": None},
    {"limit": -3},
    {"compute_type": None},
    object(),
    np.float32(2),
    np.int64(3),
    np.zeros(()),
    np.zeros(3, np.float32),
    np.zeros((0, 2), np.float32),
    np.zeros((2, 3), np.float32),
    np.zeros((3, 2), np.float64),
    np.zeros((2, 2), np.int8),
    np.zeros((2, 2), ">f4"),
    np.zeros((2, 2, 2), np.complex64),
    np.zeros((2, 2), np.uint8),
    MatmulOptions(compute_type=MatmulComputeType.COMPUTE_64F),
    E.RELU_BIAS,
    E.DRELU,
    E.BGRADA,
    float("nan"),
    10**30,
]


@settings(FUZZ, max_examples=500)
@given(
    st.dictionaries(st.sampled_from(ARGS), st.sampled_from(GARBAGE), min_size=1, max_size=4),
    st.sampled_from(["function", "class"]),
)
def test_garbage_raises_a_named_error(garbage, form):
    a = np.ones((2, 3), np.float32)
    b = np.ones((3, 2), np.float32)
    c = None
    kw = {}
    for k, v in garbage.items():
        if k == "a":
            a = v
        elif k == "b":
            b = v
        elif k == "c":
            c = v
        else:
            kw[k] = v
    cm = quiet()
    try:
        try:
            run(form, a, b, c, kw)
        except OK_EXC as e:
            msg = str(e)
            assert any(msg.startswith(n) for n in ARGS), (garbage, repr(e))
    finally:
        cm.__exit__(None, None, None)


# ----------------------------------------------------------------------------- what the fuzzer found


def test_scalars_are_checked_against_the_operands():
    a = np.ones((2, 3), np.float32)
    b = np.ones((3, 2), np.float32)
    with pytest.raises(ValueError, match=r"^alpha: 1j is complex; the operands are real"):
        matmul(a, b, alpha=1j)
    with pytest.raises(ValueError, match=r"^alpha: .* is not representable as a float"):
        matmul(a, b, alpha=10**400)
    with pytest.raises(TypeError, match=r"^alpha: expected a number; got bool"):
        matmul(a, b, alpha=True)
    # a complex alpha with no imaginary part is its real part; complex operands take any
    np.testing.assert_array_equal(matmul(a, b, alpha=2 + 0j), np.full((2, 2), 6, np.float32))
    z = np.ones((2, 2), np.complex64)
    np.testing.assert_array_equal(matmul(z, z, alpha=1j), np.full((2, 2), 2j, np.complex64))
    with Matmul(a, b, np.zeros((2, 2), np.float32)) as mm:
        with pytest.raises(TypeError, match=r"^beta: expected a number; got str"):
            mm.reset_operands(beta="1")
        with pytest.raises(ValueError, match=r"^alpha: 1j is complex"):
            mm.reset_operands(alpha=1j)


def test_byte_order_read_only_c_and_option_types():
    a = np.ones((2, 3), np.float32)
    b = np.ones((3, 2), np.float32)
    with pytest.raises(ValueError, match=r"^b: dtype '>f4' is not in the machine's byte order"):
        matmul(a, b.astype(">f4"))
    c = np.zeros((2, 2), np.float32)
    c.flags.writeable = False
    with pytest.raises(ValueError, match=r"^c: a read-only array; options.inplace"):
        matmul(a, b, c, options={"inplace": True})
    with pytest.raises(TypeError, match=r"^options.inplace: expected True, False or None"):
        matmul(a, b, c, options={"inplace": 1})
    with pytest.raises(TypeError, match=r"^preferences.limit: expected an int; got '8'"):
        matmul(a, b, preferences={"limit": "8"})
    with pytest.raises(ValueError, match=r"^preferences.max_workspace: -1; must be >= 0"):
        matmul(a, b, preferences={"max_workspace": -1})
    with pytest.raises(TypeError, match=r"^quantization_scales: expected a dict"):
        matmul(a, b, quantization_scales=[1.0, 2.0])
    with pytest.raises(TypeError, match=r"^epilog_inputs: expected a dict; got ndarray"):
        matmul(a, b, epilog_inputs=np.zeros(2, np.float32))
    with pytest.raises(ValueError, match=r"^a: empty batches are not supported"):
        matmul(np.ones((0, 2, 3), np.float32), b)
    # compute types by name, case-insensitive; the options object given is not changed
    opts = MatmulOptions(compute_type="compute_32f_fast_tf32")
    np.testing.assert_array_equal(matmul(a, b, options=opts), np.full((2, 2), 3, np.float32))
    assert opts.compute_type == "compute_32f_fast_tf32"
    with pytest.raises(ValueError, match=r"^options.compute_type: unknown name 'FAST'; allowed"):
        matmul(a, b, options={"compute_type": "FAST"})
