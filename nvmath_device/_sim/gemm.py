# SPDX-License-Identifier: Apache-2.0
"""``Matmul`` under numba-cuda's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), in NumPy.

Layouts are cuBLASDx's, from the same descriptor and the same compiled constants as on the GPU:

- Shared-memory tiles: element (r, c) of a column-major operand with leading dimension ``ld``
  is element ``r + c * ld`` of the 1-D array (``r * ld + c`` row-major); 2-D C-contiguous
  shared arrays are read as their flat memory, as the device does with their address.
- Threads: cuBLASDx numbers the threads of one GEMM by the rank of ``block_dim`` (the
  dimensions up to the last one that is not 1): ``t = x (+ y * blockDim.x (+ z * blockDim.x *
  blockDim.y))``. A launch may add dimensions beyond that rank (a ``(64, 4)`` launch of a
  ``block_dim=(64, 1, 1)`` GEMM); each value of the extra coordinates is a separate GEMM.
- Register form: accumulator value ``i`` of thread ``t`` is C[row, col] from the table that
  :mod:`.._build.gemm_sim_tables` compiles out of cuBLASDx's partitioner (no guessing);
  ``fragment_coordinates`` fills the same table's row.

``execute`` is collective over the threads of one GEMM (as on the GPU, where every thread of
``block_dim`` computes its share of C): each thread deposits its arguments and waits at a barrier
of the GEMMs' own (``_block.collective`` by thread group); once every thread of the GEMM is in,
one thread computes it in float64 / complex128 and rounds once to ``c_value_type``, and they go
on. Each GEMM of the block meets on its own (with the others or one after another), and only the
GEMMs whose threads call take part: a launch of several GEMMs' worth of threads may have some of
them call (``if cuda.threadIdx.y == 0:``), as cuBLASDx allows (its ``execute`` has no block
barrier); the other threads wait at their next ``cuda.syncthreads()`` until the callers are done
(numba-cuda's simulator releases it only when every live thread waits in it). Threads past
``block_dim.x`` of a larger 1-D launch take no part, whether they call or not. After the
register form, accumulator values that are unused (-1 coordinates) hold
NaN: their contents are unspecified on the GPU. With ``beta == 0`` C is not read (as cuBLASDx).
The copy helpers (``load_a``...) are per-thread, with the same element-to-thread assignment as
the device code of :mod:`.._numba.gemm_numba`.

Value types: complex float16 (``types.complex32``, cuBLASDx's ``complex<__half>``) tiles are
arrays of ``numpy.dtype(types.complex32)`` (records ``x, y`` of float16, as the simulator's
``float16x2_type``): computed in complex128, each part rounded once to float16; their copy
helpers also take complex64/complex128 global arrays (converted, as on the GPU). Integer GEMMs
compute exactly in C's type, wrapping modulo its width as the device's integer arithmetic does
(inputs converted to C's type first). ``MM.execute(alpha, a, lda, b, ldb, beta, c, ldc)`` reads
the tiles with the run-time leading dimensions (each checked against the tight one).

Misuse that is undefined on the GPU raises here: wrong dtypes, sizes or memory spaces of the
arguments, a launch whose block shape does not match ``block_dim``, too little (dynamic) shared
memory for a tile, a thread of a GEMM that does not call ``execute`` while others of the same
GEMM do (or calls another GEMM, or the other form, or a different number of times: found once
no thread of the block can arrive any more), threads of one GEMM passing different tiles or
different alpha/beta.
"""

from __future__ import annotations

import functools
import numbers
import threading

import numpy as np

from ..gemm import check_runtime_lds, runtime_tile_sizes
from ..types import Complex
from ._block import Round, collective, is_shared
from ._compat import kernel_context as _kernel_context_base
from ._compat import unwrap


def _kernel_context_gemm(what: str):
    return _kernel_context_base(f"Matmul.{what}")

__all__ = ["sim_execute", "sim_fragment_coordinates", "sim_copy"]

_LAUNCH_HINT = "kernel[grid, MM.block_dim, 0, MM.shared_memory_size](...)"
_OPERANDS = ("a", "b", "c")


