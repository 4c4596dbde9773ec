# SPDX-License-Identifier: Apache-2.0
"""FFT descriptor -> C++ shim text -> NVRTC -> LTO-IR, and FFT traits read from compiled constants."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import threading
from concurrent.futures import Future

from .._types import FFT_CPP_TYPES, FFT_PRECISION_TAGS
from . import cache
from .toolchain import (
    compile_source,
    compile_source_in_child,
    include_dirs,
    link_cubin,
    read_u32_arrays,
    toolchain_id,
)

log = logging.getLogger("nvmath_device")


# Order of the traits array; Thread FFTs have no block traits (0 there).
BLOCK_TRAITS = (
    "block_dim_x", "block_dim_y", "block_dim_z", "shared_memory_size", "storage_size", "stride",
    "elements_per_thread", "ffts_per_block", "implicit_type_batching", "requires_workspace",
    "workspace_size", "input_ept", "output_ept", "input_length", "output_length",
)


def _fid(fft) -> str:
    return hashlib.sha256(repr(fft._key).encode()).hexdigest()[:16]


def fft_symbol(fft) -> str:
    """Name of the ``extern "C"`` device function generated for ``fft`` (from its description's hash)."""
    return f"nvmathdx_fft_{_fid(fft)}"


def _description(fft, ept, fpb) -> str:
    size, prec, fft_type, direction, _, _, execution, sm, layout, mode = fft._key
    ops = [
        f"cufftdx::Size<{size}>()",
        f"cufftdx::Precision<{FFT_CPP_TYPES[prec]}>()",
        f"cufftdx::Type<cufftdx::fft_type::{fft_type}>()",
        f"cufftdx::Direction<cufftdx::fft_direction::{direction}>()",
        f"cufftdx::SM<{sm * 10}>()",
    ]
    if fft_type != "c2c":
        ops.append(
            f"cufftdx::RealFFTOptions<cufftdx::complex_layout::{layout}, cufftdx::real_mode::{mode}>()"
        )
    if execution == "Block":
        if ept is not None:
            ops.append(f"cufftdx::ElementsPerThread<{ept}>()")
        if fpb is not None:
            ops.append(f"cufftdx::FFTsPerBlock<{fpb}>()")
    ops.append(f"cufftdx::{execution}()")
    return " + ".join(ops)


def _traits_block(fft, i: int) -> tuple[str, str]:
    """C++ declarations computing one descriptor's traits; returns (code, array name)."""
    name = f"nvmathdx_traits_{_fid(fft)}"
    ept, fpb = fft._key[4], fft._key[5]
    if fft.execution == "Thread":
        code = (
            f"using T{i} = decltype({_description(fft, None, None)});\n"
            f'extern "C" __device__ const unsigned {name}[] = {{0u, 0u, 0u, 0u, T{i}::storage_size, '
            f"T{i}::stride, T{i}::elements_per_thread, 1u, T{i}::implicit_type_batching, 0u, 0u, "
            f"T{i}::input_ept, T{i}::output_ept, T{i}::input_length, T{i}::output_length}};\n"
        )
        return code, name
    # Resolve 'suggested' in C++: first without the operator, then pin the resolved values.
    first = _description(fft, None if ept == "suggested" else ept, None if fpb == "suggested" else fpb)
    e = f"R{i}::elements_per_thread"
    f = f"R{i}::suggested_ffts_per_block" if fpb == "suggested" else str(fpb)
    code = (
        f"using R{i} = decltype({first});\n"
        f"using T{i} = decltype({_description(fft, '@E', '@F').replace('<@E>', '<' + e + '>').replace('<@F>', '<' + f + '>')});\n"
        f'extern "C" __device__ const unsigned {name}[] = {{T{i}::block_dim.x, T{i}::block_dim.y, '
        f"T{i}::block_dim.z, T{i}::shared_memory_size, T{i}::storage_size, T{i}::stride, "
        f"T{i}::elements_per_thread, T{i}::ffts_per_block, T{i}::implicit_type_batching, "
        f"(unsigned)T{i}::requires_workspace, T{i}::workspace_size, T{i}::input_ept, T{i}::output_ept, "
        f"T{i}::input_length, T{i}::output_length}};\n"
    )
    return code, name


def render_traits_source(ffts) -> str:
    """One translation unit computing the traits of many descriptors (PTX only, no FFT code)."""
    parts = ["#include <cufftdx.hpp>\n"]
    for i, fft in enumerate(ffts):
        parts.append(_traits_block(fft, i)[0])
    return "".join(parts)


# cuFFTDx's database is two things: records (for each size, precision and arch, which
# implementations exist: threads, elements per thread, shared memory, a function id) and the
# codelets (``cufftdx_private_function<id, T, ...>`` specialisations, ~180 files per precision).
# Parsing every codelet is half of a compile. With the library's own switch
# CUFFTDX_DETAIL_MANUAL_IMPL_FILTER (and no CUFFTDX_DETAIL_INCLUDE_PRECISION_*) the records stay
# complete and no codelet is included; a unit then includes the one file its FFT can call:
# every function id of the record of size n is defined in fft_<n>_<prec>_fwd.hpp.inc and in no
# other file (checked for all 10,519 records of nvidia-mathdx 25.6; r2c/c2r and inverse FFTs use
# the forward c2c record of the same size, folded real FFTs the one of size n/2). A missing
# specialisation could not go unnoticed: the primary template is only declared, so the link
# would fail with an undefined reference.
#
# The twiddle tables (lut_fp32/lut_fp64: megabytes of LTO-IR that every unit would otherwise
# carry, and parse, and that reading the traits back through nvJitLink would link) are compiled once per arch
# into their own LTO-IR (TwiddleTables, cached like a unit) and every unit only declares them:
# cuFFTDx's CUFFTDX_USE_SEPARATE_TWIDDLES. Kernels link both; LTO keeps the tables they use.
CODELET_FILTER = "-DCUFFTDX_DETAIL_MANUAL_IMPL_FILTER"
SEPARATE_TWIDDLES = "-DCUFFTDX_USE_SEPARATE_TWIDDLES"
FFT_OPTIONS = (CODELET_FILTER, SEPARATE_TWIDDLES)


@functools.cache
def _codelet_files() -> frozenset:
    names = set()
    for d in include_dirs():
        folder = os.path.join(d, "cufftdx", "database")
        if os.path.isdir(folder):
            names.update(f for f in os.listdir(folder) if f.startswith("fft_") and f.endswith("_fwd.hpp.inc"))
    return frozenset(names)


def codelet_includes(fft) -> str:
    """The ``#include`` of the cuFFTDx codelets ``fft`` can execute (see CODELET_FILTER)."""
    prec = fft._key[1]
    folded = fft.real_fft_options["real_mode"] == "folded"  # validated: folded sizes are even
    name = f"fft_{fft.size // 2 if folded else fft.size}_{FFT_PRECISION_TAGS[prec]}_fwd.hpp.inc"
    lines = ["namespace cufftdx { namespace database { namespace detail {"]
    if prec == "float16":  # as database.hpp does around its fp16 codelets
        lines.append("#define __HALF2_TO_UI(var) *(reinterpret_cast<unsigned int *>(&(var)))")
    if name in _codelet_files():
        lines.append(f'#include "cufftdx/database/{name}"')
    if prec == "float16":
        lines.append("#undef __HALF2_TO_UI")
    lines.append("}}}")
    return "\n".join(lines) + "\n"


def render_unit_source(fft) -> str:
    """The translation unit of one descriptor: its traits array and its execute() function."""
    code, _ = _traits_block(fft, 0)
    sym = fft_symbol(fft)
    if fft.execution == "Block":
        fn = (f'extern "C" __device__ void {sym}(void* data, void* smem) {{ '
              "T0().execute(reinterpret_cast<T0::value_type*>(data), smem); }\n")
    else:
        fn = (f'extern "C" __device__ void {sym}(void* data) {{ '
              "T0().execute(reinterpret_cast<T0::value_type*>(data)); }\n")
    return "#include <cufftdx.hpp>\n" + codelet_includes(fft) + code + fn


# Bump when the rendered code changes meaning: part of every cache key below.
CODEGEN_VERSION = "fft-3"


def _key(kind: str, what: str, *tail) -> str:
    """Disk-cache key of FFT codegen output: codegen version, NVRTC options and toolchain included."""
    return cache.make_key(kind, CODEGEN_VERSION, what, " ".join(FFT_OPTIONS), toolchain_id(), *tail)


def _compile_cached(key: str, source: str, sm: int, name: str, *announce, on_miss=None) -> bytes:
    """LTO-IR of ``source`` for ``sm``: from the disk cache, else compiled by NVRTC (announced
    with the INFO line ``announce``: format and arguments; then ``on_miss()`` is called) and cached."""
    def build():
        log.info(*announce)
        if on_miss is not None:
            on_miss()
        return compile_source(source, sm, "ltoir", name=name, extra_options=FFT_OPTIONS)

    return cache.get_or_build(key, build)


def _traits_key(fft) -> str:
    return _key("fft-traits", repr(fft._key))


def _store_traits(fft, values) -> dict:
    traits = dict(zip(BLOCK_TRAITS, values))
    cache.put(_traits_key(fft), json.dumps(traits).encode())
    return traits


def prefetch_traits(ffts) -> None:
    """Compute the traits of many descriptors with one NVRTC run (those not cached yet)."""
    todo = []
    seen = set()
    for fft in ffts:
        if fft in seen:
            continue
        seen.add(fft)
        if cache.get(_traits_key(fft)) is None:
            todo.append(fft)
    if not todo:
        return
    by_sm = {}
    for fft in todo:
        by_sm.setdefault(fft.sm, []).append(fft)
    for sm, group in by_sm.items():
        src = render_traits_source(group)
        log.info("numba-mathdx: compiling traits of %d FFT descriptor(s) for sm_%d with NVRTC "
                 "(~3 s; cached afterwards)", len(group), sm)
        ptx = compile_source(src, sm, "ptx", name="nvmathdx_fft_traits.cu", extra_options=FFT_OPTIONS)
        names = {_traits_block(fft, 0)[1]: fft for fft in group}
        arrays = read_u32_arrays(ptx, set(names))
        for name, fft in names.items():
            _store_traits(fft, arrays[name])


def fft_traits(fft, from_unit: bool = True) -> dict:
    """Traits of one descriptor: from the cache, else from compiling its unit (which also caches
    the LTO-IR a kernel will need) and reading the constants back through nvJitLink; with
    ``from_unit=False`` (no device code will be linked) from the cheaper traits-only unit."""
    blob = cache.get(_traits_key(fft))
    if blob is not None:
        return json.loads(blob)
    if not from_unit:
        prefetch_traits([fft])
        return json.loads(cache.get(_traits_key(fft)))
    ltoir = fft_ltoir(fft)
    name = _traits_block(fft, 0)[1]
    ptx = link_cubin([("ltoir", ltoir, "unit")], fft.sm, extra=["-ptx"])
    return _store_traits(fft, read_u32_arrays(ptx, {name})[name])


def ltoir_key(fft) -> str:
    """Disk-cache key of ``fft``'s LTO-IR."""
    return _key("fft-ltoir", render_unit_source(fft), fft.sm)


def fft_ltoir(fft) -> bytes:
    """LTO-IR of ``fft``'s shim for ``fft.sm``: from the disk cache, else compiled by NVRTC and cached."""
    src = render_unit_source(fft)
    return _compile_cached(
        _key("fft-ltoir", src, fft.sm), src, fft.sm, f"{fft_symbol(fft)}.cu",
        "numba-mathdx: compiling %s (FFT size %d %s) with NVRTC (~3 s; cached afterwards)",
        fft_symbol(fft), fft.size, fft.fft_type, on_miss=lambda: _twiddle_job(fft.sm))


_TWIDDLE_SOURCE = """#include <cufftdx.hpp>
namespace cufftdx { namespace database { namespace detail {
#define CUFFTDX_DETAIL_LUT_LINKAGE
#include "cufftdx/database/lut_fp32.hpp.inc"
#include "cufftdx/database/lut_fp64.hpp.inc"
#undef CUFFTDX_DETAIL_LUT_LINKAGE
}}}
"""


# A kernel with an FFT links the twiddle tables of its arch; with empty caches they are compiled
# while the first FFT unit is (the unit's compile starts their job: _compile_cached's on_miss),
# in a child process, since NVRTC runs the compiles of one process one after the other
# (toolchain.compile_source_in_child). _twiddle_jobs holds each compile in flight, keyed like
# the cache, so that everyone needing the tables waits on the same one. A job leaves it when
# done (the tables then come from the cache), or, when it failed, once its error has been
# raised to a caller needing the tables (the next call compiles again). The job's thread is not
# a daemon: a process ending while it runs waits for it (the tables are then cached on disk).
_twiddle_jobs: dict[str, Future] = {}
_twiddle_lock = threading.Lock()


def _forget_twiddle_jobs() -> None:
    """In a forked child, the threads of the parent's jobs do not exist: start afresh."""
    global _twiddle_lock
    _twiddle_jobs.clear()
    _twiddle_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_twiddle_jobs)


