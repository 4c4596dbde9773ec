# SPDX-License-Identifier: Apache-2.0
"""NumPy operands on a GPU: device copies in their memory order, results copied back."""

from __future__ import annotations

from mathdx_operands import Operand, cupy_stream, numpy_dtype


def mirror(pkg, op: Operand, device: int, stream: int | None = None) -> Operand:
    """The device copy (CuPy) of the NumPy operand ``op``, in ``op``'s memory order, made on
    ``stream`` (None: the current one)."""
    dev = pkg.to_device(op.obj.view(op.dtype.storage), device, stream)
    strides = tuple(s // dev.itemsize for s in dev.strides)
    return Operand(dev, "numpy", dev.data.ptr, op.shape, strides, op.dtype, device)


def mirror_all(pkg, ops: dict, device: int) -> dict:
    """``ops`` (name -> Operand or None) with each NumPy operand replaced by its mirror."""
    return {k: (mirror(pkg, op, device) if op is not None else None) for k, op in ops.items()}


def refresh(pkg, mirrored: Operand, op: Operand, device: int, stream: int | None = None) -> Operand:
    """``op``'s mirror with its host data: written into ``mirrored`` (same layout: checked by the
    caller), or a new copy where ``mirrored`` was released (its array None); on ``stream``
    (None: the current one). Returns the mirror."""
    if mirrored.obj is None:
        return mirror(pkg, op, device, stream)
    pkg.write(mirrored.obj, op.obj, stream)
    return mirrored


def to_host(p, d, outs, stream: int, host_c: Operand | None):
    """The result ``d`` and auxiliary outputs ``outs`` of problem ``p`` copied to NumPy on
    ``stream`` (blocking); in place, the result goes into ``host_c``, the user's ``c``."""
    import cupy as cp

    with cupy_stream(cp, stream):
        if p.d_out is None:
            dh = host_c.obj
            dh[...] = d.get().view(dh.dtype)
        else:
            dh = d.get().view(numpy_dtype(p.d_dtype))
        oh = {}
        for o in p.outputs:
            arr = outs[o.name].get()
            oh[o.name] = arr.view(numpy_dtype(o.dtype)) if o.dtype.kind != "u" else arr
    return (dh, oh) if p.outputs else dh
