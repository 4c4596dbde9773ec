# SPDX-License-Identifier: Apache-2.0
"""mathdx_operands without a GPU: recognising and reading arrays (NumPy, and stand-ins for CuPy,
torch and Numba arrays through their protocols), dtypes, package adapters, streams, the CUDA
context, and the nvmath_host re-export. Bad inputs raise TypeError/ValueError naming the
argument."""

from __future__ import annotations

import contextlib
import ctypes
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import mathdx_operands as mo
from mathdx_operands import _arrays, _cuda, _dtypes, _packages, _streams


def _cls(module, name="Array", **attrs):
    """A class that looks as if it were defined in ``module``."""
    return type(name, (), {"__module__": module, **attrs})


def _cai(shape, typestr, ptr=0x1000, strides=None):
    return {"shape": shape, "typestr": typestr, "data": (ptr, False), "strides": strides,
            "version": 3}


def fake_cupy(shape=(4, 3), typestr="<f4", ptr=0x1000, strides=None, device=0):
    obj = _cls("cupy._core.core", "ndarray")()
    obj.__cuda_array_interface__ = _cai(shape, typestr, ptr, strides)
    obj.device = SimpleNamespace(id=device)
    obj.shape = shape
    return obj


class TorchDType:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


TorchTensor = _cls("torch", "Tensor")


class TorchDevice:
    def __init__(self, type, index):
        self.type, self.index = type, index

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


def fake_torch(shape=(2, 5), strides=(5, 1), dtype="float32", cuda=True, device=1, ptr=0x2000,
               conj=False, neg=False, requires_grad=False):
    t = TorchTensor()
    t.is_cuda, t.shape, t.dtype = cuda, shape, TorchDType(dtype)
    t.is_conj, t.is_neg, t.requires_grad = (lambda: conj), (lambda: neg), requires_grad
    t.device = TorchDevice("cuda" if cuda else "cpu", device if cuda else None)
    t.data_ptr, t.stride = (lambda: ptr), (lambda: strides)
    t.get_device = lambda: device if cuda else -1  # torch: -1 for a CPU tensor
    return t


# ------------------------------------------------------------------------------------ import


def test_import_pulls_in_no_array_package_and_no_sibling():
    code = (
        "import sys, mathdx_operands; "
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('cupy', 'torch', 'numba', 'nvmath_device', 'nvmath_host', 'kernels', 'cuda')]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_public_names_exist():
    for name in mo.__all__:
        assert getattr(mo, name) is not None, name


# ----------------------------------------------------------------------------- recognising


def test_package_of_goes_by_the_type():
    assert mo.package_of(np.zeros(2)) == "numpy"
    assert mo.package_of(np.zeros(2).view(np.matrix)) == "numpy"
    assert mo.package_of(fake_cupy()) == "cupy"
    assert mo.package_of(fake_torch()) == "torch"
    assert mo.package_of(_cls("numba.cuda.cudadrv.devicearray", "DeviceNDArray")()) == "numba"
    assert mo.package_of([1.0]) is None
    assert mo.package_of(_cls("jax")()) is None


def test_on_device_and_caller_kind():
    generic = _cls("somelib")()
    generic.__cuda_array_interface__ = _cai((3,), "<f4")
    assert not mo.on_device(np.zeros(3))
    assert mo.on_device(fake_cupy()) and mo.on_device(generic)
    assert mo.caller_kind(np.zeros(3)) == "numpy"
    assert mo.caller_kind(fake_cupy()) == "cupy"
    t = fake_torch()
    t.__cuda_array_interface__ = _cai((2, 5), "<f4")
    assert mo.caller_kind(t) == "torch"
    assert mo.caller_kind(generic) == "numba"  # results of unknown GPU arrays: Numba's
    with pytest.raises(TypeError, match="^x must be a NumPy array or a GPU array"):
        mo.caller_kind([1.0], "x")
    with pytest.raises(TypeError, match="^x must be"):  # a CPU tensor has no interface
        mo.caller_kind(fake_torch(cuda=False), "x")