def _twiddle_key(sm: int) -> str:
    return _key("fft-twiddles", _TWIDDLE_SOURCE, sm)


def _twiddle_job(sm: int) -> tuple[bytes | None, Future | None]:
    """The tables of ``sm`` from the cache, else the job compiling them (started if none is)."""
    key = _twiddle_key(sm)
    with _twiddle_lock:
        job = _twiddle_jobs.get(key)
        if job is not None:
            return None, job
        blob = cache.get(key)
        if blob is not None:
            return blob, None
        job = _twiddle_jobs[key] = Future()
    try:
        threading.Thread(target=_compile_twiddles, args=(key, sm, job), name=f"nvmathdx-twiddles-sm{sm}").start()
    except RuntimeError:  # no new thread to be had (e.g. at interpreter shutdown): compile them now
        _compile_twiddles(key, sm, job)
    return None, job


def _compile_twiddles(key: str, sm: int, job: Future) -> None:
    try:
        with cache.building(key):  # another process may be compiling them: wait and read its entry
            blob = cache.get(key)
            if blob is None:
                log.info("numba-mathdx: compiling cuFFTDx's twiddle tables for sm_%d with NVRTC (once per "
                         "machine; cached afterwards)", sm)
                blob = compile_source_in_child(_TWIDDLE_SOURCE, sm, "ltoir",
                                               name=f"nvmathdx_fft_twiddles_sm{sm}.cu", extra_options=FFT_OPTIONS)
                cache.put(key, blob)
    except BaseException as e:  # raised to whoever needs the tables (the NVRTC log in it)
        job.set_exception(e)
    else:
        with _twiddle_lock:
            _twiddle_jobs.pop(key, None)
        job.set_result(blob)


