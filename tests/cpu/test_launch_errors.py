# SPDX-License-Identifier: Apache-2.0
"""Driver calls of the launch path with a fake driver (no GPU): failures raise DriverError
naming the call and the driver's error instead of passing quietly; cuCtxGetDevice is never
called without a current context (compute-sanitizer reports that as CUDA_ERROR_INVALID_CONTEXT);
a numba-cuda patch that cannot be applied warns once, saying what no longer works."""

from __future__ import annotations

import enum
import types
import warnings

import pytest

from nvmath_device import MathDxError, common_cuda
from nvmath_device._errors import DriverError
from nvmath_device._numba import _compat, launch


class CUresult(enum.Enum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_INVALID_CONTEXT = 201
    CUDA_ERROR_NOT_SUPPORTED = 801


class FakeLibrary:
    pass


class FakeModule:
    pass


class FakeDriver:
    """Records every call; ``fail`` maps a call name to the error it returns; ``ctx`` is what
    cuCtxGetCurrent returns (0: no context current)."""

    CUresult = CUresult
    CUlibrary = FakeLibrary
    CUmodule = FakeModule
    CUdevice_attribute = types.SimpleNamespace(
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN="optin",
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR="major",
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR="minor")
    CUfunction_attribute = types.SimpleNamespace(
        CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES="static",
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES="maxdyn")

    def __init__(self, ctx=0, fail=None):
        self.ctx, self.fail, self.calls, self.set = ctx, dict(fail or {}), [], {}

    def _r(self, name, *values):
        self.calls.append(name)
        return (self.fail.get(name, CUresult.CUDA_SUCCESS), *values)

    def cuInit(self, flags):
        return self._r("cuInit")

    def cuCtxGetCurrent(self):
        return self._r("cuCtxGetCurrent", self.ctx)

    def cuCtxGetDevice(self):
        # the real driver fails like this without a current context
        err = CUresult.CUDA_SUCCESS if self.ctx else CUresult.CUDA_ERROR_INVALID_CONTEXT
        self.calls.append("cuCtxGetDevice")
        return self.fail.get("cuCtxGetDevice", err), 1

    def cuDeviceGet(self, ordinal):
        return self._r("cuDeviceGet", ordinal)

    def cuDeviceGetAttribute(self, attr, dev):
        return self._r("cuDeviceGetAttribute", {"optin": 232448, "major": 9, "minor": 0}[attr])

    def cuLibraryGetKernelCount(self, lib):
        return self._r("cuLibraryGetKernelCount", 2)

    def cuLibraryEnumerateKernels(self, n, lib):
        return self._r("cuLibraryEnumerateKernels", ["k0", "k1"][:n])

    def cuKernelGetAttribute(self, attr, k, dev):
        return self._r("cuKernelGetAttribute", 1024)

    def cuKernelSetAttribute(self, attr, value, k, dev):
        self.set[k] = (attr, value, dev)
        return self._r("cuKernelSetAttribute")

    def cuKernelGetName(self, k):
        return self._r("cuKernelGetName", f"kernel_{k}".encode())

    def cuModuleGetFunctionCount(self, mod):
        return self._r("cuModuleGetFunctionCount", 1)

    def cuModuleEnumerateFunctions(self, n, mod):
        return self._r("cuModuleEnumerateFunctions", ["f0"])

    def cuFuncGetAttribute(self, attr, f):
        return self._r("cuFuncGetAttribute", 0)

    def cuFuncSetAttribute(self, f, attr, value):
        self.set[f] = (attr, value)
        return self._r("cuFuncSetAttribute")


@pytest.fixture
def fake(monkeypatch):
    def make(**kw):
        import cuda.bindings

        d = FakeDriver(**kw)
        monkeypatch.setattr(cuda.bindings, "driver", d)  # what ``from cuda.bindings import driver`` gets
        return d
    return make


# --- the shared-memory opt-in of every loaded module --------------------------------------

@pytest.mark.parametrize("handle", [FakeLibrary(), FakeModule()])
def test_opt_in_sets_every_kernel(fake, handle):
    d = fake(ctx=7)
    launch.raise_shared_memory_limit(types.SimpleNamespace(handle=handle))
    if isinstance(handle, FakeLibrary):
        assert d.set == {"k0": ("maxdyn", 232448 - 1024, 1), "k1": ("maxdyn", 232448 - 1024, 1)}
    else:
        assert d.set == {"f0": ("maxdyn", 232448)}
    assert "cuCtxGetDevice" in d.calls  # a context is current: its device


@pytest.mark.parametrize("call", ["cuKernelSetAttribute", "cuKernelGetAttribute", "cuDeviceGetAttribute",
                                  "cuLibraryGetKernelCount", "cuLibraryEnumerateKernels", "cuDeviceGet"])
def test_opt_in_driver_failure_raises_naming_the_call(fake, call):
    d = fake(fail={call: CUresult.CUDA_ERROR_NOT_SUPPORTED})
    with pytest.raises(DriverError) as e:  # before: returned quietly, the launch failed later
        launch.raise_shared_memory_limit(types.SimpleNamespace(handle=FakeLibrary()))
    assert isinstance(e.value, MathDxError)
    msg = str(e.value)
    assert "CUDA_ERROR_NOT_SUPPORTED" in msg and "shared memory" in msg
    assert call in msg or (call == "cuDeviceGet" and "cuDeviceGet" in msg), msg
    if call == "cuKernelSetAttribute":
        assert "kernel_k0" in msg and f"{232448 - 1024} bytes" in msg
    assert "cuCtxGetDevice" not in d.calls


def test_opt_in_module_branch_checks_cuFuncSetAttribute(fake):
    fake(ctx=7, fail={"cuFuncSetAttribute": CUresult.CUDA_ERROR_INVALID_VALUE})
    with pytest.raises(DriverError, match="cuFuncSetAttribute.*CUDA_ERROR_INVALID_VALUE"):
        launch.raise_shared_memory_limit(types.SimpleNamespace(handle=FakeModule()))


def test_opt_in_without_a_current_context_never_asks_cuCtxGetDevice(fake):
    d = fake(ctx=0)
    launch.raise_shared_memory_limit(types.SimpleNamespace(handle=FakeLibrary()))
    assert "cuCtxGetDevice" not in d.calls and "cuDeviceGet" in d.calls
    assert set(d.set) == {"k0", "k1"}


# --- the current device's compute capability -----------------------------------------------

@pytest.mark.parametrize("ctx", [0, None])
def test_current_device_cc_without_a_context_uses_device_0(fake, ctx):
    d = fake(ctx=ctx)
    assert common_cuda.current_device_cc.__wrapped__() == (9, 0, "")
    assert "cuCtxGetDevice" not in d.calls, d.calls
    assert d.calls[:3] == ["cuInit", "cuCtxGetCurrent", "cuDeviceGet"]


def test_current_device_cc_with_a_context_uses_its_device(fake):
    d = fake(ctx=5)
    assert common_cuda.current_device_cc.__wrapped__() == (9, 0, "")
    assert "cuCtxGetDevice" in d.calls and "cuDeviceGet" not in d.calls


# --- numba-cuda patches that cannot be applied -----------------------------------------------

def test_cache_pickling_patch_not_applied_warns_once(monkeypatch):
    from numba.cuda.codegen import CUDACodeLibrary

    monkeypatch.setitem(_compat._patched, "cache_pickling", False)
    monkeypatch.setattr(_compat, "_warned", set())
    monkeypatch.setattr(CUDACodeLibrary, "_rebuild", staticmethod(lambda **states: None))  # other shape
    with pytest.warns(RuntimeWarning, match=r"cache=True\) kernels that call an FFT/GEMM will not be cached"):
        assert _compat.install_cache_pickling() is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _compat.install_cache_pickling() is False  # once per process


def test_prune_patch_not_applied_warns_once(monkeypatch):
    from numba.cuda.cudadrv import driver

    monkeypatch.setitem(_compat._patched, "prune_unused_variables", False)
    monkeypatch.setattr(_compat, "_warned", set())
    monkeypatch.delattr(driver._Linker, "_get_linker_options")
    with pytest.warns(RuntimeWarning, match="keep all of cuFFTDx's twiddle tables"):
        assert _compat.install_prune_unused_variables() is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _compat.install_prune_unused_variables() is False


def test_bfloat16_patch_not_applied_warns_once(monkeypatch):
    from numba.cuda import cudaimpl

    monkeypatch.setitem(_compat._patched, "bfloat16_arrays", False)
    monkeypatch.setattr(_compat, "_warned", set())
    monkeypatch.setattr(cudaimpl, "_generic_array", lambda shape, dtype: None)
    with pytest.warns(RuntimeWarning, match="bfloat16 will not compile"):
        assert _compat.install_bfloat16_arrays() is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _compat.install_bfloat16_arrays() is False
