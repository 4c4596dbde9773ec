# SPDX-License-Identifier: Apache-2.0
"""Recognising an array's package and reading it: pointer, shape, strides, dtype, device, owner."""

from __future__ import annotations

import numpy as np

from ._cuda import pointer_device, simulator
from ._dtypes import DType, dtype_from_numpy, dtype_of_name, numpy_dtype, torch_dtype_name

_DEVICE_PACKAGES = ("torch", "cupy", "numba")


class Operand:
    """The facts about one array: where its elements are and how they are laid out.

    Parameters
    ----------
    obj : object
        The array itself (the owner: it keeps the memory alive).
    package : str
        ``"numpy"``, ``"cupy"``, ``"torch"`` or ``"numba"``.
    ptr : int
        Address of the element at index ``(0, ..., 0)`` (host address for NumPy).
    shape : tuple of int
    strides : tuple of int
        In elements (not bytes); may be 0 (broadcast) or negative.
    dtype : DType
    device : int or None
        Device ordinal; None on the host.
    conj : bool
        The values are the conjugates of the memory's (a torch tensor's conjugate bit, where
        the reader accepts it: :func:`wrap` with ``conj=True``).
    """

    __slots__ = ("obj", "package", "ptr", "shape", "strides", "dtype", "device", "conj")

    def __init__(self, obj, package, ptr, shape, strides, dtype, device, conj=False):
        self.obj = obj
        self.package = package
        self.ptr = ptr
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.dtype = dtype
        self.device = device
        self.conj = conj

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def signature(self) -> tuple:
        """What a plan made for this operand depends on (not the pointer).

        Returns
        -------
        tuple
            ``(package, shape, strides, dtype name, device, conj)``.
        """
        return (self.package, self.shape, self.strides, self.dtype.name, self.device, self.conj)


_PACKAGE_OF_TYPE: dict = {}  # type -> package name or None (a function of the type alone)
_UNSEEN = object()


def package_of(obj) -> str | None:
    """The array package ``obj`` belongs to, from its type alone (cached per type).

    Parameters
    ----------
    obj : object

    Returns
    -------
    str or None
        ``"numpy"`` for a ``numpy.ndarray`` (subclasses too); ``"cupy"``, ``"torch"`` or
        ``"numba"`` for an object of a type defined in that package (the simulator's arrays
        are numba's); None otherwise. Imports none of them.
    """
    t = type(obj)
    try:
        return _PACKAGE_OF_TYPE[t]
    except KeyError:
        pass
    mod = t.__module__.split(".", 1)[0]
    if isinstance(obj, np.ndarray):
        name = "numpy"
    elif mod in _DEVICE_PACKAGES:
        name = mod
    else:
        name = None
    if len(_PACKAGE_OF_TYPE) < 256:
        _PACKAGE_OF_TYPE[t] = name
    return name


def on_device(obj) -> bool:
    """Whether ``obj`` is a GPU array, used in place and never copied to the host.

    Parameters
    ----------
    obj : object

    Returns
    -------
    bool
        True for objects exposing ``__cuda_array_interface__`` (not NumPy arrays) and, under
        the simulator, for the simulator's device arrays.
    """
    return not isinstance(obj, np.ndarray) and (
        hasattr(obj, "__cuda_array_interface__")
        or (simulator() and type(obj).__name__ == "FakeCUDAArray")
    )


def check_torch_values(obj, what: str, grad: bool = False, conj: bool = False) -> None:
    """Refuse a CUDA torch tensor whose memory does not hold the values it shows.

    A lazy ``.conj()`` view sets the conjugate bit and a lazy negation (``.conj().imag``) the
    negative bit: the storage keeps the values as they were, and a kernel reading the pointer
    would see those. PyTorch's own DLPack export refuses both.

    Parameters
    ----------
    obj : torch.Tensor
    what : str
        The argument being read, named in the error.
    grad : bool
        Also refuse a tensor that requires grad (as PyTorch's ``__cuda_array_interface__``
        does: the call would not be recorded for autograd).
    conj : bool
        Accept the conjugate bit (the caller applies the conjugation itself).

    Raises
    ------
    ValueError
        Naming ``what`` and the call that makes a tensor acceptable.
    """
    if not conj and obj.is_conj():
        raise ValueError(f"{what}: a torch tensor with the conjugate bit set (a lazy .conj() view) is not "
                         "supported: its memory holds the unconjugated values; pass .resolve_conj() of it")
    if obj.is_neg():
        raise ValueError(f"{what}: a torch tensor with the negative bit set (a lazily negated view, e.g. "
                         ".conj().imag) is not supported: its memory holds the values unnegated; "
                         "pass .resolve_neg() of it")
    if grad and obj.requires_grad:
        raise ValueError(f"{what}: a torch tensor that requires grad is not supported (the call is not "
                         "recorded for autograd); pass .detach() of it")


def caller_kind(obj, what: str = "array") -> str:
    """The kind of array a caller passing ``obj`` gets results as.

    Parameters
    ----------
    obj : object
    what : str
        The argument being read, named in the error.

    Returns
    -------
    str
        ``"numpy"`` for NumPy arrays; ``"cupy"`` / ``"torch"`` for their GPU arrays;
        ``"numba"`` for Numba device arrays, the simulator's arrays and any other object
        exposing ``__cuda_array_interface__``.

    Raises
    ------
    TypeError
        ``obj`` is none of these (a list, a CPU torch tensor, ...).
    """
    if isinstance(obj, np.ndarray):
        return "numpy"
    if package_of(obj) == "torch" and obj.is_cuda:  # before its interface refuses
        check_torch_values(obj, what, grad=True)
    if on_device(obj):
        pkg = package_of(obj)
        return pkg if pkg in ("cupy", "torch") else "numba"
    raise TypeError(
        f"{what} must be a NumPy array or a GPU array exposing __cuda_array_interface__ "
        f"(CuPy, PyTorch CUDA tensor, Numba device array); got {type(obj).__name__}"
    )


