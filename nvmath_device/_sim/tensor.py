# SPDX-License-Identifier: Apache-2.0
"""nvmath_device.common's tensor API under the CUDA simulator, in NumPy, with cuBLASDx's layouts.

- A tensor is its buffer (the ndarray behind the simulated array) and its Layout. Global and
  shared tensors address element (r, c) at the offsets of :func:`.._build.gemm_sim_layouts.
  layout_offsets` (swizzled shared tiles as on the GPU); a register fragment's element ``i`` is
  ``buffer[i]`` and holds C's element ``map_fragment_index(i)`` of the partitioner the GEMM runs
  for its layout (:func:`.._build.gemm_sim_tables.fragment_table`).
- ``copy`` is collective: every thread of the block calls it, thread 0 of the GEMM moves the
  tile; ``copy_wait`` is the block barrier (``cuda.syncthreads``), so no thread reads a tile
  before it is complete (on the GPU the tile is equally unspecified before ``copy_wait``).
- ``MM.execute(smem_a, smem_b, fragment_or_accumulator)``: each thread reads the tiles through
  their layouts, computes ``A @ B`` in float64 / complex128 and adds its fragment's values
  (rounded once to the fragment's type); elements outside C are left as they are.
  ``MM.execute(alpha, smem_a, smem_b, beta, smem_c)``: collective (barrier, thread 0 computes and
  writes C through its layout, barrier).
- ``copy_fragment``, the partitioner queries, ``clear``, ``axpby``: per thread.

Misuse that is undefined on the GPU raises here: a buffer shorter than the layout's cosize, a
global array that is not contiguous, a fragment of another layout.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .._build.gemm_sim_layouts import layout_offsets
from .._build.gemm_sim_tables import fragment_table
from .._layouts import Layout
from .._partitioners import Accumulator, Partitioner
from ..common import OpaqueTensor
from ._compat import kernel_context, unwrap
from .gemm import _plan, _rank_index

__all__ = ["IMPLEMENTATIONS", "SimTensor", "SimAccumulator", "is_tensor_call", "sim_tensor_execute"]


def _thread_index(mm) -> int:
    thread, ctx = kernel_context("the tensor API")
    return _rank_index(_plan(mm), thread, ctx)[0]


def _sync():
    thread, _ = kernel_context("the tensor API")
    thread.syncthreads()  # the simulator's block barrier (cuda.syncthreads in a kernel)


class SimTensor(OpaqueTensor):
    """A buffer seen through a Layout, in the simulator."""

    __slots__ = ("buffer", "layout", "_flat")

    def __init__(self, buffer: np.ndarray, layout: Layout):  # noqa: D107  (not OpaqueTensor's)
        self.buffer = buffer
        self.layout = layout
        self._flat = None

    @property
    def memory(self) -> str:
        return self.layout.memory

    @property
    def flat(self) -> np.ndarray:
        """The buffer as a 1-D view in memory order (global 2-D arrays: C or F order)."""
        if self._flat is None:
            b = self.buffer
            if b.ndim == 1 and b.strides[0] == b.itemsize:
                flat = b
            elif b.flags.c_contiguous or b.flags.f_contiguous:
                flat = b.reshape(-1, order="A")
            else:  # a strided view (e.g. a tile c[i:i+m, j:j+n] of a larger array): its memory as on the GPU
                flat = as_strided(b, shape=(_extent(b),), strides=(b.itemsize,))
            if not np.shares_memory(flat, b) and b.size:
                raise ValueError("make_tensor: the array's memory cannot be viewed as 1-D")
            self._flat = flat
        return self._flat

    def offsets(self) -> np.ndarray:
        lay = self.layout
        return layout_offsets(lay.descriptor, lay.name, lay.leading_dimension if lay.memory == "gmem" else None)

    def tile(self) -> np.ndarray:
        """The (rows x cols) values of a global/shared tensor (a copy)."""
        return self.flat[self.offsets()]

    def store_tile(self, values: np.ndarray) -> None:
        self.flat[self.offsets()] = values

    def _check_fragment(self, what):
        if self.memory != "rmem":
            raise TypeError(f"{what}: a {self.memory} tensor is opaque; only register fragments take t[i]")

    def __getitem__(self, i):
        self._check_fragment("tensor[i]")
        return self.buffer[i]

    def __setitem__(self, i, v):
        self._check_fragment("tensor[i] = v")
        self.buffer[i] = v

    def __repr__(self):
        return f"SimTensor({self.layout!r}, {self.buffer.dtype}[{self.buffer.size}])"


def _extent(b: np.ndarray) -> int:
    """Elements from a view's first element to its last, in memory (what a layout over its data
    pointer may address); positive strides that are multiples of the element size only."""
    if any(st <= 0 or st % b.itemsize for st in b.strides):
        raise ValueError(f"make_tensor: an array with strides {b.strides} (bytes; {b.itemsize}-byte elements) "
                         f"cannot be addressed through a layout: strides must be positive multiples of the "
                         f"element size")
    return 1 + sum((n - 1) * st // b.itemsize for n, st in zip(b.shape, b.strides)) if b.size else 0


def _fragment(layout: Layout, dtype) -> SimTensor:
    dt = np.dtype(dtype)
    buf = np.full(layout.cosize, np.nan, dt) if dt.kind in "fc" else np.zeros(layout.cosize, dt)
    return SimTensor(buf, layout)


def _coords(layout: Layout):
    """(masked table, raw coordinates, info) of the partitioner that runs a fragment of ``layout``."""
    mm = layout.descriptor
    table, info = fragment_table(mm, layout.name == "suggest_layout_rmem_c")
    return table, info["coords"], info


# ---------------------------------------------------------------------------- common.*
def make_tensor(array, layout):
    kernel_context("nvmath_device.common.make_tensor")
    if not isinstance(layout, Layout):
        raise TypeError(f"make_tensor: layout (2nd argument) must be a Layout of a Matmul, got {layout!r}")
    buf = unwrap(array)
    if not isinstance(buf, np.ndarray):
        raise TypeError(f"make_tensor: array (1st argument) must be an array, got {type(array).__name__}")
    if layout.memory != "gmem" and buf.ndim != 1:
        raise TypeError(f"make_tensor: a {'shared' if layout.memory == 'smem' else 'register (local)'}-memory "
                        f"buffer must be a 1-D array of layout.cosize ({layout.cosize}) elements, got {buf.ndim}-D")
    span = buf.size if buf.flags.c_contiguous or buf.flags.f_contiguous else _extent(buf)
    if span < layout.cosize:
        raise ValueError(f"make_tensor: the buffer spans {span} elements, the layout spans {layout.cosize} "
                         f"(layout.cosize)")
    return SimTensor(buf, layout)


def _tensor(fn, what, t, memories=None) -> SimTensor:
    if isinstance(t, SimAccumulator):
        raise TypeError(f"{fn}: {what} is an accumulator; pass accumulator.get_results() (its fragment)")
    if not isinstance(t, SimTensor):
        raise TypeError(f"{fn}: {what} must be a tensor (make_tensor(array, layout)), got {type(t).__name__}")
    if memories and t.memory not in memories:
        raise TypeError(f"{fn}: {what} must be a {' or '.join(memories)} tensor, got {t.layout.name}")
    return t


def copy(src, dst, alignment=None):
    src = _tensor("copy", "src", src, ("gmem", "smem"))
    dst = _tensor("copy", "dst", dst, ("gmem", "smem"))
    if {src.memory, dst.memory} != {"gmem", "smem"} or src.layout.operand != dst.layout.operand:
        raise TypeError(f"copy: copies one operand between global and shared memory, got {src.layout.name} -> "
                        f"{dst.layout.name}")
    if _thread_index(src.layout.descriptor) == 0:
        dst.store_tile(src.tile())


def copy_wait():
    kernel_context("nvmath_device.common.copy_wait")
    _sync()


def copy_fragment(src, dst, alignment=None):
    src = _tensor("copy_fragment", "src", src)
    dst = _tensor("copy_fragment", "dst", dst)
    if (src.memory == "rmem") == (dst.memory == "rmem"):
        raise TypeError(f"copy_fragment: copies between a register fragment and a C tensor, got {src.layout.name} "
                        f"-> {dst.layout.name}")
    frag, mem = (src, dst) if src.memory == "rmem" else (dst, src)
    if mem.layout.operand != "c":
        raise TypeError(f"copy_fragment: the memory tensor must be a C tensor, got {mem.layout.name}")
    table, _, _ = _coords(frag.layout)
    t = _thread_index(frag.layout.descriptor)
    rows, cols = table[t, :, 0], table[t, :, 1]
    ok = rows >= 0
    off = mem.offsets()[rows[ok], cols[ok]]
    if src is frag:
        mem.flat[off] = frag.buffer[: table.shape[1]][ok].astype(mem.flat.dtype)
    else:
        frag.buffer[: table.shape[1]][ok] = mem.flat[off].astype(frag.buffer.dtype)


def clear(tensor):
    t = _tensor("clear", "tensor", tensor, ("rmem",))
    t.buffer[: t.layout.cosize] = 0


def axpby(alpha, x, beta, y):
    x = _tensor("axpby", "x", x, ("rmem",))
    y = _tensor("axpby", "y", y, ("rmem",))
    n = y.layout.cosize
    xt, yt = x.buffer.dtype.type, y.buffer.dtype.type
    ax = xt(alpha) * x.buffer[:n]
    if yt(beta) == 0:
        y.buffer[:n] = ax.astype(y.buffer.dtype)
    else:
        y.buffer[:n] = (ax.astype(y.buffer.dtype) + yt(beta) * y.buffer[:n]).astype(y.buffer.dtype)


def make_fragment_like(tensor, dtype):
    t = _tensor("make_fragment_like", "tensor", tensor, ("rmem",))
    return _fragment(t.layout, dtype)


# ---------------------------------------------------------------------------- partitioners
class SimAccumulator(Accumulator):
    """An accumulator made in a simulated kernel: its fragment (zeros of C's type)."""

    __slots__ = ("_fragment",)

    def __init__(self, mm, suggested):
        super().__init__(mm, suggested)
        frag = SimTensor(np.zeros(self.layout.cosize, np.dtype(mm.c_value_type)), self.layout)
        object.__setattr__(self, "_fragment", frag)

    def get_results(self):
        return self._fragment

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)