@pytest.mark.parametrize("bit, message", [
    ({"conj": True}, r"^x: a torch tensor with the conjugate bit set \(a lazy \.conj\(\) view\) is not "
                     r"supported: its memory holds the unconjugated values; pass \.resolve_conj\(\) of it$"),
    ({"neg": True}, r"^x: a torch tensor with the negative bit set .* pass \.resolve_neg\(\) of it$"),
    ({"requires_grad": True}, r"^x: a torch tensor that requires grad is not supported \(the call is not "
                              r"recorded for autograd\); pass \.detach\(\) of it$"),
])
def test_torch_views_whose_memory_differs_are_refused_naming_the_argument(bit, message):
    """A lazy conjugate or negation leaves the storage as it was: reading the pointer would give
    other values than the tensor shows. kernels (caller_kind) refuse these and tensors that
    require grad; wrap (nvmath_host) the first two, before reading the pointer."""
    t = fake_torch(dtype="complex64", **bit)
    t.__cuda_array_interface__ = _cai((2, 5), "<c8")
    with pytest.raises(ValueError, match=message):
        mo.caller_kind(t, "x")
    if "requires_grad" in bit:
        assert mo.wrap(t, "x").package == "torch"  # a matmul operand may require grad
    else:
        with pytest.raises(ValueError, match=message):
            mo.wrap(t, "x")
    with pytest.raises(TypeError, match="^x must be a NumPy array or a GPU array"):  # a CPU tensor: as before
        mo.caller_kind(fake_torch(dtype="complex64", cuda=False, **bit), "x")
    if "conj" in bit:  # a reader that applies the conjugation itself takes it, and says so
        op = mo.wrap(t, "x", conj=True)
        assert op.conj and op.signature()[-1] is True
        assert mo.wrap(fake_torch(dtype="complex64"), "x", conj=True).conj is False
    elif "neg" in bit:
        with pytest.raises(ValueError, match=message):
            mo.wrap(t, "x", conj=True)


def test_simulator_arrays_are_device_arrays_under_the_simulator(monkeypatch):
    fake = _cls("numba.cuda.simulator.cudadrv.devicearray", "FakeCUDAArray")()
    monkeypatch.setattr(_arrays, "simulator", lambda: True)
    assert mo.on_device(fake) and mo.caller_kind(fake) == "numba"
    monkeypatch.setattr(_arrays, "simulator", lambda: False)
    assert not mo.on_device(fake)


# ----------------------------------------------------------------------------------- wrap


def test_wrap_numpy_reads_strides_in_elements():
    a = np.zeros((4, 6), np.float32)[:, ::2]
    op = mo.wrap(a, "a")
    assert (op.package, op.shape, op.strides, op.dtype.name, op.device) == (
        "numpy", (4, 3), (6, 2), "float32", None)
    assert op.ptr == a.ctypes.data and op.obj is a and op.ndim == 2
    assert op.signature() == ("numpy", (4, 3), (6, 2), "float32", None, False)


def test_wrap_cupy_through_the_interface():
    op = mo.wrap(fake_cupy((4, 3), "<c8", ptr=0x5000, device=2), "b")
    assert (op.package, op.ptr, op.shape, op.strides, op.dtype.name, op.device) == (
        "cupy", 0x5000, (4, 3), (3, 1), "complex64", 2)
    op = mo.wrap(fake_cupy((4, 3), "<f8", strides=(8, 32)), "b")  # F order
    assert op.strides == (1, 4)


def test_wrap_numba_asks_the_pointers_device(monkeypatch):
    d = _cls("numba.cuda.cudadrv.devicearray", "DeviceNDArray")()
    d.__cuda_array_interface__ = _cai((5,), "<f4", ptr=0x7000)
    monkeypatch.setattr(_arrays, "pointer_device", lambda ptr: {0x7000: 3}[ptr])
    op = mo.wrap(d, "c")
    assert (op.package, op.device, op.strides) == ("numba", 3, (1,))


def test_wrap_torch_by_attributes_bfloat16_included():
    op = mo.wrap(fake_torch(dtype="bfloat16", device=1, ptr=0x9000), "a")
    assert (op.package, op.ptr, op.shape, op.strides, op.dtype.name, op.device) == (
        "torch", 0x9000, (2, 5), (5, 1), "bfloat16", 1)
    assert op.dtype is mo.DTYPES["bfloat16"] and op.dtype.cuda == 14


