# SPDX-License-Identifier: Apache-2.0
"""kernels.plan's replay without a GPU: a recorded call (fake launches and allocations) is turned
into relaunches whose array pointers are patched for each call's inputs and fresh results, while
constants keep theirs; each way a call's array can differ from the planned one is refused, named."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from numba.core import types

from kernels import _launch, _plan
from kernels._arrays import DevArray


class Dev:
    """A device array as a package would expose it (only ``__cuda_array_interface__``)."""

    def __init__(self, ptr, shape, dtype=np.float32):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.__cuda_array_interface__ = {"shape": self.shape, "typestr": self.dtype.str, "data": (ptr, False),
                                         "strides": None, "version": 3}

    def reshape(self, shape):
        return Dev(self.__cuda_array_interface__["data"][0], shape, self.dtype)


class FakeLauncher:
    def __init__(self, argtypes, driver=None):
        self.argtypes, self.calls = argtypes, []
        if driver is not None:  # a real launcher's driver module and CUfunction: its launches can be a graph
            self.driver, self.handle = driver, driver.CUfunction()

    def launch_params(self, grid, block, stream, smem, params):
        """What the driver would read: the parameters as packed in ``params`` at launch."""
        self.calls.append((grid, block, stream, smem, list(params.struct.unpack_from(params.buf))))


class FakeOutput:
    """Output's recorded fields; at a call, kernels._plan.Output makes new ones at new addresses."""

    next_ptr = 0x7000000

    def __init__(self, shape, dtype, like, stream, ptr=None):
        if ptr is None:
            ptr, FakeOutput.next_ptr = FakeOutput.next_ptr, FakeOutput.next_ptr + 0x100000
        self.like, self.obj = like, Dev(ptr, shape, dtype)
        self.dev = DevArray(ptr, shape, dtype, self.obj)


A2 = types.Array(types.float32, 2, "C")
A1 = types.Array(types.complex64, 1, "C")


def _planning(monkeypatch):
    """A context (42), no simulator, fake Outputs; the planned x (0x1000, 4 x 64 float32) and its
    Operand's fields (numba: results made through Output)."""
    monkeypatch.setattr(_plan, "current_context", lambda: 42)
    monkeypatch.setattr(_plan, "simulator", lambda: False)
    monkeypatch.setattr(_plan, "Output", FakeOutput)
    x = Dev(0x1000, (4, 64))
    return x, SimpleNamespace(package="numba", obj=x)


def _recorded_plan(monkeypatch, driver=None):
    """A plan of a call on x (0x1000, 4 x 64 float32) that launched two kernels: a copy of x's
    rows 1.. into a scratch buffer, then a kernel reading the scratch and a constant spectrum and
    writing the result (allocated by the call, returned reshaped to (256,)). With ``driver``, the
    launchers hold its CUfunctions (so the plan makes a graph where ``_launch.GRAPHS`` says so)."""
    x, like = _planning(monkeypatch)
    scratch = FakeOutput((3, 64), np.float32, like, None, ptr=0x5000)
    result = FakeOutput((4, 64), np.float32, like, None, ptr=0x9000)
    spec = DevArray(0x3000, (33,), np.complex64, "spectrum owner")
    copy, main = FakeLauncher((A2, A2), driver), FakeLauncher((A2, A1, A2, types.int64, types.complex64), driver)
    rec = _plan._Recording()
    rec.outputs = [scratch, result]
    xrows = DevArray(0x1000 + 64 * 4, (3, 64), np.float32, x)  # a view of rows 1..3 of x
    rec.launches = [(copy, (3, 1, 1), (64, 1, 1), 5, 0, (xrows, scratch.dev)),
                    (main, (2, 1, 1), (128, 1, 1), 5, 1024, (scratch.dev, spec, result.dev, 7, 1 + 2j))]
    return _built(rec, x, result.obj.reshape((256,))), copy, main


def _built(rec, x, returned):
    """The plan of a call on ``x`` alone, built from the recording ``rec`` of a call that returned
    ``returned``."""
    p = _plan.Plan.__new__(_plan.Plan)
    p.fn, p.names, p.stream = (lambda: None), ["x"], "stream"
    p._set_planned([x])
    p._lock = _plan.threading.Lock()
    p.replayed = True
    p._build(rec, [x], returned)
    return p