# ---------------------------------------------------------------------------- descriptor facts
class _Plan:
    def __init__(self, mm):
        self.mm = mm
        self.m, self.n, self.k = mm.size
        # the operands' math shapes (m x k, k x n, m x n), whatever transpose_mode said of a_dim/b_dim
        self.dims = ((self.m, self.k), (self.k, self.n), (self.m, self.n))
        # the copy helpers' global arrays: (rows, cols, col_major) per operand
        self.copies = tuple(mm._copy_layout(i) for i in range(3))
        self.lds = tuple(mm.leading_dimension)
        self.col_major = tuple(a == "col_major" for a in mm.arrangement)
        self.sizes = (mm.a_size, mm.b_size, mm.c_size)
        self.vts = (np.dtype(mm.a_value_type), np.dtype(mm.b_value_type), np.dtype(mm.c_value_type))
        self.ct = self.vts[2]
        self.half_complex = isinstance(mm.c_value_type, Complex)  # records (x, y) of float16
        self.complex = self.ct.kind == "c" or self.half_complex
        self.integer = self.ct.kind in "iu"
        # integers: exact, modulo C's width (as the device); floats: float64/complex128, rounded once
        self.wide = self.ct if self.integer else np.dtype(np.complex128 if self.complex else np.float64)
        self.block_dim = tuple(mm.block_dim)
        bx, by, bz = self.block_dim
        self.rank = 3 if bz != 1 else (2 if by != 1 else 1)
        self.nthreads = bx * by * bz
        self._table = None
        self._table_lock = threading.Lock()

    @property
    def table(self) -> np.ndarray:
        # Every simulated thread of the block asks at once: one compiles (NVRTC, seconds), the
        # others wait for it instead of each compiling the same table.
        if self._table is None:
            with self._table_lock:
                if self._table is None:
                    from .._build.gemm_sim_tables import fragment_table

                    self._table = fragment_table(self.mm)[0]
        return self._table

    @property
    def accumulator_size(self) -> int:
        return self.mm.accumulator_size

    def widen(self, x) -> np.ndarray:
        """Values (an array of a value type) as ``self.wide`` (records: x + 1j * y)."""
        if x.dtype.names:
            return x["x"].astype(np.float64) + 1j * x["y"].astype(np.float64)
        return x.astype(self.wide)

    def narrow(self, x: np.ndarray, out: np.ndarray) -> None:
        """Store ``self.wide`` values ``x`` into ``out`` (an array of C's value type), rounding once."""
        if out.dtype.names:
            out["x"] = np.real(x).astype(np.float16)
            out["y"] = np.imag(x).astype(np.float16)
        else:
            out[...] = x.astype(out.dtype)

    def tile(self, idx: int, flat: np.ndarray, ld=None) -> np.ndarray:
        """(rows, cols) view of operand ``idx`` in the 1-D shared array ``flat``."""
        rows, cols = self.dims[idx]
        s = flat.itemsize
        ld = self.lds[idx] if ld is None else ld
        strides = (s, ld * s) if self.col_major[idx] else (ld * s, s)
        return np.lib.stride_tricks.as_strided(flat, shape=(rows, cols), strides=strides, writeable=True)


# One plan per descriptor and process (descriptors are frozen and hashable).
_plan = functools.cache(_Plan)


# ---------------------------------------------------------------------------- simulator context


def _rank_index(p: _Plan, thread, ctx) -> tuple[int, tuple]:
    """(cuBLASDx's thread index, the coordinates that select one of the block's GEMMs)."""
    x, y, z = thread.threadIdx
    bdx, bdy, _ = ctx.blockDim
    if p.rank == 3:
        return x + y * bdx + z * bdx * bdy, ()
    if p.rank == 2:
        return x + y * bdx, (z,)
    return x, (y, z)


def _check_block_dim(p: _Plan, ctx, what: str) -> None:
    launched = tuple(ctx.blockDim)
    more_x = p.rank == 1 and launched[0] >= p.block_dim[0]  # threads x >= block_dim.x stay idle
    if launched[: p.rank] != p.block_dim[: p.rank] and not more_x:
        extra = "" if p.rank == 3 else (
            f" (dimensions past the first {p.rank} may be larger: each of their values is a separate GEMM"
            + ("; a 1-D block_dim may also be launched with more threads in x, which stay idle" if p.rank == 1
               else "") + ")"
        )
        raise ValueError(
            f"Matmul.{what} needs the kernel launched with MM.block_dim = {p.block_dim} threads per "
            f"block{extra}, but this launch has blockDim = {launched}; launch with {_LAUNCH_HINT}"
        )