def _p_active(p: Partitioner):
    _, _, info = _coords(p.layout)
    t = _thread_index(p.descriptor)
    return bool(info["all_active"] or t < info["mma_threads"])


def _p_predicated(p: Partitioner):
    return bool(_coords(p.layout)[2]["predicated"])


def _p_index(p, index):
    n = p.layout.size
    i = int(index)
    if not 0 <= i < n:
        raise IndexError(f"fragment index {i} outside 0..{n - 1}")
    return i


def _p_in_bounds(p: Partitioner, index):
    table, _, _ = _coords(p.layout)
    return bool(table[_thread_index(p.descriptor), _p_index(p, index), 0] >= 0)


def _p_map(p: Partitioner, index):
    _, coords, _ = _coords(p.layout)
    r, c = coords[_thread_index(p.descriptor), _p_index(p, index)]
    return int(r), int(c)


def _p_make_fragment(p: Partitioner):
    return _fragment(p.layout, np.dtype(p.descriptor.c_value_type))


def _p_partition_and_copy(p: Partitioner, src, dst):
    copy_fragment(src, dst)


def _p_make_partition_and_copy(p: Partitioner, src):
    src = _tensor("make_partition_and_copy", "tensor", src, ("gmem", "smem"))
    frag = _fragment(p.layout, src.buffer.dtype)
    copy_fragment(src, frag)
    return frag


