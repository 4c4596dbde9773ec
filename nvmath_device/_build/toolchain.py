# SPDX-License-Identifier: Apache-2.0
"""Where the headers are, which NVRTC/nvJitLink we run, and the NVRTC driver itself.

Everything here works without a GPU or a driver: NVRTC and nvJitLink are plain libraries.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import pickle
import re
import subprocess
import sys
import threading
import time

from .._errors import CompileError, LinkError

log = logging.getLogger("nvmath_device")

_nvrtc_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def mathdx_root() -> str:
    """Root folder of the nvidia-mathdx wheel (holds include/ and external/)."""
    try:
        import nvidia.mathdx as m
    except ImportError as e:  # pragma: no cover - a hard dependency
        raise ImportError("nvidia-mathdx is not installed: pip install nvidia-mathdx") from e
    for p in m.__path__:
        if os.path.isdir(os.path.join(p, "include", "cufftdx")):
            return p
    raise ImportError(f"nvidia-mathdx found at {list(m.__path__)} but without include/cufftdx")


@functools.lru_cache(maxsize=1)
def include_dirs() -> tuple[str, ...]:
    """Include folders for NVRTC: mathdx, its CUTLASS, CUDA's CCCL and CUDA's own headers."""
    from cuda.pathfinder import find_nvidia_header_directory

    root = mathdx_root()
    dirs = [os.path.join(root, "include"), os.path.join(root, "external", "cutlass", "include")]
    for lib in ("cccl", "cudart"):
        d = find_nvidia_header_directory(lib)
        if d is None:
            raise ImportError(
                f"CUDA headers '{lib}' not found; install numba-cuda[cu13] (it brings nvidia-cuda-cccl "
                "and nvidia-cuda-runtime)"
            )
        dirs.append(d)
    return tuple(dirs)


@functools.lru_cache(maxsize=1)
def mathdx_version() -> str:
    """cuFFTDx and cuBLASDx header versions, read from the headers themselves."""
    root = os.path.join(mathdx_root(), "include")
    parts = []
    for name, path in (("cufftdx", "cufftdx/cufftdx_version.hpp"), ("cublasdx", "cublasdx/cublasdx_version.hpp")):
        try:
            with open(os.path.join(root, path)) as f:
                text = f.read()
            m = re.search(r"#define\s+\w+_VERSION\s+(\d+)", text)
            parts.append(f"{name}{m.group(1) if m else '?'}")
        except OSError:
            parts.append(f"{name}?")
    return "-".join(parts)


@functools.lru_cache(maxsize=1)
def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC library in use (part of every cache key).

    Raises CompileError when the NVRTC library cannot be loaded (the loader's reason in it).
    """
    try:
        from cuda.bindings import nvrtc

        err, major, minor = nvrtc.nvrtcVersion()
    except Exception as e:  # cuda.pathfinder's DynamicLibNotFoundError, an OSError from dlopen, ...
        raise CompileError(
            f"numba-mathdx needs NVRTC to compile FFT/GEMM device code, and the NVRTC library could not be "
            f"loaded ({type(e).__name__}: {e}). Install it with `pip install nvidia-cuda-nvrtc` (or "
            f"`pip install numba-cuda[cu13]`)."
        ) from e
    _check_nvrtc(err, "nvrtcVersion")
    return int(major), int(minor)


@functools.lru_cache(maxsize=1)
def nvjitlink_version() -> tuple[int, int]:
    """(major, minor) of the nvJitLink library in use (part of every cache key)."""
    from cuda.bindings import nvjitlink

    major, minor = nvjitlink.version()
    return int(major), int(minor)


def toolchain_id() -> str:
    """Everything that changes generated code besides the source: part of every cache key.

    The NVRTC version and the headers' versions. Not nvJitLink's: the cache holds what NVRTC
    makes (LTO-IR, and traits read from it); any nvJitLink at least as new links that LTO-IR,
    and linked cubins are kept by numba's own cache. Leaving it out also keeps nvJitLink
    unloaded when a process only reads the cache."""
    return f"nvrtc{'.'.join(map(str, nvrtc_version()))}-{mathdx_version()}"