def _check_tile(p: _Plan, ctx, idx: int, arr, what: str, shared: bool = True, lds=None) -> np.ndarray:
    name = _OPERANDS[idx]
    hint = f"a shared array of MM.{name}_size MM.{name}_value_type"
    arr = unwrap(arr)
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{what} must be {hint}, got {type(arr).__name__}")
    vt = p.vts[idx]
    if arr.dtype != vt:
        raise TypeError(f"{what} must hold {vt} values ({hint}), got an array of {arr.dtype}")
    if arr.ndim not in (1, 2) or not arr.flags.c_contiguous:
        raise TypeError(f"{what} must be a C-contiguous array with 1 or 2 dimension(s) ({hint}), got shape "
                        f"{arr.shape}{'' if arr.flags.c_contiguous else ' (not contiguous)'}")
    flat = arr.reshape(-1)
    need = p.sizes[idx] if lds is None else runtime_tile_sizes(p.mm, lds)[idx]
    _check_tile_size(p, ctx, idx, flat.size, what, lds)
    if shared and not is_shared(ctx, flat):
        raise TypeError(f"{what} is not shared memory (a local or global array?); pass {hint}, e.g. "
                        f"cuda.shared.array(MM.{name}_size, dtype=MM.{name}_value_type)")
    return flat[:need]


def _check_tile_size(p: _Plan, ctx, idx: int, size: int, what: str, lds=None) -> None:
    if lds is not None:  # the run-time leading-dimension form
        need = runtime_tile_sizes(p.mm, lds)[idx]
        if size < need:
            ld = ("lda", "ldb", "ldc")[idx]
            raise ValueError(
                f"{what} has {size} elements but {'ABC'[idx]} with {ld}={lds[idx]} "
                f"({p.mm.arrangement[idx]}) needs {need}; size the shared memory with "
                "MM.get_shared_storage_size(lda, ldb, ldc)")
        return
    need = p.sizes[idx]
    if size < need:
        name = _OPERANDS[idx]
        dyn = getattr(ctx.shared, "_dynshared_size", None)
        raise ValueError(
            f"{what} has {size} elements but MM.{name}_size = {need} (leading dimension "
            f"{p.lds[idx]}, {p.mm.arrangement[idx]}); a slice of dynamic shared memory needs the launch's "
            f"MM.shared_memory_size = {p.mm.shared_memory_size} bytes ({_LAUNCH_HINT})"
            + (f"; this launch has {dyn} bytes of dynamic shared memory" if dyn is not None else "")
        )


def _check_scalar(p: _Plan, v, what: str):
    if p.half_complex and isinstance(v, np.void) and v.dtype == p.ct:  # a float16x2(re, im) value
        return np.complex128(complex(float(v["x"]), float(v["y"])))
    # a bfloat16 scalar (ml_dtypes) is a numpy scalar but not a numbers.Number
    bf16 = isinstance(v, np.generic) and np.dtype(type(v)).name == "bfloat16"
    if isinstance(v, np.ndarray) or not (bf16 or isinstance(v, (numbers.Number, np.bool_))):
        raise TypeError(f"{what} must be a scalar convertible to {p.ct} (MM.c_value_type), got {type(v).__name__}")
    if isinstance(v, (complex, np.complexfloating)) and not p.complex:
        raise TypeError(f"{what} is complex ({v!r}) but this GEMM is real (c_value_type {p.ct})")
    if p.half_complex:  # converted to complex<__half> first: each part rounded to float16
        c = complex(v)
        return np.complex128(complex(float(np.float16(c.real)), float(np.float16(c.imag))))
    if p.integer and isinstance(v, (float, np.floating)):
        with np.errstate(all="ignore"):  # the device converts towards zero (cvt.rzi)
            return np.trunc(np.float64(v)).astype(p.ct)
    if p.integer and isinstance(v, (int, np.integer)) and -2**63 <= int(v) < 2**64:
        # an integer converts modulo C's width on the device (e.g. -2 into uint32)
        wide = np.uint64(int(v) % 2**64)
        return wide.astype(p.ct)
    return p.ct.type(v)  # the device converts alpha/beta to c_value_type first