def test_a_call_patches_inputs_and_results_and_keeps_constants(monkeypatch):
    p, copy, main = _recorded_plan(monkeypatch)
    x2 = Dev(0x20000, (4, 64))
    y = p(x2)
    assert y.shape == (256,)
    new_result = y.__cuda_array_interface__["data"][0]
    assert new_result not in (0x9000, 0x5000)
    (grid, block, stream, smem, v), = copy.calls
    assert (grid, block, stream, smem) == ((3, 1, 1), (64, 1, 1), 5, 0)
    # array slots: meminfo, parent, size, itemsize, data, shape..., strides...
    assert v[:9] == [0, 0, 192, 4, 0x20000 + 256, 3, 64, 256, 4]  # x's rows 1.. at the new x
    assert v[9:14] == [0, 0, 192, 4, 0x5000]  # the scratch buffer: a constant of the plan
    (grid, block, stream, smem, v), = main.calls
    assert (grid, smem) == ((2, 1, 1), 1024)
    assert v[4] == 0x5000 and v[13] == 0x3000 and v[20] == new_result
    assert v[-3:] == [7, 1.0, 2.0]  # scalars as recorded
    # the plan keeps neither the planning call's arrays nor its operands alive
    assert all(not hasattr(a.owner, "like") and not hasattr(a, "like") for a in p._keep)
    held = [c.cell_contents for make in p._allocs for c in make.__closure__]
    assert not any(hasattr(v, "obj") or isinstance(v, (Dev, FakeOutput)) for v in held)
    y2 = p(Dev(0x40000, (4, 64)))
    assert y2.__cuda_array_interface__["data"][0] != new_result  # a fresh result per call
    assert copy.calls[-1][4][4] == 0x40000 + 256


@pytest.mark.parametrize("bad, err, msg", [
    (Dev(0x20000, (4, 32)), ValueError, r"x must match the planned array: .*\(4, 64\).*got .*\(4, 32\)"),
    (Dev(0x20000, (4, 64), np.float64), ValueError, "x must match the planned array: .*float32.*got .*float64"),
    (Dev(0x20004, (4, 64)), ValueError, "address mod 16 = 0; got .* address mod 16 = 4"),
    (np.zeros((4, 64), np.float32), TypeError, "x must be a device array like the planned one"),
])
def test_a_call_refuses_an_array_unlike_the_planned_one(monkeypatch, bad, err, msg):
    p, copy, _ = _recorded_plan(monkeypatch)
    with pytest.raises(err, match=msg):
        p(bad)
    assert not copy.calls


def test_a_call_refuses_another_context_and_a_wrong_count(monkeypatch):
    p, copy, _ = _recorded_plan(monkeypatch)
    with pytest.raises(TypeError, match=r"takes 1 array\(s\) \(x\), got 2"):
        p(Dev(0x20000, (4, 64)), Dev(0x30000, (4, 64)))
    monkeypatch.setattr(_plan, "current_context", lambda: 43)
    with pytest.raises(RuntimeError, match="made in another CUDA context"):
        p(Dev(0x20000, (4, 64)))
    assert not copy.calls
    # a thread with no current context gets numba's made current, then the same check
    monkeypatch.setattr(_plan, "current_context", lambda: 0)
    monkeypatch.setattr(_plan, "ensure_context", lambda: 42)
    p(Dev(0x20000, (4, 64)))
    monkeypatch.setattr(_plan, "ensure_context", lambda: 44)
    with pytest.raises(RuntimeError, match="made in another CUDA context"):
        p(Dev(0x20000, (4, 64)))
    assert len(copy.calls) == 1


def test_aliasing_pattern_and_regions():
    assert _plan._aliasing([5, 9, 5]) == (0, 1, 0)
    assert _plan._locate(0x1010, 16, [(0x2000, 0x3000), (0x1000, 0x1020)]) == (1, 0x10)
    assert _plan._locate(0x1010, 32, [(0x1000, 0x1020)]) is None  # runs past the region's end
    assert _plan._locate(0x1000, 0, [(0x1000, 0x1000)]) == (0, 0)  # an empty array's own address
    # regions are half-open: an array that starts where another ends (CuPy's pool packs 512-byte
    # multiples back to back) belongs to the next one, found on the GPU by matched_filter's results
    assert _plan._locate(0x1020, 16, [(0x1000, 0x1020), (0x1020, 0x1040)]) == (1, 0)
    assert _plan._locate(0x1020, 0, [(0x1000, 0x1020)]) is None


def _two_input_plan(planned_ptrs):
    """A plan of a call on two arrays at ``planned_ptrs`` (not replayed: a call checks its arrays,
    then calls the function, here one that returns its arguments)."""
    p = _plan.Plan.__new__(_plan.Plan)
    p.fn, p.names, p.replayed = (lambda a, b: (a, b)), ["a", "b"], False
    p._slots, p._keys, p._args, p._kwargs = [0, 1], [], [None, None], {}
    p._set_planned([Dev(ptr, (4, 64)) for ptr in planned_ptrs])
    return p