def _check_nvrtc(err, what):
    from cuda.bindings import nvrtc

    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"{what} failed: {err!r}")


# Statistics the tests and the cache use to prove what ran. ``nvrtc_in_flight``: NVRTC compiles
# started and not finished (in this process or in a child, see compile_source_in_child);
# ``nvrtc_max_in_flight``: its highest value so far (2: two compiles overlapped);
# ``nvrtc_child_compiles``: compiles run in a child process (failed ones too; ``nvrtc_compiles``
# counts the successful ones, here and in children).
stats = {"nvrtc_compiles": 0, "nvrtc_seconds": 0.0, "nvjitlink_links": 0, "pch_created": 0, "pch_used": 0,
         "nvrtc_in_flight": 0, "nvrtc_max_in_flight": 0, "nvrtc_child_compiles": 0}
_stats_lock = threading.Lock()


@contextlib.contextmanager
def _in_flight(source: str, heavy: bool = True):
    """Count one compile of ``source`` in flight (and, with ``heavy``, among the compiles of its
    library for the PCH policy)."""
    kind = _heavy_kind(source) if heavy else None
    with _stats_lock:
        if kind is not None:
            _pch["heavy_compiles"][kind] += 1
        stats["nvrtc_in_flight"] += 1
        stats["nvrtc_max_in_flight"] = max(stats["nvrtc_max_in_flight"], stats["nvrtc_in_flight"])
    try:
        yield
    finally:
        with _stats_lock:
            stats["nvrtc_in_flight"] -= 1


def _count_compile(t0: float) -> float:
    """Count one successful compile begun at ``t0``; returns its time."""
    dt = time.perf_counter() - t0
    with _stats_lock:
        stats["nvrtc_compiles"] += 1
        stats["nvrtc_seconds"] += dt
    return dt


# NVRTC automatic precompiled headers (-pch): the compile that creates the PCH costs more than a
# plain one (it writes a large file under /tmp and needs a PCH heap of about 1 GB); later
# compiles in the same process cost less. The PCH only lives as long as the process: NVRTC deletes it at exit,
# and an explicit -create-pch file is rejected by another process ("incompatible precompiled
# header (PCH) heap allocation address"), so there is no cross-process PCH (-pch-dir or
# otherwise). FFT units include only their own codelets and declare the twiddle tables
# (fft_codegen), so for cuFFTDx the PCH pays off only after a few compiles. Policy
# (NUMBA_MATHDX_PCH): "auto" (default) turns it on for the second cuBLASDx compile of a process
# and for the fourth cuFFTDx compile (PCH_AFTER), "1" from the first, "0" never.
PCH_AFTER = {"cublasdx": 1, "cufftdx": 3}
ENV_PCH = "NUMBA_MATHDX_PCH"
_PCH_HEAP_DEFAULT = 1 << 30  # cuFFTDx needs 974,405,632 bytes (NVRTC 13.5, mathdx 25.x)
_pch = {"heavy_compiles": {"cublasdx": 0, "cufftdx": 0}, "heap_set": False}


def pch_mode() -> str:
    """``"auto"``, ``"on"`` or ``"off"``, from ``$NUMBA_MATHDX_PCH`` (unknown values: auto)."""
    v = os.environ.get(ENV_PCH, "auto").strip().lower()
    if v in ("1", "on", "true", "yes", "always"):
        return "on"
    if v in ("0", "off", "false", "no", "never"):
        return "off"
    return "auto"


def _heavy_kind(source: str) -> str | None:
    """"cublasdx" or "cufftdx" for sources including those libraries, else None."""
    if "<cublasdx" in source:
        return "cublasdx"
    if "<cufftdx" in source:
        return "cufftdx"
    return None


def _pch_wanted(source: str) -> bool:
    kind = _heavy_kind(source)
    if kind is None:
        return False
    mode = pch_mode()
    return mode == "on" or (mode == "auto" and _pch["heavy_compiles"][kind] >= PCH_AFTER[kind])