def _check_registers(p: _Plan, arr, dtype, what: str, hint: str) -> np.ndarray:
    arr = unwrap(arr)
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{what} must be {hint}, got {type(arr).__name__}")
    if arr.dtype != dtype:
        raise TypeError(f"{what} must hold {np.dtype(dtype)} values ({hint}), got an array of {arr.dtype}")
    if arr.ndim != 1 or not arr.flags.c_contiguous:
        raise TypeError(f"{what} must be a 1-D contiguous local array ({hint}), got shape {arr.shape}")
    n = p.accumulator_size
    if arr.shape[0] < n:
        raise ValueError(f"{what} has {arr.shape[0]} values; this GEMM needs MM.accumulator_size = {n} ({hint})")
    return arr


# ---------------------------------------------------------------------------- block exchange
class _Deposit:
    __slots__ = ("mm", "form", "t", "group", "key", "alpha", "beta", "a", "b", "c", "acc", "lds", "idle")

    def __init__(self, mm, form, t, group, alpha=None, beta=None, a=None, b=None, c=None, acc=None, lds=None):
        self.mm, self.form, self.t, self.group = mm, form, t, group
        # the GEMM's thread group: the block_dim (which shapes the group) and the coordinates past its rank
        self.key = (tuple(mm.block_dim), group)
        self.idle = t >= _plan(mm).nthreads  # a thread past block_dim.x (a larger 1-D launch)
        self.alpha, self.beta, self.a, self.b, self.c, self.acc = alpha, beta, a, b, c, acc
        self.lds = lds


def _same_buffer(u: np.ndarray, v: np.ndarray) -> bool:
    return u.__array_interface__["data"][0] == v.__array_interface__["data"][0] and u.size == v.size


def _describe(d: _Deposit) -> str:
    return {"smem": "execute(alpha, a, b, beta, c)", "smem_ld": "execute(alpha, a, lda, b, ldb, beta, c, ldc)",
            "rmem": "execute(a, b, accumulator)"}[d.form]


@functools.lru_cache(maxsize=256)
def _group_threads(block_dim: tuple, launched: tuple, group: tuple) -> frozenset:
    """The threadIdx tuples of the GEMM thread group ``group`` (coordinates past the rank)."""
    bx, by, bz = block_dim
    if len(group) == 2:  # rank 1: x < block_dim.x at one (y, z)
        y, z = group
        return frozenset((x, y, z) for x in range(bx))
    if len(group) == 1:  # rank 2: the block_dim's x, y at one z
        (z,) = group
        return frozenset((x, y, z) for y in range(by) for x in range(bx))
    lx, ly, lz = launched
    return frozenset((x, y, z) for z in range(lz) for y in range(ly) for x in range(lx))


def _group_label(mm, group: tuple) -> str:
    bd = tuple(mm.block_dim)
    if len(group) == 2:
        return f"the GEMM of block_dim {bd} at threadIdx.y, threadIdx.z = {group}"
    if len(group) == 1:
        return f"the GEMM of block_dim {bd} at threadIdx.z = {group[0]}"
    return f"the GEMM of block_dim {bd}"


def _conflict(call: int, block: tuple, first, other) -> str | None:
    """Two threads of one GEMM thread group whose calls put them in different groups."""
    (t1, d1), (t2, d2) = first, other
    if d1.mm != d2.mm:
        return (f"Matmul.execute call #{call + 1} in block {block}: the threads of one GEMM called "
                f"different GEMM descriptors ({d1.mm!r} in thread {t1} and, in thread {t2}, {d2.mm!r}); "
                "the threads of a GEMM must call the same Matmul together")
    return None