def test_a_call_must_share_memory_as_the_planned_arrays_did():
    """Distinct planned arrays: a call on one array twice is refused; arrays planned as one (in
    place): a call on two distinct arrays is refused, one array twice runs."""
    distinct, same = _two_input_plan([0x1000, 0x2000]), _two_input_plan([0x1000, 0x1000])
    a, b = Dev(0x40000, (4, 64)), Dev(0x80000, (4, 64))
    assert distinct(a, b) == (a, b) and same(a, a) == (a, a)
    with pytest.raises(ValueError, match=r"must share memory as the planned ones did \(same start address: "
                                         r"\(0, 1\), got \(0, 0\)\)"):
        distinct(a, a)
    with pytest.raises(ValueError, match=r"same start address: \(0, 0\), got \(0, 1\)"):
        same(a, b)


def test_launch_records_only_while_a_plan_is_made(monkeypatch):
    """_launch.launch appends to the recorder of its own thread only (numba's launch path here:
    no CUDA context on this machine), marked not replayable."""
    calls = []

    class K:
        def __getitem__(self, cfg):
            return lambda *args: calls.append((cfg, args))

    monkeypatch.setattr(_launch, "current_context", lambda: 0)
    stream = _launch.Stream(0)
    monkeypatch.setattr(_launch.Stream, "numba", property(lambda self: "numba-stream"))
    _launch.launch(K(), 2, 32, stream, 0, 1.0)
    rec = _plan._Recording()
    _launch.recorder.active = rec
    try:
        _launch.launch(K(), 3, 64, stream, 16, 2.0)
    finally:
        _launch.recorder.active = None
    assert len(calls) == 2 and rec.launches == [(None, 3, 64, 0, 16, (2.0,))]


class FakePackage:
    """A package adapter's allocator interface (what mathdx_operands.package gives for CuPy)."""

    def __init__(self):
        self.made, self.allocs = [], []

    def allocator(self, dtype, shape, strides, nelems, device):
        self.made.append((dtype.name, dtype.itemsize, shape, strides, nelems, device))

        def alloc(stream, current=False):
            self.allocs.append(stream)
            return Dev(0x80000 + 0x1000 * len(self.allocs), shape, dtype.name)

        return alloc

    @staticmethod
    def ptr(arr):
        return arr.__cuda_array_interface__["data"][0]


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.int64])
def test_results_of_cupy_callers_come_from_the_package_allocator(monkeypatch, dtype):
    """A CuPy (or PyTorch) caller's fresh results: the package's allocator, made once per plan
    with the result's shape, element strides, size and device, called with the plan's stream."""
    fake = FakePackage()
    monkeypatch.setattr(_plan, "package", lambda name: fake if name == "cupy" else None)
    obj = SimpleNamespace(device=SimpleNamespace(id=3))  # CuPy arrays name their device by id
    out = SimpleNamespace(like=SimpleNamespace(package="cupy"), obj=obj,
                          dev=DevArray(0x9000, (4, 8, 2), dtype, obj))
    make = _plan._allocator(out, SimpleNamespace(handle=77))
    assert fake.made == [(np.dtype(dtype).name, np.dtype(dtype).itemsize, (4, 8, 2), (16, 2, 1), 64, 3)]
    a, ptr = make()
    b, ptr2 = make()
    assert fake.allocs == [77, 77] and ptr != ptr2 and a.shape == (4, 8, 2)
    assert ptr == a.__cuda_array_interface__["data"][0]


class FakeMem:
    """cupy.cuda.MemoryPointer: an address; ``+`` makes one at an offset."""

    def __init__(self, ptr):
        self.ptr = ptr

    def __add__(self, off):
        return FakeMem(self.ptr + off)


def _fake_cupy(allocs, current=77):
    """A stand-in ``cupy`` namespace: ``cuda.alloc`` hands out addresses 1 MiB apart, recorded."""

    def alloc(nbytes):
        allocs.append(nbytes)
        return FakeMem(0x100000 * len(allocs))

    def ndarray(shape, dtype, memptr, strides=None):
        return SimpleNamespace(shape=shape, dtype=np.dtype(dtype), ptr=memptr.ptr, strides=strides)

    stream = SimpleNamespace(ptr=current)
    return SimpleNamespace(cuda=SimpleNamespace(alloc=alloc, get_current_stream=lambda: stream), ndarray=ndarray)