@pytest.mark.parametrize(
    "obj,exc,match",
    [
        ([1.0], TypeError, r"^a: unsupported operand of type builtins.list; supported"),
        (SimpleNamespace(__dlpack__=lambda: None), TypeError, r"^a: .*\(it has __dlpack__\)"),
        (fake_torch(cuda=False), TypeError, "^a: a torch tensor on cpu is not supported"),
        (fake_torch(dtype="complex32"), ValueError, "^a: unsupported dtype 'complex32'"),
        (np.zeros(3, np.int32), ValueError, "^a: unsupported dtype 'int32'; supported: float16"),
        (np.zeros(3, ">f4"), ValueError, "^a: dtype '>f4' is not in the machine's byte order"),
        (fake_cupy((4,), "<f4", strides=(6,)), ValueError, "^a: stride 6 bytes"),
    ],
)
def test_wrap_refuses_naming_the_argument(obj, exc, match):
    with pytest.raises(exc, match=match):
        mo.wrap(obj, "a")


def test_unknown_cuda_array_is_named_with_its_protocol():
    x = _cls("somelib", "Buf")()
    x.__cuda_array_interface__ = _cai((3,), "<f4")
    with pytest.raises(TypeError, match=r"^bias: unsupported operand of type somelib.Buf "
                                        r"\(it has __cuda_array_interface__\)"):
        mo.wrap(x, "bias")


def test_layout_helpers():
    assert mo.c_strides((2, 3, 4)) == (12, 4, 1) and mo.c_strides((0, 3)) == (3, 1)
    a = np.arange(12, dtype=np.float32).reshape(3, 4).T  # F order stays F order
    flat, strides = mo.memory_order_bytes(a)
    assert strides == (1, 4) and flat.dtype == np.uint8 and flat.size == a.nbytes
    view = np.lib.stride_tricks.as_strided(flat.view(np.float32), a.shape, (4, 16))
    np.testing.assert_array_equal(view, a)
    h = mo.host_array(mo.DTYPES["float64"], (2, 3), (1, 2), 6)
    assert h.shape == (2, 3) and h.strides == (8, 16)


# ---------------------------------------------------------------------------------- dtypes


def test_dtype_table():
    assert mo.dtype_of_name("float16", "x").itemsize == 2
    with pytest.raises(ValueError, match="^result_type: unsupported dtype 'int8'"):
        mo.dtype_of_name("int8", "result_type")
    assert mo.DTYPES["complex128"].storage == np.complex128
    assert mo.DTYPES["bfloat16"].storage == np.uint16
    assert mo.DTYPES["float8_e5m2"].storage == np.uint8 and mo.UINT8.kind == "u"
    assert mo.numpy_dtype(mo.UINT8) == np.uint8
    assert mo.dtype_from_numpy(np.dtype("float32"), "x") is mo.DTYPES["float32"]


def test_bfloat16_through_ml_dtypes():
    ml = pytest.importorskip("ml_dtypes")
    assert mo.numpy_dtype(mo.DTYPES["bfloat16"]) == ml.bfloat16
    assert mo.dtype_from_numpy(np.dtype(ml.bfloat16), "a") is mo.DTYPES["bfloat16"]
    assert mo.numpy_dtype_of_torch(TorchDType("float8_e4m3fn")) == ml.float8_e4m3fn


def test_torch_dtype_mapping(monkeypatch):
    assert mo.torch_dtype_name(TorchDType("complex64")) == "complex64"
    assert mo.numpy_dtype_of_torch(TorchDType("float32")) == np.float32
    assert mo.numpy_dtype_of_torch(TorchDType("int32")) == np.int32
    assert mo.numpy_dtype_of_torch(TorchDType("qint8")) is None  # quantized: torch only

    class dtype:  # noqa: N801 - torch's dtype class is called "dtype"
        def __init__(self, name):
            self.name = name

    fake = SimpleNamespace(float32=dtype("float32"), int32=dtype("int32"),
                           bfloat16=dtype("bfloat16"), Tensor=object)
    monkeypatch.setattr(_dtypes, "_TO_TORCH", {})
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert mo.torch_dtype(np.float32) is fake.float32
    assert mo.torch_dtype(np.dtype(np.int32)) is fake.int32
    assert mo.torch_dtype(mo.DTYPES["bfloat16"]) is fake.bfloat16
    with pytest.raises(TypeError, match="^out: torch has no dtype 'float16'"):
        mo.torch_dtype("float16", "out")
    with pytest.raises(TypeError, match="torch has no dtype 'Tensor'"):  # not a dtype
        mo.torch_dtype(mo.DType("Tensor", 0, 1, "f"), "out")


# --------------------------------------------------------------------------------- streams


