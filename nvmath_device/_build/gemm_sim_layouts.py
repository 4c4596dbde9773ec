# SPDX-License-Identifier: Apache-2.0
"""cuBLASDx's global and shared-memory layouts as data, for the simulator's tensor API.

The simulator needs, for a tensor of layout ``MM.suggest_layout_smem_a()`` ..., the buffer offset
of every element (row, col): the GPU's cuBLASDx copies write swizzled shared tiles, and a program
may look at a shared buffer. This module asks the compiler for each layout's structure instead of
assuming it: one NVRTC unit per descriptor whose ``extern "C"`` constants hold, per layout, the
swizzle of a ``cute::ComposedLayout`` (``Swizzle<B, M, S>``: bits, base, shift; none for a plain
``cute::Layout``), its constant offset, and the flattened shapes and strides of its two modes
(rows, columns). Python evaluates ``offset(r, c) = swizzle(o + sum(r_i * d_i) + sum(c_j * e_j))``
with CuTe's colexicographic split of ``r`` and ``c`` over the modes' shapes. The evaluation is
checked, not trusted: the same unit holds the layout's own ``L(i)`` for 128 indices (the first 64
and 64 spread over the layout) and they must agree, else a CompileError says the simulator cannot
reproduce this layout.

Layouts: ``get/suggest_layout_smem_a/b/c`` and the default ``get_layout_gmem_a/b/c`` (a global
layout with another leading dimension is the same column- or row-major map with that stride;
the default one's structure, read here, is what confirms the map).
"""

from __future__ import annotations

import functools
import json
import logging
import threading

import numpy as np

from .._errors import CompileError
from . import cache
from .gemm_codegen import _compile, _description, _fid, _include_id, pinned_block_dim
from .toolchain import read_u32_arrays, toolchain_id

log = logging.getLogger("nvmath_device")

__all__ = ["layout_offsets", "layout_structures", "SIM_LAYOUTS"]

SIM_LAYOUTS = ("get_layout_smem_a", "get_layout_smem_b", "get_layout_smem_c",
               "suggest_layout_smem_a", "suggest_layout_smem_b", "suggest_layout_smem_c",
               "get_layout_gmem_a", "get_layout_gmem_b", "get_layout_gmem_c")
_R = 8          # flattened sub-modes per mode, at most
_SAMPLES = 128  # L(i) values compiled per layout to check the evaluation
_HEAD = 6       # composed, swizzle?, B, M, S, offset
_LEN = _HEAD + 2 * (1 + 2 * _R) + 2 + _SAMPLES

_PRELUDE = r"""#include <cublasdx.hpp>
namespace nmdx_lay {
template <unsigned N> struct Table { unsigned v[N]; };
template <class T> struct swz { static constexpr int ok = 0, b = 0, m = 0, s = 0; };
template <int B, int M, int S> struct swz<cute::Swizzle<B, M, S>> { static constexpr int ok = 1, b = B, m = M, s = S; };
template <class L> struct parts { using A = void; using O = cute::C<0>; using I = L; static constexpr int composed = 0; };
template <class A_, class O_, class B_> struct parts<cute::ComposedLayout<A_, O_, B_>> {
  using A = A_; using O = O_; using I = B_; static constexpr int composed = 1;
};
template <class T, int... K> constexpr void put_seq(unsigned* out, T const& t, cute::integer_sequence<int, K...>) {
  ((out[K] = static_cast<unsigned>(static_cast<int>(cute::get<K>(t)))), ...);
}
template <unsigned R, class T> constexpr unsigned put(unsigned* out, T const& t) {
  auto f = cute::flatten_to_tuple(t);
  constexpr int n = decltype(cute::rank(f))::value;
  static_assert(n <= (int)R, "layout mode deeper than the simulator's table");
  put_seq(out, f, cute::make_integer_sequence<int, n>{});
  return n;
}
// the structure of layout L (rows x cols), then L(idx[k]) for the sample indices
template <class L, unsigned R, unsigned NS, unsigned LEN>
constexpr Table<LEN> table(const unsigned (&idx)[NS]) {
  Table<LEN> t{};
  using P = parts<L>;
  using I = typename P::I;
  t.v[0] = P::composed;
  if constexpr (P::composed) {
    t.v[1] = swz<typename P::A>::ok;
    t.v[2] = static_cast<unsigned>(swz<typename P::A>::b);
    t.v[3] = static_cast<unsigned>(swz<typename P::A>::m);
    t.v[4] = static_cast<unsigned>(swz<typename P::A>::s);
    t.v[5] = static_cast<unsigned>(static_cast<int>(typename P::O{}));
  }
  unsigned at = 6;
  t.v[at] = put<R>(t.v + at + 1, cute::shape<0>(I{}));
  put<R>(t.v + at + 1 + R, cute::stride<0>(I{}));
  at += 1 + 2 * R;
  t.v[at] = put<R>(t.v + at + 1, cute::shape<1>(I{}));
  put<R>(t.v + at + 1 + R, cute::stride<1>(I{}));
  at += 1 + 2 * R;
  t.v[at] = static_cast<unsigned>(decltype(cute::size<0>(I{}))::value);
  t.v[at + 1] = static_cast<unsigned>(decltype(cute::size<1>(I{}))::value);
  at += 2;
  for (unsigned k = 0; k < NS; ++k) t.v[at + k] = static_cast<unsigned>(static_cast<int>(L{}(static_cast<int>(idx[k]))));
  return t;
}
}  // namespace nmdx_lay
"""


