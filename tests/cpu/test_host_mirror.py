# SPDX-License-Identifier: Apache-2.0
"""NumPy operands are mirrored to the GPU in their own memory order.

:func:`mathdx_operands.memory_order_bytes` turns a host array into flat bytes in the
array's memory order plus the strides that view them; the device mirror is those bytes,
uploaded as one buffer, viewed with the original shape and these strides. Here the upload is
emulated on the host (a copy of the bytes viewed with ``as_strided``), and the CuPy calls of
``_CuPy.to_device``/``write`` go to a NumPy-backed stand-in of the few CuPy names they use,
so that ``Matmul``'s mirrors and ``reset_operands`` can be checked without a GPU.
"""

import contextlib
from types import SimpleNamespace

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import mathdx_operands
from mathdx_operands import _packages, memory_order_bytes
from nvmath_host import Algorithm, Matmul, MatmulEpilog, _execute, _gpu, _plan

ml_dtypes = pytest.importorskip("ml_dtypes")


def _device_view(flat, strides, like):
    """What the device mirror holds: ``flat`` copied to a new buffer, viewed as ``like``."""
    isz = like.itemsize
    buf = flat.copy().view((np.void, isz))  # (as_strided cannot take every ml_dtypes type)
    return as_strided(buf, like.shape, tuple(s * isz for s in strides)).view(like.dtype)


def _axis_order(shape, strides):
    """Axes of extent > 1, outermost (largest |stride|) first: the memory order."""
    return sorted((i for i, n in enumerate(shape) if n > 1), key=lambda i: -abs(strides[i]))