def c_strides(shape) -> tuple[int, ...]:
    """C-order strides in elements for ``shape`` (extents of 0 count as 1).

    Parameters
    ----------
    shape : sequence of int

    Returns
    -------
    tuple of int
    """
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


def _prod(shape):
    n = 1
    for x in shape:
        n *= x
    return n


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
    for axis, s in zip(perm, c_strides(dense.shape)):
        strides[axis] = s
    return dense.reshape(-1).view(np.uint8), tuple(strides)


def host_array(dtype: DType, shape, strides, nelems: int) -> np.ndarray:
    """An uninitialised host array with the given layout.

    Parameters
    ----------
    dtype : DType
    shape : sequence of int
    strides : sequence of int
        In elements.
    nelems : int
        Elements allocated (at least the extent ``shape``/``strides`` reach).

    Returns
    -------
    numpy.ndarray
        A strided view of a fresh buffer, of :func:`numpy_dtype` ``(dtype)``.
    """
    base = np.empty(max(nelems, 1), dtype=numpy_dtype(dtype))
    isz = base.itemsize
    return np.lib.stride_tricks.as_strided(
        base, shape=tuple(shape), strides=tuple(s * isz for s in strides)
    )


def _byte_strides_to_elements(strides, itemsize, what):
    out = []
    for s in strides:
        if s % itemsize:
            raise ValueError(f"{what}: stride {s} bytes is not a multiple of the item size")
        out.append(s // itemsize)
    return tuple(out)


_TORCH_DTYPES: dict = {}  # torch dtype -> DType


def wrap(obj, what: str, conj: bool = False) -> Operand:
    """Read a NumPy, CuPy, torch (CUDA) or Numba array as an :class:`Operand`.

    torch tensors are read through their attributes (``__cuda_array_interface__`` cannot
    describe bfloat16/float8); CuPy and Numba arrays through ``__cuda_array_interface__``.
    Imports none of these packages. The dtype must be one of :data:`DTYPES`.

    Parameters
    ----------
    obj : object
        The array.
    what : str
        The argument being read, named in every error.
    conj : bool
        Accept a torch tensor with the conjugate bit set (a lazy ``.conj()``) as an operand
        whose :attr:`Operand.conj` says so; by default it is refused, as is the negative bit
        always (:func:`check_torch_values`).

    Returns
    -------
    Operand

    Raises
    ------
    TypeError
        ``obj`` is not an array of these packages, or is a torch tensor off the GPU.
    ValueError
        Unsupported or byte-swapped dtype; a stride that is not a multiple of the item size.
    """
    package = _PACKAGE_OF_TYPE.get(type(obj), _UNSEEN)
    if package is _UNSEEN:
        package = package_of(obj)
    if package == "numpy":
        dt = dtype_from_numpy(obj.dtype, what)
        strides = _byte_strides_to_elements(obj.strides, dt.itemsize, what)
        return Operand(obj, "numpy", obj.ctypes.data, obj.shape, strides, dt, None)
    if package == "torch":
        if not obj.is_cuda:
            raise TypeError(
                f"{what}: a torch tensor on {obj.device} is not supported; "
                "pass a CUDA tensor or a NumPy array"
            )
        is_conj = obj.is_conj()  # read once (each torch attribute read costs ~0.1-0.3 us)
        if (is_conj and not conj) or obj.is_neg():
            check_torch_values(obj, what, conj=conj)  # raises, naming what and the bit
        dt = _TORCH_DTYPES.get(obj.dtype)
        if dt is None:
            dt = dtype_of_name(torch_dtype_name(obj.dtype), what)
            _TORCH_DTYPES[obj.dtype] = dt
        # get_device(): a CUDA tensor's index, without the torch.device object of .device.index
        return Operand(
            obj, "torch", obj.data_ptr(), tuple(obj.shape), obj.stride(), dt, obj.get_device(),
            conj and is_conj,
        )
    cai = getattr(obj, "__cuda_array_interface__", None)
    if package in ("cupy", "numba") and cai is not None:
        dt = dtype_from_numpy(np.dtype(cai["typestr"]), what)
        shape = tuple(cai["shape"])
        strides = cai.get("strides")
        strides = (
            c_strides(shape)
            if strides is None
            else _byte_strides_to_elements(strides, dt.itemsize, what)
        )
        ptr = cai["data"][0] or 0
        device = obj.device.id if package == "cupy" else pointer_device(ptr)
        return Operand(obj, package, ptr, shape, strides, dt, device)
    kinds = [p for p in ("__cuda_array_interface__", "__dlpack__") if hasattr(obj, p)]
    raise TypeError(
        f"{what}: unsupported operand of type {type(obj).__module__}.{type(obj).__qualname__}"
        + (f" (it has {', '.join(kinds)})" if kinds else "")
        + "; supported: numpy.ndarray, cupy.ndarray, torch.Tensor (CUDA), Numba device arrays"
    )