def _close_round(rnd: Round, call: int, block: tuple) -> None:
    """The GEMM of the round (one thread group's call), run by the thread that completed it (see
    ``_block.collective``). Threads of one GEMM must make the same call; different GEMMs of the
    block (other groups) may call other descriptors."""
    groups = {}
    for tid, d in sorted(rnd.deposits.items(), key=lambda td: td[0][::-1]):
        if not d.idle:  # (idle threads do not reach the round)
            groups.setdefault(d.key, []).append((tid, d))
    for members in groups.values():
        tid0, first = members[0]
        for tid, d in members:
            if d.mm != first.mm:
                rnd.error = (f"Matmul.execute call #{call + 1} in block {block}: the threads of one GEMM "
                             f"called different GEMM descriptors ({first.mm!r} in thread {tid0} and, in "
                             f"thread {tid}, {d.mm!r}); the threads of a GEMM must call the same Matmul "
                             "together")
                return
        forms = {}
        for tid, d in members:
            forms.setdefault(d.form, (tid, d))
        if len(forms) > 1:
            (t1, d1), (t2, d2) = list(forms.values())[:2]
            rnd.error = (f"Matmul.execute call #{call + 1} in block {block}: threads called both "
                         f"{_describe(d1)} (thread {t1}) and {_describe(d2)} (thread {t2}); the threads "
                         "of a GEMM must call the same form together")
            return
    work = []
    for members in groups.values():
        (tid0, d0) = members[0]
        for tid, d in members[1:]:
            for name in ("a", "b", "c"):
                u, v = getattr(d0, name), getattr(d, name)
                if u is not None and not _same_buffer(u, v):
                    rnd.error = (f"Matmul.execute call #{call + 1} in block {block}: threads {tid0} and {tid} "
                                 f"of one GEMM passed different '{name}' tiles; the threads of a GEMM must "
                                 "pass the same shared arrays")
                    return
            if d0.form != "rmem" and d.lds != d0.lds:
                rnd.error = (f"Matmul.execute call #{call + 1} in block {block}: threads {tid0} and {tid} "
                             f"of one GEMM passed different leading dimensions {d0.lds} vs {d.lds}; the "
                             "threads of a GEMM must pass the same lda, ldb, ldc")
                return
            if d0.form != "rmem" and (d.alpha != d0.alpha or d.beta != d0.beta):
                rnd.error = (f"Matmul.execute call #{call + 1} in block {block}: threads {tid0} and {tid} "
                             f"of one GEMM passed different alpha/beta ({d0.alpha}, {d0.beta}) vs "
                             f"({d.alpha}, {d.beta}); each thread scales its own share of C")
                return
        work.append(members)
    with np.errstate(all="ignore"):  # overflow/NaN propagate silently, as on the GPU
        _compute(_plan(work[0][0][1].mm) if work else None, work)


def _compute(p: _Plan | None, work) -> None:
    """Each GEMM of ``work`` (its threads' (tid, deposit) pairs); ``p`` is the first one's plan
    (the GEMMs of different groups may be different descriptors: each uses its own)."""
    for members in work:
        d0 = members[0][1]
        p = _plan(d0.mm)
        lds = d0.lds or (None, None, None)
        a = p.widen(p.tile(0, d0.a, lds[0]))
        b = p.widen(p.tile(1, d0.b, lds[1]))
        prod = a @ b
        if d0.form != "rmem":
            c = p.tile(2, d0.c, lds[2])
            res = d0.alpha.astype(p.wide) * prod
            if d0.beta != 0:  # cuBLASDx does not read C when beta == 0
                res = res + d0.beta.astype(p.wide) * p.widen(c)
            p.narrow(res, c)
        else:
            table = p.table
            n = p.accumulator_size
            for _, d in members:
                rc = table[d.t]
                ok = rc[:, 0] >= 0
                acc = d.acc[:n]
                new = p.widen(acc)
                new[ok] += prod[rc[ok, 0], rc[ok, 1]]
                p.narrow(new, acc)
                # unused values are unspecified on the GPU: NaN here (integers: the type's extreme)
                if p.half_complex:
                    acc["x"][~ok] = np.nan
                    acc["y"][~ok] = np.nan
                elif p.integer:
                    info = np.iinfo(p.ct)
                    acc[~ok] = info.min if info.min < 0 else info.max
                else:
                    acc[~ok] = np.nan


