# SPDX-License-Identifier: Apache-2.0
"""common_cuda without a GPU: Dim3 takes positive integers only (nvmath-python's Dim3 is a plain
named tuple that takes anything; a launch with a bad one fails later, far from the mistake), and
current_device_sm() raises DriverError without a GPU outside the simulator (the simulator's
answer is tests/sim/test_nvmath_compat_sm.py's)."""

import pickle

import numpy as np
import pytest

from nvmath_device import Dim3, DriverError, Matmul, common_cuda


def test_positive_integers_are_kept_as_python_ints():
    d = Dim3(np.int64(4), 2)
    assert d == (4, 2, 1) and type(d.x) is int and type(d.y) is int
    assert Dim3() == (1, 1, 1) and Dim3(z=3) == (1, 1, 3)
    assert d._replace(z=5) == Dim3(4, 2, 5) and Dim3._make([2, 3, 4]) == (2, 3, 4)
    assert pickle.loads(pickle.dumps(Dim3(8, 4))) == Dim3(8, 4)


@pytest.mark.parametrize("args, name, got", [
    ((1.0,), "x", "1.0 (float)"), ((4, True), "y", "True (bool)"), ((4, 2, "3"), "z", "'3' (str)"),
    ((None,), "x", "None (NoneType)"), ((np.float32(2),), "x", "(float32)"),
])
def test_non_integers_are_type_errors_naming_the_argument(args, name, got):
    with pytest.raises(TypeError, match=rf"Dim3: {name} must be a positive integer, got .*{got[-12:].replace('(', '[(]').replace(')', '[)]')}"):
        Dim3(*args)


@pytest.mark.parametrize("args, name, value", [((0,), "x", 0), ((4, -1), "y", -1), ((4, 2, 0), "z", 0)])
def test_non_positive_values_are_value_errors_naming_the_argument(args, name, value):
    with pytest.raises(ValueError, match=rf"Dim3: {name} must be a positive integer \(>= 1\), got {value}"):
        Dim3(*args)


def test_replace_validates_too():
    with pytest.raises(ValueError, match=r"Dim3: y must be a positive integer"):
        Dim3(4)._replace(y=0)


def test_a_bad_block_dim_fails_before_any_compiler_runs():
    with pytest.raises(ValueError, match=r"Dim3: x must be a positive integer"):
        Matmul(size=(16, 16, 16), precision=np.float32, data_type="real", block_dim=Dim3(0), sm=90)


def test_current_device_sm_without_a_gpu(monkeypatch):
    def no_gpu():
        raise DriverError("numba-mathdx: cuInit failed (test)")

    monkeypatch.setattr(common_cuda, "get_current_device_cc", no_gpu)
    monkeypatch.setattr(common_cuda, "_no_gpu_sm", None)  # the numba layer: no simulator answer
    with pytest.raises(DriverError, match="cuInit failed"):
        common_cuda.current_device_sm()
    monkeypatch.setattr(common_cuda, "_no_gpu_sm", common_cuda.ComputeCapability(9, 0))
    assert common_cuda.current_device_sm() == common_cuda.ComputeCapability(9, 0)
    monkeypatch.setattr(common_cuda, "get_current_device_cc", lambda: common_cuda.ComputeCapability(8, 6))
    assert common_cuda.current_device_sm() == (8, 6, "")  # a GPU's answer always wins


def test_compute_capability_has_nvmath_pythons_fields():
    """nvmath-python 1.0's ComputeCapability: (major, minor, arch="") with ``integer`` (its
    examples' ``match cc.integer: case 900``) and ``str`` "9.0"; descriptors take it as ``sm=``."""
    CC = common_cuda.ComputeCapability
    cc = CC(9, 0)
    assert (cc.major, cc.minor, cc.arch) == (9, 0, "") and cc == (9, 0, "") and cc != (9, 0)
    assert cc.integer == 900 and CC(8, 6).integer == 860 and CC(12, 1).integer == 1210
    assert str(cc) == "9.0" and str(CC(9, 0, "a")) == "9.0a"
    assert pickle.loads(pickle.dumps(CC(9, 0, "a"))) == CC(9, 0, "a")
    for sm in (CC(9, 0), CC(9, 0, "a"), CC(9, 0, "f"), (9, 0)):
        assert Matmul(size=(16, 16, 16), precision=np.float32, data_type="real", sm=sm).sm == 90
    with pytest.raises(TypeError, match=r"sm must be .*got \(9, 0, 'x'\)"):
        Matmul(size=(16, 16, 16), precision=np.float32, data_type="real", sm=(9, 0, "x"))


def test_descriptor_sm_is_an_int_with_compute_capability_fields():
    """nvmath-python's ``MM.sm`` is a ComputeCapability (its pipeline example passes it to a
    helper matching on ``cc.integer``); ours stays the int 90 and has those fields too."""
    from nvmath_device import FFT

    mm = Matmul(size=(16, 16, 16), precision=np.float32, data_type="real", sm=90)
    fft = FFT(size=64, precision=np.float32, direction="forward", sm=(8, 6))
    for d, want in ((mm, 90), (fft, 86)):
        assert d.sm == want and isinstance(d.sm, int) and hash(d.sm) == hash(want) and f"{d.sm}" == str(want)
        assert (d.sm.major, d.sm.minor, d.sm.arch, d.sm.integer) == (want // 10, want % 10, "", want * 10)
    assert pickle.loads(pickle.dumps(mm.sm)).integer == 900


@pytest.mark.parametrize("args, err, msg", [
    ((9.0, 0), TypeError, "major must be a non-negative integer, got 9.0"),
    ((9, True), TypeError, "minor must be a non-negative integer, got True"),
    ((-1, 0), ValueError, "major must be a non-negative integer, got -1"),
    ((9, 0, "x"), ValueError, "arch must be '', 'a' or 'f', got 'x'"),
])
def test_compute_capability_refuses_bad_fields_naming_them(args, err, msg):
    with pytest.raises(err, match=msg):
        common_cuda.ComputeCapability(*args)
    assert common_cuda.ComputeCapability(np.int64(9), 0)._replace(arch="a") == (9, 0, "a")
    with pytest.raises(ValueError, match="arch must be"):
        common_cuda.ComputeCapability(9, 0)._replace(arch="b")


def test_shared_memory_limit_per_architecture():
    """The opt-in shared memory one block may use (cuBLASDx's device table), by any spelling of
    sm; a bad sm is a ValueError naming it; None without a GPU is the DriverError of
    current_device_sm (not a guess)."""
    assert common_cuda.shared_memory_limit(90) == 227 * 1024 == common_cuda.shared_memory_limit("sm_90")
    assert common_cuda.shared_memory_limit((8, 0)) == 163 * 1024
    assert common_cuda.shared_memory_limit(common_cuda.ComputeCapability(12, 0)) == 99 * 1024
    with pytest.raises(ValueError, match=r"sm=91 is not supported; allowed: 70, "):
        common_cuda.shared_memory_limit(91)


def test_shared_memory_limit_of_the_current_gpu(monkeypatch):
    monkeypatch.setattr(common_cuda, "get_current_device_cc", lambda: common_cuda.ComputeCapability(8, 6))
    assert common_cuda.shared_memory_limit() == 99 * 1024

    def no_gpu():
        raise DriverError("no driver")

    monkeypatch.setattr(common_cuda, "get_current_device_cc", no_gpu)
    monkeypatch.setattr(common_cuda, "_no_gpu_sm", None)
    with pytest.raises(DriverError):
        common_cuda.shared_memory_limit()
