# SPDX-License-Identifier: Apache-2.0
"""GEMM descriptor -> C++ shim text -> NVRTC -> LTO-IR, and cuBLASDx traits read from compiled constants.

One translation unit per descriptor holds three ``extern "C"`` device functions:

- ``<sym>_smem(alpha*, a*, b*, beta*, c*)``: ``c = alpha * a @ b + beta * c`` on shared tiles;
- ``<sym>_rmem(a*, b*, acc*)``: ``acc += a @ b`` with C in this thread's registers;
- ``<sym>_coords(rows*, cols*)``: the (row, col) of each accumulator element (-1: unused),
  from the partitioner whose tiled MMA the register GEMM actually runs.

A second unit, compiled only when a kernel uses it (:func:`render_runtime_ld_source`), holds
``<sym>_ld_smem``: the shared-memory GEMM with leading dimensions given at run time.

The traits unit also holds ``cute::size`` / ``cute::cosize`` of every cuBLASDx layout of the
descriptor (:data:`LAYOUTS`, for :mod:`nvmath_device._layouts`); a global-memory layout with a
leading dimension other than the tight one is one more small unit (:func:`gemm_gmem_layout_sizes`).

cuBLASDx 0.4 (mathdx 25.6) bundles CUTLASS 3.9, whose headers do not compile under NVRTC with
CCCL >= 3.2 (both declare ``std::tuple_size``; ``cute::get`` becomes ambiguous with
``cuda::std::get``). :func:`cccl_include_dir` picks a compatible CCCL (CUDA's own, or CuPy's
bundled one) and puts it first on the include path.
"""

from __future__ import annotations

import concurrent.futures
import functools
import glob
import hashlib
import json
import logging
import multiprocessing
import os
import re

from .._errors import CompileError
from .._types import GEMM_PRECISIONS
from . import cache
from .toolchain import compile_source, include_dirs, read_u32_arrays, toolchain_id

log = logging.getLogger("nvmath_device")

# cuBLASDx's Precision<> types (__half, __nv_bfloat16, float, double); cublasdx.hpp includes
# cuda_fp16.h and cuda_bf16.h itself (commondx/complex_types.hpp)
_CPP_PREC = {name: cpp for name, (cpp, _) in GEMM_PRECISIONS.items()}

TRAITS = (
    "block_dim_x", "block_dim_y", "block_dim_z",
    "suggested_block_dim_x", "suggested_block_dim_y", "suggested_block_dim_z",
    "a_size", "b_size", "c_size", "lda", "ldb", "ldc",
    "shared_memory_size", "accumulator_size",
    "a_alignment", "b_alignment", "c_alignment",
    "a_itemsize", "b_itemsize", "c_itemsize",
    "suggested_lda", "suggested_ldb", "suggested_ldc",
)

# cuBLASDx's layouts of one descriptor (nvmath_device._layouts): gmem/smem from the description's
# get_layout_* / suggest_layout_* (commondx pointer_layouts; their .layout is a CuTe layout), the
# register C from the partitioners' accumulator fragments (cuBLASDx 0.4 has no *_layout_rmem_c)
LAYOUTS = (
    "gmem_a", "gmem_b", "gmem_c", "smem_a", "smem_b", "smem_c",
    "suggested_smem_a", "suggested_smem_b", "suggested_smem_c", "rmem_c", "suggested_rmem_c",
)
TRAITS += tuple(f"layout_{name}_{q}" for name in LAYOUTS for q in ("size", "cosize"))


def _layout_exprs(t: str, i: int) -> tuple[str, str]:
    """(C++ prelude, initialiser list) of cute::size / cute::cosize of every layout in LAYOUTS for
    the pinned description ``t`` (unsigned constants, evaluated by the compiler)."""
    pre = "".join(
        f"using L{p[0].upper()}{i} = decltype(cute::declval<decltype({t}::{p}())>()"
        ".make_accumulator_fragment().layout());\n"
        for p in ("get_partitioner", "suggest_partitioner")
    )
    vals = []
    for name in LAYOUTS:
        if name.endswith("rmem_c"):
            lt = f"L{'S' if name.startswith('suggested') else 'G'}{i}"
            vals += [f"(unsigned)decltype(cute::size(cute::declval<{lt}>()))::value",
                     f"(unsigned)decltype(cute::cosize(cute::declval<{lt}>()))::value"]
        else:
            fn = ("suggest_layout_" + name[len("suggested_"):]) if name.startswith("suggested") else f"get_layout_{name}"
            vals += [f"(unsigned)cute::size({t}::{fn}().layout)", f"(unsigned)cute::cosize({t}::{fn}().layout)"]
    return pre, ", ".join(vals)