def _pch_prepare() -> None:
    """Reserve the PCH heap once, before the first PCH is created (resizing it later
    invalidates PCHs already made)."""
    from cuda.bindings import nvrtc

    if _pch["heap_set"]:
        return
    _pch["heap_set"] = True
    err, size = nvrtc.nvrtcGetPCHHeapSize()
    if err == nvrtc.nvrtcResult.NVRTC_SUCCESS and size < _PCH_HEAP_DEFAULT:
        nvrtc.nvrtcSetPCHHeapSize(_PCH_HEAP_DEFAULT)


def _pch_after(prog, logtext: str) -> None:
    """Count PCH creation/use; grow the heap for the next compile if this one ran out."""
    from cuda.bindings import nvrtc

    if "using precompiled header" in logtext:
        stats["pch_used"] += 1
    (status,) = nvrtc.nvrtcGetPCHCreateStatus(prog)
    if status == nvrtc.nvrtcResult.NVRTC_SUCCESS:
        stats["pch_created"] += 1
    elif status == nvrtc.nvrtcResult.NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED:
        err, need = nvrtc.nvrtcGetPCHHeapSizeRequired(prog)
        err2, have = nvrtc.nvrtcGetPCHHeapSize()
        # Grow only when one PCH does not fit at all (resizing drops the PCH already made; a heap
        # merely occupied by another header set's PCH is left alone rather than thrashed).
        if err == err2 == nvrtc.nvrtcResult.NVRTC_SUCCESS and need > have:
            log.debug("NVRTC PCH heap too small (%d bytes needed); growing it for the next compile", need)
            nvrtc.nvrtcSetPCHHeapSize(int(need * 1.1))


def base_options(sm: int, extra_include_dirs=()) -> list[str]:
    """NVRTC options for ``sm``; ``extra_include_dirs`` are searched before the default ones."""
    opts = [
        "-std=c++17",
        "-default-device",
        "-rdc=true",
        f"-arch=compute_{sm}",
        "-DCUFFTDX_DISABLE_RUNTIME_ASSERTS",
        "-DCUBLASDX_IGNORE_DEPRECATED_DIALECT",
    ]
    opts += [f"-I{d}" for d in extra_include_dirs]
    opts += [f"-I{d}" for d in include_dirs()]
    return opts


def _options(sm: int, output: str, extra_include_dirs, extra_options) -> list[str]:
    if output not in ("ltoir", "ptx"):
        raise ValueError(f"output must be 'ltoir' or 'ptx', got {output!r}")
    opts = base_options(sm, tuple(extra_include_dirs)) + list(extra_options)
    if output == "ltoir":
        opts.append("-dlto")
    return opts


def _compile_error(name: str, sm: int, err_name: str, opts, logtext: str, source: str) -> CompileError:
    return CompileError(
        f"NVRTC {'.'.join(map(str, nvrtc_version()))} failed to compile {name} for sm_{sm} "
        f"({err_name}).\nOptions: {' '.join(opts)}\n--- NVRTC log ---\n{logtext}\n"
        f"--- source ---\n{source}"
    )


def compile_source(source: str, sm: int, output: str, name: str = "nvmath_device_shim.cu",
                   extra_include_dirs=(), extra_options=()) -> bytes:
    """Compile CUDA C++ ``source`` with NVRTC to ``output`` ("ltoir" or "ptx") for ``sm``.

    ``extra_include_dirs`` are searched before the default include folders (cuBLASDx uses this
    to put a CUTLASS-compatible CCCL first); ``extra_options`` are appended to the NVRTC options.
    Raises CompileError with the full NVRTC log on failure.
    """
    return _compile_here(source, sm, output, name, _options(sm, output, extra_include_dirs, extra_options))


