# SPDX-License-Identifier: Apache-2.0
"""Strides as cuBLASLt sees them: column-major matrix layouts, batch strides, result arrays."""

from __future__ import annotations

from dataclasses import dataclass

from mathdx_operands import DType


def round_up(x: int, m: int) -> int:
    """``x`` rounded up to a multiple of ``m``."""
    return -(-x // m) * m


def matrix_memory(rows, cols, sr, sc, what):
    """How a (rows, cols) matrix with element strides (sr, sc) sits in memory.

    Returns ("row", ld) when it is row-major (col-major ``cols x rows`` with ``ld``), or
    ("col", ld) when it is col-major ``rows x cols``.
    """
    if (sc == 1 or cols == 1) and (rows == 1 or sr >= cols):
        return "row", (sr if rows > 1 else cols)
    if (sr == 1 or rows == 1) and (cols == 1 or sc >= rows):
        return "col", (sc if cols > 1 else rows)
    raise ValueError(
        f"{what}: strides {(sr, sc)} (in elements) of a {rows}x{cols} matrix cannot be expressed "
        "to cuBLASLt: one of the last two axes must have unit stride and the other a stride "
        "no smaller than the matrix extent (make it contiguous first)"
    )


def batch_stride(shape, strides, what, host: bool = False) -> int:
    """One stride for all batch axes, or ValueError naming ``what``.

    A negative one (a reversed view) is refused for device operands; ``host``: a NumPy operand,
    which is mirrored to the device in its memory order (a dense copy going forward) before any
    plan, so its stride here is only validated."""
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]
    if not dims:
        return 0
    if not host and any(s < 0 for _, s in dims):
        raise ValueError(
            f"{what}: batch axes of shape {tuple(shape)} with strides {tuple(strides)} run "
            "backwards in memory (a reversed view); cuBLASLt's strided batches take a stride of 0 "
            "or more: pass a copy (e.g. cupy.ascontiguousarray)"
        )
    for (_, s0), (n1, s1) in zip(dims, dims[1:]):
        if s0 != s1 * n1:
            raise ValueError(
                f"{what}: batch axes of shape {tuple(shape)} with strides {tuple(strides)} cannot "
                "be expressed as one batch stride"
            )
    return dims[-1][1]


@dataclass
class Layout:
    """A ``cublasLtMatrixLayout_t``'s fields: a column-major ``rows x cols`` batch."""

    dtype: DType
    rows: int
    cols: int
    ld: int
    batch: int
    stride: int


@dataclass
class OutSpec:
    """An array the matmul returns: the result or an auxiliary output.

    ``attr`` is the descriptor attribute that takes its pointer at each launch (None for the
    result, whose pointer is an argument of ``cublasLtMatmul``).
    """

    name: str
    dtype: DType
    shape: tuple
    strides: tuple
    nelems: int
    attr: int | None = None


def dense_batch(name, dtype, batch_shape, mshape, mstrides, mat, attr=None) -> OutSpec:
    """An output of ``batch_shape`` matrices of ``mshape`` (``mat`` elements apart)."""
    bstrides, acc = [], mat
    for n in reversed(batch_shape):
        bstrides.append(acc)
        acc *= n
    return OutSpec(
        name,
        dtype,
        tuple(batch_shape) + tuple(mshape),
        tuple(reversed(bstrides)) + tuple(mstrides),
        acc,
        attr,
    )