# Newest CCCL known to compile mathdx 25.6's CUTLASS under NVRTC (3.0.1 and 3.1.2 tested; 3.5.0 fails).
_CCCL_MAX_OK = (3, 1)


def _cccl_version(d: str):
    try:
        text = open(os.path.join(d, "cuda", "std", "__cccl", "version.h")).read()
    except OSError:
        return None
    m = re.search(r"#define\s+CCCL_VERSION\s+(\d+)", text)
    if not m:
        return None
    v = int(m.group(1))
    return (v // 1000000, v // 1000 % 1000, v % 1000)


@functools.lru_cache(maxsize=1)
def cccl_include_dir() -> tuple[str, ...]:
    """Include folder of a CCCL that mathdx 25.6's CUTLASS compiles with, or () for the default one."""
    default = next((d for d in include_dirs() if os.path.basename(d.rstrip("/")) == "cccl"), None)
    dv = _cccl_version(default) if default else None
    if dv is not None and dv[:2] <= _CCCL_MAX_OK:
        return ()
    candidates = []
    env = os.environ.get("NUMBA_MATHDX_CCCL_DIR")
    if env:
        candidates.append(env)
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if root:
            candidates.append(os.path.join(root, "include", "cccl"))
    candidates += sorted(glob.glob("/usr/local/cuda*/include/cccl"), reverse=True)
    try:
        import importlib.util

        spec = importlib.util.find_spec("cupy")
        if spec and spec.submodule_search_locations:
            for p in spec.submodule_search_locations:
                candidates.append(os.path.join(p, "_core", "include", "cupy", "_cccl", "libcudacxx"))
    except Exception:  # pragma: no cover - cupy is optional here
        pass
    best = None
    for c in candidates:
        v = _cccl_version(c)
        if v is not None and v[:2] <= _CCCL_MAX_OK and (best is None or v > best[0]):
            best = (v, c)
    if best is None:
        log.warning("numba-mathdx: no CCCL <= %s found for cuBLASDx (default CCCL %s); set "
                    "NUMBA_MATHDX_CCCL_DIR to a CCCL 3.0/3.1 include folder", _CCCL_MAX_OK, dv)
        return ()
    return (best[1],)


def _include_id() -> str:
    d = cccl_include_dir()
    return f"cccl{_cccl_version(d[0]) if d else 'default'}"


def _fid(mm) -> str:
    text = repr(mm._key) + ("|StaticBlockDim" if getattr(mm, "static_block_dim", False) else "")
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def gemm_symbol(mm) -> str:
    """Base name of the ``extern "C"`` device functions generated for ``mm`` (from its description's hash)."""
    return f"nvmathdx_gemm_{_fid(mm)}"


def _description(mm, block_dim) -> str:
    (m, n, k), prec, data_type, arr, _, _, aligns, _, sm = mm._key
    ops = [
        f"cublasdx::Size<{m}, {n}, {k}>()",
        f"cublasdx::Precision<{', '.join(_CPP_PREC[p] for p in prec)}>()",
        f"cublasdx::Type<cublasdx::type::{data_type}>()",
        f"cublasdx::Arrangement<{', '.join('cublasdx::' + a for a in arr)}>()",
        "cublasdx::Function<cublasdx::function::MM>()",
        f"cublasdx::SM<{sm * 10}>()",
        "cublasdx::Block()",
    ]
    if mm._key[4] is not None:
        ops.append(f"cublasdx::LeadingDimension<{', '.join(map(str, mm.leading_dimension))}>()")
    if aligns is not None:
        ops.append(f"cublasdx::Alignment<{', '.join(map(str, aligns))}>()")
    if block_dim is not None:
        ops.append(f"cublasdx::BlockDim<{', '.join(map(str, block_dim))}>()")
    if getattr(mm, "static_block_dim", False):
        ops.append("cublasdx::experimental::StaticBlockDim()")
    return " + ".join(ops)


def _traits_block(mm, i: int) -> tuple[str, str]:
    name = f"nvmathdx_gemm_traits_{_fid(mm)}"
    bdim = mm._key[5]
    first = _description(mm, None if bdim == "suggested" else bdim)
    r = f"R{i}"
    pinned = _description(mm, (f"{r}::block_dim.x", f"{r}::block_dim.y", f"{r}::block_dim.z"))
    t = f"T{i}"
    lpre, lvals = _layout_exprs(t, i)
    code = (
        f"using {r} = decltype({first});\n"
        f"using {t} = decltype({pinned});\n"
        f"using F{i} = decltype(cute::declval<decltype({t}::get_partitioner())>().make_accumulator_fragment());\n"
        f"using S{i} = cublasdx::suggested_leading_dimension_of<{t}, {mm.sm * 10}>;\n"
        f"{lpre}"
        f'extern "C" __device__ const unsigned {name}[] = {{'
        f"{t}::block_dim.x, {t}::block_dim.y, {t}::block_dim.z, "
        f"{t}::suggested_block_dim.x, {t}::suggested_block_dim.y, {t}::suggested_block_dim.z, "
        f"{t}::a_size, {t}::b_size, {t}::c_size, {t}::lda, {t}::ldb, {t}::ldc, "
        f"cublasdx::get_shared_storage_size<{t}>(), "
        f"(unsigned)decltype(cute::size(cute::declval<F{i}>()))::value, "
        f"cublasdx::alignment_of<{t}>::a, cublasdx::alignment_of<{t}>::b, cublasdx::alignment_of<{t}>::c, "
        f"(unsigned)sizeof(typename {t}::a_value_type), (unsigned)sizeof(typename {t}::b_value_type), "
        f"(unsigned)sizeof(typename {t}::c_value_type), S{i}::lda, S{i}::ldb, S{i}::ldc, {lvals}}};\n"
    )
    return code, name


def render_traits_source(mms) -> str:
    """C++ source of one NVRTC unit whose constants hold the cuBLASDx traits of every GEMM in ``mms``."""
    parts = ["#include <cublasdx.hpp>\n"]
    for i, mm in enumerate(mms):
        parts.append(_traits_block(mm, i)[0])
    return "".join(parts)


def _traits_key(mm) -> str:
    return cache.make_key("gemm-traits", render_traits_source([mm]), toolchain_id(), _include_id())


def _compile(src, sm, output, name):
    try:
        return compile_source(src, sm, output, name=name, extra_include_dirs=cccl_include_dir())
    except CompileError as e:
        raise CompileError(f"cuBLASDx shim failed to compile: {e}") from None


def prefetch_traits(mms) -> None:
    """Compute the traits of many descriptors with one NVRTC run per architecture (those not cached yet)."""
    todo, seen = [], set()
    for mm in mms:
        if mm in seen:
            continue
        seen.add(mm)
        if cache.get(_traits_key(mm)) is None:
            todo.append(mm)
    by_sm = {}
    for mm in todo:
        by_sm.setdefault(mm.sm, []).append(mm)
    for sm, group in by_sm.items():
        log.info("numba-mathdx: compiling traits of %d GEMM descriptor(s) for sm_%d with NVRTC "
                 "(~15 s; cached afterwards)", len(group), sm)
        ptx = _compile(render_traits_source(group), sm, "ptx", "nvmathdx_gemm_traits.cu")
        names = {_traits_block(mm, 0)[1]: mm for mm in group}
        arrays = read_u32_arrays(ptx, set(names))
        for name, mm in names.items():
            if len(arrays.get(name, ())) != len(TRAITS):
                raise CompileError(f"cuBLASDx traits: {name} holds {len(arrays.get(name, ()))} values, "
                                   f"expected {len(TRAITS)}")
            traits = dict(zip(TRAITS, arrays[name]))
            cache.put(_traits_key(mm), json.dumps(traits).encode())


def gemm_traits(mm) -> dict:
    """cuBLASDx traits of ``mm`` (block shape, suggested leading dimensions, accumulator size), cached."""
    key = _traits_key(mm)
    blob = cache.get(key)
    if blob is None:
        prefetch_traits([mm])
        blob = cache.get(key)
    return json.loads(blob)


def render_gmem_layout_source(mm, operand: str, ld: int) -> str:
    """C++ source of one small NVRTC unit whose constant holds ``cute::size`` and ``cute::cosize`` of
    cuBLASDx's ``get_layout_gmem_<operand>(cute::Int<ld>)`` for ``mm`` (``ld`` already checked)."""
    bdim = mm._key[5]
    desc = _description(mm, None if bdim == "suggested" else bdim)
    name = f"nvmathdx_gemm_layout_{_fid(mm)}_gmem_{operand}_{ld}"
    return (
        "#include <cublasdx.hpp>\n"
        f"using G = decltype({desc});\n"
        f"constexpr auto kLayout = G::get_layout_gmem_{operand}(cute::Int<{ld}>{{}}).layout;\n"
        f'extern "C" __device__ const unsigned {name}[] = {{'
        "(unsigned)cute::size(kLayout), (unsigned)cute::cosize(kLayout)};\n"
    )


def gemm_gmem_layout_sizes(mm, operand: str, ld: int) -> tuple[int, int]:
    """``(size, cosize)`` of cuBLASDx's global-memory layout of ``operand`` ("a", "b" or "c") with
    leading dimension ``ld``, read from a compiled constant (disk-cached)."""
    src = render_gmem_layout_source(mm, operand, ld)
    key = cache.make_key("gemm-gmem-layout", src, toolchain_id(), _include_id())
    def build():
        log.info("numba-mathdx: compiling the global layout of %s (ld=%d) of GEMM %s with NVRTC "
                 "(~15 s; cached afterwards)", operand.upper(), ld, mm.size)
        name = f"nvmathdx_gemm_layout_{_fid(mm)}_gmem_{operand}_{ld}"
        values = read_u32_arrays(_compile(src, mm.sm, "ptx", f"{name}.cu"), {name}).get(name)
        if not values or len(values) != 2:
            raise CompileError(f"cuBLASDx layout: {name} not found in the compiled PTX")
        return json.dumps(values).encode()

    blob = cache.get_or_build(key, build)
    size, cosize = json.loads(blob)
    return int(size), int(cosize)


def pinned_block_dim(mm) -> tuple:
    """``mm``'s block shape as numbers: a "suggested" one comes from cuBLASDx's database (the traits)."""
    bdim = mm._key[5]
    if bdim == "suggested":
        t = gemm_traits(mm)
        bdim = (t["block_dim_x"], t["block_dim_y"], t["block_dim_z"])
    return bdim


def render_shim_source(mm) -> str:
    """C++ source of ``mm``'s shim: the ``extern "C"`` device functions its kernels call."""
    bdim = pinned_block_dim(mm)
    sym = gemm_symbol(mm)
    desc = _description(mm, bdim)
    return f"""#include <cublasdx.hpp>
using MM = decltype({desc});
using AT = typename MM::a_value_type;
using BT = typename MM::b_value_type;
using CT = typename MM::c_value_type;
extern "C" __device__ void {sym}_smem(void* alpha, void* a, void* b, void* beta, void* c) {{
  MM().execute(*reinterpret_cast<const CT*>(alpha), reinterpret_cast<AT*>(a), reinterpret_cast<BT*>(b),
               *reinterpret_cast<const CT*>(beta), reinterpret_cast<CT*>(c));
}}
extern "C" __device__ void {sym}_rmem(void* a, void* b, void* acc) {{
  auto ta = cublasdx::make_tensor(reinterpret_cast<AT*>(a), MM::get_layout_smem_a());
  auto tb = cublasdx::make_tensor(reinterpret_cast<BT*>(b), MM::get_layout_smem_b());
  auto partitioner = MM::get_partitioner();
  auto frag = partitioner.make_accumulator_fragment();
  auto tc = cute::make_tensor(cute::make_rmem_ptr(reinterpret_cast<CT*>(acc)), frag.layout());
  MM().execute(ta, tb, tc);
}}
// The accumulator of _rmem has get_partitioner()'s layout. cuBLASDx's register GEMM
// (cute_backend::execution::tensor_gemm) runs the swizzled ("suggested") tiled MMA whenever
// that layout equals the suggested partitioner's, so the coordinates must come from the same one.
using PG = decltype(MM::get_partitioner());
using PS = decltype(MM::suggest_partitioner());
constexpr bool kSameLayout = cute::is_same_v<
    decltype(cute::declval<PG>().make_accumulator_fragment().layout()),
    decltype(cute::declval<PS>().make_accumulator_fragment().layout())>;
extern "C" __device__ void {sym}_coords(void* rows, void* cols) {{
  int* r = reinterpret_cast<int*>(rows);
  int* c = reinterpret_cast<int*>(cols);
  auto partitioner = [] {{
    if constexpr (kSameLayout) {{ return MM::suggest_partitioner(); }} else {{ return MM::get_partitioner(); }}
  }}();
  using F = decltype(MM::get_partitioner().make_accumulator_fragment());
  constexpr int N = decltype(cute::size(cute::declval<F>()))::value;
  const bool active = partitioner.is_thread_active();
  #pragma unroll
  for (int i = 0; i < N; ++i) {{
    auto crd = partitioner.map_fragment_index(i);
    const bool ok = active && partitioner.is_index_in_bounds(i);
    r[i] = ok ? static_cast<int>(cute::get<0>(crd)) : -1;
    c[i] = ok ? static_cast<int>(cute::get<1>(crd)) : -1;
  }}
}}
"""


def render_runtime_ld_source(mm) -> str:
    """C++ source of ``mm``'s run-time leading-dimension execute (its own unit, compiled only for
    kernels that call ``MM.execute(alpha, a, lda, b, ldb, beta, c, ldc)``):
    ``<sym>_ld_smem(alpha*, a*, lda*, b*, ldb*, beta*, c*, ldc*)`` with the leading dimensions
    as ``unsigned`` values behind pointers (cuBLASDx's pointer + dynamic-ld ``execute``)."""
    bdim = pinned_block_dim(mm)
    sym = gemm_symbol(mm)
    desc = _description(mm, bdim)
    return f"""#include <cublasdx.hpp>
using MM = decltype({desc});
using AT = typename MM::a_value_type;
using BT = typename MM::b_value_type;
using CT = typename MM::c_value_type;
extern "C" __device__ void {sym}_ld_smem(void* alpha, void* a, void* lda, void* b, void* ldb, void* beta,
                                       void* c, void* ldc) {{
  MM().execute(*reinterpret_cast<const CT*>(alpha), reinterpret_cast<AT*>(a), *reinterpret_cast<const unsigned*>(lda),
               reinterpret_cast<BT*>(b), *reinterpret_cast<const unsigned*>(ldb),
               *reinterpret_cast<const CT*>(beta), reinterpret_cast<CT*>(c), *reinterpret_cast<const unsigned*>(ldc));
}}
"""


def gemm_runtime_ld_ltoir(mm) -> bytes:
    """LTO-IR of ``mm``'s run-time leading-dimension execute for ``mm.sm`` (disk-cached)."""
    src = render_runtime_ld_source(mm)
    key = cache.make_key("gemm-ltoir-ld", src, toolchain_id(), _include_id(), mm.sm)

    def build():
        log.info("numba-mathdx: compiling %s_ld (GEMM %s, run-time leading dimensions) with NVRTC "
                 "(~15 s; cached afterwards)", gemm_symbol(mm), mm.size)
        return _compile(src, mm.sm, "ltoir", f"{gemm_symbol(mm)}_ld.cu")

    return cache.get_or_build(key, build)


def _ltoir_key(mm) -> str:
    return cache.make_key("gemm-ltoir", render_shim_source(mm), toolchain_id(), _include_id(), mm.sm)


def gemm_ltoir(mm) -> bytes:
    """LTO-IR of ``mm``'s shim for ``mm.sm``: from the disk cache, else compiled by NVRTC and cached."""
    key = _ltoir_key(mm)
    blob = cache.get(key)
    if blob is None:
        src = render_shim_source(mm)  # may compile the traits first: outside the key's lock
        with cache.building(key):  # one builder per key, across threads and processes
            blob = cache.get(key)
            if blob is None:
                log.info("numba-mathdx: compiling %s (GEMM %s) with NVRTC (~15 s; cached afterwards)",
                         gemm_symbol(mm), mm.size)
                blob = _compile(src, mm.sm, "ltoir", f"{gemm_symbol(mm)}.cu")
                cache.put(key, blob)
    return blob


def _worker_ltoir(mm):
    return gemm_ltoir(mm) is not None


def prefetch_ltoir(mms, workers: int | None = None) -> None:
    """Compile the LTO-IR of many descriptors, in parallel processes, into the disk cache.

    NVRTC is serialised within a process; on a many-core machine several processes cut the time
    of a large batch. Traits are computed first (one NVRTC run). Needs the disk cache enabled.
    """
    mms = list(dict.fromkeys(mms))
    prefetch_traits([mm for mm in mms if mm._key[5] == "suggested"])
    todo = [mm for mm in mms if cache.get(_ltoir_key(mm)) is None]
    if not todo:
        return
    workers = workers or min(len(todo), os.cpu_count() or 1)
    if workers <= 1 or len(todo) == 1 or cache.cache_dir() is None:
        for mm in todo:
            gemm_ltoir(mm)
        return
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as ex:
        list(ex.map(_worker_ltoir, todo))