class SimPartitioned:
    """``partition_like_C(gmem_c)`` in the simulator: element ``i`` is C's ``map_fragment_index(i)``."""

    def __init__(self, tensor: SimTensor, layout: Layout, thread: int):
        self._tensor, self._layout, self._thread = tensor, layout, thread

    def _offset(self, i):
        _, coords, _ = _coords(self._layout)
        r, c = coords[self._thread, int(i)]
        return self._tensor.offsets()[r, c]

    def __getitem__(self, i):
        return self._tensor.flat[self._offset(i)]

    def __setitem__(self, i, v):
        self._tensor.flat[self._offset(i)] = v


def _p_partition_like_c(p: Partitioner, gmem_c):
    t = _tensor("partition_like_C", "gmem_c", gmem_c, ("gmem",))
    if t.layout.operand != "c":
        raise TypeError(f"partition_like_C: gmem_c must be a C tensor (get_layout_gmem_c), got {t.layout.name}")
    return SimPartitioned(t, p.layout, _thread_index(p.descriptor))


def _p_get_results(p):
    raise TypeError("get_results() of an accumulator made outside the kernel: make it in the kernel "
                    "(MM.get_accumulator())")


def make_accumulator(mm, suggested: bool):
    """``MM.get_accumulator()`` / ``suggest_accumulator()``: in a simulated kernel, a new
    accumulator with its own fragment; elsewhere the plain description."""
    try:
        kernel_context("Matmul.get_accumulator")
    except RuntimeError:
        return Accumulator(mm, suggested)
    return SimAccumulator(mm, suggested)


