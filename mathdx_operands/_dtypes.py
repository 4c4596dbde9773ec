# SPDX-License-Identifier: Apache-2.0
"""Element types: names, CUDA data types, NumPy / ml_dtypes / torch equivalents."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

# cudaDataType_t (library_types.h): the CUDA-wide enum that cuBLAS, cuFFT, ... take
_R_16F, _R_16BF, _R_32F, _R_64F, _C_32F, _C_64F, _R_8I = 2, 14, 0, 1, 4, 5, 3
_R_8F_E4M3, _R_8F_E5M2 = 28, 29
_ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


@dataclass(frozen=True)
class DType:
    """An element type of the operand layer.

    Attributes
    ----------
    name : str
        NumPy / torch spelling (``"float32"``, ``"bfloat16"``, ``"float8_e4m3fn"``, ...).
    cuda : int
        Its ``cudaDataType_t`` value (library_types.h).
    itemsize : int
        Bytes per element.
    kind : str
        ``"f"`` real float, ``"c"`` complex, ``"f8"`` float8, ``"u"`` unsigned integer.
    """

    name: str
    cuda: int
    itemsize: int
    kind: str

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
        DType("float16", _R_16F, 2, "f"),
        DType("bfloat16", _R_16BF, 2, "f"),
        DType("float32", _R_32F, 4, "f"),
        DType("float64", _R_64F, 8, "f"),
        DType("complex64", _C_32F, 8, "c"),
        DType("complex128", _C_64F, 16, "c"),
        DType("float8_e4m3fn", _R_8F_E4M3, 1, "f8"),
        DType("float8_e5m2", _R_8F_E5M2, 1, "f8"),
    )
}
UINT8 = DType("uint8", _R_8I, 1, "u")  # byte storage (e.g. a relu bit-mask), not in DTYPES


def dtype_of_name(name: str, what: str) -> DType:
    """The :class:`DType` called ``name``.

    Parameters
    ----------
    name : str
        A key of :data:`DTYPES`.
    what : str
        The argument being read, named in the error.

    Returns
    -------
    DType

    Raises
    ------
    ValueError
        ``name`` is not in :data:`DTYPES` (the message lists those that are).
    """
    try:
        return DTYPES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"{what}: unsupported dtype {name!r}; supported: {', '.join(DTYPES)}"
        ) from None


def dtype_from_numpy(dt: np.dtype, what: str) -> DType:
    """The :class:`DType` of a NumPy dtype (ml_dtypes' bfloat16/float8 included).

    Parameters
    ----------
    dt : numpy.dtype
        In the machine's byte order.
    what : str
        The argument being read, named in the error.

    Returns
    -------
    DType

    Raises
    ------
    ValueError
        ``dt`` is byte-swapped or not in :data:`DTYPES`.
    """
    if not dt.isnative:  # the name would hide the byte order, which CUDA libraries do not take
        raise ValueError(
            f"{what}: dtype {dt.str!r} is not in the machine's byte order; convert it first, "
            f"e.g. x.astype(x.dtype.newbyteorder('='))"
        )
    return dtype_of_name(dt.name, what)


def numpy_dtype(dtype: DType) -> np.dtype:
    """The NumPy dtype of ``dtype``.

    Parameters
    ----------
    dtype : DType

    Returns
    -------
    numpy.dtype
        ``ml_dtypes``' type for bfloat16/float8 when ml_dtypes is installed, else
        :attr:`DType.storage` (same size, for moving bytes).
    """
    if dtype.name == "uint8":
        return np.dtype(np.uint8)
    if dtype.name in _ML_DTYPES:
        try:
            import ml_dtypes

            return np.dtype(getattr(ml_dtypes, dtype.name))
        except ImportError:
            return dtype.storage
    return np.dtype(dtype.name)


_FROM_TORCH: dict = {}  # torch dtype -> numpy dtype or None
_TO_TORCH: dict = {}  # numpy dtype -> torch dtype


def torch_dtype_name(tdtype) -> str:
    """The name of a torch dtype (``torch.float32`` -> ``"float32"``).

    Parameters
    ----------
    tdtype : torch.dtype
        Or any object whose ``str()`` is ``"torch.<name>"``.

    Returns
    -------
    str
    """
    return str(tdtype).rsplit(".", 1)[-1]


def numpy_dtype_of_torch(tdtype) -> np.dtype | None:
    """The NumPy dtype of a torch dtype, or None when NumPy has none.

    Parameters
    ----------
    tdtype : torch.dtype

    Returns
    -------
    numpy.dtype or None
        bfloat16/float8 through ``ml_dtypes`` (None without it); None for torch-only types
        (``complex32``, quantized types).
    """
    try:
        return _FROM_TORCH[tdtype]
    except KeyError:
        pass
    name = torch_dtype_name(tdtype)
    out = None
    if name in _ML_DTYPES:
        try:
            import ml_dtypes

            out = np.dtype(getattr(ml_dtypes, name))
        except ImportError:
            pass
    else:
        try:
            out = np.dtype(name)
        except TypeError:
            pass
    if len(_FROM_TORCH) < 256:
        _FROM_TORCH[tdtype] = out
    return out


def torch_dtype(dtype, what: str = "dtype"):
    """The torch dtype of a NumPy dtype, a :class:`DType` or a name.

    Imports nothing: torch must already be imported (a caller holding torch tensors has).

    Parameters
    ----------
    dtype : numpy.dtype, DType or str
    what : str
        The argument being read, named in the error.

    Returns
    -------
    torch.dtype

    Raises
    ------
    TypeError
        torch has no such dtype (or torch is not imported).
    """
    key = dtype.name if isinstance(dtype, DType) else np.dtype(dtype).name
    try:
        return _TO_TORCH[key]
    except KeyError:
        pass
    torch = sys.modules.get("torch")
    out = getattr(torch, key, None) if torch is not None else None
    if out is None or type(out).__name__ != "dtype":
        raise TypeError(f"{what}: torch has no dtype {key!r}")
    _TO_TORCH[key] = out
    return out