def test_stream_handle_reads_every_kind_of_stream():
    h = mo.stream_handle
    assert h(0) == 0 and h(1234) == 1234
    assert h(SimpleNamespace(__cuda_stream__=lambda: (0, 77))) == 77
    assert h(SimpleNamespace(__cuda_stream__=(0, 78))) == 78  # an attribute, too
    assert h(SimpleNamespace(ptr=88)) == 88  # CuPy
    assert h(SimpleNamespace(cuda_stream=99)) == 99  # torch
    assert h(SimpleNamespace(handle=ctypes.c_void_p(111))) == 111  # Numba
    assert h(SimpleNamespace(handle=ctypes.c_void_p(None))) == 0


@pytest.mark.parametrize("bad", [True, False, 1.5, "fast", None, SimpleNamespace(ptr=True)])
def test_stream_handle_refuses_naming_the_argument(bad):
    with pytest.raises(TypeError, match="^ws_stream: expected an int handle"):
        mo.stream_handle(bad, "ws_stream")


class NumbaStream:
    __module__ = "numba.cuda.cudadrv.driver"

    def __init__(self, h):
        self.handle = ctypes.c_void_p(h)


@pytest.fixture
def on_gpu(monkeypatch):
    """resolve_stream as on a GPU; current streams come from a table."""
    monkeypatch.setattr(_streams, "simulator", lambda: False)
    asked = []

    def current(pkg, device=None):
        asked.append((pkg, device))
        return {"cupy": 0x10, "torch": 0x20}[pkg]

    monkeypatch.setattr(_streams, "current_stream", current)
    return asked


def test_resolve_stream_given(on_gpu):
    s = mo.resolve_stream(42)
    assert isinstance(s, mo.Stream) and s.handle == 42 and s._numba is None
    assert mo.resolve_stream(SimpleNamespace(__cuda_stream__=lambda: (0, 7))).handle == 7
    assert mo.resolve_stream(SimpleNamespace(ptr=8)).handle == 8
    ns = NumbaStream(9)
    s = mo.resolve_stream(ns)
    assert s.handle == 9 and s.numba is ns  # the caller's Numba stream object is kept
    assert on_gpu == []


def test_resolve_stream_none_is_the_packages_current_stream(on_gpu):
    assert mo.resolve_stream(None, "cupy").handle == 0x10
    op = mo.wrap(fake_torch(device=3), "a")
    assert mo.resolve_stream(None, op).handle == 0x20
    like = SimpleNamespace(package="torch")  # no device: the current one
    assert mo.resolve_stream(None, like).handle == 0x20
    assert on_gpu == [("cupy", None), ("torch", 3), ("torch", None)]


@pytest.mark.parametrize("sim", [False, True])
@pytest.mark.parametrize("bad", [True, 1.5, "fast", object()])
def test_resolve_stream_refuses(on_gpu, monkeypatch, sim, bad):
    monkeypatch.setattr(_streams, "simulator", lambda: sim)
    with pytest.raises(TypeError, match=r"^stream must be None, a Numba/CuPy/PyTorch stream"):
        mo.resolve_stream(bad)


def test_resolve_stream_under_the_simulator_is_stream_zero(monkeypatch):
    monkeypatch.setattr(_streams, "simulator", lambda: True)
    for s in (None, 5, NumbaStream(3), SimpleNamespace(__cuda_stream__=lambda: (0, 1))):
        assert mo.resolve_stream(s).handle == 0
    assert mo.Stream(0).numba == 0  # no numba stream object simulated
    mo.Stream(0).synchronize()  # no-op


def test_stream_object():
    s = mo.Stream(0x2A)
    assert s.handle == 42 and repr(s) == "Stream(0x2a)"
    ns = NumbaStream(1)
    assert mo.Stream(1, ns).numba is ns


# -------------------------------------------------------------------------------- packages


class FakeCupy:
    """What _CuPy uses of CuPy: the current stream, Stream.from_external, empty."""

    def __init__(self):
        self.current, self.made, self.entered = 0x10, [], []
        fake = self

        class Stream:
            def __init__(self, h):
                self.h = h
                fake.made.append(h)

            @classmethod
            def from_external(cls, obj):  # CuPy 14: only stream-protocol objects
                version, handle = obj.__cuda_stream__()
                return cls(handle)

            def __enter__(self):
                fake.entered.append(self.h)

            def __exit__(self, *exc):
                fake.entered.append(None)

        self.cuda = SimpleNamespace(
            Stream=Stream,
            get_current_stream=lambda: SimpleNamespace(ptr=self.current),
        )

    def empty(self, shape, dtype):
        return ("cupy-array", shape, np.dtype(dtype), self.entered[-1] if self.entered else None)