def test_cupy_group_allocator_makes_results_from_one_allocation():
    """One allocation per call for all results, each at a 256-byte boundary in order, with the
    recorded shapes, dtypes and byte strides; the base Package has no such path."""
    from mathdx_operands import DTYPES, DType
    from mathdx_operands._packages import Package, _CuPy

    allocs = []
    pkg = _CuPy.__new__(_CuPy)
    pkg.cp, pkg._ext = _fake_cupy(allocs), {}
    i32, f32 = DType("int32", -1, 4, "i"), DTYPES["float32"]  # int32: as kernels._plan makes it
    make = pkg.group_allocator([(i32, (8,), (1,), 8), (f32, (300,), (2,), 599), (f32, (1, 1), (1, 1), 1)], 0)
    made = make(77)
    assert allocs == [256 + 2560 + 256]
    base = 0x100000
    # C order: no strides argument (CuPy's default); else byte strides
    assert [(a.shape, a.dtype.name, a.ptr, a.strides, p) for a, p in made] == [
        ((8,), "int32", base, None, base), ((300,), "float32", base + 256, (8,), base + 256),
        ((1, 1), "float32", base + 2816, None, base + 2816)]
    made2 = make(77)
    assert len(allocs) == 2 and made2[0][1] == 2 * base
    assert Package.group_allocator(pkg, [], 0) is None


def test_plan_groups_small_cupy_results_only(monkeypatch):
    """_group_allocator: two or more CuPy results of at most GROUP_BYTES each; otherwise None
    (one allocation each); a grouped maker is called with the plan's stream."""
    asked = []

    class Pkg:
        def group_allocator(self, layouts, device):
            asked.append(([(d.name, sh, st, n) for d, sh, st, n in layouts], device))
            return lambda stream: [("made", stream)]

    monkeypatch.setattr(_plan, "package", lambda name: Pkg())
    obj = SimpleNamespace(device=SimpleNamespace(id=2))

    def out(shape, dtype, kind="cupy"):
        return SimpleNamespace(like=SimpleNamespace(package=kind), obj=obj, dev=DevArray(0x9000, shape, dtype, obj))

    small = [out((8,), np.int32), out((8,), np.float32)]
    stream = SimpleNamespace(handle=55)
    monkeypatch.setattr(_plan, "GROUP_BYTES", 0)
    assert _plan._group_allocator(small, stream) is None
    monkeypatch.setattr(_plan, "GROUP_BYTES", 4096)
    make = _plan._group_allocator(small, stream)
    assert asked == [([("int32", (8,), (1,), 8), ("float32", (8,), (1,), 8)], 2)] and make() == [("made", 55)]
    assert _plan._group_allocator(small[:1], stream) is None
    assert _plan._group_allocator(small + [out((4096,), np.float32)], stream) is None  # 16 KiB: over
    assert _plan._group_allocator([out((8,), np.int32, "torch"), small[1]], stream) is None


def _two_result_plan(monkeypatch, order):
    """A plan of a call on x that launched one kernel writing two results it allocated (a, b), and
    returned them in ``order`` (indices into (a, b)), as recorded."""
    x, like = _planning(monkeypatch)
    a = FakeOutput((4,), np.int32, like, None, ptr=0x9000)
    b = FakeOutput((4,), np.float32, like, None, ptr=0xA000)
    k = FakeLauncher((A2, types.Array(types.int32, 1, "C"), types.Array(types.float32, 1, "C")))
    rec = _plan._Recording()
    rec.outputs = [a, b]
    rec.launches = [(k, (1, 1, 1), (64, 1, 1), 5, 0, (DevArray(0x1000, (4, 64), np.float32, x), a.dev, b.dev))]
    return _built(rec, x, tuple((a, b)[i].obj for i in order)), k


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_fresh_results_are_returned_in_the_recorded_order(monkeypatch, order):
    """Results returned as allocated take the plain path (the made arrays as they are); any other
    order goes through the general one; either way each returned array is the one the kernel got
    at its place."""
    p, k = _two_result_plan(monkeypatch, order)
    assert p._plain == (order == (0, 1))
    got = p(Dev(0x20000, (4, 64)))
    ptrs = [r.__cuda_array_interface__["data"][0] for r in got]
    (_, _, _, _, v), = k.calls
    launched = (v[13], v[20])  # the data slots of the int32 and the float32 results
    assert ptrs == [launched[i] for i in order] and [r.dtype for r in got] == [(np.int32, np.float32)[i] for i in order]


