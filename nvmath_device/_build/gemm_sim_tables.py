# SPDX-License-Identifier: Apache-2.0
"""cuBLASDx's register-fragment layout as compile-time data, for the CUDA simulator.

On the GPU, ``MM.fragment_coordinates(rows, cols)`` runs cuBLASDx's partitioner in each thread
(``<sym>_coords`` in :mod:`gemm_codegen`): element ``i`` of thread ``t``'s accumulator is
``C[rows[i], cols[i]]`` or unused (-1). The simulator needs the same mapping for every thread
without a GPU, so this module asks the compiler for it: it compiles, with NVRTC to PTX, the
same choice of partitioner as ``<sym>_coords`` (the suggested one when its accumulator layout
equals ``get_partitioner()``'s, which is when cuBLASDx's register GEMM runs the suggested tiled
MMA) and evaluates the tiled MMA's ``get_thread_slice(t).partition_C(identity tensor)`` in
``constexpr`` functions whose results initialise ``extern "C" __device__`` constants, read back
with :func:`toolchain.read_u32_arrays`.

CuTe's slice of a layout is ``offset(thread) + fragment_layout(i)`` (the fragment layout is
static, only the offset depends on the thread), so the tables hold one base coordinate per
thread plus the offsets of thread 0's fragment: evaluating every (thread, index) pair one by one
exceeds NVRTC's constexpr budget for 128 threads x 32 values. The factorisation is checked, not
assumed: the full coordinates of thread 1 and of the last active thread are compiled too and
must equal base + offset. Bounds and active threads follow ``blas_partitioner``
(``is_thread_active``, ``is_index_in_bounds``): -1 for both row and column otherwise.

One NVRTC run per architecture serves any number of descriptors (:func:`prefetch_fragment_tables`);
results go to the content-addressed disk cache like the traits.
"""

from __future__ import annotations

import json
import logging
import threading

import numpy as np

from .._errors import CompileError
from . import cache
from .gemm_codegen import _compile, _description, _include_id, gemm_traits, prefetch_traits
from .toolchain import read_u32_arrays, toolchain_id

log = logging.getLogger("nvmath_device")

__all__ = ["fragment_table", "prefetch_fragment_tables", "render_tables_source"]

_PRELUDE = r"""#include <cublasdx.hpp>
namespace nvmathdx_sim {
template <class P> struct part_traits;
template <class TM, class L, class S, class SMN, class IC, class Al, class H, class BS>
struct part_traits<cublasdx::detail::blas_partitioner<TM, L, S, SMN, IC, Al, H, BS>> {
  using tiled_mma = TM;
  using shape_mn = SMN;
  static constexpr bool static_block_dim = H::value;
  static constexpr unsigned block_size = BS::value;
};
template <unsigned Len> struct Table { unsigned v[Len]; };
// The partitioner whose coordinates <sym>_coords reports (see gemm_codegen.render_shim_source).
template <class MM, bool Sug = false> struct Frag {
  using PG = decltype(MM::get_partitioner());
  using PS = decltype(MM::suggest_partitioner());
  static constexpr bool same = cute::is_same_v<
      decltype(cute::declval<PG>().make_accumulator_fragment().layout()),
      decltype(cute::declval<PS>().make_accumulator_fragment().layout())>;
  using PT = part_traits<cute::conditional_t<same || Sug, PS, PG>>;
  using TM = typename PT::tiled_mma;
  using SMN = typename PT::shape_mn;
  using F = decltype(cute::declval<PG>().make_accumulator_fragment());
  static constexpr unsigned size = decltype(cute::size(cute::declval<F>()))::value;
  static constexpr unsigned mma_threads = decltype(cute::size(TM{}))::value;
  static constexpr bool all_active = PT::static_block_dim && PT::block_size == mma_threads;
  static constexpr auto coords(unsigned thr) {
    return TM{}.get_thread_slice(thr).partition_C(cute::make_identity_tensor(SMN{}));
  }
};
// header: accumulator size, mma threads, same, all_active, M, N
template <class MM, bool Sug> constexpr Table<6> header() {
  using F = Frag<MM, Sug>;
  return Table<6>{{F::size, F::mma_threads, F::same ? 1u : 0u, F::all_active ? 1u : 0u,
                   (unsigned)decltype(cute::get<0>(typename F::SMN{}))::value,
                   (unsigned)decltype(cute::get<1>(typename F::SMN{}))::value}};
}
// (row, col) of fragment value 0 of threads T0 .. T0 + NT - 1
template <class MM, bool Sug, unsigned T0, unsigned NT> constexpr Table<2 * NT> bases() {
  Table<2 * NT> t{};
  for (unsigned thr = T0; thr < T0 + NT; ++thr) {
    const auto c = Frag<MM, Sug>::coords(thr)(0);
    t.v[2 * (thr - T0)] = static_cast<unsigned>(cute::get<0>(c));
    t.v[2 * (thr - T0) + 1] = static_cast<unsigned>(cute::get<1>(c));
  }
  return t;
}
// (row, col) of fragment values I0 .. I0 + NI - 1 of thread Which (0, 1 or the last active one
// of a block of NThreads), preceded by the thread's index
template <class MM, bool Sug, unsigned Which, unsigned NThreads, unsigned I0, unsigned NI>
constexpr Table<2 * NI + 1> values() {
  constexpr unsigned last = (NThreads < Frag<MM, Sug>::mma_threads ? NThreads : Frag<MM, Sug>::mma_threads) - 1;
  constexpr unsigned thr = Which == 0 ? 0u : (Which == 1 ? (last < 1 ? last : 1u) : last);
  Table<2 * NI + 1> t{};
  t.v[0] = thr;
  const auto crd = Frag<MM, Sug>::coords(thr);
  for (unsigned i = I0; i < I0 + NI; ++i) {
    const auto c = crd(i);
    t.v[1 + 2 * (i - I0)] = static_cast<unsigned>(cute::get<0>(c));
    t.v[2 + 2 * (i - I0)] = static_cast<unsigned>(cute::get<1>(c));
  }
  return t;
}
}  // namespace nvmathdx_sim
"""

