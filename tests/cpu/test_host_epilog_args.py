# SPDX-License-Identifier: Apache-2.0
"""Epilogs by name and epilog_inputs keys: accepted forms and the errors for the wrong ones.

NumPy operands without a GPU: matmul runs on the CPU path.
"""

import numpy as np
import pytest

from nvmath_host import Matmul, MatmulEpilog, _gpu, matmul
from nvmath_host._function import plan_key
from nvmath_host._wrap import wrap_call
from nvmath_host.epilogs import _as_epilog, reference


def _key(a, b, epilog, epilog_inputs=None):
    """matmul()'s plan-cache key of ``a @ b`` with ``epilog`` on stream 0."""
    oa, ob, oc, inputs = wrap_call(a, b, None, epilog_inputs)
    return plan_key(oa, ob, oc, epilog, inputs, None, None, None, 0, None, (False, False))


pytestmark = pytest.mark.filterwarnings("ignore::nvmath_host.CPUExecutionWarning")
E = MatmulEpilog
RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _cpu_only(monkeypatch):
    monkeypatch.setattr(_gpu, "PRETEND", False)


def operands():
    a = RNG.standard_normal((5, 4)).astype(np.float32)
    b = RNG.standard_normal((4, 3)).astype(np.float32)
    bias = RNG.standard_normal(3).astype(np.float32)
    return a, b, bias


@pytest.mark.parametrize("name", ["GELU_BIAS", "gelu_bias", "Gelu_Bias"])
def test_epilog_by_name_in_function_form_and_plan(name):
    a, b, bias = operands()
    want, _ = reference(a, b, epilog=E.GELU_BIAS, epilog_inputs={"bias": bias})
    d = matmul(a, b, epilog=name, epilog_inputs={"bias": bias})
    np.testing.assert_array_equal(d, want)
    with Matmul(a, b) as mm:
        mm.plan(epilog=name, epilog_inputs={"bias": bias})
        np.testing.assert_array_equal(mm.execute(), want)
    # the reference takes names too
    np.testing.assert_array_equal(
        reference(a, b, epilog=name, epilog_inputs={"bias": bias})[0], want
    )


def test_every_epilog_name_is_its_member():
    for e in E:
        assert _as_epilog(e.name) is e
        assert _as_epilog(e.name.lower()) is e
        assert _as_epilog(int(e)) is e
        assert _as_epilog(np.int64(int(e))) is e
    assert _as_epilog(None) is E.DEFAULT


def test_epilog_names_give_the_same_cache_key():
    a, b, bias = operands()
    keys = {
        _key(a, b, ep, {"bias": bias})
        for ep in (E.RELU_BIAS, "relu_bias", "RELU_BIAS", int(E.RELU_BIAS))
    }
    assert len(keys) == 1


@pytest.mark.parametrize(
    "bad, exc, msg",
    [
        (
            "GELU_BAIS",
            ValueError,
            r"^epilog: unknown epilog name 'GELU_BAIS'; allowed.*'GELU_BIAS'",
        ),
        ("", ValueError, r"^epilog: unknown epilog name ''; allowed"),
        (12345, ValueError, r"^epilog: unknown value 12345; allowed.*'RELU_BIAS'"),
        (1.0, TypeError, r"^epilog: expected a MatmulEpilog, its name.*got float; allowed names"),
        (True, TypeError, r"^epilog: expected a MatmulEpilog.*got bool"),
        ([E.RELU], TypeError, r"^epilog: expected a MatmulEpilog.*got list"),
        (b"RELU", TypeError, r"^epilog: expected a MatmulEpilog.*got bytes"),
    ],
)
def test_bad_epilog_names_the_argument_and_the_allowed_names(bad, exc, msg):
    a, b, _ = operands()
    with pytest.raises(exc, match=msg):
        matmul(a, b, epilog=bad)
    with Matmul(a, b) as mm:
        with pytest.raises(exc, match=msg):
            mm.plan(epilog=bad)
    with pytest.raises(exc, match=msg):
        _key(a, b, bad)


def test_misspelt_epilog_input_is_named_with_the_keys_the_epilog_takes():
    a, b, bias = operands()
    msg = r"^epilog_inputs: unexpected \['bais'\] for GELU_BIAS \(it takes \['bias'\]; missing \['bias'\]\)"
    with pytest.raises(ValueError, match=msg):
        matmul(a, b, epilog="GELU_BIAS", epilog_inputs={"bais": bias})
    with Matmul(a, b) as mm:
        with pytest.raises(ValueError, match=msg):
            mm.plan(epilog=E.GELU_BIAS, epilog_inputs={"bais": bias})


def test_unknown_and_missing_inputs():
    a, b, bias = operands()
    aux = np.zeros((5, 16), np.uint8)
    # unknown key next to the right one
    with pytest.raises(
        ValueError,
        match=r"^epilog_inputs: unexpected \['gelu_aux'\] for BIAS \(it takes \['bias'\]\)$",
    ):
        matmul(a, b, epilog=E.BIAS, epilog_inputs={"bias": bias, "gelu_aux": a[:, :3]})
    # an epilog that takes none
    with pytest.raises(
        ValueError, match=r"^epilog_inputs: unexpected \['bias'\] for RELU \(it takes none\)$"
    ):
        matmul(a, b, epilog=E.RELU, epilog_inputs={"bias": bias})
    with pytest.raises(
        ValueError, match=r"^epilog_inputs: unexpected \['bias'\] for DEFAULT \(it takes none\)$"
    ):
        matmul(a, b, epilog_inputs={"bias": bias})
    # missing keys only
    with pytest.raises(
        ValueError, match=r"^epilog_inputs: DRELU requires \['relu_aux'\]; missing \['relu_aux'\]$"
    ):
        matmul(a, b, epilog=E.DRELU)
    with pytest.raises(ValueError, match=r"^epilog_inputs: DRELU requires \['relu_aux'\]; missing"):
        matmul(a, b, epilog=E.DRELU, epilog_inputs={})
    # right key: fine
    matmul(a, b, epilog=E.DRELU, epilog_inputs={"relu_aux": aux})
    # a key that is not a str
    with pytest.raises(TypeError, match=r"^epilog_inputs: keys are input names \(str\).*got 1$"):
        matmul(a, b, epilog=E.BIAS, epilog_inputs={"bias": bias, 1: bias})
    with Matmul(a, b) as mm:
        with pytest.raises(TypeError, match=r"^epilog_inputs: keys are input names"):
            mm.plan(epilog=E.BIAS, epilog_inputs={("bias",): bias})


def test_reset_operands_names_the_inputs_the_plan_takes():
    a, b, bias = operands()
    with Matmul(a, b) as mm:
        mm.plan(epilog="bias", epilog_inputs={"bias": bias})
        with pytest.raises(
            ValueError,
            match=r"^epilog_inputs\['bais'\]: not an input of the planned epilog BIAS \(it takes \['bias'\]\)",
        ):
            mm.reset_operands(epilog_inputs={"bais": bias})