class _CupyLike:
    """A CuPy array's device: its memory pointer's device number (reading ``.device`` fails here)."""

    __module__ = "cupy._core.core"

    def __init__(self, dev):
        self._mem = SimpleNamespace(device_id=dev)

    @property
    def data(self):  # (a class attribute in CuPy too)
        return self._mem

    @property
    def device(self):
        raise AssertionError("a CuPy array's Device object was made")


class _TorchLike:
    __module__ = "torch"

    def __init__(self, dev):
        self.dev = dev

    def get_device(self):
        return self.dev

    @property
    def device(self):
        raise AssertionError("a torch tensor's device object was made")


def test_each_package_s_device_is_read_without_a_device_object():
    """CuPy's from its memory pointer, torch's by get_device(); other arrays by their device's index
    or id, else None (the context check alone)."""
    assert _plan._device(_CupyLike(3)) == 3 and _plan._device(_CupyLike(0)) == 0
    assert _plan._device(_TorchLike(1)) == 1
    assert _plan._device(SimpleNamespace(device=SimpleNamespace(index=2, id=7))) == 2
    assert _plan._device(SimpleNamespace(device=SimpleNamespace(index=None, id=5))) == 5
    assert _plan._device(Dev(0x1000, (4,))) is None


class _CupyArray:
    """A CuPy array as a plan reads it: attributes (``data`` with ``ptr`` and ``device_id``, shape,
    dtype, strides) and ``__cuda_array_interface__``, whose reads are counted."""

    __module__ = "cupy._core.core"
    interface_reads = 0

    def __init__(self, ptr, shape, dtype=np.float32, device=0, strides=None):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        c = tuple(int(np.prod(self.shape[i + 1:])) * self.dtype.itemsize for i in range(len(self.shape)))
        self.strides = c if strides is None else tuple(strides)
        self._mem = SimpleNamespace(ptr=ptr, device_id=device)

    @property
    def data(self):
        return self._mem

    @property
    def __cuda_array_interface__(self):
        _CupyArray.interface_reads += 1
        c = tuple(int(np.prod(self.shape[i + 1:])) * self.dtype.itemsize for i in range(len(self.shape)))
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self._mem.ptr, False), "version": 3,
                "strides": None if self.strides == c else self.strides}


def _copy_plan(monkeypatch, x):
    """The plan of a call on ``x`` (at 0x1000, 4 x 1 x 64 float32, a package's array) that
    launched one kernel copying it into a fresh result; the plan and its launcher."""
    monkeypatch.setattr(_plan, "current_context", lambda: 42)
    monkeypatch.setattr(_plan, "simulator", lambda: False)
    monkeypatch.setattr(_plan, "Output", FakeOutput)
    like = SimpleNamespace(package="numba", obj=x)
    out = FakeOutput((4, 1, 64), np.float32, like, None, ptr=0x9000)
    k = FakeLauncher((types.Array(types.float32, 3, "C"), types.Array(types.float32, 3, "C")))
    rec = _plan._Recording()
    rec.outputs = [out]
    rec.launches = [(k, (1, 1, 1), (64, 1, 1), 5, 0, (DevArray(0x1000, (4, 1, 64), np.float32, x), out.dev))]
    return _built(rec, x, out.obj), k


def _cupy_plan(monkeypatch):
    return _copy_plan(monkeypatch, _CupyArray(0x1000, (4, 1, 64)))


def test_a_cupy_array_laid_out_as_planned_is_checked_by_its_attributes(monkeypatch):
    """A call's CuPy array with the planned device, shape, dtype, strides and address mod 16 runs
    without its interface dict; another C-order layout (a size-1 axis's stride) goes through the
    interface's check and runs; any other difference is refused as before, named."""
    p, k = _cupy_plan(monkeypatch)
    assert p._quick == [(_plan._cupy_layout, (0, (4, 1, 64), np.dtype(np.float32), (256, 256, 4)))]
    _CupyArray.interface_reads = 0
    p(_CupyArray(0x20000, (4, 1, 64)))
    assert _CupyArray.interface_reads == 0 and k.calls[-1][4][4] == 0x20000  # x's data slot
    p(_CupyArray(0x30000, (4, 1, 64), strides=(256, 4, 4)))  # C order too
    assert _CupyArray.interface_reads == 1 and k.calls[-1][4][4] == 0x30000
    bad = [(_CupyArray(0x40000, (4, 1, 64), device=1), "on device 0.*got .* on device 1"),
           (_CupyArray(0x40000, (4, 1, 64), np.int32), "float32.*got .*int32"),
           (_CupyArray(0x40000, (4, 1, 32)), r"\(4, 1, 64\).*got .*\(4, 1, 32\)"),
           (_CupyArray(0x40008, (4, 1, 64)), "address mod 16 = 0; got .* address mod 16 = 8"),
           (_CupyArray(0x40000, (4, 1, 64), strides=(512, 256, 4)), "x must be C-contiguous")]
    for arr, msg in bad:
        with pytest.raises(ValueError, match=msg):
            p(arr)
    assert len(k.calls) == 2  # the two calls that ran


