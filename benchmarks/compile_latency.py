# SPDX-License-Identifier: Apache-2.0
"""Compile latency: time from descriptor creation to the first kernel result, each scenario in
a fresh Python process, ours vs nvmath-python's device FFT (its 1.0 API) where importable.

    python benchmarks/compile_latency.py --out bench_out            # GPU if present, else CPU
    python benchmarks/compile_latency.py --out bench_out --mode cpu # codegen only, no GPU

Scenarios (one c2c fp32 Block FFT in a ``@cuda.jit`` kernel):

(a) empty caches (ours: fresh NUMBA_MATHDX_CACHE_DIR and NUMBA_CACHE_DIR);
(b) the same again in a new process, caches warm; ours uses ``@cuda.jit(cache=True)``
    (nvmath-python cannot: numba issue #8888, so its (b) recompiles); ``--repeat N`` fresh
    processes (default 5), the median reported with the range;
(c) a new descriptor in a process that has already compiled another one (headers/PCH warm;
    ours with NUMBA_MATHDX_PCH=1, and with NUMBA_MATHDX_PCH=0 for comparison);
(b-floor) the numba floor of (b): the same kernel with ``cache=True`` but no FFT (a plain copy,
    same signature, loops and launch; numba-cuda alone, no descriptor), loaded from numba's
    cache in a new process (a first, untimed process fills that cache). It is what any
    numba-cuda ``cache=True`` kernel needs to its first result (on the H200 mostly numba-cuda's
    target-context refresh on cache load, ``load_overload -> refresh ->
    load_additional_registries``, which imports scipy.linalg). GPU mode only: in CPU mode no
    kernel is loaded through numba's cache ((b-kernel) unpickles the library directly), so the
    row says "skipped".

GPU mode: the time ends when the kernel's output is back on the host (checked against NumPy).
CPU mode (no GPU): the time ends at the linked sm_90 cubin (``nvmath_device.aot.compile_kernel``);
(b) is the warm disk cache (link only) and (b-kernel) loads the kernel library pickled by
numba's serializer in (a) -- what ``cache=True`` stores -- and takes its cubin.

Writes compile_latency.json and compile_latency.md into --out. Import time of numba and the
library (``import_s``) and, on the GPU, the creation of the process's CUDA context
(``context_s``, paid by any CUDA program) are measured separately and not included. ``cpu_s``
is the CPU time of the process and of its child processes (ours compiles cuFFTDx's twiddle
tables in a child process, alongside the FFT unit).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

KERNEL = r'''
import numpy as np
from numba import cuda
from {module} import FFT

fft = FFT(size={size}, precision=np.float32, fft_type="c2c", direction="forward",
          elements_per_thread={ept}, ffts_per_block={fpb}{extra})
EPT, STRIDE, FPB, N = fft.{ept_attr}, fft.stride, fft.{fpb_attr}, fft.size
STORAGE, VT = fft.storage_size, fft.value_type
BLOCK_DIM, SMEM = fft.block_dim, fft.shared_memory_size


@cuda.jit(cache={cache})
def kern(x, y, nrows):
    td = cuda.local.array(STORAGE, dtype=VT)
    smem = cuda.shared.array(0, dtype=VT)
    row = cuda.blockIdx.x * FPB + cuda.threadIdx.y
    base = row * N + cuda.threadIdx.x
    ok = row < nrows
    for i in range(EPT):
        td[i] = x[base + i * STRIDE] if ok else 0
    fft.execute(td, smem)
    if ok:
        for i in range(EPT):
            y[base + i * STRIDE] = td[i]
'''

# KERNEL without the FFT: the numba floor of scenario (b) (numba-cuda alone, no descriptor).
FLOOR_KERNEL = r'''
import numpy as np
from numba import cuda

COPY = True  # the output is the input
EPT, FPB, N = {ept}, {fpb}, {size}
STRIDE, STORAGE, VT = N // EPT, EPT, np.complex64
BLOCK_DIM, SMEM = (N // EPT, FPB, 1), 0


@cuda.jit(cache=True)
def kern(x, y, nrows):
    td = cuda.local.array(STORAGE, dtype=VT)
    row = cuda.blockIdx.x * FPB + cuda.threadIdx.y
    base = row * N + cuda.threadIdx.x
    ok = row < nrows
    for i in range(EPT):
        td[i] = x[base + i * STRIDE] if ok else 0
    if ok:
        for i in range(EPT):
            y[base + i * STRIDE] = td[i]
'''

SIZES = {"main": (128, 8, 2), "other": (256, 8, 2)}


# --- child side -----------------------------------------------------------------------------

def _kernel_module(workdir, impl, which, cache, sm):
    size, ept, fpb = SIZES[which]
    if impl == "floor":
        text = FLOOR_KERNEL.format(size=size, ept=ept, fpb=fpb)
    elif impl == "ours":
        text = KERNEL.format(module="nvmath_device", size=size, ept=ept, fpb=fpb, cache=cache,
                             extra=f", sm={sm}" if sm else "", ept_attr="elements_per_thread_value",
                             fpb_attr="ffts_per_block_value")
    else:
        text = KERNEL.format(module="nvmath.device", size=size, ept=ept, fpb=fpb, cache=cache,
                             extra=', execution="Block"', ept_attr="elements_per_thread",
                             fpb_attr="ffts_per_block")
    path = os.path.join(workdir, f"kern_{impl}_{which}.py")
    if not os.path.exists(path):  # same file in every process: numba's cache keys on it
        with open(path, "w") as f:
            f.write(text)
    spec = importlib.util.spec_from_file_location(f"kern_{impl}_{which}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # creates the descriptor and its traits
    return mod


def _first_result_gpu(mod):
    import numpy as np
    from numba import cuda

    nrows = mod.FPB * 4
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((nrows, mod.N)) + 1j * rng.standard_normal((nrows, mod.N))).astype(np.complex64)
    dx, dy = cuda.to_device(x.ravel()), cuda.device_array(nrows * mod.N, np.complex64)
    mod.kern[nrows // mod.FPB, mod.BLOCK_DIM, 0, mod.SMEM](dx, dy, nrows)
    y = dy.copy_to_host().reshape(nrows, mod.N)
    ref = x if getattr(mod, "COPY", False) else np.fft.fft(x.astype(np.complex128), axis=-1)
    return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))


def _first_result_cpu(mod, workdir=None):
    from numba.core import types

    from nvmath_device.aot import compile_kernel

    ck = compile_kernel(mod.kern, (types.complex64[::1], types.complex64[::1], types.int64), sm=90)
    return len(ck.cubin)


def _pickle_library(mod, workdir):
    """What cache=True stores: the kernel's code library, through numba's serializer."""
    from numba.core import types
    from numba.cuda import serialize

    from nvmath_device._numba._compat import compile_kernel_library

    lib, _ = compile_kernel_library(mod.kern.py_func, (types.complex64[::1], types.complex64[::1], types.int64), (9, 0))
    lib.get_cubin(cc=(9, 0))
    with open(os.path.join(workdir, "kernel_library.pkl"), "wb") as f:
        f.write(serialize.dumps(lib))


def child(args) -> dict:
    t = time.perf_counter()
    import numba.cuda  # noqa: F401

    if args.impl == "ours":
        import nvmath_device  # noqa: F401
        from nvmath_device._build import toolchain
    elif args.impl == "nvmath":
        import nvmath.device  # noqa: F401
    import_s = time.perf_counter() - t
    gpu = args.mode == "gpu"
    context_s = None
    if gpu:  # the CUDA context every process pays once, whatever it runs: timed on its own
        t = time.perf_counter()
        numba.cuda.current_context()
        context_s = round(time.perf_counter() - t, 3)
    sm = None if gpu else 90
    run = _first_result_gpu if gpu else _first_result_cpu
    out = {"import_s": round(import_s, 3), "context_s": context_s}
    cache = args.impl in ("ours", "floor") and gpu
    if args.scenario == "c":  # warm headers/PCH with another descriptor first (untimed)
        run(_kernel_module(args.workdir, args.impl, "main", False, sm))
    if args.scenario == "b-kernel":
        import pickle

        t0, c0 = time.perf_counter(), _cpu_time()
        with open(os.path.join(args.workdir, "kernel_library.pkl"), "rb") as f:
            lib = pickle.loads(f.read())
        value = len(bytes(lib.get_cubin(cc=(9, 0)).code))
    else:
        which = "other" if args.scenario == "c" else "main"
        t0, c0 = time.perf_counter(), _cpu_time()
        mod = _kernel_module(args.workdir, args.impl, which, cache, sm)
        value = run(mod)
    out["first_result_s"] = round(time.perf_counter() - t0, 3)
    out["cpu_s"] = round(_cpu_time() - c0, 3)
    out["check"] = value  # GPU: relative error vs NumPy; CPU: cubin bytes
    if gpu and cache:
        out["numba_cache_hits"] = sum(mod.kern._cache_hits.values())
    if args.impl == "ours":
        out["nvrtc_compiles"] = toolchain.stats["nvrtc_compiles"]
        out["pch_used"] = toolchain.stats["pch_used"]
        if not gpu and args.scenario == "a":
            _pickle_library(mod, args.workdir)
    return out


def _cpu_time():
    """CPU time of this process and of its finished child processes (NVRTC runs in both)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