# Work per constexpr evaluation (NVRTC gives up on "excessive constexpr function call
# complexity" somewhere between 256 and 8192 coordinates of a 64x64x64 fp64 GEMM).
_THREADS_PER_CHUNK = 64
_VALUES_PER_CHUNK = 64


def _shape(mm):
    t = gemm_traits(mm)
    bdim = (t["block_dim_x"], t["block_dim_y"], t["block_dim_z"])
    return bdim, bdim[0] * bdim[1] * bdim[2], t["accumulator_size"]


def _fid(mm) -> str:
    from .gemm_codegen import _fid as gemm_fid

    return gemm_fid(mm)


def _block(mm, i: int, chunk_threads: int, chunk_values: int, sug: bool = False):
    """C++ for one descriptor (``sug``: the fragments of ``suggest_layout_rmem_c``) and the names of
    its arrays: {name: (kind, first, count)}."""
    bdim, nt, n = _shape(mm)
    base = f"nvmathdx_gemm_frag_{_fid(mm)}{'_s' if sug else ''}"
    lines = [f"using M{i} = decltype({_description(mm, bdim)});"]
    ms = f"M{i}, {'true' if sug else 'false'}"
    names = {}

    def add(suffix, size, expr, what):
        name = f"{base}_{suffix}"
        lines.append(f'extern "C" __device__ const nvmathdx_sim::Table<{size}> {name} = {expr};')
        names[name] = what

    add("h", 6, f"nvmathdx_sim::header<{ms}>()", ("header", 0, 6))
    for t0 in range(0, nt, chunk_threads):
        c = min(chunk_threads, nt - t0)
        add(f"b{t0}", 2 * c, f"nvmathdx_sim::bases<{ms}, {t0}, {c}>()", ("bases", t0, c))
    for which in (0, 1, 2):
        for i0 in range(0, n, chunk_values):
            c = min(chunk_values, n - i0)
            add(f"v{which}_{i0}", 2 * c + 1, f"nvmathdx_sim::values<{ms}, {which}, {nt}, {i0}, {c}>()",
                (f"values{which}", i0, c))
    return "\n".join(lines) + "\n", names


def _items(mms):
    """(descriptor, suggested) pairs: a descriptor alone is its get_layout_rmem_c fragments."""
    return [m if isinstance(m, tuple) else (m, False) for m in mms]


def render_tables_source(mms, chunk_threads: int = _THREADS_PER_CHUNK,
                         chunk_values: int = _VALUES_PER_CHUNK) -> str:
    """The C++ source whose PTX holds the fragment tables of ``mms`` (descriptors, or
    ``(descriptor, suggested)`` pairs; one translation unit)."""
    return _PRELUDE + "".join(_block(mm, i, chunk_threads, chunk_values, sug)[0]
                              for i, (mm, sug) in enumerate(_items(mms)))


def _key(item) -> str:
    return cache.make_key("gemm-sim-fragments-v2", render_tables_source([item]), toolchain_id(), _include_id())


