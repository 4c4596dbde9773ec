# SPDX-License-Identifier: Apache-2.0
"""matmul()'s path for CUDA torch tensors: its cache key is read from the tensors themselves,
and a hit points the cached plan at the new tensors without wrapping them.

No GPU here: the tensors are ``benchmarks/host_overhead.py``'s fake torch tensors, cuBLASLt's
heuristic and handle are faked and ``cublasLtMatmul`` is replaced by a recorder (the
descriptors and layouts are real cuBLASLt objects). Every fake is undone after each test.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from types import SimpleNamespace

import pytest

from mathdx_operands import _packages
from nvmath_host import MatmulEpilog, _cublaslt, _gpu, matmul
from nvmath_host import _function as fn_mod

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RELU_BIAS = MatmulEpilog.RELU_BIAS


def _host_overhead():
    spec = importlib.util.spec_from_file_location(
        "host_overhead_fakes", os.path.join(ROOT, "benchmarks", "host_overhead.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def fakes(monkeypatch):
    """host_overhead.install_fakes(), undone afterwards; records each cublasLtMatmul call's
    (A, B, C, D) pointers in ``fakes.launches`` and counts the Matmuls made."""
    ho = _host_overhead()
    lib = _cublaslt.lib()
    monkeypatch.setitem(_packages._PACKAGES, "torch", None)  # undone: restored or removed
    for obj, name in ((_gpu, "PRETEND"), (_gpu, "handle"), (_gpu, "_DEVICE_COUNT"), (_gpu, "DeviceScope"),
                      (_cublaslt, "heuristic"), (lib, "raw_cublasLtMatmul")):
        monkeypatch.setattr(obj, name, getattr(obj, name))  # recorded, so that undo restores it
    ho.install_fakes()
    ho.launches = []

    def record(handle, desc, alpha, a, a_layout, b, b_layout, beta, c, c_layout, d, *rest):
        ho.launches.append((a, b, c, d))
        return 0

    lib.raw_cublasLtMatmul = record
    made = []
    real = fn_mod.Matmul

    class Counted(real):
        def __init__(self, *args, **kwargs):
            made.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(fn_mod, "Matmul", Counted)
    ho.made = made
    fn_mod.clear_plan_cache()
    yield ho
    fn_mod.clear_plan_cache()


def _cached_plan():
    (entry,) = fn_mod._plans._idle.values()
    (plan,) = entry.plans
    return plan


def test_a_hit_points_the_cached_plan_at_the_new_tensors(fakes):
    a, b, bias = fakes.tensor(64, 32), fakes.tensor(32, 16), fakes.tensor(16)
    d1 = matmul(a, b, epilog=RELU_BIAS, epilog_inputs={"bias": bias})
    assert len(fakes.made) == 1 and fn_mod.plan_cache_info()["size"] == 1
    a2, b2, bias2 = fakes.tensor(64, 32), fakes.tensor(32, 16), fakes.tensor(16)
    d2 = matmul(a2, b2, epilog=RELU_BIAS, epilog_inputs={"bias": bias2})
    assert len(fakes.made) == 1, "a hit must not make a new Matmul"
    assert fn_mod.plan_cache_info()["size"] == 1
    assert d2 is not d1 and d2.shape == (64, 16)
    A, B, C, D = fakes.launches[-1]
    assert {A, B} == {a2.data_ptr(), b2.data_ptr()}  # (cuBLASLt's A and B: ours, maybe swapped)
    assert D == d2.data_ptr()
    plan = _cached_plan()
    ops = plan._problem
    assert ops.a.obj is a2 and ops.b.obj is b2  # the plan holds the latest call's tensors
    assert ops.inputs["bias"].obj is bias2 and ops.inputs["bias"].ptr == bias2.data_ptr()
    # the bias pointer of the descriptor follows (set only when it changed)
    set_calls = []
    real_set = plan._gpu.desc.set_pointer
    plan._gpu.desc.set_pointer = lambda attr, ptr: (set_calls.append(ptr), real_set(attr, ptr))
    matmul(a2, b2, epilog=RELU_BIAS, epilog_inputs={"bias": bias2})
    assert set_calls == []
    bias3 = fakes.tensor(16)
    matmul(a2, b2, epilog=RELU_BIAS, epilog_inputs={"bias": bias3})
    assert set_calls == [bias3.data_ptr()]


def test_c_and_scales_take_the_new_values_on_a_hit(fakes):
    a, b, c = fakes.tensor(8, 8), fakes.tensor(8, 8), fakes.tensor(8, 8)
    matmul(a, b, c, alpha=2.0, beta=0.5)
    c2 = fakes.tensor(8, 8)
    matmul(a, b, c2, alpha=3.0, beta=0.25)
    assert len(fakes.made) == 1
    plan = _cached_plan()
    assert plan._problem.c.obj is c2 and fakes.launches[-1][2] == c2.data_ptr()
    assert (plan.alpha, plan.beta) == (3.0, 0.25)
    assert plan._alpha_buf[0] == 3.0 and plan._beta_buf[0] == 0.25
    # c given vs not, alpha given vs not: other plans
    matmul(a, b, alpha=2.0)
    matmul(a, b)
    assert len(fakes.made) == 3


def _variants(fakes):
    """Tensors each differing from ``fakes.tensor(64, 32)`` in one attribute the key holds."""
    base = fakes.tensor(64, 32)
    other_shape = fakes.tensor(48, 32)
    transposed = fakes.tensor(32, 64).as_strided((64, 32), (1, 64))
    misaligned = fakes.tensor(64, 32)
    misaligned._ptr += 2
    f32 = fakes.FakeTensor((64, 32), (32, 1), fakes.FAKE_TORCH.float32, fakes.DEV0)
    return base, {"shape": other_shape, "strides": transposed, "alignment": misaligned, "dtype": f32}


@pytest.mark.parametrize("what", ["shape", "strides", "alignment", "dtype"])
def test_a_tensor_differing_in_one_attribute_gets_its_own_plan(fakes, what):
    base, variants = _variants(fakes)
    b = fakes.tensor(32, 16)
    matmul(base, b)
    other = variants[what]
    bb = b if what != "dtype" else fakes.FakeTensor((32, 16), (16, 1), fakes.FAKE_TORCH.float32, fakes.DEV0)
    matmul(other, bb)
    assert len(fakes.made) == 2, what
    assert fn_mod.plan_cache_info()["size"] == 2
    A, B, _, _ = fakes.launches[-1]
    assert {A, B} == {other.data_ptr(), bb.data_ptr()}


def test_the_negative_and_conjugate_bits_are_refused_as_on_the_general_path(fakes):
    a, b, bias = fakes.tensor(16, 16), fakes.tensor(16, 16), fakes.tensor(16)
    matmul(a, b, epilog=RELU_BIAS, epilog_inputs={"bias": bias})  # plans: the key is cached

    def flagged(shape, bit):  # same type as a: the torch path reads the bit into its key
        t = fakes.tensor(*shape)
        setattr(t, bit, lambda: True)
        return t

    neg = flagged((16,), "is_neg")
    with pytest.raises(ValueError, match=r"epilog_inputs\['bias'\]: a torch tensor with the negative bit"):
        matmul(a, b, epilog=RELU_BIAS, epilog_inputs={"bias": neg})
    negb = flagged((16, 16), "is_neg")
    with pytest.raises(ValueError, match="b: a torch tensor with the negative bit"):
        matmul(a, negb, epilog=RELU_BIAS, epilog_inputs={"bias": bias})
    conj_c = flagged((16, 16), "is_conj")
    with pytest.raises(ValueError, match="c: a torch tensor with the conjugate bit"):
        matmul(a, b, conj_c)
    assert len(fakes.made) == 1


def test_calls_this_path_does_not_take_still_validate(fakes):
    a, b = fakes.tensor(16, 16), fakes.tensor(16, 16)
    matmul(a, b)
    with pytest.raises(TypeError, match="epilog_inputs: expected a dict"):
        matmul(a, b, epilog=RELU_BIAS, epilog_inputs=[("bias", fakes.tensor(16))])
    with pytest.raises(TypeError, match="b: unsupported operand of type builtins.list"):
        matmul(a, [[1.0]])
    with pytest.raises(ValueError, match="epilog: unknown epilog name .no_such_epilog."):
        matmul(a, b, epilog="no_such_epilog")
    with pytest.raises(TypeError, match="epilog_inputs: keys are input names"):
        matmul(a, b, epilog=RELU_BIAS, epilog_inputs={1: fakes.tensor(16)})
    assert len(fakes.made) == 1


def test_the_stream_is_part_of_the_key(fakes):
    a, b = fakes.tensor(16, 16), fakes.tensor(16, 16)
    matmul(a, b)
    matmul(a, b, stream=fakes.STREAM)  # the current stream, given explicitly: same plan
    assert len(fakes.made) == 1
    # another stream: the result is allocated in its order (a stand-in for torch's)
    fakes.FAKE_TORCH.cuda = SimpleNamespace(ExternalStream=lambda s, device: s,
                                            stream=lambda s: contextlib.nullcontext())
    matmul(a, b, stream=0x7000)
    assert len(fakes.made) == 2
    matmul(fakes.tensor(16, 16), fakes.tensor(16, 16), stream=0x7000)
    matmul(a, b)
    assert len(fakes.made) == 2
