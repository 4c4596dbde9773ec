# SPDX-License-Identifier: Apache-2.0
"""In-kernel Philox4_32_10 generation: cuRAND's device API (``curand_kernel.h``) against cuRANDDx
(nvidia-mathdx), same kernels, same process (issue 19 item 3: which backend should
``nvmath_device.random`` compile?).

    python benchmarks/random_backends.py --out bench_out [--threads 1048576] [--draws 64] [--reps 20]

Every thread initialises one Philox4_32_10 generator (seed ``--seed``, subsequence = its global
thread id, offset 0) and draws ``--draws`` (K) values of 4 in a loop:

- ``normal4``: 4 normal floats, Box-Muller (``curand_normal4`` /
  ``curanddx::normal<float, curanddx::box_muller>::generate4``);
- ``uniform4``: 4 uniform floats (``curand_uniform4`` / ``curanddx::uniform<float>::generate4``);
- ``bits4``: the raw uint4 (``curand4`` / ``curanddx::uniform_bits<unsigned>::generate4``).

Two forms of each: ``sum`` adds the K draws in registers and stores one value per thread (the
generation cost alone), ``store`` writes every draw (float4/uint4, coalesced, K x threads x 16 B).
The kernels are CUDA C++ strings compiled at run time by CuPy's ``RawModule`` (NVRTC, C++17, for
the current GPU's architecture; CuPy adds ``-arch=sm_XX``, ``-ftz=true`` and
``--device-as-default-execution-space``), one module per backend, with cuRANDDx's ``SM<>`` set to
the current GPU. Headers: cuRAND's from the nvidia-curand wheel, cuRANDDx/commonDx from
nvidia-mathdx, CCCL and the CUDA runtime headers (where ``nvmath_device`` finds them).

Check first (printed and in the JSON): for ``--check-threads`` threads x ``--check-draws`` draws,
are the two backends' raw 32-bit Philox outputs identical, and do both equal an independent NumPy
Philox4x32-10? Max |difference| of their uniforms and normals, and of the normals against the
Box-Muller formula in float64 (the devices' ``__sincosf``/``logf`` are approximate).

Timing: CUDA events around each launch on CuPy's current stream, median of ``--reps`` after 3
warm-ups. Per row: ms, draw4/s (one draw = 4 values), ns per draw4 (kernel time / (threads x K)),
GB/s written, and the ratio to the cuRAND row of the same kernel. Reference rows: CuPy's
``cupy.random`` making threads x K x 4 float32 normals, bytes written / time: ``RandomState``
(cuRAND's host API with Philox4_32_10; a new array from CuPy's pool each call) and ``default_rng``
(CuPy's XORWOW bit generator, into one preallocated array).

The Philox outputs of the first ``min(--check-threads, 1024)`` threads are compared with NumPy.

Writes random_backends.json and random_backends.md into --out. Exits with status 2 and a
one-line message when no GPU is usable.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)


def _sibling(name):
    """A script of this folder as a module (the folder is not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules[name] = mod
    return mod


_fused = _sibling("random_fused")  # no_gpu_reason and time_ms are shared with it
no_gpu_reason = _fused.no_gpu_reason

BACKENDS = ("curand", "curanddx")
DISTS = ("normal4", "uniform4", "bits4")
MODES = ("sum", "store")
# distribution -> (CUDA vector type of a draw, type of the per-thread sum)
DIST_TYPES = {"normal4": ("float4", "float"), "uniform4": ("float4", "float"), "bits4": ("uint4", "unsigned int")}
SM_OK = (700, 750, 800, 860, 870, 890, 900, 1000, 1010, 1030, 1200, 1210)  # commonDx's SM<> values
MAX_THREADS = 2**31 - 1
SEED_DEFAULT = 1234
NORMAL_FORMULA_TOL = 1e-3  # |device Box-Muller - float64 formula|; __sincosf is approximate

# ----------------------------------------------------------------------------------------------
# CUDA sources

_GEN_CURAND = r"""
#include <curand_kernel.h>

// cuRAND's device API: curand_init + curand4 / curand_uniform4 / curand_normal4.
struct Gen {
    curandStatePhilox4_32_10_t s;
    __device__ __forceinline__ Gen(unsigned long long seed, unsigned long long subsequence) {
        curand_init(seed, subsequence, 0ULL, &s);
    }
    __device__ __forceinline__ uint4 bits4() { return curand4(&s); }
    __device__ __forceinline__ float4 uniform4() { return curand_uniform4(&s); }
    __device__ __forceinline__ float4 normal4() { return curand_normal4(&s); }
};
"""

_GEN_CURANDDX = r"""
#include <curanddx.hpp>

#ifndef BENCH_SM
#error "BENCH_SM (the cuRANDDx SM<> value, e.g. 900) must be defined"
#endif

// cuRANDDx: a thread-level Philox4_32_10 description; distributions' generate4.
using RNG = decltype(curanddx::Generator<curanddx::philox4_32>() + curanddx::PhiloxRounds<10>() +
                     curanddx::SM<BENCH_SM>() + curanddx::Thread());

struct Gen {
    RNG rng;
    __device__ __forceinline__ Gen(unsigned long long seed, unsigned long long subsequence)
        : rng(seed, subsequence, 0ULL) {}
    __device__ __forceinline__ uint4 bits4() { return curanddx::uniform_bits<unsigned int>().generate4(rng); }
    __device__ __forceinline__ float4 uniform4() { return curanddx::uniform<float>(0.0f, 1.0f).generate4(rng); }
    __device__ __forceinline__ float4 normal4() {
        return curanddx::normal<float, curanddx::box_muller>(0.0f, 1.0f).generate4(rng);
    }
};
"""

_COMMON = r"""
// sum: the K draws added in registers, one store per thread (the generation cost alone).
template <class V, class S, V (Gen::*Draw)()>
__device__ __forceinline__ void sum_draws(unsigned long long seed, unsigned int n, int draws, S* out) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Gen g(seed, i);
    V a = {0, 0, 0, 0};
    for (int k = 0; k < draws; ++k) {
        const V v = (g.*Draw)();
        a.x += v.x; a.y += v.y; a.z += v.z; a.w += v.w;
    }
    out[i] = (a.x + a.y) + (a.z + a.w);
}

// store: every draw written, draw k of thread i at out[k * n + i] (coalesced 16-byte stores).
template <class V, V (Gen::*Draw)()>
__device__ __forceinline__ void store_draws(unsigned long long seed, unsigned int n, int draws, V* out) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Gen g(seed, i);
    for (int k = 0; k < draws; ++k)
        out[(size_t)k * n + i] = (g.*Draw)();
}
"""


def kernel_name(backend: str, dist: str, mode: str) -> str:
    """``extern "C"`` name of one kernel, e.g. ``curanddx_normal4_sum``."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")
    if dist not in DISTS:
        raise ValueError(f"dist must be one of {list(DISTS)}, got {dist!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    return f"{backend}_{dist}_{mode}"


def kernel_names(backend: str) -> list[str]:
    """Every kernel of ``backend``'s module."""
    return [kernel_name(backend, d, m) for d in DISTS for m in MODES]


def source(backend: str) -> str:
    """CUDA C++ of ``backend``'s module: its ``Gen``, the shared templates, one ``extern "C"``
    kernel per distribution and form (signature ``(seed u64, n u32, draws i32, out*)``)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")
    lines = [_GEN_CURAND if backend == "curand" else _GEN_CURANDDX, _COMMON]
    for dist in DISTS:
        v, s = DIST_TYPES[dist]
        for mode in MODES:
            name = kernel_name(backend, dist, mode)
            if mode == "sum":
                lines.append(f'extern "C" __global__ void {name}(unsigned long long seed, unsigned int n, int draws, '
                             f'{s}* out)\n{{ sum_draws<{v}, {s}, &Gen::{dist}>(seed, n, draws, out); }}')
            else:
                lines.append(f'extern "C" __global__ void {name}(unsigned long long seed, unsigned int n, int draws, '
                             f'{v}* out)\n{{ store_draws<{v}, &Gen::{dist}>(seed, n, draws, out); }}')
    return "\n".join(lines) + "\n"


def dx_sm(compute_capability: str | int) -> int:
    """cuRANDDx's ``SM<>`` value for a compute capability (``"90"`` -> 900); ValueError when
    commonDx has no such SM."""
    try:
        cc = int(compute_capability)
    except (TypeError, ValueError):
        raise ValueError(f"compute_capability must be digits like '90', got {compute_capability!r}") from None
    sm = cc * 10
    if sm not in SM_OK:
        raise ValueError(f"cuRANDDx (commonDx SM<>) has no SM<{sm}> for compute capability {cc}; "
                         f"known: {list(SM_OK)}")
    return sm


def include_dirs() -> list[str]:
    """Header folders: cuRAND's (nvidia-curand), then those ``nvmath_device`` compiles with
    (nvidia-mathdx's include with cuRANDDx and commonDx, CCCL, the CUDA runtime headers)."""
    if _ROOT not in sys.path:  # run from a checkout without installing it
        sys.path.append(_ROOT)
    from nvmath_device._build.random_codegen import curand_include_dir
    from nvmath_device._build.toolchain import include_dirs as project_dirs
    from nvmath_device._build.toolchain import mathdx_root

    mathdx_inc = os.path.join(mathdx_root(), "include")
    if not os.path.isfile(os.path.join(mathdx_inc, "curanddx.hpp")):
        raise ImportError(f"cuRANDDx headers (curanddx.hpp) are not in {mathdx_inc}")
    dirs = [curand_include_dir(), mathdx_inc]
    dirs += [d for d in project_dirs() if d not in dirs and "cutlass" not in d]
    return dirs


def header_versions() -> dict:
    """cuRAND's (curand.h) and cuRANDDx's (curanddx_version.hpp) header versions, "?" where unread."""
    import re

    out = {}
    try:
        from nvmath_device._build.random_codegen import curand_version

        include_dirs()  # puts the checkout on sys.path
        out["curand"] = curand_version()
    except Exception as e:
        out["curand"] = f"? ({type(e).__name__})"
    try:
        from nvmath_device._build.toolchain import mathdx_root

        with open(os.path.join(mathdx_root(), "include", "curanddx", "curanddx_version.hpp")) as f:
            text = f.read()
        parts = [re.search(rf"#define\s+CURANDDX_VERSION_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
        out["curanddx"] = ".".join(m.group(1) if m else "?" for m in parts)
    except Exception as e:
        out["curanddx"] = f"? ({type(e).__name__})"
    return out


def nvrtc_options(backend: str, sm: int) -> list[str]:
    """NVRTC options of ``backend``'s module, without the architecture (CuPy adds the current
    GPU's; a compile without a GPU adds ``-arch=sm_XX`` itself). ``sm``: cuRANDDx's SM<> value."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")
    if sm not in SM_OK:
        raise ValueError(f"sm must be one of {list(SM_OK)}, got {sm!r}")
    opts = ["-std=c++17"] + [f"-I{d}" for d in include_dirs()]
    if backend == "curanddx":
        # 1444: cuRANDDx's common.hpp names the deprecated double4/ulonglong4 (CUDA 13 warns)
        opts += [f"-DBENCH_SM={sm}", "-diag-suppress=1444"]
    return opts


# ----------------------------------------------------------------------------------------------
# Arguments


def _int(text):
    """argparse type: an int, also written as 2**20 or 1<<20."""
    t = str(text).strip().replace("_", "")
    for op in ("**", "<<"):
        if op in t:
            a, b = t.split(op, 1)
            a, b = int(a), int(b)
            return a**b if op == "**" else a << b
    return int(t)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_out", help="folder for random_backends.json and random_backends.md")
    ap.add_argument("--threads", type=_int, default=2**20, help="threads of the timed kernels (default 2**20)")
    ap.add_argument("--draws", type=_int, default=64, help="draws of 4 values per thread, K (default 64)")
    ap.add_argument("--block", type=_int, default=256, help="threads per block: a multiple of 32 in 32..1024")
    ap.add_argument("--reps", type=_int, default=20, help="timed launches per row (median; 3 warm-ups before)")
    ap.add_argument("--seed", type=_int, default=SEED_DEFAULT, help="Philox seed, 0 <= seed < 2**64")
    ap.add_argument("--check-threads", type=_int, default=4096, help="threads of the cross-check (default 4096)")
    ap.add_argument("--check-draws", type=_int, default=8, help="draws per thread of the cross-check (default 8)")
    a = ap.parse_args(argv)
    if not 1 <= a.threads <= MAX_THREADS:
        ap.error(f"--threads must be in 1..{MAX_THREADS} (one subsequence per thread), got {a.threads}")
    if not 1 <= a.draws <= 2**20:
        ap.error(f"--draws must be in 1..{2**20}, got {a.draws}")
    if not (32 <= a.block <= 1024 and a.block % 32 == 0):
        ap.error(f"--block must be a multiple of 32 in 32..1024, got {a.block}")
    if a.reps < 1:
        ap.error(f"--reps must be >= 1, got {a.reps}")
    if not 0 <= a.seed < 2**64:
        ap.error(f"--seed must be in 0..2**64-1, got {a.seed}")
    if not 1 <= a.check_threads <= MAX_THREADS:
        ap.error(f"--check-threads must be in 1..{MAX_THREADS}, got {a.check_threads}")
    if not 1 <= a.check_draws <= 2**20:
        ap.error(f"--check-draws must be in 1..{2**20}, got {a.check_draws}")
    return a


# ----------------------------------------------------------------------------------------------
# Host references (NumPy): Philox4x32-10 and the Box-Muller formula

_M0, _M1, _W0, _W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85


def philox4x32_10(ctr, key):
    """Philox4x32-10 of counters ``ctr`` (..., 4) under keys ``key`` (..., 2), uint32 arrays
    (Salmon et al. 2011; cuRAND's ``curand_Philox4x32_10``)."""
    import numpy as np

    mask = np.uint64(0xFFFFFFFF)
    c = [np.asarray(ctr, dtype=np.uint64)[..., j].copy() for j in range(4)]
    k0 = np.asarray(key, dtype=np.uint64)[..., 0].copy()
    k1 = np.asarray(key, dtype=np.uint64)[..., 1].copy()
    for r in range(10):
        p0 = np.uint64(_M0) * c[0]
        p1 = np.uint64(_M1) * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & mask
        hi1, lo1 = p1 >> np.uint64(32), p1 & mask
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
        if r < 9:
            k0 = (k0 + np.uint64(_W0)) & mask
            k1 = (k1 + np.uint64(_W1)) & mask
    return np.stack(c, axis=-1).astype(np.uint32)


def reference_bits(seed: int, threads: int, draws: int):
    """uint32 (draws, threads, 4): the Philox stream of thread i (subsequence i, offset 0), draw k."""
    import numpy as np

    k = np.arange(draws, dtype=np.uint64)[:, None]
    i = np.arange(threads, dtype=np.uint64)[None, :]
    shape = (draws, threads)
    ctr = np.stack([np.broadcast_to(k & np.uint64(0xFFFFFFFF), shape), np.broadcast_to(k >> np.uint64(32), shape),
                    np.broadcast_to(i & np.uint64(0xFFFFFFFF), shape), np.broadcast_to(i >> np.uint64(32), shape)],
                   axis=-1)
    key = np.broadcast_to(np.array([seed & 0xFFFFFFFF, seed >> 32], dtype=np.uint64), shape + (2,))
    return philox4x32_10(ctr, key)


def box_muller_reference(bits):
    """float64 normals of uint32 (..., 4) bits by cuRAND's Box-Muller: pairs (x, y), (z, w);
    u = x 2^-32 + 2^-33, v = 2 pi (y 2^-32 + 2^-33), (sin v, cos v) sqrt(-2 log u)."""
    import numpy as np

    b = np.asarray(bits, dtype=np.float64)
    out = np.empty(b.shape, dtype=np.float64)
    for a, c in ((0, 1), (2, 3)):
        u = b[..., a] * 2.0**-32 + 2.0**-33
        v = 2 * math.pi * (b[..., c] * 2.0**-32 + 2.0**-33)
        s = np.sqrt(-2 * np.log(u))
        out[..., a], out[..., c] = np.sin(v) * s, np.cos(v) * s
    return out


def compare(bits, normals, uniforms, ref_bits):
    """The cross-check's numbers from host copies: ``bits``/``normals``/``uniforms`` map backend ->
    array (draws, threads, 4) (a backend that did not run is absent)."""
    import numpy as np

    res = {}
    if all(b in bits for b in BACKENDS):
        neq = int(np.count_nonzero(bits["curand"] != bits["curanddx"]))
        res["raw_identical"] = neq == 0
        res["raw_words_differing"] = neq
        res["raw_words"] = int(bits["curand"].size)
    for b in BACKENDS:
        if b in bits:
            t = min(ref_bits.shape[1], bits[b].shape[1])
            res[f"{b}_raw_equals_numpy_philox"] = bool(np.array_equal(bits[b][:, :t], ref_bits[:, :t]))
    for name, d in (("normal", normals), ("uniform", uniforms)):
        if all(b in d for b in BACKENDS):
            x, y = d["curand"].astype(np.float64), d["curanddx"].astype(np.float64)
            res[f"{name}_max_abs_diff"] = float(np.max(np.abs(x - y)))
            res[f"{name}_bitwise_identical"] = bool(np.array_equal(d["curand"].view(np.uint32),
                                                                   d["curanddx"].view(np.uint32)))
    for b in BACKENDS:
        if b in normals and b in bits:
            ref = box_muller_reference(bits[b])
            res[f"{b}_normal_vs_formula_max_abs"] = float(np.max(np.abs(normals[b] - ref)))
            res[f"{b}_normal_mean"] = float(np.mean(normals[b]))
            res[f"{b}_normal_std"] = float(np.std(normals[b]))
    ok = [res.get("raw_identical", False)] + [res.get(f"{b}_raw_equals_numpy_philox", False) for b in BACKENDS]
    ok += [res.get(f"{b}_normal_vs_formula_max_abs", math.inf) <= NORMAL_FORMULA_TOL for b in BACKENDS]
    res["ok"] = all(ok)
    return res


# ----------------------------------------------------------------------------------------------
# Rows and files


def finish_row(impl, backend, dist, mode, threads, draws, ms, base_ms=None, bytes_written=None, note=""):
    """One table row; ``ms`` None: it did not run (``note`` says why)."""
    row = dict(impl=impl, backend=backend, dist=dist, mode=mode, threads=threads, draws=draws, ms=ms, note=note)
    if ms is not None:
        n4 = threads * draws
        row["draw4_per_s"] = n4 / (ms * 1e-3)
        row["values_per_s"] = 4 * n4 / (ms * 1e-3)
        row["ns_per_draw4"] = ms * 1e6 / n4
        row["gb_per_s_written"] = bytes_written / (ms * 1e-3) / 1e9 if bytes_written else None
        row["vs_curand"] = ms / base_ms if base_ms else None
    return row


def verdict(rows):
    """{kernel: faster backend and by how much} for every kernel both backends ran."""
    out = {}
    for dist in DISTS:
        for mode in MODES:
            ms = {r["backend"]: r["ms"] for r in rows
                  if r.get("dist") == dist and r.get("mode") == mode and r.get("ms") is not None
                  and r.get("backend") in BACKENDS}
            if len(ms) == 2:
                fast = min(ms, key=ms.get)
                slow = max(ms, key=ms.get)
                out[f"{dist}_{mode}"] = dict(faster=fast, ratio=ms[slow] / ms[fast] if ms[fast] else None,
                                            curand_ms=ms["curand"], curanddx_ms=ms["curanddx"])
    return out


def format_report(rows, meta, check, verdicts):
    lines = [f"Philox4_32_10 in registers: cuRAND device API vs cuRANDDx, {meta.get('device', '?')} "
             f"(sm_{meta.get('cc', '?')}), {meta.get('threads')} threads x {meta.get('draws')} draws of 4, "
             f"median of {meta.get('reps')} CUDA-event timings; ratio = ms / cuRAND's ms", ""]
    if check:
        lines.append("Cross-check ({} threads x {} draws): raw 32-bit outputs identical: **{}** ({} of {} words "
                     "differ); cuRAND = NumPy Philox: {}; cuRANDDx = NumPy Philox: {}; normals max |diff| {}, "
                     "bitwise identical: {}; uniforms max |diff| {}; normals vs float64 Box-Muller: cuRAND {}, "
                     "cuRANDDx {}; check {}".format(
                         check.get("threads"), check.get("draws"), check.get("raw_identical"),
                         check.get("raw_words_differing"), check.get("raw_words"),
                         check.get("curand_raw_equals_numpy_philox"), check.get("curanddx_raw_equals_numpy_philox"),
                         _g(check.get("normal_max_abs_diff")), check.get("normal_bitwise_identical"),
                         _g(check.get("uniform_max_abs_diff")), _g(check.get("curand_normal_vs_formula_max_abs")),
                         _g(check.get("curanddx_normal_vs_formula_max_abs")),
                         "ok" if check.get("ok") else "FAILED" + (f" ({check['error']})" if "error" in check else "")))
        lines.append("")
    lines += ["| implementation | backend | kernel | ms | Gdraw4/s | ns per draw4 | GB/s written | ratio |",
              "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        kern = f"{r['dist']} {r['mode']}"
        if r.get("ms") is None:
            note = str(r.get("note", "")).replace("|", "/").replace("\n", " ")[:200]
            lines.append(f"| {r['impl']} | {r['backend']} | {kern} | - | - | - | - | not run: {note} |")
            continue
        gb = f"{r['gb_per_s_written']:.0f}" if r.get("gb_per_s_written") else "-"
        ratio = f"{r['vs_curand']:.2f}x" if r.get("vs_curand") else "-"
        lines.append(f"| {r['impl']} | {r['backend']} | {kern} | {r['ms']:.3f} | {r['draw4_per_s'] / 1e9:.1f} | "
                     f"{r['ns_per_draw4']:.4f} | {gb} | {ratio} |")
    if verdicts:
        lines += ["", "Faster backend per kernel: " + "; ".join(
            f"{k}: {v['faster']} ({v['ratio']:.2f}x)" for k, v in verdicts.items())]
    return "\n".join(lines) + "\n"


def _g(x):
    return "-" if x is None else f"{x:.3g}"


def write_results(out, rows, meta, check, verdicts):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "random_backends.json"), "w") as f:
        json.dump(dict(meta=meta, check=check, verdict=verdicts, rows=rows), f, indent=1)
    text = format_report(rows, meta, check, verdicts)
    with open(os.path.join(out, "random_backends.md"), "w") as f:
        f.write(text)
    return text


# ----------------------------------------------------------------------------------------------
# GPU side


def build_modules(sm, log=print):
    """backend -> (cupy.RawModule with its kernels loaded, compile seconds) or (None, reason)."""
    import cupy as cp

    mods = {}
    for b in BACKENDS:
        t0 = time.perf_counter()
        try:
            mod = cp.RawModule(code=source(b), options=tuple(nvrtc_options(b, sm)))
            for name in kernel_names(b):
                mod.get_function(name)  # compiles (or reads CuPy's cache) and loads
            mods[b] = (mod, time.perf_counter() - t0)
        except Exception as e:
            mods[b] = (None, f"{type(e).__name__}: {str(e)[:1500]}")
        log(f"{b}: " + (f"module ready in {mods[b][1]:.1f} s" if mods[b][0] else f"failed: {mods[b][1][:300]}"))
    return mods


def launch(mod, name, seed, n, draws, out, block):
    import cupy as cp

    mod.get_function(name)(((n + block - 1) // block,), (block,),
                           (cp.uint64(seed), cp.uint32(n), cp.int32(draws), out))


def run_check(mods, seed, threads, draws, block):
    """The cross-check on the GPU: store kernels of both backends, compared on the host."""
    import cupy as cp

    bits, normals, uniforms = {}, {}, {}
    for b, (mod, _) in mods.items():
        if mod is None:
            continue
        for dist, dest, dt in (("bits4", bits, cp.uint32), ("normal4", normals, cp.float32),
                               ("uniform4", uniforms, cp.float32)):
            out = cp.empty((draws, threads, 4), dtype=dt)
            launch(mod, kernel_name(b, dist, "store"), seed, threads, draws, out, block)
            dest[b] = cp.asnumpy(out)
    ref = reference_bits(seed, min(threads, 1024), draws)
    res = compare(bits, normals, uniforms, ref)
    res.update(threads=threads, draws=draws, seed=seed, numpy_threads_checked=int(ref.shape[1]))
    return res


def time_backends(mods, args, log=print):
    import cupy as cp

    time_ms = _fused.time_ms
    rows, base = [], {}
    n, k = args.threads, args.draws
    for dist in DISTS:
        v, s = DIST_TYPES[dist]
        for mode in MODES:
            for b in BACKENDS:
                mod, info = mods[b]
                impl = f"{b} {'curand_kernel.h' if b == 'curand' else 'cuRANDDx'}"
                if mod is None:
                    rows.append(finish_row(impl, b, dist, mode, n, k, None, note=f"module: {info}"))
                    continue
                try:
                    if mode == "sum":
                        out = cp.empty(n, dtype=cp.float32 if s == "float" else cp.uint32)
                        written = None
                    else:
                        out = cp.empty((k, n, 4), dtype=cp.float32 if v == "float4" else cp.uint32)
                        written = out.nbytes
                    name = kernel_name(b, dist, mode)
                    ms = time_ms(lambda mod=mod, name=name, out=out: launch(mod, name, args.seed, n, k, out, args.block),
                                 args.reps)
                    if b == "curand":
                        base[(dist, mode)] = ms
                    rows.append(finish_row(impl, b, dist, mode, n, k, ms, base.get((dist, mode)), written))
                    out = None
                except Exception as e:
                    rows.append(finish_row(impl, b, dist, mode, n, k, None, note=f"{type(e).__name__}: {str(e)[:200]}"))
                log(json.dumps(rows[-1]))
                cp.get_default_memory_pool().free_all_blocks()
    rows += cupy_rows(args, log)
    return rows


def cupy_rows(args, log=print):
    """CuPy's host-side generators filling threads x K x 4 float32 normals (reference rows)."""
    import cupy as cp

    n, k = args.threads, args.draws
    rows = []
    size = 4 * n * k

    def legacy():
        rs = cp.random.RandomState(args.seed, method=cp.cuda.curand.CURAND_RNG_PSEUDO_PHILOX4_32_10)
        return lambda: rs.standard_normal(size, dtype=cp.float32)

    def new():
        rng = cp.random.default_rng(args.seed)
        out = cp.empty(size, dtype=cp.float32)
        try:
            rng.standard_normal(out=out, dtype=cp.float32)
            return lambda: rng.standard_normal(out=out, dtype=cp.float32)
        except TypeError:  # a CuPy without out=
            return lambda: rng.standard_normal(size, dtype=cp.float32)

    for impl, make in (("cupy.random.RandomState (cuRAND host API, Philox4_32_10, new array each call)", legacy),
                       ("cupy.random.default_rng (XORWOW)", new)):
        try:
            ms = _fused.time_ms(make(), args.reps)
            rows.append(finish_row(impl, "cupy", "normal4", "store", n, k, ms, None, 4 * size))
        except Exception as e:
            rows.append(finish_row(impl, "cupy", "normal4", "store", n, k, None,
                                   note=f"{type(e).__name__}: {str(e)[:200]}"))
        log(json.dumps(rows[-1]))
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def _nvrtc_version():
    try:
        import cupy as cp

        return ".".join(map(str, cp.cuda.nvrtc.getVersion()))
    except Exception as e:
        return f"? ({type(e).__name__})"


def main(argv=None):
    args = parse_args(argv)
    why = no_gpu_reason()
    if why:
        print(f"benchmarks/random_backends.py needs a CUDA GPU (with CuPy): {why}", file=sys.stderr)
        return 2
    import cupy as cp

    dev = cp.cuda.Device()
    cc = dev.compute_capability
    try:
        sm = dx_sm(cc)
    except ValueError as e:
        print(f"benchmarks/random_backends.py: {e}", file=sys.stderr)
        return 2
    mods = build_modules(sm)
    meta = dict(device=cp.cuda.runtime.getDeviceProperties(dev.id)["name"].decode(), cc=cc, curanddx_sm=sm,
                threads=args.threads, draws=args.draws, block=args.block, reps=args.reps, seed=args.seed,
                cupy=cp.__version__, nvrtc=_nvrtc_version(), headers=header_versions(), compile_s={b: (m[1] if m[0] is not None else None) for b, m in mods.items()},
                command="python benchmarks/random_backends.py " + " ".join(sys.argv[1:] if argv is None else argv))
    try:
        check = run_check(mods, args.seed, args.check_threads, args.check_draws, args.block)
    except Exception as e:
        check = dict(ok=False, error=f"{type(e).__name__}: {str(e)[:300]}")
    print("cross-check: " + json.dumps(check))
    rows = time_backends(mods, args)
    verdicts = verdict(rows)
    print(write_results(args.out, rows, meta, check, verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