def _execute_collective(p: _Plan, form: str, checks) -> None:
    thread, ctx = _kernel_context_gemm("execute")

    def deposit():
        _check_block_dim(p, ctx, "execute")
        arrays = checks(ctx)
        t, group = _rank_index(p, thread, ctx)
        return _Deposit(p.mm, form, t, group, **arrays)

    def group(d: _Deposit):
        if d.idle:  # past block_dim.x of a larger 1-D launch: no part in any GEMM
            return None
        members = _group_threads(tuple(d.mm.block_dim), tuple(ctx.blockDim), d.group)
        return d.key, members, _group_label(d.mm, d.group)

    block = tuple(thread.blockIdx)
    collective(
        "Matmul.execute", "gemm", thread, ctx, deposit,
        lambda rnd, call: _close_round(rnd, call, block),
        "did they return early, or skip execute in a branch? every thread of a GEMM computes its "
        "share of C: all threads of MM.block_dim must call execute, also those that load no data; "
        "a GEMM none of whose threads call is left out",
        group=group, conflict=lambda call, first, other: _conflict(call, block, first, other))


def sim_execute(mm, *args) -> None:
    """``MM.execute(alpha, a, b, beta, c)``, ``MM.execute(alpha, a, lda, b, ldb, beta, c, ldc)`` or
    ``MM.execute(a, b, acc)`` in a simulated kernel."""
    p = _plan(mm)
    if len(args) == 8:
        alpha, a, lda, b, ldb, beta, c, ldc = args

        def checks(ctx):
            lds = check_runtime_lds(mm, tuple(unwrap(v) for v in (lda, ldb, ldc)))
            return {
                "alpha": _check_scalar(p, alpha, "Matmul.execute: alpha (1st argument)"),
                "a": _check_tile(p, ctx, 0, a, "Matmul.execute: a (2nd argument)", lds=lds),
                "b": _check_tile(p, ctx, 1, b, "Matmul.execute: b (4th argument)", lds=lds),
                "beta": _check_scalar(p, beta, "Matmul.execute: beta (6th argument)"),
                "c": _check_tile(p, ctx, 2, c, "Matmul.execute: c (7th argument)", lds=lds),
                "lds": lds,
            }

        _execute_collective(p, "smem_ld", checks)
    elif len(args) == 5:
        alpha, a, b, beta, c = args

        def checks(ctx):
            return {
                "alpha": _check_scalar(p, alpha, "Matmul.execute: alpha (1st argument)"),
                "a": _check_tile(p, ctx, 0, a, "Matmul.execute: a (2nd argument)"),
                "b": _check_tile(p, ctx, 1, b, "Matmul.execute: b (3rd argument)"),
                "beta": _check_scalar(p, beta, "Matmul.execute: beta (4th argument)"),
                "c": _check_tile(p, ctx, 2, c, "Matmul.execute: c (5th argument)"),
            }

        _execute_collective(p, "smem", checks)
    elif len(args) == 3:
        a, b, acc = args
        hint = "a local array cuda.local.array(MM.accumulator_size, dtype=MM.c_value_type)"

        def checks(ctx):
            out = {
                "a": _check_tile(p, ctx, 0, a, "Matmul.execute: a (1st argument)"),
                "b": _check_tile(p, ctx, 1, b, "Matmul.execute: b (2nd argument)"),
                "acc": _check_registers(p, acc, p.ct, "Matmul.execute: accumulator (3rd argument)", hint),
            }
            p.table  # noqa: B018 - compile/load the fragment table before the barrier
            return out

        _execute_collective(p, "rmem", checks)
    else:
        _kernel_context_gemm("execute")
        raise TypeError(
            "Matmul.execute takes (alpha, a, b, beta, c) with A, B, C in shared memory, (alpha, a, lda, b, "
            "ldb, beta, c, ldc) with run-time leading dimensions, or (a, b, accumulator) with C in registers; "
            f"got {len(args)} argument(s)"
        )


def sim_fragment_coordinates(mm, *args) -> None:
    """``MM.fragment_coordinates(rows, cols)`` in a simulated kernel (per thread, no barrier)."""
    p = _plan(mm)
    thread, ctx = _kernel_context_gemm("fragment_coordinates")
    if len(args) != 2:
        raise TypeError(f"Matmul.fragment_coordinates takes (rows, cols), got {len(args)} argument(s)")
    _check_block_dim(p, ctx, "fragment_coordinates")
    hint = "a local array cuda.local.array(MM.accumulator_size, dtype=numpy.int32)"
    rows, cols = (_check_registers(p, x, np.int32, f"Matmul.fragment_coordinates: {w}", hint)
                  for x, w in zip(args, ("rows", "cols")))
    t, _ = _rank_index(p, thread, ctx)
    n = p.accumulator_size
    if t >= p.nthreads:  # an idle thread of a larger 1-D launch holds no element (-1, as on the GPU)
        rows[:n] = -1
        cols[:n] = -1
        return
    rc = p.table[t]
    rows[:n] = rc[:, 0]
    cols[:n] = rc[:, 1]