def _elem_strides(arr):
    return tuple(s // arr.itemsize for s in arr.strides)


def _numbered(shape, dtype=np.float64):
    """A C-ordered array of distinct values (so a misplaced element is seen)."""
    n = int(np.prod(shape))
    return np.arange(1, n + 1, dtype=np.float64).reshape(shape).astype(dtype)


def _fortran(shape):
    """F-ordered distinct values (``np.asfortranarray`` keeps a C array with one row)."""
    out = np.empty(shape, order="F")
    out[...] = _numbered(shape)
    return out


X34 = _numbered((3, 4))
X4_10 = _numbered((4, 10))

# name: (array, expected strides of the mirror (elements) or None, is it dense already)
CASES = {
    "C": (X34, (4, 1), True),
    "F": (np.asfortranarray(X34), (1, 3), True),
    "transposed": (_numbered((4, 3)).T, (1, 3), True),
    "batched_last_two_transposed": (_numbered((2, 4, 3)).transpose(0, 2, 1), (12, 1, 3), True),
    "batched_F": (np.asfortranarray(_numbered((2, 3, 4))), (1, 2, 6), True),
    "batch_axis_in_the_middle": (_numbered((3, 2, 4)).transpose(1, 0, 2), (4, 8, 1), True),
    "every_other_column": (X4_10[:, ::2], (5, 1), False),
    "every_other_column_F": (np.asfortranarray(X4_10)[:, ::2], (1, 4), False),
    "every_other_row_of_transposed": (X4_10.T[::2], (1, 5), False),
    "submatrix_of_batched_transposed": (
        _numbered((2, 6, 5)).transpose(0, 2, 1)[:, 1:4, :3],
        (9, 1, 3),
        False,
    ),
    "reversed_rows": (X34[::-1], (4, 1), False),
    "one_row": (_numbered((1, 4)), (4, 1), True),
    "one_row_F": (_fortran((1, 4)), (1, 1), True),
    "first_row_of_F": (np.asfortranarray(_numbered((2, 4)))[:1], (1, 1), False),
    "one_column": (_numbered((4, 1)), (1, 1), True),
    "one_column_F": (_fortran((4, 1)), (1, 4), True),
    "first_column_of_wide": (X4_10[:, :1], (1, 1), False),
    "batch_of_one_transposed": (_numbered((1, 4, 3)).transpose(0, 2, 1), (12, 1, 3), True),
    "broadcast_batch": (np.broadcast_to(X34, (2, 3, 4)), (12, 4, 1), False),
    "broadcast_column": (np.broadcast_to(_numbered((3, 1)), (3, 4)), (1, 3), False),
    # no elements, no memory order (NumPy gives such arrays zero strides)
    "empty_rows": (np.empty((0, 4)), None, True),
    "empty_cols_F": (np.empty((3, 0), order="F"), None, True),
    "empty_batch": (np.empty((2, 0, 5)), None, True),
    "empty_view": (X34[:, 2:2], None, True),
    "single_element": (np.ones((1, 1)), (1, 1), True),
    "complex_F": (np.asfortranarray(X34 + 2j * X34), (1, 3), True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_flat_bytes_reproduce_the_array_in_its_memory_order(name):
    arr, strides, dense = CASES[name]
    flat, got = memory_order_bytes(arr)
    assert flat.dtype == np.uint8 and flat.ndim == 1 and flat.nbytes == arr.nbytes
    assert got == strides or strides is None
    assert all(s >= 0 for s in got)
    view = _device_view(flat, got, arr)
    np.testing.assert_array_equal(view, arr)
    if arr.size and 0 not in arr.strides:  # (a broadcast axis goes outermost)
        assert _axis_order(arr.shape, got) == _axis_order(arr.shape, _elem_strides(arr))
    if arr.size:  # dense: the last element is the last byte, none is visited twice
        offsets = {sum(i * s for i, s in zip(idx, got)) for idx in np.ndindex(arr.shape)}
        assert offsets == set(range(arr.size))
    # no host copy of an array that is already dense
    assert np.shares_memory(flat, arr) == (dense and arr.size > 0)
    if dense:
        assert got == _elem_strides(arr) or arr.size == 0 or 1 in arr.shape


def test_dense_strides_equal_the_original_ones():
    for arr in (X34, np.asfortranarray(X34), X34.T, _numbered((2, 4, 3)).transpose(0, 2, 1)):
        assert memory_order_bytes(arr)[1] == _elem_strides(arr)


@pytest.mark.parametrize(
    "dtype, storage",
    [("bfloat16", np.uint16), ("float8_e4m3fn", np.uint8), ("float8_e5m2", np.uint8)],
)
@pytest.mark.parametrize("layout", ["F", "transposed", "batched_transposed", "strided_F"])
def test_ml_dtypes_arrays_viewed_as_their_storage(dtype, storage, layout):
    dt = np.dtype(getattr(ml_dtypes, dtype))
    # values exact in every FP8 type, and all distinct
    vals = np.array([0.5, 1.0, 1.5, 2.0, 3.0, 4.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0])
    if layout == "F":
        arr = np.asfortranarray(vals.reshape(3, 4)).astype(dt, order="K")
        strides = (1, 3)
    elif layout == "transposed":
        arr = vals.reshape(4, 3).astype(dt).T
        strides = (1, 3)
    elif layout == "batched_transposed":
        arr = np.concatenate([vals, vals * 16]).reshape(2, 3, 4).astype(dt).transpose(0, 2, 1)
        strides = (12, 1, 4)
    else:  # every other column of a column-major (4, 6)
        arr = np.asfortranarray(np.concatenate([vals, vals * 16]).reshape(4, 6)).astype(
            dt, order="K"
        )[:, ::2]
        strides = (1, 4)
    host = arr.view(storage)  # as nvmath_host hands it to the package
    for a in (host, arr):  # the bytes do not depend on the dtype they are read as
        flat, got = memory_order_bytes(a)
        assert got == strides
        assert _axis_order(a.shape, got) == _axis_order(a.shape, _elem_strides(a))
        np.testing.assert_array_equal(_device_view(flat, got, host), host)
        view = _device_view(flat, got, arr)
        np.testing.assert_array_equal(view.astype(np.float64), arr.astype(np.float64))


def test_a_wrong_stride_order_is_seen():
    """The checks above fail for row-major bytes of a column-major array (the old mirror)."""
    arr = np.asfortranarray(X34)
    flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    assert _axis_order(arr.shape, (4, 1)) != _axis_order(arr.shape, _elem_strides(arr))
    assert not np.array_equal(_device_view(flat, (1, 3), arr), arr)


# ------------------------------------------------------------- Matmul's mirrors (fake CuPy)


class _FakeMemoryPointer:
    """A ``cupy.cuda.MemoryPointer`` stand-in: a host byte buffer."""

    def __init__(self, buf):
        self.buf = buf
        self.ptr = buf.ctypes.data


class _FakeCupyArray:
    """A ``cupy.ndarray`` stand-in: ``shape``/``dtype``/byte ``strides`` over a memptr."""

    def __init__(self, shape, dtype, memptr, strides=None):
        self.shape, self.dtype, self.data = tuple(shape), np.dtype(dtype), memptr
        isz = self.dtype.itemsize
        self.itemsize = isz
        self.strides = (
            tuple(s * isz for s in mathdx_operands.c_strides(self.shape))
            if strides is None
            else tuple(strides)
        )

    def host(self):
        """The elements, read from the buffer with this shape and these strides."""
        return as_strided(self.data.buf.view(self.dtype), self.shape, self.strides)

    def set(self, arr, stream=None):
        # CuPy's rules: same shape and dtype, and a contiguous destination
        _FakeStream.copies.append(None if stream is None else stream.ptr)
        if arr.shape != self.shape or arr.dtype != self.dtype:
            raise ValueError("shape or dtype mismatch")
        dst = self.host()
        if not (dst.flags.c_contiguous or dst.flags.f_contiguous):
            raise RuntimeError("Cannot set to non-contiguous array")
        dst[...] = arr


class _FakeStream:
    """A CuPy stream over a raw handle: a context making it current; records each copy's stream
    (``copies``: the handle, None for the current one)."""

    current: int | None = None
    copies: list = []

    def __init__(self, ptr):
        self.ptr = ptr

    def __enter__(self):
        self.outer, _FakeStream.current = _FakeStream.current, self.ptr

    def __exit__(self, *exc):
        _FakeStream.current = self.outer


def _fake_asarray(host):
    assert host.ndim == 1 and host.dtype == np.uint8  # the mirror uploads flat bytes
    _FakeStream.copies.append(_FakeStream.current)
    return _FakeCupyArray(host.shape, host.dtype, _FakeMemoryPointer(host.copy()))


FAKE_CUPY = SimpleNamespace(
    asarray=_fake_asarray,
    ndarray=_FakeCupyArray,
    cuda=SimpleNamespace(
        Device=lambda device: contextlib.nullcontext(),
        get_current_stream=lambda: SimpleNamespace(ptr=0),
        Stream=SimpleNamespace(from_external=lambda obj: _FakeStream(obj.__cuda_stream__()[1])),
    ),
)


class _PlanStandIn:
    """Stands in for ``_plan.GpuPlan``: no cuBLASLt, no device; records what it was given."""

    last = None

    def __init__(self, p, ops, *args):
        self.problem, self.ops = p, ops
        self.handle = SimpleNamespace(ptr=0)
        self.pointers = {}  # descriptor attribute -> pointer, as set after planning
        self.desc = SimpleNamespace(ptr=0, set_pointer=self.pointers.__setitem__)
        self.layouts = [SimpleNamespace(ptr=0)] * 4
        self.algorithms = [Algorithm(bytes(64), 0)]
        self.workspace, self.workspace_ptr, self.workspace_size = None, 0, 0
        self.workspace_stream = 0
        self.align = {}
        _PlanStandIn.last = self

    def destroy(self):
        pass


@pytest.fixture
def fake_gpu(monkeypatch):
    """A "GPU" whose CuPy is :data:`FAKE_CUPY`; plan() makes no cuBLASLt objects (the plan and
    its launches are stand-ins; the mirrors are real)."""
    pkg = object.__new__(_packages._CuPy)
    pkg.cp, pkg._ext = FAKE_CUPY, {}
    monkeypatch.setattr(_gpu, "PRETEND", True)
    monkeypatch.setitem(_packages._PACKAGES, "cupy", pkg)
    monkeypatch.setattr(_gpu, "DeviceScope", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(_plan, "GpuPlan", _PlanStandIn)
    monkeypatch.setattr(
        _execute, "Executor", lambda args, desc, pkg, p, device: SimpleNamespace(args=args)
    )


def _planned_ops():
    """The device operands the last plan got."""
    return _PlanStandIn.last.ops


def _mirror_of(mm, name):
    """The device operand that the plan got for ``name``, and its data."""
    plan = _PlanStandIn.last
    op = plan.ops[name] if name in ("a", "b", "c") else plan.problem.inputs[name]
    return op, op.obj.host()


def test_matmul_mirrors_keep_the_memory_order(fake_gpu):
    a = _numbered((2, 4, 3), np.float32)  # C-ordered batch
    b = _numbered((2, 5, 3), np.float32).transpose(0, 2, 1)  # last two axes transposed
    c = _numbered((2, 5, 4), np.float32).transpose(0, 2, 1)  # column-major matrices
    bias = _numbered((4, 1), np.float32)  # an F-ordered result's bias
    with Matmul(a, b, c, options={"device_id": 0}) as mm:
        mm.plan(epilog=MatmulEpilog.BIAS, epilog_inputs={"bias": bias})
        for name, arr in (("a", a), ("b", b), ("c", c), ("bias", bias)):
            op, held = _mirror_of(mm, name)
            assert op.package == "numpy" and op.device == 0
            assert op.strides == memory_order_bytes(arr)[1]
            assert op.ptr == op.obj.data.ptr
            np.testing.assert_array_equal(held, arr)
        assert _planned_ops()["b"].strides == (15, 1, 3)  # column-major, as the user's b
        assert _planned_ops()["c"].strides == (20, 1, 4)
        assert _PlanStandIn.last.problem.mem == {"a": "row", "b": "col"}
        # reset_operands writes new data of the same layout into the same device buffers
        ptrs = {k: _mirror_of(mm, k)[0].ptr for k in ("a", "b", "c", "bias")}
        a2 = -_numbered((2, 4, 3), np.float32)
        b2 = -_numbered((2, 5, 3), np.float32).transpose(0, 2, 1)
        c2 = (3 * _numbered((2, 5, 4), np.float32)).transpose(0, 2, 1)
        bias2 = bias + 7
        mm.reset_operands(a2, b2, c2, epilog_inputs={"bias": bias2})
        for name, arr in (("a", a2), ("b", b2), ("c", c2), ("bias", bias2)):
            op, held = _mirror_of(mm, name)
            assert op.ptr == ptrs[name]
            np.testing.assert_array_equal(held, arr)
        # a b of another memory order is refused, naming it, and the mirror is untouched
        with pytest.raises(ValueError, match=r"^b: numpy float32 shape \(2, 3, 5\) strides"):
            mm.reset_operands(b=np.ascontiguousarray(b2))
        with pytest.raises(ValueError, match=r"^c: numpy float32"):
            mm.reset_operands(c=np.ascontiguousarray(c2))
        with pytest.raises(ValueError, match=r"^epilog_inputs\['bias'\]: does not match"):
            mm.reset_operands(epilog_inputs={"bias": np.repeat(bias2, 2, axis=0)[::2]})
        np.testing.assert_array_equal(_mirror_of(mm, "b")[1], b2)


def test_a_strided_operand_is_mirrored_dense_and_reset(fake_gpu):
    a = _numbered((4, 6), np.float64)[:, :3]  # (4, 3) row-major, leading dimension 6
    b = np.asfortranarray(_numbered((6, 5), np.float64))[:3]  # (3, 5) column-major, ld 6
    with Matmul(a, b, options={"device_id": 0}) as mm:
        mm.plan()
        assert _planned_ops()["a"].strides == (3, 1) and _planned_ops()["b"].strides == (1, 3)
        np.testing.assert_array_equal(_planned_ops()["b"].obj.host(), b)
        b2 = np.asfortranarray(-_numbered((6, 5), np.float64))[:3]
        mm.reset_operands(b=b2)
        np.testing.assert_array_equal(_planned_ops()["b"].obj.host(), b2)


def test_numpy_fp8_column_major_b_stays_column_major(fake_gpu):
    """cuBLASLt's FP8 layout ("TN": row-major a, column-major b) survives the mirror."""
    f8 = np.dtype(ml_dtypes.float8_e4m3fn)
    a = (_numbered((4, 8)) / 8).astype(f8)
    w = (_numbered((6, 8)) / 16).astype(f8)
    b = w.T  # (8, 6) column-major
    with Matmul(a, b, quantization_scales={"a": 1.0, "b": 1.0, "d": 1.0}, options={"device_id": 0}) as mm:
        mm.plan()  # validates the FP8 layouts of the device mirrors
        assert _planned_ops()["b"].strides == (1, 8)
        assert _PlanStandIn.last.problem.mem == {"a": "row", "b": "col"}
        held = _planned_ops()["b"].obj.host()
        assert held.dtype == np.uint8
        np.testing.assert_array_equal(held, b.view(np.uint8))
        w2 = (-_numbered((6, 8)) / 16).astype(f8)
        mm.reset_operands(b=w2.T)
        np.testing.assert_array_equal(_planned_ops()["b"].obj.host(), w2.T.view(np.uint8))
        with pytest.raises(ValueError, match=r"^b: numpy float8_e4m3fn shape \(8, 6\)"):
            mm.reset_operands(b=np.ascontiguousarray(w2.T))


# ------------------------------------------- release_operands, reset on a stream, unchecked reset


def test_released_operands_must_all_come_back_and_get_new_mirrors(fake_gpu):
    """release_operands drops the user's arrays and their device copies; execute and plan then
    refuse; reset_operands needs every operand and epilog input again, copies them anew on the
    given stream and points the descriptor at the new bias copy."""
    a, b, c = _numbered((4, 3), np.float32), _numbered((3, 5), np.float32), _numbered((4, 5), np.float32)
    bias = _numbered((5,), np.float32)
    with Matmul(a, b, c, options={"device_id": 0}) as mm:
        mm.plan(epilog=MatmulEpilog.BIAS, epilog_inputs={"bias": bias})
        plan = _PlanStandIn.last
        mm.release_operands()
        assert all(op.obj is None and op.ptr == 0 for op in plan.ops.values())
        assert mm._user["a"].obj is None and plan.problem.inputs["bias"].obj is None
        with pytest.raises(RuntimeError, match=r"^the operands were released \(release_operands\(\)\): give "
                                               r"them again with reset_operands\(\) first"):
            mm.execute()
        with pytest.raises(RuntimeError, match="were released"):
            mm.plan()
        with pytest.raises(ValueError, match=r"^after release_operands\(\), reset_operands needs every "
                                             r"operand again; missing c, epilog_inputs\['bias'\]$"):
            mm.reset_operands(a, b)
        with pytest.raises(ValueError, match=r"^a: numpy float64"):  # still checked against the plan
            mm.reset_operands(a.astype(np.float64), b, c, epilog_inputs={"bias": bias})
        _FakeStream.copies.clear()
        a2, b2, c2, bias2 = -a, b + 1, c * 2, bias - 3
        mm.reset_operands(a2, b2, c2, epilog_inputs={"bias": bias2}, stream=77)
        assert _FakeStream.copies == [77] * 4  # four new device copies, made on stream 77
        for name, arr in (("a", a2), ("b", b2), ("c", c2), ("bias", bias2)):
            np.testing.assert_array_equal(_mirror_of(mm, name)[1], arr)
        new_bias = plan.problem.inputs["bias"]
        assert list(plan.pointers.values()) == [new_bias.ptr] and new_bias.ptr != 0
        # the next reset writes into the copies it made, on the stream given (or the current one)
        _FakeStream.copies.clear()
        mm.reset_operands(a=a, stream=5)
        mm.reset_operands(b=b)
        assert _FakeStream.copies == [5, None]
        np.testing.assert_array_equal(_mirror_of(mm, "a")[1], a)
        # unchecked, NumPy operands are still checked (their copy costs more than the checks)
        with pytest.raises(ValueError, match=r"^b: numpy float32 shape \(5, 3\)"):
            mm.reset_operands_unchecked(b=np.ascontiguousarray(b.T))


def test_execute_and_tuning_arguments_are_checked(fake_gpu):
    with Matmul(_numbered((4, 3)), _numbered((3, 5)), options={"device_id": 0}) as mm:
        mm.plan()
        with pytest.raises(ValueError, match=r"^algorithm: not one of this Matmul's algorithms \(Matmul.algorithms\)$"):
            mm.execute(algorithm=Algorithm(bytes(64), 0))  # equal, but not one of them
        with pytest.raises(TypeError, match=r"^limit: expected an int; got 2.0"):
            mm.applicable_algorithm_ids(2.0)
        with pytest.raises(ValueError, match=r"^limit: 0; must be >= 1"):
            mm.applicable_algorithm_ids(0)
        with pytest.raises(ValueError, match=r"^quantization_scales: \['a'\] not planned; this Matmul has "
                                             r"scales for \[\]"):
            mm.reset_operands(quantization_scales={"a": 2.0})
        with pytest.raises(TypeError, match=r"^quantization_scales: expected a dict or None; got float"):
            mm.reset_operands(quantization_scales=2.0)