# ---------------------------------------------------------------------------- MM.execute with tensors
def is_tensor_call(args) -> bool:
    return any(isinstance(a, (SimTensor, Accumulator)) for a in args)


def sim_tensor_execute(mm, *args):
    p = _plan(mm)
    if len(args) == 3:
        a, b, c = args
        if isinstance(c, Accumulator):
            if not isinstance(c, SimAccumulator):
                raise TypeError("Matmul.execute: an accumulator made outside the kernel has no registers")
            c = c.get_results()
    elif len(args) == 5:
        alpha, a, b, beta, c = args
    else:
        raise TypeError(f"Matmul.execute with tensors takes (smem_a, smem_b, rmem_c or accumulator) or (alpha, "
                        f"smem_a, smem_b, beta, smem_c), got {len(args)} arguments")
    for what, t, op in (("a", a, "a"), ("b", b, "b")):
        _tensor("Matmul.execute", what, t, ("smem",))
        if t.layout.operand != op or t.layout.descriptor != mm:
            raise TypeError(f"Matmul.execute: {what} must be a shared-memory tensor of {op.upper()} of this Matmul, "
                            f"got {t.layout!r}")
    c = _tensor("Matmul.execute", "c", c, ("rmem",) if len(args) == 3 else ("smem",))
    if c.layout.descriptor != mm or c.layout.operand != "c":
        raise TypeError(f"Matmul.execute: c must be a C tensor of this Matmul, got {c.layout!r}")
    if len(args) == 3:
        prod = p.widen(a.tile()) @ p.widen(b.tile())
        table, _, _ = _coords(c.layout)
        t = _thread_index(mm)
        rows, cols = table[t, :, 0], table[t, :, 1]
        ok = np.flatnonzero(rows >= 0)
        acc = c.buffer
        new = np.empty(len(ok), acc.dtype)
        p.narrow(p.widen(acc[ok]) + prod[rows[ok], cols[ok]], new)
        acc[ok] = new
        return
    _sync()
    if _thread_index(mm) == 0:
        prod = p.widen(a.tile()) @ p.widen(b.tile())
        cur = c.tile()
        wide_beta = p.wide.type(beta)
        val = p.wide.type(alpha) * prod + (wide_beta * p.widen(cur) if wide_beta != 0 else 0)
        out = np.empty(cur.shape, c.buffer.dtype)
        p.narrow(val, out)
        c.store_tile(out)
    _sync()


IMPLEMENTATIONS = {
    "common.make_tensor": make_tensor, "common.copy": copy, "common.copy_wait": copy_wait,
    "common.copy_fragment": copy_fragment, "common.clear": clear, "common.axpby": axpby,
    "common.make_fragment_like": make_fragment_like,
    "Partitioner.is_thread_active": _p_active, "Partitioner.is_predicated": _p_predicated,
    "Partitioner.is_index_in_bounds": _p_in_bounds, "Partitioner.map_fragment_index": _p_map,
    "Partitioner.make_accumulator_fragment": _p_make_fragment,
    "Partitioner.partition_and_copy": _p_partition_and_copy,
    "Partitioner.make_partition_and_copy": _p_make_partition_and_copy,
    "Partitioner.get_results": _p_get_results,
    "Partitioner.partition_like_C": _p_partition_like_c,
    "Matmul.make_accumulator": make_accumulator,
}