@pytest.fixture
def cupy_pkg(monkeypatch):
    pkg = object.__new__(_packages._CuPy)
    pkg.cp, pkg._ext = FakeCupy(), {}
    monkeypatch.setitem(_packages._PACKAGES, "cupy", pkg)
    return pkg


def test_results_of_the_callers_kind_on_the_callers_stream(cupy_pkg):
    assert mo.current_stream("cupy") == 0x10 and mo.current_stream("numpy") == 0x10
    out = mo.device_empty("cupy", (2, 3), np.float32, mo.Stream(0x10))  # current: no switch
    assert out == ("cupy-array", (2, 3), np.float32, None)
    out = mo.device_empty("cupy", (4,), np.int32, mo.Stream(0x99))
    assert out == ("cupy-array", (4,), np.int32, 0x99)
    mo.device_empty("cupy", (4,), np.int32, mo.Stream(0x99))
    assert cupy_pkg.cp.made == [0x99]  # one CuPy stream per handle


def test_cupy_stream_wraps_a_raw_handle_without_cupy_deprecation():
    """CuPy 14 deprecates ExternalStream: raw handles reach CuPy through the stream protocol
    (no GPU needed to make one)."""
    import warnings

    cupy = pytest.importorskip("cupy")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = mo.cupy_stream(cupy, 0x1234)
    assert s.ptr == 0x1234 and s.device_id == -1
    assert mo.stream_handle(mo.StreamProtocol(0x55)) == 0x55


def test_cupy_allocator_passes_strides_only_where_not_c_order(cupy_pkg):
    """The allocator a plan (and Matmul.execute) makes once: C-order results leave the strides to
    CuPy's default (the cheaper constructor call), others pass their byte strides; each call
    allocates the layout's bytes on the given stream."""
    cp = cupy_pkg.cp
    allocs, arrays = [], []

    def alloc(nbytes):
        allocs.append((nbytes, cp.entered[-1] if cp.entered else None))
        return f"mem{len(allocs)}"

    def ndarray(shape, dtype, memptr, **kw):
        arrays.append((shape, np.dtype(dtype), memptr, kw))
        return arrays[-1]

    cp.cuda.alloc, cp.ndarray = alloc, ndarray
    f32 = mo.DTYPES["float32"]
    c_order = cupy_pkg.allocator(f32, (4, 3), (3, 1), 12, 0)
    f_order = cupy_pkg.allocator(f32, (4, 3), (1, 4), 12, 0)
    empty = cupy_pkg.allocator(f32, (0, 3), (3, 1), 0, 0)
    assert c_order(0x10)[3] == {} and allocs == [(48, None)]
    assert f_order(0x99)[3] == {"strides": (4, 16)} and allocs[-1] == (48, 0x99)
    assert empty(0x10)[3] == {"strides": (12, 4)} and allocs[-1] == (4, None)  # no extent: as given
    assert [a[:3] for a in arrays] == [((4, 3), np.float32, "mem1"), ((4, 3), np.float32, "mem2"),
                                       ((0, 3), np.float32, "mem3")]


def test_numpy_callers_results_are_staged_in_numba_arrays(monkeypatch):
    made = []
    fake = SimpleNamespace(new=lambda shape, dtype, stream: made.append((shape, stream.handle)))
    monkeypatch.setitem(_packages._PACKAGES, "numba", fake)
    mo.device_empty("numpy", (3,), np.float64, mo.Stream(5))
    assert made == [((3,), 5)]


def test_torch_current_stream_with_and_without_a_device():
    pkg = object.__new__(_packages._Torch)
    pkg._raw_stream = lambda device: 0x100 + device
    pkg.torch = SimpleNamespace(
        cuda=SimpleNamespace(current_stream=lambda: SimpleNamespace(cuda_stream=0x77))
    )
    assert pkg.current_stream(2) == 0x102 and pkg.current_stream() == 0x77
    assert pkg.current_stream_getter()(1) == 0x101