def _compile_here(source: str, sm: int, output: str, name: str, opts: list[str], heavy: bool = True) -> bytes:
    nvrtc_version()  # a CompileError saying why when the NVRTC library cannot be loaded
    from cuda.bindings import nvrtc

    t0 = time.perf_counter()
    with _nvrtc_lock:
        use_pch = _pch_wanted(source)
        if use_pch:
            _pch_prepare()
            opts = opts + ["-pch"]
        bopts = [o.encode() for o in opts]
        with _in_flight(source, heavy):
            err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
            _check_nvrtc(err, "nvrtcCreateProgram")
            try:
                (err,) = nvrtc.nvrtcCompileProgram(prog, len(bopts), bopts)
                lerr, size = nvrtc.nvrtcGetProgramLogSize(prog)
                logbuf = bytearray(size)  # never b" " * size: for size 1 that is CPython's shared b" " object
                nvrtc.nvrtcGetProgramLog(prog, logbuf)
                logtext = logbuf.decode(errors="replace").rstrip("\x00 \n")
                if use_pch:
                    _pch_after(prog, logtext)
                if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
                    raise _compile_error(name, sm, err.name, opts, logtext, source)
                if output == "ltoir":
                    err, size = nvrtc.nvrtcGetLTOIRSize(prog)
                    _check_nvrtc(err, "nvrtcGetLTOIRSize")
                    buf = bytearray(size)
                    (err,) = nvrtc.nvrtcGetLTOIR(prog, buf)
                    _check_nvrtc(err, "nvrtcGetLTOIR")
                else:
                    err, size = nvrtc.nvrtcGetPTXSize(prog)
                    _check_nvrtc(err, "nvrtcGetPTXSize")
                    buf = bytearray(size)
                    (err,) = nvrtc.nvrtcGetPTX(prog, buf)
                    _check_nvrtc(err, "nvrtcGetPTX")
            finally:
                nvrtc.nvrtcDestroyProgram(prog)
            dt = _count_compile(t0)
    log.debug("NVRTC compiled %s for sm_%d to %s in %.1f s%s", name, sm, output, dt, " (-pch)" if use_pch else "")
    return bytes(buf)


# NVRTC runs the compiles of one process one after the other (two threads compiling take as
# long as one after the other, though the GIL is released); two processes compile in parallel.
# compile_source_in_child runs one compile in a child Python process that imports only
# cuda.bindings, so that it overlaps a compile in this process.
_CHILD = r"""
import pickle, sys
from cuda.bindings import nvrtc
OK = nvrtc.nvrtcResult.NVRTC_SUCCESS
source, name, opts, output = pickle.load(sys.stdin.buffer)
err, major, minor = nvrtc.nvrtcVersion()
err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
assert err == OK, err
(err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
_, size = nvrtc.nvrtcGetProgramLogSize(prog)
logbuf = bytearray(size)
nvrtc.nvrtcGetProgramLog(prog, logbuf)
if err != OK:
    result = ("error", (major, minor), err.name, logbuf.decode(errors="replace").rstrip("\x00 \n"))
else:
    get_size, get = ((nvrtc.nvrtcGetLTOIRSize, nvrtc.nvrtcGetLTOIR) if output == "ltoir"
                     else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX))
    e, size = get_size(prog)
    buf = bytearray(size)
    (e2,) = get(prog, buf)
    assert e == e2 == OK, (e, e2)
    result = ("ok", (major, minor), bytes(buf))
nvrtc.nvrtcDestroyProgram(prog)
sys.stdout.buffer.write(pickle.dumps(result))
"""


def _run_child(source: str, name: str, opts: list[str], output: str):
    """``("ok", nvrtc version, bytes)`` or ``("error", nvrtc version, result name, log)`` from a
    child process; None (logged) where the child could not compile with our NVRTC."""
    try:
        p = subprocess.run([sys.executable, "-c", _CHILD], input=pickle.dumps((source, name, opts, output)),
                           capture_output=True, check=False)
        if p.returncode == 0:
            result = pickle.loads(p.stdout)
            if tuple(result[1]) == nvrtc_version():
                return result
            why = f"it runs NVRTC {result[1]}"
        else:
            why = f"exit code {p.returncode}: {p.stderr.decode(errors='replace').strip()[-2000:]}"
    except Exception as e:  # could not start it, or garbled output
        why = repr(e)
    log.debug("NVRTC: no child process could compile %s (%s); compiling it in this process", name, why)
    return None


