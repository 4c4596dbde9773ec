# SPDX-License-Identifier: Apache-2.0
"""Per-package adapters (CuPy, torch, Numba): current stream, new arrays of the caller's kind."""

from __future__ import annotations

import operator
import sys

import numpy as np

from ._arrays import _prod, c_strides, memory_order_bytes
from ._dtypes import DType, torch_dtype
from ._handles import cupy_stream, stream_handle


class Package:
    """What the operand layer does through one array package.

    Subclasses exist for ``"cupy"``, ``"torch"`` and ``"numba"``; get them with
    :func:`package`. Made on first use (the package is imported then, not before).
    """

    name = ""

    def current_stream(self, device: int | None = None) -> int:
        """Handle of this package's current stream.

        Parameters
        ----------
        device : int, optional
            The device (None: the current device).

        Returns
        -------
        int
        """
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
        """An uninitialised array of ``shape``/``strides`` over ``nelems`` elements.

        Parameters
        ----------
        dtype : DType
        shape : sequence of int
        strides : sequence of int
            In elements.
        nelems : int
            Elements allocated (padded layouts allocate more than ``prod(shape)``).
        device : int
        stream : int
            Allocated in this stream's order.
        current : bool
            ``stream`` is known to be the package's current stream (skips a look-up).

        Returns
        -------
        array of this package
        """
        raise NotImplementedError

    def current_stream_getter(self):
        """A callable ``f(device)`` doing :meth:`current_stream`, read at each call.

        Returns
        -------
        callable
        """
        return self.current_stream

    def allocator(self, dtype: DType, shape, strides, nelems: int, device: int):
        """A callable ``f(stream, current=False)`` doing :meth:`empty` for a fixed layout.

        What does not depend on the stream is looked up once, here.

        Parameters
        ----------
        dtype, shape, strides, nelems, device
            As for :meth:`empty`.

        Returns
        -------
        callable
        """
        empty = self.empty

        def alloc(stream, current=False):
            return empty(dtype, shape, strides, nelems, device, stream, current)

        return alloc

    def group_allocator(self, layouts, device: int):
        """A callable ``f(stream)`` making one array per layout of ``layouts`` (``(dtype, shape,
        strides, nelems)`` as for :meth:`empty`) from a single allocation, in order, each at a
        256-byte boundary: ``[(array, data pointer), ...]``. The arrays share the allocation's
        lifetime. None where the package has no such path.

        Parameters
        ----------
        layouts : sequence of tuple
        device : int

        Returns
        -------
        callable or None
        """
        return None

    def new(self, shape, dtype, stream):
        """A C-contiguous uninitialised array on the current device, in ``stream``'s order.

        Parameters
        ----------
        shape : tuple of int
        dtype : numpy.dtype
            Any dtype the package has (int32 included).
        stream : Stream

        Returns
        -------
        array of this package
        """
        raise NotImplementedError

    @staticmethod
    def ptr(arr) -> int:
        """Device address of an array of this package.

        Parameters
        ----------
        arr : array of this package

        Returns
        -------
        int
        """
        raise NotImplementedError

    def scalar_array(self, value: float, device: int):
        """A one-element float32 device array holding ``value`` (used for FP8 scales).

        Parameters
        ----------
        value : float
        device : int

        Returns
        -------
        array of this package
        """
        raise NotImplementedError


