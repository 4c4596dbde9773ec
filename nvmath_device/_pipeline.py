# SPDX-License-Identifier: Apache-2.0
"""Device and tile pipelines (nvmath-python's ``DevicePipeline`` / ``TilePipeline``): the host
description of a pipelined GEMM over two global arrays, checked once, and the linkable code of
its tile loop (:class:`PipelineOp`).

A :class:`DevicePipeline` is a kernel argument. In the kernel, ``get_tile(smem, bx, by)`` gives
the :class:`TilePipeline` of C's tile ``(bx, by)`` (rows ``bx * m ...``, columns ``by * n ...``
of the whole product; with 3-D arrays ``(bx, i)`` also picks A's batch ``i``), ``execute(acc)``
adds that tile's ``A @ B`` over all of K to the accumulator, and ``reset_tile`` moves the tile
pipeline to another tile. The code is :mod:`nvmath_device._build.pipeline_codegen`'s unit: a
ring of ``pipeline_depth`` shared-memory stages fed by asynchronous copies. Everything about the
arrays except their addresses (shapes, strides, K) is compile-time, as nvmath-python's pipeline
is made for its arrays.
"""

from __future__ import annotations

import numpy as np

from . import _dispatch
from ._build.pipeline_codegen import STAGE_ALIGNMENT, PipelineSpec
from ._types import SHARED_MEMORY_LIMIT
from .common_cuda import Dim3

__all__ = ["DevicePipeline", "TilePipeline", "PipelineOp", "MAX_DEPTH", "attribute_values", "tile_steps"]

MAX_DEPTH = 16


def attribute_values(spec: PipelineSpec) -> dict:
    """A pipeline's compile-time attributes: the host object's properties and, in kernels, constants."""
    return {"buffer_size": spec.buffer_bytes, "buffer_alignment": STAGE_ALIGNMENT, "storage_bytes": 0,
            "storage_alignment": 1}


def tile_steps(mm, strides, operand: int) -> tuple[int, int]:
    """Elements from one tile of operand 0 (A: tiles of m rows) or 1 (B: tiles of n columns) to
    the next, and from one batch to the next (0 for 2-D arrays); ``strides`` in elements."""
    return mm.size[operand] * strides[operand], (strides[2] if len(strides) == 3 else 0)


def _round_up(n: int, a: int) -> int:
    return (n + a - 1) // a * a