_COPY = {"load_a": 0, "load_b": 1, "load_c": 2, "store_c": 2}


def sim_copy(mm, name: str, *args) -> None:
    """``MM.load_a/load_b/load_c(global_2d, shared_1d)``, ``MM.store_c(shared_1d, global_2d)``.

    Per thread, as the device code: thread ``t < MM.max_threads_per_block`` (numbered by the rank
    of ``block_dim``) copies elements ``t, t + nthreads, ...`` of the tile, walking the shared
    tile's contiguous dimension.
    """
    p = _plan(mm)
    thread, ctx = _kernel_context_gemm(name)
    idx = _COPY[name]
    store = name == "store_c"
    op = "ABC"[idx]
    if len(args) != 2:
        src, dst = ("sC", "gC") if store else (f"g{op}", f"s{op}")
        raise TypeError(f"Matmul.{name} takes ({src}, {dst}), got {len(args)} argument(s)")
    g, s = (args[1], args[0]) if store else args
    gpos, spos = ("2nd", "1st") if store else ("1st", "2nd")
    rows, cols, col_major = p.copies[idx]
    vt = p.vts[idx]
    g = unwrap(g)
    if not isinstance(g, np.ndarray) or g.ndim != 2:
        raise TypeError(f"Matmul.{name}: the global array ({gpos} argument) must be a 2-D array of shape "
                        f"{(rows, cols)}, got {type(g).__name__}{getattr(g, 'shape', '')}")
    half = vt.names is not None  # complex float16 (records x, y)
    convert = half and g.dtype in (np.complex64, np.complex128)  # converted, as on the GPU
    if g.dtype != vt and not convert:
        also = (" (or complex64/complex128, converted, or records of numpy.dtype(types.complex32))"
                if half else "")
        raise TypeError(f"Matmul.{name}: the global array ({gpos} argument) must hold {vt}{also}, got {g.dtype} "
                        f"(MM.{op.lower()}_value_type: the copy does not convert)")
    if g.shape[0] < rows or g.shape[1] < cols:
        raise ValueError(f"Matmul.{name}: the global array ({gpos} argument) has shape {g.shape}; "
                         f"{op} is {rows} x {cols}")
    s = unwrap(s)
    what = f"Matmul.{name}: the shared array ({spos} argument)"
    lname = op.lower()
    hint = f"a 1-D shared array of MM.{lname}_size MM.{lname}_value_type"
    if not isinstance(s, np.ndarray):
        raise TypeError(f"{what} must be {hint}, got {type(s).__name__}")
    if s.dtype != vt:
        raise TypeError(f"{what} must hold {vt} values ({hint}), got an array of {s.dtype}")
    if s.ndim != 1 or not s.flags.c_contiguous:
        raise TypeError(f"{what} must be a C-contiguous array with 1 dimension(s) ({hint}), got shape {s.shape}")
    _check_tile_size(p, ctx, idx, s.size, what)
    x, y, z = thread.threadIdx
    bdx, bdy, _ = ctx.blockDim
    t = x + (y * bdx if p.rank >= 2 else 0) + (z * bdx * bdy if p.rank == 3 else 0)
    if t >= p.nthreads:
        return
    i = np.arange(t, rows * cols, p.nthreads)
    ld = p.lds[idx]
    if col_major:
        r, c = i % rows, i // rows
        flat = r + c * ld
    else:
        r, c = i // cols, i % cols
        flat = r * ld + c
    if convert and store:
        g[r, c] = (s[flat]["x"].astype(np.float64) + 1j * s[flat]["y"].astype(np.float64)).astype(g.dtype)
    elif convert:
        v = g[r, c]
        s["x"][flat] = v.real.astype(np.float16)
        s["y"][flat] = v.imag.astype(np.float16)
    elif store:
        g[r, c] = s[flat]
    else:
        s[flat] = g[r, c]