class _Tensor:
    """A CUDA torch tensor as a plan reads it: attributes (layout, get_device(), shape, dtype,
    stride(), the grad flag and lazy bits, data_ptr()) and ``__cuda_array_interface__``, whose
    reads are counted and which refuses as torch's does."""

    __module__ = "torch"
    interface_reads = 0

    def __init__(self, ptr, shape, dtype=np.float32, device=0, strides=None, layout="torch.strided",
                 requires_grad=False, conj=False, neg=False, cuda=True):
        self.shape, self.dtype, self.layout, self.is_cuda = tuple(shape), np.dtype(dtype), layout, cuda
        self._strides = tuple(int(np.prod(self.shape[i + 1:])) for i in range(len(self.shape))) \
            if strides is None else tuple(strides)
        self._ptr, self._dev, self._conj, self._neg = ptr, device, conj, neg
        self.requires_grad = requires_grad
        self.device = f"cuda:{device}" if cuda else "cpu"

    def get_device(self):
        return self._dev if self.is_cuda else -1

    def stride(self):
        if self.layout != "torch.strided":
            raise RuntimeError("sparse tensors do not have strides")
        return self._strides

    def data_ptr(self):
        return self._ptr

    def is_conj(self):
        return self._conj

    def is_neg(self):
        return self._neg

    @property
    def __cuda_array_interface__(self):
        _Tensor.interface_reads += 1
        if self.requires_grad:
            raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")
        c = tuple(int(np.prod(self.shape[i + 1:])) for i in range(len(self.shape)))
        strides = None if self._strides == c else tuple(st * self.dtype.itemsize for st in self._strides)
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self._ptr, False), "version": 2,
                "strides": strides}


def _torch_plan(monkeypatch):
    monkeypatch.setattr(_plan, "_device", lambda obj: obj.get_device())
    return _copy_plan(monkeypatch, _Tensor(0x1000, (4, 1, 64)))


def test_a_torch_tensor_laid_out_as_planned_is_checked_by_its_attributes(monkeypatch):
    """As CuPy's: a call's tensor with the planned device, shape, dtype, strides, address mod 16
    and no grad flag or lazy bit runs without its interface dict; another C-order layout goes
    through the interface's check; every other difference is refused, named, torch's refusals
    (grad, lazy conjugate or negation, another layout, a CPU tensor) included."""
    p, k = _torch_plan(monkeypatch)
    read, planned = p._quick[0]
    assert planned == (0, (4, 1, 64), np.dtype(np.float32), (64, 64, 1), False, False, False)
    _Tensor.interface_reads = 0
    p(_Tensor(0x20000, (4, 1, 64)))
    assert _Tensor.interface_reads == 0 and k.calls[-1][4][4] == 0x20000  # x's data slot
    p(_Tensor(0x30000, (4, 1, 64), strides=(64, 1, 1)))  # C order too
    assert _Tensor.interface_reads == 1 and k.calls[-1][4][4] == 0x30000
    bad = [(_Tensor(0x40000, (4, 1, 64), device=1), ValueError, "on device 0.*got .* on device 1"),
           (_Tensor(0x40000, (4, 1, 64), np.int32), ValueError, "float32.*got .*int32"),
           (_Tensor(0x40000, (4, 1, 32)), ValueError, r"\(4, 1, 64\).*got .*\(4, 1, 32\)"),
           (_Tensor(0x40008, (4, 1, 64)), ValueError, "address mod 16 = 0; got .* address mod 16 = 8"),
           (_Tensor(0x40000, (4, 1, 64), strides=(128, 64, 1)), ValueError, "x must be C-contiguous"),
           (_Tensor(0x40000, (4, 1, 64), requires_grad=True), ValueError, "^x: a torch tensor that requires grad"),
           (_Tensor(0x40000, (4, 1, 64), conj=True), ValueError, "^x: a torch tensor with the conjugate bit set"),
           (_Tensor(0x40000, (4, 1, 64), neg=True), ValueError, "^x: a torch tensor with the negative bit set"),
           (_Tensor(0x40000, (4, 1, 64), cuda=False), TypeError, "^x must be a CUDA tensor like the planned one, "
                                                                 "got one on cpu"),
           (_Tensor(0x40000, (4, 1, 64), layout="torch.sparse_coo"), ValueError,
            "^x must be a strided \\(dense\\) tensor like the planned one, got layout torch.sparse_coo")]
    for arr, err, msg in bad:
        with pytest.raises(err, match=msg):
            p(arr)
    assert len(k.calls) == 2  # the two calls that ran