class _Operand:
    """One global array of a pipeline: address, shape, element strides, dtype (and, under the
    simulator, the NumPy view the simulated kernel reads)."""

    def __init__(self, name, arr, mm, idx):
        want = np.dtype((mm.a_value_type, mm.b_value_type)[idx])
        cai = getattr(arr, "__cuda_array_interface__", None)
        if cai is not None:
            dtype = np.dtype(cai["typestr"])
            own = getattr(arr, "dtype", None)
            if dtype != want and own is not None and np.dtype(own) == want:
                dtype = want  # bfloat16 / complex32 arrays: the interface says only "V2" / "V4"
            shape = tuple(int(s) for s in cai["shape"])
            strides = cai.get("strides")
            ptr = int(cai["data"][0])
            host = None
        elif not _dispatch.links_device_code() and hasattr(arr, "__array_interface__"):
            host = np.asarray(arr)  # the simulator: NumPy arrays and the simulator's device arrays
            dtype, shape, strides, ptr = host.dtype, host.shape, host.strides, host.ctypes.data
        else:
            raise TypeError(f"{name} must be a device array (CuPy, PyTorch, numba.cuda device array: anything with "
                            f"__cuda_array_interface__), got {type(arr).__name__}")
        if dtype != want:
            raise TypeError(f"{name} holds {dtype}, but {'AB'[idx]} of this Matmul is {want} "
                            f"(MM.{'ab'[idx]}_value_type)")
        if len(shape) not in (2, 3):
            raise ValueError(f"{name} must be 2-D ({'M x K' if idx == 0 else 'K x N'}) or 3-D (... x batch), got "
                             f"shape {shape}")
        size = want.itemsize
        if strides is None:  # C-contiguous
            strides, acc = [], size
            for s in reversed(shape):
                strides.insert(0, acc)
                acc *= s
        if any(s % size for s in strides):
            raise ValueError(f"{name}'s strides {tuple(strides)} are not multiples of its element size {size}")
        self.name, self.shape, self.ptr, self.dtype, self.host = name, shape, ptr, want, host
        self.strides = tuple(int(s) // size for s in strides)


class DevicePipeline:
    """A pipelined GEMM over two global arrays, made on the host and passed to a kernel.

    ``Matmul(..., with_pipeline=True).suggest_device_pipeline(pipeline_depth, a, b)`` makes one
    (or this constructor). The Matmul's ``size`` is the tile: each block computes an ``m x n``
    tile of ``A @ B`` and walks K in slices of ``k`` through ``pipeline_depth`` shared-memory
    stages. Launch with ``block_dim`` threads and ``buffer_size`` bytes of dynamic shared memory
    aligned to ``buffer_alignment``; kernels that take one need
    ``@cuda.jit(extensions=nvmath_device.cublasdx_numba.pipeline_extensions)``.

    Parameters
    ----------
    mm : Matmul
        The tile GEMM, made with ``with_pipeline=True``.
    pipeline_depth : int
        Shared-memory stages, 1 to 16.
    a, b : device arrays
        A (M x K or M x K x batch), B (K x N or K x N x batch): the Matmul's value types; unit
        stride along K for a row-major A and a column-major B, along M (N) for a column-major
        A (row-major B); M, N, K multiples of the tile's m, n, k; 16-byte-aligned K slices
        where the Matmul's alignment is 16.

    Attributes
    ----------
    mm : Matmul
    pipeline_depth : int
    block_dim : Dim3
        Threads per block (the Matmul's ``block_dim``: no extra producer warp here).
    buffer_size : int
        Bytes of dynamic shared memory the tile pipeline uses: ``pipeline_depth`` stages of A's
        and B's tiles in cuBLASDx's suggested shared layouts, each 128-byte aligned.
    buffer_alignment : int
        Alignment (bytes) of that shared buffer: 128.
    storage_bytes, storage_alignment : int
        Bytes and alignment of device-side pipeline state: 0 and 1 (the state is two addresses,
        passed as the kernel argument itself; nvmath-python keeps TMA descriptors there).
    a_strides, b_strides : tuple of int
        The arrays' strides in elements.
    k_tiles : int
        K slices per tile: ``K // mm.k``.
    """

    def __init__(self, mm, pipeline_depth, a, b):
        if type(mm).__name__ != "Matmul" or not hasattr(mm, "with_pipeline"):  # (gemm imports this module)
            raise TypeError(f"mm must be a Matmul, got {type(mm).__name__}")
        if not mm.with_pipeline:
            raise ValueError("device pipelines need Matmul(..., with_pipeline=True)")
        if isinstance(pipeline_depth, bool) or not isinstance(pipeline_depth, (int, np.integer)) or not (
                1 <= pipeline_depth <= MAX_DEPTH):
            raise ValueError(f"pipeline_depth must be an int from 1 to {MAX_DEPTH}, got {pipeline_depth!r}")
        tm, tn, tk = mm.size
        A, B = _Operand("a", a, mm, 0), _Operand("b", b, mm, 1)
        if len(A.shape) != len(B.shape):
            raise ValueError(f"a and b must both be 2-D or both 3-D (... x batch), got shapes {A.shape} and {B.shape}")
        (M, K), (K2, N) = A.shape[:2], B.shape[:2]
        if K != K2:
            raise ValueError(f"a is {M} x {K} and b is {K2} x {N}: their K differ")
        for what, total, tile, arr in (("M (a.shape[0])", M, tm, "a"), ("N (b.shape[1])", N, tn, "b"),
                                       ("K (a.shape[1])", K, tk, "a")):
            if total % tile or total == 0:
                raise ValueError(f"{what} = {total} must be a positive multiple of the tile's "
                                 f"{'mnk'['MNK'.index(what[0])]} = {tile} ({arr} of shape {(A if arr == 'a' else B).shape})")
        # leading dimensions from the arrangements: the unit stride must be where cuBLASDx reads it
        lds = []
        for op, idx in ((A, 0), (B, 1)):
            row_major = mm.arrangement[idx] == "row_major"
            unit, ld = (1, 0) if row_major else (0, 1)
            if op.strides[unit] != 1:
                raise ValueError(f"{op.name} is {mm.arrangement[idx]} in this Matmul, so its stride along axis {unit} "
                                 f"must be 1 element, got strides {op.strides} (elements)")
            lds.append(op.strides[ld])
        align = mm.alignment
        for op, ld, al in ((A, lds[0], align[0]), (B, lds[1], align[1])):
            size = op.dtype.itemsize
            steps = [ld * size] + ([op.strides[2] * size] if len(op.shape) == 3 else [])
            if op.ptr % al or any(s % al for s in steps):
                raise ValueError(f"{op.name} must be aligned as the Matmul's alignment says ({al} bytes for "
                                 f"{op.name.upper()}): its address {op.ptr:#x} and strides (bytes) {steps} must be "
                                 f"multiples of {al}")
        sa, sb = mm.suggest_layout_smem_a(), mm.suggest_layout_smem_b()
        a_bytes = _round_up(sa.cosize * A.dtype.itemsize, STAGE_ALIGNMENT)
        b_bytes = _round_up(sb.cosize * B.dtype.itemsize, STAGE_ALIGNMENT)
        depth = int(pipeline_depth)
        limit = SHARED_MEMORY_LIMIT[mm.sm]
        if depth * (a_bytes + b_bytes) > limit:
            raise ValueError(f"pipeline_depth={depth} needs {depth * (a_bytes + b_bytes)} bytes of shared memory "
                             f"({a_bytes + b_bytes} per stage); sm_{mm.sm} allows {limit}: use pipeline_depth <= "
                             f"{limit // (a_bytes + b_bytes)}")
        self.mm, self.pipeline_depth, self.a_strides, self.b_strides = mm, depth, A.strides, B.strides
        self.k_tiles = K // tk
        self._ops = (A, B)
        self._arrays = (a, b)  # kept alive while the pipeline is
        self._spec = PipelineSpec(depth=depth, k_tiles=self.k_tiles, lda=lds[0], ldb=lds[1],
                                  a_dtype=_dtype_name(A.dtype), b_dtype=_dtype_name(B.dtype),
                                  c_dtype=_dtype_name(np.dtype(mm.c_value_type)), suggested=True,
                                  a_bytes=a_bytes, b_bytes=b_bytes)

    # the attributes nvmath-python's DevicePipeline has
    @property
    def block_dim(self) -> Dim3:
        return Dim3(*self.mm.block_dim)

    @property
    def buffer_size(self) -> int:
        return attribute_values(self._spec)["buffer_size"]

    @property
    def buffer_alignment(self) -> int:
        return attribute_values(self._spec)["buffer_alignment"]

    @property
    def storage_bytes(self) -> int:
        return attribute_values(self._spec)["storage_bytes"]

    @property
    def storage_alignment(self) -> int:
        return attribute_values(self._spec)["storage_alignment"]

    @property
    def _key(self):
        """What the kernel's code depends on (the numba type's key): all but the addresses."""
        return (self.mm, self._spec, self.a_strides, self.b_strides, len(self._ops[0].shape))

    def get_tile(self, smem, blockIdx_x, blockIdx_y):
        """The :class:`TilePipeline` of C's tile ``(blockIdx_x, blockIdx_y)`` (device function).

        Parameters
        ----------
        smem : shared array
            At least ``buffer_size`` bytes, aligned to ``buffer_alignment``.
        blockIdx_x, blockIdx_y : int or tuple of 2 ints
            Tile row and column (``(tile, batch)`` with 3-D arrays).

        Returns
        -------
        TilePipeline
        """
        return _dispatch.implementation("DevicePipeline.get_tile", "get_tile is a device function: call it in a "
                                        "kernel")(self, smem, blockIdx_x, blockIdx_y)

    def reset_tile(self, tile_pipeline, idx, idy):
        """Point ``tile_pipeline`` at another tile (device function).

        Parameters
        ----------
        tile_pipeline : TilePipeline
        idx, idy : int or tuple of 2 ints
            As ``get_tile``'s ``blockIdx_x`` / ``blockIdx_y``.
        """
        return _dispatch.implementation("DevicePipeline.reset_tile", "reset_tile is a device function: call it in "
                                        "a kernel")(self, tile_pipeline, idx, idy)

    def __repr__(self):
        return (f"DevicePipeline(depth={self.pipeline_depth}, k_tiles={self.k_tiles}, a_strides={self.a_strides}, "
                f"b_strides={self.b_strides}, mm={self.mm!r})")


class TilePipeline:
    """The pipeline of one tile of C (made in a kernel by ``DevicePipeline.get_tile``).

    Parameters
    ----------
    device_pipeline : DevicePipeline

    Attributes
    ----------
    device_pipeline : DevicePipeline
    storage_bytes, storage_alignment : int
        0 and 1: a tile pipeline's state is its two tile addresses and the shared buffer's.
    """

    storage_bytes = 0
    storage_alignment = 1

    def __init__(self, device_pipeline):
        if not isinstance(device_pipeline, DevicePipeline):
            raise TypeError(f"device_pipeline must be a DevicePipeline, got {type(device_pipeline).__name__}")
        self.device_pipeline = device_pipeline

    def execute(self, accumulator):
        """Add this tile's ``A @ B`` over all of K to ``accumulator`` (device function).

        Parameters
        ----------
        accumulator : Accumulator
            ``MM.get_accumulator()`` / ``MM.suggest_accumulator()`` of the pipeline's Matmul.
        """
        return _dispatch.implementation("TilePipeline.execute", "TilePipeline.execute is a device function: call "
                                        "it in a kernel")(self, accumulator)

    def _del(self):
        """End of the tile pipeline's life (nvmath-python's destructor call; nothing to release here)."""
        return None


def _dtype_name(dt: np.dtype) -> str:
    """The element name the codegen takes: complex float16 values (nvmath_device.types.complex32,
    4-byte records of two float16) are "complex32"."""
    return "complex32" if dt.kind == "V" and dt.itemsize == 4 else dt.name


class PipelineOp:
    """The linkable code of one tile pipeline: ``symbol``, ``sm``, ``ltoir()`` (hashable, picklable).

    Parameters
    ----------
    mm : Matmul
    spec : PipelineSpec
    """

    __slots__ = ("mm", "spec")

    def __init__(self, mm, spec):
        object.__setattr__(self, "mm", mm)
        object.__setattr__(self, "spec", PipelineSpec(*spec))

    def __setattr__(self, name, value):
        raise AttributeError(f"PipelineOp is immutable: cannot set {name!r}")

    @property
    def symbol(self) -> str:
        from ._build.pipeline_codegen import pipeline_symbol

        return pipeline_symbol(self.mm, self.spec)

    @property
    def sm(self) -> int:
        return self.mm.sm

    def ltoir(self) -> bytes:
        from ._build.pipeline_codegen import pipeline_ltoir

        return pipeline_ltoir(self.mm, self.spec)

    def source(self) -> str:
        """The C++ of this pipeline's unit."""
        from ._build.pipeline_codegen import render_pipeline_source

        return render_pipeline_source(self.mm, self.spec)

    def __eq__(self, other):
        return type(other) is PipelineOp and (other.mm, other.spec) == (self.mm, self.spec)

    def __hash__(self):
        return hash(("PipelineOp", self.mm, self.spec))

    def __reduce__(self):
        return (PipelineOp, (self.mm, tuple(self.spec)))

    def __repr__(self):
        return f"PipelineOp({self.spec}, mm={self.mm!r})"