def compile_source_in_child(source: str, sm: int, output: str, name: str = "nvmath_device_shim.cu",
                            extra_include_dirs=(), extra_options=()) -> bytes:
    """:func:`compile_source` in a child Python process (without ``-pch``), so that it can run
    while this process compiles something else (see ``_CHILD``): same result, same
    ``CompileError`` with the NVRTC log. Where no child can do it (a frozen application, no
    interpreter, a crash, another NVRTC version) the compile runs in this process instead.
    """
    opts = _options(sm, output, extra_include_dirs, extra_options)
    if sys.executable and not getattr(sys, "frozen", False):
        t0 = time.perf_counter()
        with _in_flight(source):
            result = _run_child(source, name, opts, output)
            if result is not None:
                with _stats_lock:
                    stats["nvrtc_child_compiles"] += 1
                if result[0] == "error":
                    raise _compile_error(name, sm, result[2], opts, result[3], source)
                dt = _count_compile(t0)
        if result is not None:
            log.debug("NVRTC compiled %s for sm_%d to %s in %.1f s (child process)", name, sm, output, dt)
            return result[2]
        return _compile_here(source, sm, output, name, opts, heavy=False)  # counted above
    return _compile_here(source, sm, output, name, opts)


def link_cubin(items: list[tuple[str, bytes, str]], sm: int, extra: list[str] | None = None) -> bytes:
    """Link LTO-IR / PTX / cubin items with nvJitLink into a cubin for sm_XX (no GPU needed).

    ``items`` are (kind, data, name) with kind in {"ltoir", "ptx", "cubin", "fatbin", "object"}.
    """
    from cuda.bindings import nvjitlink

    kinds = {
        "ltoir": nvjitlink.InputType.LTOIR,
        "ptx": nvjitlink.InputType.PTX,
        "cubin": nvjitlink.InputType.CUBIN,
        "fatbin": nvjitlink.InputType.FATBIN,
        "object": nvjitlink.InputType.OBJECT,
    }
    opts = [f"-arch=sm_{sm}", "-lto"] + list(extra or [])
    h = nvjitlink.create(len(opts), opts)
    try:
        try:
            for kind, data, name in items:
                nvjitlink.add_data(h, kinds[kind], data, len(data), name)
            nvjitlink.complete(h)
        except nvjitlink.nvJitLinkError as e:
            size = nvjitlink.get_error_log_size(h)
            buf = bytearray(size)
            nvjitlink.get_error_log(h, buf)
            raise LinkError(
                f"nvJitLink {'.'.join(map(str, nvjitlink_version()))} failed for sm_{sm} ({e}).\n"
                f"--- nvJitLink log ---\n{buf.decode(errors='replace')}"
            ) from None
        if "-ptx" in opts:
            size = nvjitlink.get_linked_ptx_size(h)
            buf = bytearray(size)
            nvjitlink.get_linked_ptx(h, buf)
        else:
            size = nvjitlink.get_linked_cubin_size(h)
            buf = bytearray(size)
            nvjitlink.get_linked_cubin(h, buf)
    finally:
        nvjitlink.destroy(h)
    stats["nvjitlink_links"] += 1
    return bytes(buf)


_PTX_GLOBAL = re.compile(r"\.global\s+\.align\s+\d+\s+\.(?:b8|u32|u64)\s+(\w+)\[(\d+)\]\s*(?:=\s*\{([^}]*)\})?")


def read_u32_arrays(ptx: bytes | str, names) -> dict[str, list[int]]:
    """Read ``extern "C" __device__ const unsigned NAME[]`` initialisers out of PTX text."""
    text = ptx.decode() if isinstance(ptx, bytes) else ptx
    found = {}
    for m in _PTX_GLOBAL.finditer(text):
        name, n, init = m.group(1), int(m.group(2)), m.group(3)
        if name not in names:
            continue
        decl = m.group(0)
        values = [int(v, 0) for v in init.split(",")] if init else []
        if ".b8" in decl:
            raw = bytes(values + [0] * (n - len(values)))
            found[name] = [int.from_bytes(raw[i : i + 4], "little") for i in range(0, n, 4)]
        else:
            found[name] = values + [0] * (n - len(values))
    missing = set(names) - set(found)
    if missing:
        raise CompileError(f"traits {sorted(missing)} not found in the compiled PTX")
    return found