class _CuPy(Package):
    name = "cupy"

    def __init__(self):
        self.cp = sys.modules.get("cupy") or __import__("cupy")
        self._ext = {}

    def current_stream(self, device=None):
        return self.cp.cuda.get_current_stream().ptr

    def _stream_ctx(self, stream):
        ctx = self._ext.get(stream)
        if ctx is None:
            ctx = self._ext[stream] = cupy_stream(self.cp, stream)
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

    def _alloc_fn(self):
        """``alloc(nbytes, stream, current=False)``: CuPy memory in ``stream``'s order (as empty())."""
        cuda, stream_ctx = self.cp.cuda, self._stream_ctx

        def alloc(nbytes, stream, current=False):
            if current or stream == cuda.get_current_stream().ptr:
                return cuda.alloc(nbytes)
            with stream_ctx(stream):
                return cuda.alloc(nbytes)

        return alloc

    def _array_fn(self, dtype, shape, strides):
        """``array(mem)``: the CuPy array of ``shape`` and element ``strides`` at ``mem``."""
        ndarray, storage, shape = self.cp.ndarray, dtype.storage, tuple(shape)
        if all(shape) and tuple(strides) == c_strides(shape):
            # C order, CuPy's default: without the strides argument (H100 host: 1.32 -> 1.10 us)
            return lambda mem: ndarray(shape, storage, memptr=mem)
        bstrides = tuple(s * dtype.itemsize for s in strides)
        return lambda mem: ndarray(shape, storage, memptr=mem, strides=bstrides)

    def allocator(self, dtype, shape, strides, nelems, device):
        nbytes = max(nelems, 1) * dtype.itemsize
        array, mem = self._array_fn(dtype, shape, strides), self._alloc_fn()
        return lambda stream, current=False: array(mem(nbytes, stream, current))

    def group_allocator(self, layouts, device):
        specs, total = [], 0
        for dtype, shape, strides, nelems in layouts:
            specs.append((self._array_fn(dtype, shape, strides), total))
            total += -(-max(nelems, 1) * dtype.itemsize // 256) * 256
        alloc = self._alloc_fn()

        def make(stream):
            mem = alloc(total, stream)
            base = mem.ptr
            return [(array(mem + off if off else mem), base + off) for array, off in specs]

        return make

    def new(self, shape, dtype, stream):
        cp = self.cp
        if cp.cuda.get_current_stream().ptr == stream.handle:
            return cp.empty(shape, dtype=dtype)
        with self._stream_ctx(stream.handle):
            return cp.empty(shape, dtype=dtype)

    def scalar_array(self, value, device):
        with self.cp.cuda.Device(device):
            return self.cp.full((1,), value, dtype=self.cp.float32)

    def to_device(self, host: np.ndarray, device: int, stream: int | None = None):
        """A copy of ``host`` on ``device``: same shape and memory order (dense), made on
        ``stream`` (None: the current one)."""
        flat, strides = memory_order_bytes(host)
        with self.cp.cuda.Device(device):
            if stream is None:
                buf = self.cp.asarray(flat)
            else:
                with self._stream_ctx(stream):
                    buf = self.cp.asarray(flat)
        isz = host.itemsize
        return self.cp.ndarray(
            host.shape, host.dtype, memptr=buf.data, strides=tuple(s * isz for s in strides)
        )

    def write(self, dev, host: np.ndarray, stream: int | None = None) -> None:
        """Copy ``host`` into ``dev``: a :meth:`to_device` copy of an array of ``host``'s layout,
        on ``stream`` (None: the current one).

        Bytes in memory order into the flat buffer under ``dev`` (CuPy's ``set`` would need
        ``dev`` to be C- or F-contiguous).
        """
        flat, _ = memory_order_bytes(host)
        target = self.cp.ndarray(flat.shape, flat.dtype, memptr=dev.data)
        target.set(flat, stream=None if stream is None else self._stream_ctx(stream))


class _Torch(Package):
    name = "torch"

    def __init__(self):
        self.torch = t = sys.modules["torch"]
        raw = getattr(getattr(t, "_C", None), "_cuda_getCurrentRawStream", None)
        self._raw_stream = raw or (lambda d: t.cuda.current_stream(d).cuda_stream)
        self._ext = {}
        self._dtypes = {}
        self._devices = {}

    def current_stream(self, device=None):
        if device is None:
            return self.torch.cuda.current_stream().cuda_stream
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
            # a one-element tensor of the dtype and device, made once: its new_empty_strided
            # parses two arguments, not four (dtype= and device= cost ~0.2 us a call)
            empty_strided = t.empty((1,), dtype=tdt, device=dev).new_empty_strided

            def alloc(stream, current=False):  # as empty()
                if current or stream == raw_stream(device):
                    return empty_strided(shape, strides)
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

    def new(self, shape, dtype, stream):
        t = self.torch
        tdt = torch_dtype(dtype)
        if t.cuda.current_stream().cuda_stream == stream.handle:
            return t.empty(shape, dtype=tdt, device="cuda")
        with t.cuda.stream(t.cuda.ExternalStream(stream.handle)):
            return t.empty(shape, dtype=tdt, device="cuda")

    def scalar_array(self, value, device):
        t = self.torch
        return t.full((1,), value, dtype=t.float32, device=t.device("cuda", device))


class _Numba(Package):
    name = "numba"

    def __init__(self):
        from numba import cuda

        self.cuda = cuda
        self._default = None

    def current_stream(self, device=None):
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

    def new(self, shape, dtype, stream):
        return self.cuda.device_array(shape, dtype=dtype, stream=stream.numba)

    def scalar_array(self, value, device):
        return self.cuda.to_device(np.array([value], dtype=np.float32))


_PACKAGES: dict[str, Package] = {}
_CLASSES = {"cupy": _CuPy, "torch": _Torch, "numba": _Numba}


def package(name: str) -> Package:
    """The (cached) :class:`Package` adapter called ``name``.

    Parameters
    ----------
    name : str
        ``"cupy"``, ``"torch"`` or ``"numba"``; ``"numpy"`` gives CuPy's (NumPy operands of
        nvmath_host go to the GPU through CuPy).

    Returns
    -------
    Package

    Raises
    ------
    ValueError
        Any other name.
    """
    if name == "numpy":
        name = "cupy"
    pkg = _PACKAGES.get(name)
    if pkg is None:
        try:
            cls = _CLASSES[name]
        except (KeyError, TypeError):
            raise ValueError(
                f"package: {name!r} is not one of 'cupy', 'torch', 'numba', 'numpy'"
            ) from None
        pkg = _PACKAGES[name] = cls()
    return pkg


def current_stream(name: str, device: int | None = None) -> int:
    """The current stream of an array package.

    Parameters
    ----------
    name : str
        ``"cupy"``, ``"torch"``, ``"numba"`` (its default stream) or ``"numpy"`` (CuPy's).
    device : int, optional
        The device (None: the current device).

    Returns
    -------
    int
        Its ``cudaStream_t``.
    """
    return package(name).current_stream(device)


def device_empty(kind: str, shape, dtype, stream):
    """A new array for a caller of ``kind``: C-contiguous, uninitialised, on the current device.

    Allocated by the caller's package (its memory pool) in ``stream``'s order.

    Parameters
    ----------
    kind : str
        ``"cupy"``, ``"torch"``, ``"numba"``, or ``"numpy"`` (a Numba device array to stage a
        NumPy caller's result, copied back by the caller).
    shape : tuple of int
    dtype : numpy.dtype
    stream : Stream

    Returns
    -------
    cupy.ndarray, torch.Tensor or numba DeviceNDArray
    """
    return package("numba" if kind == "numpy" else kind).new(shape, dtype, stream)