def _layout_type(name: str, ld) -> str:
    if name.startswith("get_layout_gmem_"):
        return f"cute::remove_cvref_t<decltype(MM::{name}(cute::Int<{ld}>{{}}).layout)>"
    return f"cute::remove_cvref_t<decltype(MM::{name}().layout)>"


def _samples(size: int) -> list[int]:
    first = list(range(min(64, size)))
    spread = [min(size - 1, (k * size) // 64 + (k * 7) % max(1, size // 64)) for k in range(64)]
    out = (first + spread)[:_SAMPLES]
    return out + [0] * (_SAMPLES - len(out))


def _names(mm):
    return {lay: f"nvmathdx_gemm_lay_{_fid(mm)}_{i}" for i, lay in enumerate(SIM_LAYOUTS)}


def _gmem_ld(mm, name):
    return getattr(mm, name)().leading_dimension


def render_layouts_source(mm) -> str:
    """The C++ unit whose constants hold the structure of ``mm``'s layouts (``SIM_LAYOUTS``)."""
    lines = [_PRELUDE, f"using MM = decltype({_description(mm, pinned_block_dim(mm))});"]
    for lay, sym in _names(mm).items():
        ld = _gmem_ld(mm, lay) if lay.startswith("get_layout_gmem_") else None
        size = getattr(mm, lay)().size
        idx = ", ".join(map(str, _samples(size)))
        lines.append(f"constexpr unsigned {sym}_idx[] = {{{idx}}};")
        lines.append(f'extern "C" __device__ const nmdx_lay::Table<{_LEN}> {sym} = '
                     f"nmdx_lay::table<{_layout_type(lay, ld)}, {_R}, {_SAMPLES}, {_LEN}>({sym}_idx);")
    return "\n".join(lines) + "\n"


def _signed(v: int) -> int:
    return v - (1 << 32) if v >= 1 << 31 else v


def evaluate(struct: dict, rows=None, cols=None) -> np.ndarray:
    """Offsets (int64, rows x cols) of a layout structure (as :func:`layout_structures` returns)."""
    rows = struct["rows"] if rows is None else rows
    cols = struct["cols"] if cols is None else cols
    off = np.full((rows, cols), struct["offset"], np.int64)
    for axis, (shapes, strides) in enumerate((struct["mode0"], struct["mode1"])):
        idx = np.arange(rows if axis == 0 else cols, dtype=np.int64)
        part = np.zeros_like(idx)
        for s, d in zip(shapes, strides):
            part += (idx % s) * d
            idx //= s
        off += part[:, None] if axis == 0 else part[None, :]
    sw = struct["swizzle"]
    if sw is not None:
        b, m, s = sw
        yyy = ((1 << b) - 1) << (m + max(0, s))
        y = off & yyy
        off = off ^ (y >> s if s >= 0 else y << -s)
    return off


def _assemble(mm, arrays) -> dict:
    out = {}
    for lay, sym in _names(mm).items():
        v = [int(x) for x in arrays[sym]]
        composed, is_swz, b, m, s, offset = v[0], v[1], v[2], v[3], _signed(v[4]), _signed(v[5])
        at = _HEAD
        modes = []
        for _ in range(2):
            n = v[at]
            modes.append([v[at + 1:at + 1 + n], [_signed(x) for x in v[at + 1 + _R:at + 1 + _R + n]]])
            at += 1 + 2 * _R
        rows, cols = v[at], v[at + 1]
        samples = [_signed(x) for x in v[at + 2:at + 2 + _SAMPLES]]
        if composed and not is_swz:
            raise CompileError(f"{mm!r}.{lay}(): a composed layout whose outer function is not a cute::Swizzle; "
                               "the simulator cannot evaluate it")
        struct = {"swizzle": [b, m, s] if composed else None, "offset": offset if composed else 0,
                  "mode0": modes[0], "mode1": modes[1], "rows": rows, "cols": cols}
        table = evaluate(struct)
        flat = table.reshape(-1, order="F")  # L(i): i = r + rows * c (CuTe's colexicographic index)
        idx = _samples(rows * cols)
        if [int(flat[i]) for i in idx] != samples:
            raise CompileError(f"{mm!r}.{lay}(): the simulator's evaluation of the layout disagrees with "
                               f"cuBLASDx's L(i) at sampled indices; it cannot reproduce this layout")
        out[lay] = struct
    return out


_memory: dict = {}
_lock = threading.RLock()


def layout_structures(mm) -> dict:
    """{layout method name: structure} for ``mm`` (compiled once, disk-cached, checked)."""
    hit = _memory.get(mm)
    if hit is not None:
        return hit
    with _lock:  # every simulated thread of a block asks at once: one compiles, the others wait
        hit = _memory.get(mm)
        if hit is not None:
            return hit
        res = _build(mm)
        _memory[mm] = res
    return res


def _build(mm) -> dict:
    src = render_layouts_source(mm)
    key = cache.make_key("gemm-sim-layouts-v1", src, toolchain_id(), _include_id())

    def build():
        log.info("numba-mathdx: compiling the shared/global layouts of GEMM %s with NVRTC (for the "
                 "simulator's tensors; cached afterwards)", mm.size)
        ptx = _compile(src, mm.sm, "ptx", f"nvmathdx_gemm_layouts_{_fid(mm)}.cu")
        arrays = read_u32_arrays(ptx, set(_names(mm).values()))
        return json.dumps(_assemble(mm, arrays)).encode()

    return json.loads(cache.get_or_build(key, build))


@functools.lru_cache(maxsize=1024)
def layout_offsets(mm, name: str, leading_dimension=None) -> np.ndarray:
    """Buffer offsets (rows x cols, int64, read-only) of element (r, c) in ``mm``'s layout ``name``
    (``leading_dimension``: a global layout's, when not the default)."""
    structs = layout_structures(mm)
    if name.startswith("get_layout_gmem_"):
        op = name[-1]
        i = "abc".index(op)
        rows, cols = ((mm.m, mm.k), (mm.k, mm.n), (mm.m, mm.n))[i]
        col_major = mm.arrangement[i] == "col_major"
        default = structs[name]
        tight = rows if col_major else cols
        ld = tight if leading_dimension is None else int(leading_dimension)
        r = np.arange(rows, dtype=np.int64)[:, None]
        c = np.arange(cols, dtype=np.int64)[None, :]
        plain = r + c * ld if col_major else r * ld + c
        check = evaluate(default)
        expect = r + c * _gmem_ld(mm, name) if col_major else r * _gmem_ld(mm, name) + c
        if not np.array_equal(check, expect):
            raise CompileError(f"{mm!r}.{name}(): cuBLASDx's global layout is not the plain "
                               f"{'column' if col_major else 'row'}-major map; the simulator cannot use it")
        out = plain
    else:
        out = evaluate(structs[name])
    out.setflags(write=False)
    return out