def _assemble(mm, arrays: dict, names: dict) -> dict:
    """Fragment table of ``mm`` from its compiled arrays, checked against the full coordinates."""
    bdim, nt, n = _shape(mm)
    parts = {}
    for name, (kind, first, count) in names.items():
        parts.setdefault(kind, []).append((first, count, np.array(arrays[name], dtype=np.uint32)))
    (_, _, head), = parts["header"]
    size, mma_threads, same, all_active, sm_m, sm_n = (int(v) for v in head)
    m, n_cols = mm.m, mm.n
    if size != n or (sm_m, sm_n) != (m, n_cols):
        raise CompileError(
            f"fragment tables of {mm!r}: the partitioner has {size} values over a {sm_m}x{sm_n} C, "
            f"expected accumulator_size {n} over {m}x{n_cols}"
        )
    base = np.empty((nt, 2), np.int64)
    for first, count, v in parts["bases"]:
        base[first:first + count] = v.astype(np.int64).reshape(count, 2)
    full = {}
    for which in (0, 1, 2):
        vals = np.empty((n, 2), np.int64)
        thr = None
        for first, count, v in parts[f"values{which}"]:
            thr = int(v[0])
            vals[first:first + count] = v[1:].astype(np.int64).reshape(count, 2)
        full[thr] = vals
    offsets = full[0] - base[0]
    for thr, vals in full.items():
        if not np.array_equal(base[thr] + offsets, vals):
            raise CompileError(
                f"fragment tables of {mm!r}: thread {thr}'s coordinates are not its base plus "
                "thread 0's offsets (cuBLASDx's partition is not a sliced CuTe layout here); the "
                "simulator cannot reproduce this GEMM's register fragments"
            )
    coords = base[:, None, :] + offsets[None, :, :]
    active = np.ones(nt, bool) if all_active else np.arange(nt) < mma_threads
    ok = active[:, None] & (coords[..., 0] < m) & (coords[..., 1] < n_cols) & (coords >= 0).all(-1)
    table = np.where(ok[..., None], coords, -1).astype(np.int32)
    # is_predicated(): some active thread holds values outside C (the MMA tile does not divide C)
    inside = (coords[..., 0] < m) & (coords[..., 1] < n_cols)
    predicated = bool((active[:, None] & ~inside).any())
    return {"table": table.tolist(), "coords": coords.astype(np.int32).tolist(), "mma_threads": mma_threads,
            "suggested_mma": bool(same), "all_active": bool(all_active), "predicated": predicated,
            "block_dim": list(bdim)}


_memory: dict = {}
_memory_lock = threading.Lock()
_build_lock = threading.RLock()


def _compile_group(sm, group, chunk_threads, chunk_values):
    src_parts, names = [_PRELUDE], []
    for i, (mm, sug) in enumerate(group):
        code, nm = _block(mm, i, chunk_threads, chunk_values, sug)
        src_parts.append(code)
        names.append(nm)
    ptx = _compile("".join(src_parts), sm, "ptx", "nvmathdx_gemm_fragments.cu")
    arrays = read_u32_arrays(ptx, set().union(*names))
    return [(_assemble(mm, arrays, nm)) for (mm, _), nm in zip(group, names)]


def prefetch_fragment_tables(mms) -> None:
    """Compile the fragment tables of many descriptors (or ``(descriptor, suggested)`` pairs): one
    NVRTC run per architecture (uncached ones only)."""
    items = list(dict.fromkeys(_items(mms)))
    prefetch_traits([mm for mm, _ in items])
    todo = [it for it in items if it not in _memory and cache.get(_key(it)) is None]
    by_sm = {}
    for it in todo:
        by_sm.setdefault(it[0].sm, []).append(it)
    for sm, group in by_sm.items():
        log.info("numba-mathdx: compiling register-fragment tables of %d GEMM descriptor(s) for sm_%d "
                 "with NVRTC (for the simulator; cached afterwards)", len(group), sm)
        chunk_threads, chunk_values = _THREADS_PER_CHUNK, _VALUES_PER_CHUNK
        while True:
            try:
                results = _compile_group(sm, group, chunk_threads, chunk_values)
                break
            except CompileError as e:
                if "constexpr" not in str(e) or chunk_threads == 1 and chunk_values == 1:
                    raise
                chunk_threads, chunk_values = max(1, chunk_threads // 4), max(1, chunk_values // 4)
        for it, res in zip(group, results):
            cache.put(_key(it), json.dumps(res).encode())


def fragment_table(mm, suggested: bool = False) -> tuple[np.ndarray, dict]:
    """``(table, info)``: ``table[t, i] = (row, col)`` of accumulator value ``i`` of thread ``t``
    (cuBLASDx's thread index within ``block_dim``), or ``(-1, -1)``; ``info`` has ``mma_threads``,
    ``suggested_mma`` (whether the register GEMM runs the suggested tiled MMA for
    ``get_layout_rmem_c`` fragments), ``all_active``, ``predicated`` (``is_predicated()``) and
    ``coords`` (the partitioner's ``map_fragment_index`` for every thread and value, in bounds or
    not, an int32 array). ``suggested``: the fragments of ``suggest_layout_rmem_c`` (the suggested
    MMA's partitioner) instead of ``get_layout_rmem_c``'s (the MMA ``execute`` runs for them)."""
    item = (mm, bool(suggested))
    hit = _memory.get(item)
    if hit is not None:
        return hit
    with _build_lock:  # every simulated thread of a block asks at once: one compiles, the others wait
        hit = _memory.get(item)
        if hit is not None:
            return hit
        blob = cache.get(_key(item))
        if blob is None:
            prefetch_fragment_tables([item])
            blob = cache.get(_key(item))
    res = json.loads(blob)
    table = np.array(res.pop("table"), dtype=np.int32)
    table.setflags(write=False)
    coords = np.array(res.pop("coords"), dtype=np.int32)
    coords.setflags(write=False)
    res["coords"] = coords
    out = (table, res)
    with _memory_lock:
        _memory[item] = out
    return out
