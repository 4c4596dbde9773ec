# SPDX-License-Identifier: Apache-2.0
"""CPU execution of every epilog (NumPy operands, no GPU) against explicit NumPy formulas."""

import math
import warnings

import numpy as np
import pytest

from nvmath_host import CPUExecutionWarning, Matmul, MatmulEpilog, _gpu, matmul
from nvmath_host.epilogs import EPILOGS, dgelu, gelu

pytestmark = pytest.mark.filterwarnings("ignore::nvmath_host.CPUExecutionWarning")

E = MatmulEpilog
RNG = np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _cpu_only(monkeypatch):
    monkeypatch.setattr(_gpu, "PRETEND", False)


def _rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def _gelu_explicit(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _bit(aux, m, n):
    """Bit of D[m, n] in a C-order relu_aux, read byte by byte."""
    return (int(aux[m, n // 8]) >> (n % 8)) & 1


M, K, N = 7, 5, 19


@pytest.mark.parametrize("epilog", list(E))
def test_every_epilog_against_formula(epilog):
    a, b = _rand(M, K), _rand(K, N)
    if epilog == E.BGRADA:  # cuBLASLt's restriction: a column-major a
        a = np.asfortranarray(a)
    c = _rand(M, N)
    bias = _rand(N)
    alpha, beta = 0.75, -1.25
    x = alpha * (a @ b) + beta * c
    spec = EPILOGS[epilog]
    inputs = {}
    if spec.bias:
        inputs["bias"] = bias
        x = x + bias[None, :]
    mask_in = None
    if spec.gradient == "drelu":
        mask_in = RNG.random((M, N)) > 0.5
        aux = np.zeros((M, 16 * math.ceil(N / 128)), np.uint8)
        for m in range(M):
            for n in range(N):
                aux[m, n // 8] |= int(mask_in[m, n]) << (n % 8)
        inputs["relu_aux"] = aux
    if spec.gradient == "dgelu":
        # cuBLASLt's rule: the leading dimension of gelu_aux is a multiple of 8
        g = _rand(M, 24)[:, :N]
        inputs["gelu_aux"] = g
    got = matmul(a, b, c, alpha=alpha, beta=beta, epilog=epilog, epilog_inputs=inputs)
    d, outs = got if spec.outputs else (got, {})
    assert set(outs) == set(spec.outputs)
    if spec.activation == "relu":
        want = np.where(x > 0, x, 0.0)
    elif spec.activation == "gelu":
        want = _gelu_explicit(x)
    elif spec.gradient == "drelu":
        want = x * mask_in
    elif spec.gradient == "dgelu":
        h = 1e-6
        want = x * (_gelu_explicit(g + h) - _gelu_explicit(g - h)) / (2 * h)
    else:
        want = x
    np.testing.assert_allclose(d, want, rtol=1e-7, atol=1e-7)
    if spec.aux_output == "relu_aux":
        aux = outs["relu_aux"]
        assert aux.dtype == np.uint8 and aux.shape == (M, 16)
        for m in range(M):
            for n in range(N):
                assert _bit(aux, m, n) == int(x[m, n] > 0)
        assert not aux[:, math.ceil(N / 8) :].any()  # padding
    if spec.aux_output == "gelu_aux":
        np.testing.assert_allclose(outs["gelu_aux"], x, rtol=1e-12)
        assert outs["gelu_aux"].strides == (24 * 8, 8)  # ld padded to 24 = 8 * ceil(19 / 8)
    if spec.bgrad == "d":
        np.testing.assert_allclose(outs["bgrad"], np.sum(d, axis=0), rtol=1e-10)
    elif spec.bgrad == "a":
        np.testing.assert_allclose(outs["bgrad"], [a[m, :].sum() for m in range(M)])
    elif spec.bgrad == "b":
        np.testing.assert_allclose(outs["bgrad"], [b[:, n].sum() for n in range(N)])


def test_gelu_helpers():
    x = np.linspace(-6, 6, 101)
    np.testing.assert_allclose(gelu(x), _gelu_explicit(x))
    h = 1e-6
    np.testing.assert_allclose(dgelu(x), (gelu(x + h) - gelu(x - h)) / (2 * h), atol=1e-8)


def test_column_bias_gives_f_order_and_packs_mask_along_m():
    a, b = _rand(M, K), _rand(K, N)
    bias = _rand(M, 1)
    d, outs = matmul(a, b, epilog=E.RELU_AUX_BIAS, epilog_inputs={"bias": bias})
    x = a @ b + bias
    np.testing.assert_allclose(d, np.maximum(x, 0), rtol=1e-12)
    assert d.flags.f_contiguous
    aux = outs["relu_aux"]
    assert aux.shape == (16, N) and aux.flags.f_contiguous
    for m in range(M):
        for n in range(N):
            assert (int(aux[m // 8, n]) >> (m % 8)) & 1 == int(x[m, n] > 0)
    # and DRELU_BGRAD in that order reduces over the columns, shape (M, 1)
    g = _rand(M, K)
    dd, o2 = matmul(g, b, epilog=E.DRELU_BGRAD, epilog_inputs={"relu_aux": aux})
    np.testing.assert_allclose(dd, (g @ b) * (x > 0), rtol=1e-12)
    np.testing.assert_allclose(o2["bgrad"], dd.sum(axis=1, keepdims=True), rtol=1e-12)


def test_forward_backward_chain():
    """RELU_AUX_BIAS's aux feeds DRELU; GELU_AUX_BIAS's feeds DGELU."""
    a, b, bias = _rand(M, K), _rand(K, N), _rand(N)
    _, outs = matmul(a, b, epilog=E.RELU_AUX_BIAS, epilog_inputs={"bias": bias})
    dy = _rand(M, K)
    d = matmul(dy, b, epilog=E.DRELU, epilog_inputs={"relu_aux": outs["relu_aux"]})
    np.testing.assert_allclose(d, (dy @ b) * ((a @ b + bias) > 0), rtol=1e-12)
    _, outs = matmul(a, b, epilog=E.GELU_AUX_BIAS, epilog_inputs={"bias": bias})
    d = matmul(dy, b, epilog=E.DGELU, epilog_inputs={"gelu_aux": outs["gelu_aux"]})
    np.testing.assert_allclose(d, (dy @ b) * dgelu(a @ b + bias), rtol=1e-10)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.complex64, np.complex128])
def test_dtypes_and_layouts(dtype):
    a = _rand(3, M, K).astype(dtype)
    b = np.asfortranarray(_rand(K, N)).astype(dtype)  # broadcast over the batch
    if np.dtype(dtype).kind == "c":
        a = a + 1j * _rand(3, M, K).astype(dtype)
    d = matmul(a, b.T.T)
    assert d.dtype == dtype and d.shape == (3, M, N)
    want = np.matmul(a.astype(np.complex128), b.astype(np.complex128))
    tol = 1e-2 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(d, want, rtol=tol, atol=tol)


def test_batched_bias_and_transposed_views():
    a = _rand(2, K, M).swapaxes(-1, -2)  # transposed view: F-ordered matrices
    b = _rand(2, N, K).swapaxes(-1, -2)
    bias = _rand(2, 1, N)
    d, outs = matmul(a, b, epilog=E.GELU_AUX_BIAS, epilog_inputs={"bias": bias})
    x = a @ b + bias
    np.testing.assert_allclose(d, _gelu_explicit(x), rtol=1e-12)
    np.testing.assert_allclose(outs["gelu_aux"], x, rtol=1e-12)


def test_inplace_and_stateful_reset():
    a, b = _rand(M, K), _rand(K, N)
    c = _rand(M, N)
    c0 = c.copy()
    with Matmul(a, b, c, beta=2.0, options={"inplace": True}) as mm:
        mm.plan()
        d = mm.execute()
        assert d is c
        np.testing.assert_allclose(c, a @ b + 2.0 * c0, rtol=1e-12)
        a2 = _rand(M, K)
        mm.reset_operands(a=a2, alpha=3.0)
        c1 = c.copy()
        mm.execute()
        np.testing.assert_allclose(c, 3.0 * (a2 @ b) + 2.0 * c1, rtol=1e-12)


def test_one_cpu_warning():
    a, b = _rand(M, K), _rand(K, N)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        Matmul(a, b)
    assert [x.category for x in w] == [CPUExecutionWarning]
    assert "CPU" in str(w[0].message)
    assert w[0].filename == __file__  # points at the caller


def test_amax_option_rejected_without_fp8():
    with pytest.raises(ValueError, match="options.result_amax"):
        Matmul(_rand(M, K), _rand(K, N), options={"result_amax": True})