# --- parent side ----------------------------------------------------------------------------

def _spawn(mode, impl, scenario, workdir, env_extra):
    env = dict(os.environ, **env_extra)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--mode", mode, "--impl", impl,
           "--scenario", scenario, "--workdir", workdir]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-1][:300]}
    return json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])


def _repeat(n, *spawn_args):
    """``n`` runs of a warm scenario (``_spawn(*spawn_args)``): the median run's fields, plus
    every run's seconds."""
    runs = [_spawn(*spawn_args) for _ in range(max(1, n))]
    ok = [r for r in runs if "first_result_s" in r]
    if not ok:
        return runs[0]
    ok.sort(key=lambda r: r["first_result_s"])
    r = dict(ok[(len(ok) - 1) // 2])  # the median (the lower one of an even count)
    if n > 1:
        r["runs_s"] = [x.get("first_result_s") for x in runs]
    return r


def _importable(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _has_gpu():
    code = "from numba import cuda; import sys; sys.exit(0 if cuda.is_available() else 1)"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench_out")
    ap.add_argument("--mode", choices=("auto", "gpu", "cpu"), default="auto")
    ap.add_argument("--skip-nvmath", action="store_true")
    ap.add_argument("--repeat", type=int, default=5,
                    help="fresh processes per warm scenario ((b), (b-floor)); the median is reported")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--impl", default="ours", help=argparse.SUPPRESS)
    ap.add_argument("--scenario", default="a", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(args)), flush=True)
        return 0

    mode = args.mode if args.mode != "auto" else ("gpu" if _has_gpu() else "cpu")
    impls = ["ours"]
    if mode == "gpu" and not args.skip_nvmath and _importable("nvmath"):
        impls.append("nvmath")
    rows = []
    root = tempfile.mkdtemp(prefix="nmdx-compile-latency-")
    try:
        for impl in impls:
            work = os.path.join(root, impl)
            os.makedirs(work)
            caches = {"NUMBA_MATHDX_CACHE_DIR": os.path.join(work, "mathdx"),
                      "NUMBA_CACHE_DIR": os.path.join(work, "numba")}
            plan = [("a", "empty caches", caches, {}), ("b", "warm caches, new process", caches, {})]
            if impl == "ours" and mode == "cpu":
                plan.append(("b-kernel", "cached kernel library (what cache=True stores)", caches, {}))
            for pch in (("1", "0") if impl == "ours" else (None,)):
                fresh = {k: v + f"-c{pch or ''}" for k, v in caches.items()}
                extra = {"NUMBA_MATHDX_PCH": pch} if pch else {}
                label = "new descriptor, headers warm" + (f" (NUMBA_MATHDX_PCH={pch})" if pch else "")
                plan.append(("c", label, fresh, extra))
            if impl == "ours":
                plan.append(("b-floor", "numba floor of (b): cache=True kernel without FFT, new process",
                             caches, {}))
            for scenario, label, cenv, extra in plan:
                who = impl
                if scenario == "b-floor":
                    who = "numba"
                    if mode != "gpu":
                        r = {"skipped": "GPU mode only (no kernel is loaded through numba's cache here)"}
                    else:
                        r = _spawn(mode, "floor", "b", work, cenv)  # fills numba's cache (untimed)
                        if "error" not in r:
                            r = _repeat(args.repeat, mode, "floor", "b", work, cenv)
                elif scenario == "b":  # warm: every run finds the same caches, so it can repeat
                    n = args.repeat if impl == "ours" else 1  # nvmath-python's (b) recompiles: once
                    r = _repeat(n, mode, impl, "b", work, dict(cenv, **extra))
                else:
                    r = _spawn(mode, impl, scenario, work, dict(cenv, **extra))
                r.update(impl=who, scenario=scenario, label=label, mode=mode)
                rows.append(r)
                shown = r.get("first_result_s", r.get("error", r.get("skipped")))
                print(f"{who:7s} ({scenario}) {label:55s} {shown} (cpu {r.get('cpu_s')})", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    os.makedirs(args.out, exist_ok=True)
    meta = {"mode": mode, "python": sys.version.split()[0], "machine": platform.machine(),
            "cpus": os.cpu_count(), "sizes": SIZES}
    with open(os.path.join(args.out, "compile_latency.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=2)
    end = "first kernel result on the host" if mode == "gpu" else "linked sm_90 cubin (no GPU)"
    lines = [f"# Compile latency ({mode}: descriptor creation -> {end})", "",
             f"{os.cpu_count()} CPUs; FFT c2c fp32 size {SIZES['main'][0]} ((c): size {SIZES['other'][0]}); "
             "each row a fresh process; import time and CUDA context creation (columns import s, "
             "context s) not included; seconds = wall clock, CPU s = the CPU time of the process and "
             "its child processes (steadier on a shared machine); (b-floor): the same kernel without "
             "the FFT, numba-cuda alone (GPU mode only).", "",
             "| impl | scenario | seconds | CPU s | NVRTC compiles | PCH used | import s | context s | check |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if "first_result_s" in r:
            sec = f"{r['first_result_s']:.3f}"
            if r.get("runs_s"):
                got = [x for x in r["runs_s"] if x is not None]
                sec += f" (median of {len(r['runs_s'])}: {min(got):.3f}-{max(got):.3f})"
        else:
            sec = f"skipped: {r['skipped']}" if "skipped" in r else f"error: {r['error']}"
        lines.append(f"| {r['impl']} | ({r['scenario']}) {r['label']} | {sec} | {r.get('cpu_s', '')} | "
                     f"{r.get('nvrtc_compiles', '')} | "
                     f"{r.get('pch_used', '')} | {r.get('import_s', '')} | {r.get('context_s') or ''} | "
                     f"{r.get('check', '')} |")
    with open(os.path.join(args.out, "compile_latency.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