# --- plans replayed as one CUDA graph (kernels._launch.Graph), against a fake driver module ---

class FakeDriver:
    """The cuda.bindings driver calls a Graph makes, recorded: each node's parameters as the
    driver would copy them (the kernel's parameter bytes at that moment, unpacked)."""

    class CUfunction:
        pass

    class CUDA_KERNEL_NODE_PARAMS:
        pass

    class Err:
        def __init__(self, name):
            self.name = name

    def __init__(self, fail=None):
        self.CUresult = SimpleNamespace(CUDA_SUCCESS=self.Err("CUDA_SUCCESS"))
        self.fail, self.log, self.params = fail, [], {}  # params: Params by kernelParams address

    def _ok(self, name, *rest):
        err = self.Err("CUDA_ERROR_LAUNCH_FAILED") if name == self.fail else self.CUresult.CUDA_SUCCESS
        return (err, *rest)

    def _values(self, p):
        params = self.params[p.kernelParams]
        return list(params.struct.unpack_from(params.buf))

    def CUstream(self, handle):
        return ("stream", handle)

    def cuGraphCreate(self, flags):
        self.log.append(("create", flags))
        return self._ok("cuGraphCreate", "graph")

    def cuGraphAddKernelNode(self, graph, deps, ndeps, p):
        node = f"node{sum(e[0] == 'add' for e in self.log)}"
        self.log.append(("add", node, list(deps), ndeps, p.func, (p.gridDimX, p.gridDimY, p.gridDimZ),
                         (p.blockDimX, p.blockDimY, p.blockDimZ), p.sharedMemBytes, p.kernelParams))
        return self._ok("cuGraphAddKernelNode", node)

    def cuGraphInstantiate(self, graph, flags):
        self.log.append(("instantiate", graph))
        return self._ok("cuGraphInstantiate", "exec")

    def cuGraphUpload(self, exe, stream):
        self.log.append(("upload", exe, stream))
        return self._ok("cuGraphUpload")

    def cuGraphExecKernelNodeSetParams(self, exe, node, p):
        self.log.append(("set", node, self._values(p)))
        return self._ok("cuGraphExecKernelNodeSetParams")

    def cuGraphLaunch(self, exe, stream):
        self.log.append(("launch", exe, stream))
        return self._ok("cuGraphLaunch")

    def cuGraphExecDestroy(self, exe):
        self.log.append(("destroy exec", exe))

    def cuGraphDestroy(self, graph):
        self.log.append(("destroy graph", graph))


def _graphs_on(monkeypatch, drv):
    """Graphs switched on, and every Params made from now on known to ``drv`` by the address a
    node is given."""
    monkeypatch.setattr(_launch, "GRAPHS", True)
    real = _launch.Params

    def params(formats):
        made = real(formats)
        drv.params[made.params] = made
        return made

    monkeypatch.setattr(_launch, "Params", params)


def _graphed_plan(monkeypatch, drv):
    _graphs_on(monkeypatch, drv)
    return _recorded_plan(monkeypatch, drv)