def test_torch_allocator_makes_dense_results_from_a_template_of_the_dtype_and_device():
    """A plan's torch allocator makes a one-element tensor of the result's dtype and device once;
    dense results on the current stream are its new_empty_strided (two arguments to parse, not
    four); another stream allocates under torch's stream context, padded results as before."""
    calls = []

    class Tensor:
        def __init__(self, shape, strides, dtype, device):
            self.shape, self.strides, self.dtype, self.device = shape, strides, dtype, device

        def new_empty_strided(self, shape, strides):
            calls.append(("template", shape, strides))
            return Tensor(shape, strides, self.dtype, self.device)

        def as_strided(self, shape, strides):
            return Tensor(shape, strides, self.dtype, self.device)

    def empty(shape, dtype, device):
        calls.append(("empty", shape))
        return Tensor(shape, (1,), dtype, device)

    def empty_strided(shape, strides, dtype, device):
        calls.append(("empty_strided", shape, strides))
        return Tensor(shape, strides, dtype, device)

    entered = []
    torch = SimpleNamespace(
        float32="f32", empty=empty, empty_strided=empty_strided, device=lambda kind, i: (kind, i),
        cuda=SimpleNamespace(ExternalStream=lambda s, device: s,
                             stream=lambda s: contextlib.nullcontext(entered.append(s))),
    )
    pkg = object.__new__(_packages._Torch)
    pkg.torch, pkg._raw_stream = torch, lambda device: 0x10
    pkg._ext, pkg._dtypes, pkg._devices = {}, {}, {}
    f32 = mo.dtype_of_name("float32", "x")
    alloc = pkg.allocator(f32, (4, 3), (1, 4), 12, 1)
    assert calls == [("empty", (1,))]  # the template, once
    d = alloc(0x10, True)
    assert (d.shape, d.strides, d.dtype, d.device) == ((4, 3), (1, 4), "f32", ("cuda", 1))
    alloc(0x10)  # the current stream, found by handle
    assert calls[1:] == [("template", (4, 3), (1, 4))] * 2 and entered == []
    alloc(0x99)  # another stream: in its order, by torch's stream context
    assert entered == [0x99] and calls[-1] == ("empty_strided", (4, 3), (1, 4))
    padded = pkg.allocator(f32, (4, 3), (1, 8), 28, 1)(0x10, True)
    assert calls[-1] == ("empty", 28) and padded.strides == (1, 8)


def test_unknown_package_is_refused():
    with pytest.raises(ValueError, match="^package: 'jax' is not one of"):
        mo.package("jax")


# -------------------------------------------------------------------------------------- CUDA


def test_current_context(monkeypatch):
    monkeypatch.setattr(_cuda, "_driver_module", None)
    monkeypatch.setattr(_cuda, "simulator", lambda: True)
    assert mo.current_context() == 0 and mo.ensure_context() == 0
    ok, bad = object(), object()
    drv = SimpleNamespace(cuCtxGetCurrent=lambda: (ok, 0xC0))
    monkeypatch.setattr(_cuda, "_driver_module", drv)
    monkeypatch.setattr(_cuda, "_SUCCESS", ok)
    assert mo.current_context() == 0xC0
    drv.cuCtxGetCurrent = lambda: (bad, None)
    assert mo.current_context() == 0


def test_gpu_available_never_raises(monkeypatch):
    def broken():
        raise ImportError("no runtime")

    monkeypatch.setattr(_cuda, "_GPU", None)
    monkeypatch.setattr(_cuda, "_runtime", broken)
    assert mo.gpu_available() is False
    assert mo.gpu_available() is False  # cached


def test_simulator_switch_is_read_from_the_environment():
    code = "import mathdx_operands as m; print(m.simulator())"
    for value, want in (("1", "True"), ("0", "False"), ("", "False")):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**__import__("os").environ, "NUMBA_ENABLE_CUDASIM": value})
        assert r.stdout.strip() == want, r.stderr


# ------------------------------------------------------------------- the nvmath_host re-export


def test_nvmath_host_uses_the_shared_layer(monkeypatch):
    """nvmath_host has no operand layer of its own: its modules take mathdx_operands' names,
    and its GPU switch (what tests pretend) is one attribute of nvmath_host._gpu."""
    import importlib.util

    from nvmath_host import _gpu, _plan, _wrap

    assert importlib.util.find_spec("nvmath_host._operands") is None
    assert _wrap.wrap is mo.wrap and _plan.Operand is mo.Operand
    monkeypatch.setattr(_gpu, "PRETEND", True)
    assert _gpu.available() is True
    monkeypatch.setattr(_gpu, "PRETEND", False)
    assert _gpu.available() is False