def twiddle_ltoir(sm: int) -> bytes:
    """LTO-IR defining cuFFTDx's twiddle tables for ``sm`` (the units declare them ``extern``;
    with SEPARATE_TWIDDLES the declarations come first, so these definitions link externally):
    from the disk cache, else from the compile in flight, else compiled now."""
    blob, job = _twiddle_job(sm)
    if job is None:
        return blob
    try:
        return job.result()
    except BaseException:
        with _twiddle_lock:  # a failed job is reported once; the next call compiles again
            if _twiddle_jobs.get(_twiddle_key(sm)) is job:
                del _twiddle_jobs[_twiddle_key(sm)]
        raise


@dataclasses.dataclass(frozen=True)
class TwiddleTables:
    """cuFFTDx's twiddle tables for one arch, linked into every kernel that executes an FFT.

    Shaped like a descriptor for the numba layer's linkable objects (``symbol``, ``ltoir()``,
    hashable and picklable), so ``cache=True`` kernels carry it like their FFT units.
    """

    sm: int

    @property
    def symbol(self) -> str:
        """Name of the linked module (``nvmathdx_fft_twiddles_smXX``)."""
        return f"nvmathdx_fft_twiddles_sm{self.sm}"

    def ltoir(self) -> bytes:
        """The tables' LTO-IR (disk cache, else NVRTC)."""
        return twiddle_ltoir(self.sm)
