# SPDX-License-Identifier: Apache-2.0
"""torch CPU tensors as host operands: NumPy views of their memory in, torch CPU tensors out.

nvmath-python takes torch tensors on the CPU as it takes NumPy arrays: the matmul runs on a
GPU (copies made there) or, without one, on the CPU, and the result is a torch CPU tensor.
nvmath_host does the same through its NumPy path: each tensor is read as a NumPy view of its
memory (no copy; bfloat16 and float8 through ``ml_dtypes``), and each NumPy result is handed
back as a torch tensor sharing its memory. Importing this module imports no torch.
"""

from __future__ import annotations

import numpy as np

from mathdx_operands import check_torch_values, dtype_of_name, numpy_dtype, torch_dtype_name

_ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")  # no NumPy export in torch


def is_torch_cpu(x) -> bool:
    """Whether ``x`` is a torch tensor in CPU memory (a subclass such as ``Parameter`` too).
    A CUDA tensor is answered by ``is_cuda`` alone: its ``device.type`` costs ~0.5 us a read
    (a new ``torch.device`` and string), at every :func:`matmul` call."""
    return (type(x).__module__.startswith("torch") and not getattr(x, "is_cuda", False)
            and getattr(getattr(x, "device", None), "type", None) == "cpu")


def _kind(x) -> str:
    if is_torch_cpu(x):
        return "a torch tensor on cpu"
    if type(x).__module__.startswith("torch") and hasattr(x, "device"):
        return f"a torch tensor on {x.device}"
    return f"a {type(x).__module__.split('.', 1)[0]} array"


def operands_on_cpu(a, b, c) -> bool:
    """Whether ``a`` is a torch CPU tensor, and then ``b`` and ``c`` (if given) too; TypeError
    naming the operand that is not, since packages and devices are not mixed."""
    if not is_torch_cpu(a):
        return False
    for name, x in (("b", b), ("c", c)):
        if x is not None and not is_torch_cpu(x):
            raise TypeError(
                f"{name}: {_kind(x)}; a is a torch tensor on cpu (mixing packages or devices is "
                "not supported)"
            )
    return True


def to_numpy(t, what: str, conj: bool = False) -> np.ndarray:
    """The NumPy view of the torch CPU tensor ``t`` (same memory and strides).

    ``conj``: a conjugate-bit tensor (a lazy ``.conj()``, e.g. ``x.mH``) is accepted as its
    conjugated values (a copy: NumPy has no conjugate bit); otherwise it is refused, as the
    negative bit always is (:func:`mathdx_operands.check_torch_values`). A tensor that
    requires grad is read detached (the call is not recorded for autograd).
    """
    if not is_torch_cpu(t):
        raise TypeError(f"{what}: {_kind(t)}; the operands are torch tensors on cpu")
    if str(t.layout) != "torch.strided":
        raise TypeError(f"{what}: a torch tensor of layout {t.layout} is not supported; pass a dense one")
    check_torch_values(t, what, conj=conj)
    t = t.detach()
    if torch_dtype_name(t.dtype) == "uint8":  # a relu_aux bit-mask
        return t.numpy()
    if t.is_conj():
        t = t.resolve_conj()
    dtype = dtype_of_name(torch_dtype_name(t.dtype), what)
    dt = numpy_dtype(dtype)
    if dt.name != dtype.name:  # NumPy has bfloat16 and float8 only through ml_dtypes
        raise ValueError(f"{what}: torch {dtype.name} tensors on the CPU need ml_dtypes installed")
    if dtype.name in _ML_DTYPES:
        return _storage_view(t, dt)
    return t.numpy()


def _storage_view(t, dt: np.dtype) -> np.ndarray:
    """A bfloat16/float8 tensor (which torch cannot export to NumPy) as ``dt``, through an
    integer view of the same bytes."""
    import torch

    raw = torch.int16 if dt.itemsize == 2 else torch.uint8
    return t.view(raw).numpy().view(dt)


def to_torch(x: np.ndarray):
    """The torch CPU tensor sharing the memory of the NumPy result ``x``."""
    import torch

    if x.dtype.name in _ML_DTYPES:
        raw = np.int16 if x.dtype.itemsize == 2 else np.uint8
        return torch.from_numpy(x.view(raw)).view(getattr(torch, x.dtype.name))
    return torch.from_numpy(x)


def results(out, c=None, c_view=None):
    """What :meth:`Matmul.execute` returned for NumPy operands, as torch CPU tensors: ``d``
    or ``(d, aux)``. In place (``d`` is ``c_view``, the view of the user's ``c``) the result is
    the user's tensor ``c`` itself."""
    if isinstance(out, tuple):
        d, aux = out
        return results(d, c, c_view), {k: to_torch(v) for k, v in aux.items()}
    if c is not None and out is c_view:
        return c
    return to_torch(out)
