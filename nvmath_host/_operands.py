# SPDX-License-Identifier: Apache-2.0
"""Array and stream adapters.

An operand is read from the object's own protocol, chosen lazily: ``torch.Tensor`` attributes
(for bfloat16/float8, which ``__cuda_array_interface__`` cannot describe), CuPy and Numba device
arrays through ``__cuda_array_interface__``, NumPy arrays on the host. CuPy / torch / numba are
never imported here: an array of that package existing means the package is already in
``sys.modules``. Streams are read from ``__cuda_stream__``, ``.ptr`` (CuPy), ``.cuda_stream``
(torch), ``.handle`` (Numba) or a raw integer handle.
"""

from __future__ import annotations

import operator
import sys
from dataclasses import dataclass

import numpy as np

from ._cublaslt import DataType


@dataclass(frozen=True)
class DType:
    """An element type nvmath_host knows: its cuBLASLt data type and size."""

    name: str
    cuda: int
    itemsize: int
    kind: str  # "f" real float, "c" complex, "f8" float8

    @property
    def storage(self) -> np.dtype:
        """A NumPy dtype of the same size, for moving bytes (bfloat16/float8 have none)."""
        if self.kind == "f8":
            return np.dtype(np.uint8)
        if self.name == "bfloat16":
            return np.dtype(np.uint16)
        return np.dtype(self.name)


DTYPES = {
    d.name: d
    for d in (
        DType("float16", DataType.R_16F, 2, "f"),
        DType("bfloat16", DataType.R_16BF, 2, "f"),
        DType("float32", DataType.R_32F, 4, "f"),
        DType("float64", DataType.R_64F, 8, "f"),
        DType("complex64", DataType.C_32F, 8, "c"),
        DType("complex128", DataType.C_64F, 16, "c"),
        DType("float8_e4m3fn", DataType.R_8F_E4M3, 1, "f8"),
        DType("float8_e5m2", DataType.R_8F_E5M2, 1, "f8"),
    )
}
UINT8 = DType("uint8", DataType.R_8I, 1, "u")  # relu bit-mask storage (never a matmul operand)


def dtype_of_name(name: str, what: str) -> DType:
    """The :class:`DType` called ``name``, or ``ValueError`` naming ``what``."""
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(
            f"{what}: unsupported dtype {name!r}; supported: {', '.join(DTYPES)}"
        ) from None


class Operand:
    """The facts about one array that the matmul needs (strides in elements)."""

    __slots__ = ("obj", "package", "ptr", "shape", "strides", "dtype", "device")

    def __init__(self, obj, package, ptr, shape, strides, dtype, device):
        self.obj = obj
        self.package = package  # "numpy" | "cupy" | "torch" | "numba"
        self.ptr = ptr
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.dtype = dtype  # DType
        self.device = device  # int, or None on the host

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def signature(self) -> tuple:
        """What a plan depends on (not the pointer)."""
        return (self.package, self.shape, self.strides, self.dtype.name, self.device)


_PACKAGE_OF_TYPE: dict = {}  # type -> package name or None (a function of the type alone)
_UNSEEN = object()


def _package_of(obj) -> str | None:
    t = type(obj)
    try:
        return _PACKAGE_OF_TYPE[t]
    except KeyError:
        pass
    mod = t.__module__.split(".", 1)[0]
    if isinstance(obj, np.ndarray):
        name = "numpy"
    elif mod in ("torch", "cupy", "numba"):
        name = mod
    else:
        name = None
    if len(_PACKAGE_OF_TYPE) < 256:
        _PACKAGE_OF_TYPE[t] = name
    return name


def _prod(shape):
    n = 1
    for x in shape:
        n *= x
    return n


def _c_strides(shape):
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