def test_a_plan_becomes_one_graph_and_a_call_is_one_graph_launch(monkeypatch):
    drv = FakeDriver()
    p, copy, main = _graphed_plan(monkeypatch, drv)
    assert p.graphed and "one CUDA graph" in repr(p)
    adds = [e for e in drv.log if e[0] == "add"]
    # the kernels in the recorded order, each after the one before, as recorded
    assert [(e[1], e[2], e[3]) for e in adds] == [("node0", [], 0), ("node1", ["node0"], 1)]
    assert adds[0][4] is copy.handle and adds[0][5:8] == ((3, 1, 1), (64, 1, 1), 0)
    assert adds[1][4] is main.handle and adds[1][5:8] == ((2, 1, 1), (128, 1, 1), 1024)
    assert [e[0] for e in drv.log] == ["create", "add", "add", "instantiate", "upload"]
    assert drv.log[-1] == ("upload", "exec", ("stream", 5))
    del drv.log[:]
    n = _launch.stats["graph_launches"]
    y = p(Dev(0x20000, (4, 64)))
    new_result = y.__cuda_array_interface__["data"][0]
    assert not copy.calls and not main.calls  # no cuLaunchKernel
    (s0, n0, v0), (s1, n1, v1), launch = drv.log
    assert (s0, n0, s1, n1) == ("set", "node0", "set", "node1")
    assert v0[4] == 0x20000 + 256 and v0[13] == 0x5000  # x's rows 1.. at the new x; the scratch kept
    assert v1[4] == 0x5000 and v1[13] == 0x3000 and v1[20] == new_result and v1[-3:] == [7, 1.0, 2.0]
    assert launch == ("launch", "exec", ("stream", 5))
    assert _launch.stats["graph_launches"] == n + 1
    del drv.log[:]
    y2 = p(Dev(0x40000, (4, 64)))
    assert drv.log[0][2][4] == 0x40000 + 256 and drv.log[1][2][20] == y2.__cuda_array_interface__["data"][0]


def test_only_nodes_with_changing_arrays_get_new_parameters(monkeypatch):
    """A kernel of constants only (a spectrum of planned taps into a scratch buffer) keeps the
    parameters its node was made with; the kernel reading the call's x is rewritten."""
    drv = FakeDriver()
    _graphs_on(monkeypatch, drv)
    x, like = _planning(monkeypatch)
    scratch = FakeOutput((33,), np.complex64, like, None, ptr=0x5000)
    result = FakeOutput((4, 64), np.float32, like, None, ptr=0x9000)
    spec = DevArray(0x3000, (33,), np.complex64, "taps owner")
    make, apply = FakeLauncher((A1, A1), drv), FakeLauncher((A2, A1, A2), drv)
    rec = _plan._Recording()
    rec.outputs = [scratch, result]
    rec.launches = [(make, (1, 1, 1), (32, 1, 1), 9, 0, (spec, scratch.dev)),
                    (apply, (4, 1, 1), (64, 1, 1), 9, 0, (DevArray(0x1000, (4, 64), np.float32, x), scratch.dev,
                                                          result.dev))]
    p = _built(rec, x, result.obj)
    assert p.graphed
    del drv.log[:]
    p(Dev(0x20000, (4, 64)))
    assert [(e[0], e[1]) for e in drv.log] == [("set", "node1"), ("launch", "exec")]
    assert drv.log[0][2][4] == 0x20000


@pytest.mark.parametrize("why", ["switched off", "two streams", "no driver"])
def test_plans_launch_kernel_by_kernel_where_no_graph_is_made(monkeypatch, why):
    drv = FakeDriver()
    monkeypatch.setattr(_launch, "GRAPHS", why != "switched off")
    p, copy, main = _recorded_plan(monkeypatch, None if why == "no driver" else drv)
    if why == "two streams":
        assert _launch.graphable([copy, main], [5, 6]) is False
        assert _launch.graphable([copy, main], [5, 5]) is True
        return
    assert not p.graphed and "graph" not in repr(p)
    assert not [e for e in drv.log if e[0] in ("create", "launch")]
    p(Dev(0x20000, (4, 64)))
    assert len(copy.calls) == len(main.calls) == 1  # one cuLaunchKernel each


@pytest.mark.parametrize("call", ["cuGraphInstantiate", "cuGraphLaunch", "cuGraphExecKernelNodeSetParams"])
def test_a_failing_graph_call_is_raised_with_the_driver_s_error(monkeypatch, call):
    drv = FakeDriver(fail=call)
    if call == "cuGraphInstantiate":
        with pytest.raises(RuntimeError, match="cuGraphInstantiate failed: CUDA_ERROR_LAUNCH_FAILED"):
            _graphed_plan(monkeypatch, drv)
        return
    p, _, _ = _graphed_plan(monkeypatch, drv)
    with pytest.raises(RuntimeError, match=f"{call} failed: CUDA_ERROR_LAUNCH_FAILED"):
        p(Dev(0x20000, (4, 64)))


def test_a_plan_s_graph_is_freed_with_the_plan(monkeypatch):
    import gc

    drv = FakeDriver()
    p, _, _ = _graphed_plan(monkeypatch, drv)
    p(Dev(0x20000, (4, 64)))
    assert not [e for e in drv.log if e[0].startswith("destroy")]
    del p
    gc.collect()
    assert [e for e in drv.log if e[0].startswith("destroy")] == [("destroy exec", "exec"),
                                                                 ("destroy graph", "graph")]
