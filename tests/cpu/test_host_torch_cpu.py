# SPDX-License-Identifier: Apache-2.0
"""torch CPU tensors in nvmath_host without torch or a GPU: a stand-in torch module whose
tensors wrap NumPy arrays (``.numpy()`` shares memory, as torch's does) checks the plumbing:
the NumPy views in, torch tensors out (the user's own ``c`` in place), the refusals by name
(mixed packages, the negative bit, a sparse layout), the conjugate bit read as conjugated
values, resets. The real torch runs the same on the GPU machine (tests/gpu/test_host_matmul.py).
"""

import sys
import types

import ml_dtypes
import numpy as np
import pytest

from nvmath_host import Matmul, MatmulEpilog, _gpu, matmul

pytestmark = pytest.mark.filterwarnings("ignore::nvmath_host.CPUExecutionWarning")

_NP = {"float32": np.float32, "float64": np.float64, "complex64": np.complex64, "int16": np.int16,
       "uint8": np.uint8, "bfloat16": ml_dtypes.bfloat16}


class Tensor:
    """A torch CPU tensor look-alike over a NumPy array (no copy)."""

    __module__ = "torch"

    def __init__(self, arr, conj=False, neg=False, layout="torch.strided"):
        self._a, self._conj, self._neg, self.layout = arr, conj, neg, layout
        self.device = types.SimpleNamespace(type="cpu", index=None)
        self.dtype = _DT[str(arr.dtype)]
        self.requires_grad = False

    def __str__(self):
        return f"tensor({self._a})"

    def numpy(self):
        if self._conj or self._neg:
            raise RuntimeError("Can't call numpy() on Tensor that has conjugate or negative bit set")
        if self.dtype.name == "bfloat16":
            raise TypeError("Got unsupported ScalarType BFloat16")
        return self._a

    def view(self, dtype):
        return Tensor(self._a.view(_NP[dtype.name]))

    def detach(self):
        return self

    def is_conj(self):
        return self._conj

    def is_neg(self):
        return self._neg

    def resolve_conj(self):
        return Tensor(np.conj(self._a)) if self._conj else self


class _DType:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


_DT = {n: _DType(n) for n in _NP}


@pytest.fixture(autouse=True)
def fake_torch(monkeypatch):
    mod = types.ModuleType("torch")
    mod.from_numpy = Tensor
    for n, d in _DT.items():
        setattr(mod, n, d)
    monkeypatch.setitem(sys.modules, "torch", mod)
    monkeypatch.setattr(_gpu, "PRETEND", False)
    monkeypatch.setattr(_gpu, "available", lambda: False)  # the CPU path


def _t(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def test_torch_cpu_operands_give_torch_cpu_results():
    a, b = _t((4, 3)), _t((3, 5), seed=1)
    d = matmul(Tensor(a), Tensor(b))
    assert isinstance(d, Tensor) and d.device.type == "cpu"
    np.testing.assert_allclose(d.numpy(), a @ b, rtol=1e-6)
    bias = _t((5,), seed=2)
    d, aux = matmul(Tensor(a), Tensor(b), epilog=MatmulEpilog.RELU_AUX_BIAS, epilog_inputs={"bias": Tensor(bias)})
    assert isinstance(d, Tensor) and isinstance(aux["relu_aux"], Tensor)
    np.testing.assert_allclose(d.numpy(), np.maximum(a @ b + bias, 0), rtol=1e-6)
    # bfloat16: through an int16 view of the same bytes, both ways
    ab, bb = a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)
    d = matmul(Tensor(ab), Tensor(bb))
    assert d.dtype.name == "bfloat16"
    got = d.view(_DT["int16"]).numpy().view(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_allclose(got, ab.astype(np.float64) @ bb.astype(np.float64), rtol=2e-2)


def test_in_place_returns_the_users_tensor_and_a_reset_follows():
    a, b = _t((4, 3)), _t((3, 5), seed=1)
    c = Tensor(_t((4, 5), seed=2))
    c0 = c.numpy().copy()
    with Matmul(Tensor(a), Tensor(b), c, beta=2.0, options={"inplace": True}) as mm:
        mm.plan()
        assert mm.execute() is c
        np.testing.assert_allclose(c.numpy(), a @ b + 2 * c0, rtol=1e-6)
        c2 = Tensor(_t((4, 5), seed=3))
        c20 = c2.numpy().copy()
        mm.reset_operands(c=c2)
        assert mm.execute() is c2
        np.testing.assert_allclose(c2.numpy(), a @ b + 2 * c20, rtol=1e-6)
        with pytest.raises(TypeError, match=r"^c: a numpy array; the operands are torch tensors on cpu$"):
            mm.reset_operands(c=np.zeros((4, 5), np.float32))


def test_the_conjugate_bit_is_read_as_conjugated_values_and_the_negative_bit_refused():
    a, b = _t((4, 3), np.complex64), _t((3, 2), np.complex64, seed=1)
    d = matmul(Tensor(np.conj(a), conj=True), Tensor(b))  # a lazy .conj() of conj(a): shows a
    np.testing.assert_allclose(d.numpy(), a @ b, rtol=1e-5)
    with pytest.raises(ValueError, match=r"^b: a torch tensor with the negative bit set"):
        matmul(Tensor(a), Tensor(b, neg=True))
    with pytest.raises(ValueError, match=r"^c: a torch tensor with the conjugate bit set"):
        matmul(Tensor(a), Tensor(b), Tensor(_t((4, 2), np.complex64), conj=True))


def test_mixed_packages_and_layouts_are_refused_by_name():
    a, b = _t((4, 3)), _t((3, 5))
    with pytest.raises(TypeError, match=r"^b: a numpy array; a is a torch tensor on cpu \(mixing"):
        matmul(Tensor(a), b)
    with pytest.raises(TypeError, match=r"^c: a numpy array; a is a torch tensor on cpu"):
        Matmul(Tensor(a), Tensor(b), np.zeros((4, 5), np.float32))
    with pytest.raises(TypeError, match=r"^b: a torch tensor of layout torch.sparse_coo is not supported"):
        matmul(Tensor(a), Tensor(b, layout="torch.sparse_coo"))
    with pytest.raises(TypeError, match=r"^epilog_inputs\['bias'\]: a numpy array; the operands are torch"):
        matmul(Tensor(a), Tensor(b), epilog="bias", epilog_inputs={"bias": np.zeros(5, np.float32)})


def test_a_cuda_tensor_is_told_apart_by_is_cuda_without_reading_its_device():
    """matmul() asks is_torch_cpu of every call's ``a``: a CUDA tensor answers through
    ``is_cuda`` (its ``device.type`` makes a torch.device and a string, ~0.5 us a read)."""
    from nvmath_host._torch_cpu import is_torch_cpu

    class CudaTensor:
        __module__ = "torch"
        is_cuda = True

        @property
        def device(self):
            raise AssertionError("device read for a CUDA tensor")

    assert not is_torch_cpu(CudaTensor())
    assert is_torch_cpu(Tensor(np.ones(2, np.float32)))  # no is_cuda attribute: its device says cpu
    gpu_like = Tensor(np.ones(2, np.float32))
    gpu_like.is_cuda = False
    gpu_like.device = types.SimpleNamespace(type="meta", index=None)
    assert not is_torch_cpu(gpu_like) and not is_torch_cpu(np.ones(2))