def memory_order_bytes(arr: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """The elements of ``arr`` as flat bytes in ``arr``'s own memory order, and their strides.

    A dense copy whose axes are nested as ``arr``'s are (largest ``|stride|`` outermost): a
    transposed view or an F-ordered array stays column-major, the batch axes of an N-D array
    stay outermost. Gaps (a strided view) and negative strides are dropped; a broadcast axis
    (stride 0) is materialised outermost. On a tie of strides (an axis of extent 1 shares its
    neighbour's stride) the axis of extent 1 goes inside, then the earlier axis outside. An
    array that is already dense with positive strides is not copied.

    Parameters
    ----------
    arr : numpy.ndarray
        Any array; only its bytes are moved (bfloat16/float8 ``ml_dtypes`` arrays too).

    Returns
    -------
    flat : numpy.ndarray
        One-dimensional ``uint8`` array of ``arr.nbytes`` bytes (a view of ``arr`` when no
        copy is needed).
    strides : tuple of int
        Strides in elements, one per axis of ``arr``: viewing ``flat`` as ``arr.dtype`` with
        ``arr.shape`` and these strides (times the item size) gives ``arr``'s values.
    """
    shape, st = arr.shape, arr.strides
    perm = sorted(
        range(arr.ndim),
        key=lambda i: (not (st[i] == 0 and shape[i] > 1), -abs(st[i]), shape[i] == 1, i),
    )
    dense = arr.transpose(perm)
    if not dense.flags.c_contiguous:
        dense = dense.copy(order="C")
    strides = [0] * arr.ndim
    for axis, s in zip(perm, _c_strides(dense.shape)):
        strides[axis] = s
    return dense.reshape(-1).view(np.uint8), tuple(strides)


def _dtype_name_from_numpy(dt: np.dtype, what: str) -> DType:
    if not dt.isnative:  # the name would hide the byte order, which cuBLASLt does not take
        raise ValueError(
            f"{what}: dtype {dt.str!r} is not in the machine's byte order; convert it first, "
            f"e.g. x.astype(x.dtype.newbyteorder('='))"
        )
    return dtype_of_name(dt.name, what)


_TORCH_DTYPES: dict = {}


def wrap(obj, what: str) -> Operand:
    """Read ``obj`` (NumPy, CuPy, torch, Numba array) as an :class:`Operand`.

    Raises ``TypeError`` naming ``what`` for anything else.
    """
    package = _PACKAGE_OF_TYPE.get(type(obj), _UNSEEN)
    if package is _UNSEEN:
        package = _package_of(obj)
    if package == "numpy":
        dt = _dtype_name_from_numpy(obj.dtype, what)
        strides = _byte_strides_to_elements(obj.strides, dt.itemsize, what)
        return Operand(obj, "numpy", obj.ctypes.data, obj.shape, strides, dt, None)
    if package == "torch":
        if not obj.is_cuda:
            raise TypeError(
                f"{what}: a torch tensor on {obj.device} is not supported; "
                "pass a CUDA tensor or a NumPy array"
            )
        dt = _TORCH_DTYPES.get(obj.dtype)
        if dt is None:
            dt = dtype_of_name(str(obj.dtype).rsplit(".", 1)[-1], what)
            _TORCH_DTYPES[obj.dtype] = dt
        return Operand(
            obj, "torch", obj.data_ptr(), tuple(obj.shape), obj.stride(), dt, obj.device.index
        )
    cai = getattr(obj, "__cuda_array_interface__", None)
    if package in ("cupy", "numba") and cai is not None:
        dt = _dtype_name_from_numpy(np.dtype(cai["typestr"]), what)
        shape = tuple(cai["shape"])
        strides = cai.get("strides")
        strides = (
            _c_strides(shape)
            if strides is None
            else _byte_strides_to_elements(strides, dt.itemsize, what)
        )
        ptr = cai["data"][0] or 0
        if package == "cupy":
            device = obj.device.id
        else:
            device = _pointer_device(ptr)
        return Operand(obj, package, ptr, shape, strides, dt, device)
    kinds = [p for p in ("__cuda_array_interface__", "__dlpack__") if hasattr(obj, p)]
    raise TypeError(
        f"{what}: unsupported operand of type {type(obj).__module__}.{type(obj).__qualname__}"
        + (f" (it has {', '.join(kinds)})" if kinds else "")
        + "; supported: numpy.ndarray, cupy.ndarray, torch.Tensor (CUDA), Numba device arrays"
    )


def _byte_strides_to_elements(strides, itemsize, what):
    out = []
    for s in strides:
        if s % itemsize:
            raise ValueError(f"{what}: stride {s} bytes is not a multiple of the item size")
        out.append(s // itemsize)
    return tuple(out)


def _pointer_device(ptr: int) -> int:
    if not ptr:
        return _runtime().cudaGetDevice()[1]
    from cuda.bindings import driver

    err, dev = driver.cuPointerGetAttribute(
        driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr
    )
    if err != driver.CUresult.CUDA_SUCCESS:
        raise ValueError(f"cannot tell the device of pointer {ptr:#x}: {err}")
    return int(dev)


def _runtime():
    from cuda.bindings import runtime

    return runtime


_GPU = None


def gpu_available() -> bool:
    """Whether a CUDA device can be used (cached; never raises)."""
    global _GPU
    if _GPU is None:
        try:
            rt = _runtime()
            err, count = rt.cudaGetDeviceCount()
            _GPU = err == rt.cudaError_t.cudaSuccess and count > 0
        except Exception:
            _GPU = False
    return _GPU


# ----------------------------------------------------------------------------------- streams


def stream_handle(stream, what: str = "stream") -> int:
    """The raw ``cudaStream_t`` of ``stream`` (int, ``__cuda_stream__``, CuPy/torch/Numba)."""
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        value = proto() if callable(proto) else proto
        return int(value[1])
    for attr in ("ptr", "cuda_stream"):  # CuPy, torch
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    handle = getattr(stream, "handle", None)  # Numba: a ctypes c_void_p
    if handle is not None:
        v = getattr(handle, "value", handle)
        return int(v or 0)
    raise TypeError(
        f"{what}: expected an int handle, an object with __cuda_stream__, or a CuPy, torch or "
        f"Numba stream; got {type(stream).__qualname__}"
    )


class Package:
    """Per-package behaviour: current stream, allocation of results."""

    name = ""

    def current_stream(self, device: int) -> int:
        """Handle of this package's current stream on ``device``."""
        raise NotImplementedError

    def empty(
        self,
        dtype: DType,
        shape,
        strides,
        nelems: int,
        device: int,
        stream: int,
        current: bool = False,
    ):
        """An uninitialised array of ``shape``/``strides`` (elements) over ``nelems``.

        Allocated in ``stream``'s order (``current``: it is the package's current stream).
        """
        raise NotImplementedError

    def current_stream_getter(self):
        """A callable ``f(device)`` doing :meth:`current_stream` (read at each call; for the
        execute path, which looks the current stream up once per call)."""
        return self.current_stream

    def allocator(self, dtype: DType, shape, strides, nelems: int, device: int):
        """A callable ``f(stream, current=False)`` doing
        ``self.empty(dtype, shape, strides, nelems, device, stream, current)``, with what does
        not depend on the stream looked up once (for the execute path)."""
        empty = self.empty

        def alloc(stream, current=False):
            return empty(dtype, shape, strides, nelems, device, stream, current)

        return alloc

    @staticmethod
    def ptr(arr) -> int:
        """Device address of an array of this package."""
        raise NotImplementedError

    def scalar_array(self, value: float, device: int):
        """A one-element float32 device array holding ``value`` (used for FP8 scales)."""
        raise NotImplementedError


class _CuPy(Package):
    name = "cupy"

    def __init__(self):
        self.cp = sys.modules.get("cupy") or __import__("cupy")
        self._ext = {}

    def current_stream(self, device):
        return self.cp.cuda.get_current_stream().ptr

    def _stream_ctx(self, stream):
        ctx = self._ext.get(stream)
        if ctx is None:
            ctx = self._ext[stream] = self.cp.cuda.ExternalStream(stream)
        return ctx

    ptr = operator.attrgetter("data.ptr")  # (C-level) ``arr.data.ptr``

    def empty(self, dtype, shape, strides, nelems, device, stream, current=False):
        cp = self.cp
        nbytes = max(nelems, 1) * dtype.itemsize
        if current or stream == cp.cuda.get_current_stream().ptr:
            mem = cp.cuda.alloc(nbytes)
        else:
            with self._stream_ctx(stream):
                mem = cp.cuda.alloc(nbytes)
        isz = dtype.itemsize
        return cp.ndarray(shape, dtype.storage, memptr=mem, strides=tuple(s * isz for s in strides))

    def allocator(self, dtype, shape, strides, nelems, device):
        cp = self.cp
        nbytes = max(nelems, 1) * dtype.itemsize
        storage = dtype.storage
        bstrides = tuple(s * dtype.itemsize for s in strides)
        shape = tuple(shape)
        cuda = cp.cuda
        ndarray = cp.ndarray
        stream_ctx = self._stream_ctx

        def alloc(stream, current=False):  # as empty()
            if current or stream == cuda.get_current_stream().ptr:
                mem = cuda.alloc(nbytes)
            else:
                with stream_ctx(stream):
                    mem = cuda.alloc(nbytes)
            return ndarray(shape, storage, memptr=mem, strides=bstrides)

        return alloc

    def scalar_array(self, value, device):
        with self.cp.cuda.Device(device):
            return self.cp.full((1,), value, dtype=self.cp.float32)

    def to_device(self, host: np.ndarray, device: int):
        """A copy of ``host`` on ``device``: same shape and memory order (dense)."""
        flat, strides = memory_order_bytes(host)
        with self.cp.cuda.Device(device):
            buf = self.cp.asarray(flat)
        isz = host.itemsize
        return self.cp.ndarray(
            host.shape, host.dtype, memptr=buf.data, strides=tuple(s * isz for s in strides)
        )

    def write(self, dev, host: np.ndarray) -> None:
        """Copy ``host`` into ``dev``: a :meth:`to_device` copy of an array of ``host``'s layout.

        Bytes in memory order into the flat buffer under ``dev`` (CuPy's ``set`` would need
        ``dev`` to be C- or F-contiguous).
        """
        flat, _ = memory_order_bytes(host)
        self.cp.ndarray(flat.shape, flat.dtype, memptr=dev.data).set(flat)


class _Torch(Package):
    name = "torch"

    def __init__(self):
        self.torch = t = sys.modules["torch"]
        raw = getattr(getattr(t, "_C", None), "_cuda_getCurrentRawStream", None)
        self._raw_stream = raw or (lambda d: t.cuda.current_stream(d).cuda_stream)
        self._ext = {}
        self._dtypes = {}
        self._devices = {}

    def current_stream(self, device):
        return self._raw_stream(device)

    def current_stream_getter(self):
        return self._raw_stream  # torch._C._cuda_getCurrentRawStream: no Python frame

    ptr = operator.methodcaller("data_ptr")  # (C-level) ``arr.data_ptr()``

    def _torch_dtype_device(self, dtype, device):
        """torch dtype and device objects for ``dtype``/``device``, made once and reused."""
        t = self.torch
        tdt = self._dtypes.get(dtype.name)
        if tdt is None:
            tdt = self._dtypes[dtype.name] = getattr(t, dtype.name)
        dev = self._devices.get(device)
        if dev is None:
            dev = self._devices[device] = t.device("cuda", device)
        return t, tdt, dev

    def empty(self, dtype, shape, strides, nelems, device, stream, current=False):
        t, tdt, dev = self._torch_dtype_device(dtype, device)
        if current or stream == self._raw_stream(device):
            return self._alloc(t, shape, strides, nelems, tdt, dev)
        s = self._ext.get(stream)
        if s is None:
            s = self._ext[stream] = t.cuda.ExternalStream(stream, device=dev)
        with t.cuda.stream(s):
            return self._alloc(t, shape, strides, nelems, tdt, dev)

    def allocator(self, dtype, shape, strides, nelems, device):
        t, tdt, dev = self._torch_dtype_device(dtype, device)
        raw_stream = self._raw_stream
        shape, strides = tuple(shape), tuple(strides)
        alloc_here = self._alloc

        def on(stream):  # another stream than the current one: allocate in its order
            s = self._ext.get(stream)
            if s is None:
                s = self._ext[stream] = t.cuda.ExternalStream(stream, device=dev)
            with t.cuda.stream(s):
                return alloc_here(t, shape, strides, nelems, tdt, dev)

        if nelems == _prod(shape):  # dense: one call, no Python frame in between
            empty_strided = t.empty_strided

            def alloc(stream, current=False):  # as empty()
                if current or stream == raw_stream(device):
                    return empty_strided(shape, strides, dtype=tdt, device=dev)
                return on(stream)

        else:

            def alloc(stream, current=False):  # as empty()
                if current or stream == raw_stream(device):
                    return alloc_here(t, shape, strides, nelems, tdt, dev)
                return on(stream)

        return alloc

    @staticmethod
    def _alloc(t, shape, strides, nelems, tdt, dev):
        if nelems == _prod(shape):  # dense: one call
            return t.empty_strided(shape, strides, dtype=tdt, device=dev)
        # padded (aux outputs): the whole padded extent is allocated, then viewed
        return t.empty(max(nelems, 1), dtype=tdt, device=dev).as_strided(shape, strides)

    def scalar_array(self, value, device):
        t = self.torch
        return t.full((1,), value, dtype=t.float32, device=t.device("cuda", device))


class _Numba(Package):
    name = "numba"

    def __init__(self):
        from numba import cuda

        self.cuda = cuda
        self._default = None

    def current_stream(self, device):
        if self._default is None:
            self._default = stream_handle(self.cuda.default_stream())
        return self._default

    @staticmethod
    def ptr(arr):
        return arr.__cuda_array_interface__["data"][0]

    def empty(self, dtype, shape, strides, nelems, device, stream, current=False):
        from numba.cuda.cudadrv.devicearray import DeviceNDArray

        isz = dtype.itemsize
        mem = self.cuda.current_context().memalloc(max(nelems, 1) * isz)
        return DeviceNDArray(
            tuple(shape), tuple(s * isz for s in strides), dtype.storage, gpu_data=mem
        )

    def scalar_array(self, value, device):
        return self.cuda.to_device(np.array([value], dtype=np.float32))


_PACKAGES: dict[str, Package] = {}


def package(name: str) -> Package:
    """The (cached) :class:`Package` for ``name``; NumPy operands on a GPU go through CuPy."""
    if name == "numpy":
        name = "cupy"
    pkg = _PACKAGES.get(name)
    if pkg is None:
        pkg = _PACKAGES[name] = {"cupy": _CuPy, "torch": _Torch, "numba": _Numba}[name]()
    return pkg


def host_array(dtype: DType, shape, strides, nelems: int) -> np.ndarray:
    """A host array like :meth:`Package.empty` (for the CPU path)."""
    base = np.empty(max(nelems, 1), dtype=numpy_dtype(dtype))
    isz = base.itemsize
    return np.lib.stride_tricks.as_strided(
        base, shape=tuple(shape), strides=tuple(s * isz for s in strides)
    )


def numpy_dtype(dtype: DType) -> np.dtype:
    """The NumPy dtype for ``dtype`` (``ml_dtypes`` for bfloat16/float8 when installed)."""
    if dtype.name == "uint8":
        return np.dtype(np.uint8)
    if dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        try:
            import ml_dtypes

            return np.dtype(getattr(ml_dtypes, dtype.name))
        except ImportError:
            return dtype.storage
    return np.dtype(dtype.name)
