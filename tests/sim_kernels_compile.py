# SPDX-License-Identifier: Apache-2.0
"""Every kernel the simulator suite runs, compiled to an sm_90 cubin as well.

Two halves, one module (the records name this module's functions, so both processes import it):

1. **Recorder** (:func:`install_recorder`; ``tests/sim/conftest.py`` installs it when
   ``NMDX_RECORD_SIM_KERNELS=<folder>`` is set). Under the simulator it wraps the simulated
   kernel's ``__call__``: each host launch that *completes* (a launch that raised is not
   recorded: tests that expect an error stay out) records the kernel's Python function and the
   numba types of its arguments (``numba.typeof`` of the host arrays / simulated device arrays /
   scalars, as numba-cuda's dispatcher types them). The function is pickled **by value**: its
   code (marshal), the globals it names and its closure cells, recursively, so kernels made by
   factories (closures over FFT/Matmul descriptors, sizes, dtypes, helper device functions) are
   covered as well as module-level ones. Modules and importable module-level objects go by
   reference; a simulated ``@cuda.jit`` dispatcher (a device function) goes as its Python
   function and is re-``cuda.jit``-ed in the compiling process. Records are deduplicated by the
   digest of (pickled function, argument types): one file ``<digest>.kernel`` each. Kernels that
   cannot be recorded (an argument numba cannot type, a closure over an unpicklable object,
   extensions) leave ``<digest>.skip.json`` with the reason. bfloat16 arrays (which numba's
   ``typeof`` does not know) are recorded as numba-cuda's ``__nv_bfloat16`` arrays.

2. **Compile step** (``python -m tests.sim_kernels_compile <folder> [--jobs N]``, without the
   simulator): each record is unpickled under numba's CUDA target and linked with
   ``nvmath_device.aot.compile_kernel(fn, argtypes, sm=90)`` in ``--jobs`` worker processes;
   prints one line per kernel, the count, the skips and the time; exit status 1 when a kernel
   fails to compile (its error is printed). ``--one-per-family`` links one kernel per family
   (same function, argument types and descriptor kinds: FFT type/direction/execution/
   precision, GEMM precision/data type/arrangement; sizes and other closure values aside), a
   cheaper check that still types and links every kernel source on every code path the
   descriptor kinds choose.

Not covered: cuda.jit options of the recorded kernel and of its device functions (the cubin is
linked with compile_kernel's defaults; ``forceinline``/``fastmath`` are not replayed),
extensions, kernels only launched through paths other than ``FakeCUDAKernel.__call__``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import json
import marshal
import os
import pickle
import sys
import threading
import time
import types as pytypes
from pathlib import Path

RECORD_ENV = "NMDX_RECORD_SIM_KERNELS"
REPO = Path(__file__).resolve().parents[1]

# --------------------------------------------------------------------------------------------
# Pickling kernel functions by value


class NotRecordable(Exception):  # noqa: N818
    """A kernel the recorder cannot serialise (the message says why)."""


def _make_cell(value):
    return (lambda: value).__closure__[0]


_EMPTY = "<empty cell>"


def _make_function(code, globals_subset, name, qualname, module, defaults, kwdefaults, cells):
    import builtins

    g = dict(globals_subset)
    g.setdefault("__builtins__", builtins)
    g.setdefault("__name__", module)
    closure = None
    if cells is not None:
        closure = tuple(
            pytypes.CellType() if isinstance(v, str) and v == _EMPTY else _make_cell(v)
            for v in cells
        )
    fn = pytypes.FunctionType(code, g, name, defaults, closure)
    fn.__qualname__ = qualname
    fn.__module__ = module
    fn.__kwdefaults__ = kwdefaults
    return fn


def _rejit(fn, device):
    """A recorded simulated ``cuda.jit`` dispatcher, made again by this process's ``cuda.jit``."""
    from numba import cuda

    return cuda.jit(device=device)(fn)


def _load_code(data):
    return marshal.loads(data)


def _names(code) -> set:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            names |= _names(const)
    return names


def _importable(obj) -> bool:
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    qualname = getattr(obj, "__qualname__", "")
    if module is None or "<locals>" in qualname or module.__name__ == "__main__":
        return False
    found = module
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found is obj


def _is_sim_dispatcher(obj) -> bool:
    return type(obj).__name__ == "FakeCUDAKernel" and type(obj).__module__.startswith(
        "numba.cuda.simulator"
    )


# What a descriptor contributes to a kernel's "family" (see --one-per-family): the attributes
# that choose typing and code paths, not sizes.
_FAMILY_ATTRS = ("fft_type", "direction", "execution", "precision", "data_type", "arrangement")


def _descriptor_summary(obj) -> str:
    parts = [type(obj).__name__]
    for attr in _FAMILY_ATTRS:
        try:
            parts.append(f"{attr}={obj.__dict__.get(attr, getattr(obj, attr))}")
        except Exception:  # noqa: BLE001, S112 - absent or not computable: not part of it
            continue
    return "(" + ", ".join(parts) + ")"


class _KernelPickler(pickle.Pickler):
    def __init__(self, file):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.descriptors: set = set()

    def reducer_override(self, obj):
        if type(obj).__name__ in ("FFT", "Matmul") and type(obj).__module__.startswith(
            "nvmath_device"
        ):
            self.descriptors.add(_descriptor_summary(obj))
            return NotImplemented
        if isinstance(obj, pytypes.ModuleType):
            return importlib.import_module, (obj.__name__,)
        if isinstance(obj, pytypes.CodeType):
            return _load_code, (marshal.dumps(obj),)
        if _is_sim_dispatcher(obj):
            return _rejit, (obj.fn, bool(obj._device))
        if isinstance(obj, pytypes.FunctionType) and not _importable(obj):
            # by value (a function that reaches itself again ends in RecursionError: skipped)
            code = obj.__code__
            g = {n: obj.__globals__[n] for n in sorted(_names(code)) if n in obj.__globals__}
            cells = None
            if obj.__closure__ is not None:
                cells = []
                for cell in obj.__closure__:
                    try:
                        cells.append(cell.cell_contents)
                    except ValueError:
                        cells.append(_EMPTY)
            return _make_function, (code, g, obj.__name__, obj.__qualname__, obj.__module__,
                                    obj.__defaults__, obj.__kwdefaults__, cells)
        return NotImplemented


def dumps_function(fn) -> tuple[bytes, list]:
    """``fn`` pickled by value (see the module docstring) and the summaries of the descriptors
    it reaches; NotRecordable when it cannot be pickled."""
    import io

    buf = io.BytesIO()
    pickler = _KernelPickler(buf)
    try:
        pickler.dump(fn)
    except Exception as e:  # noqa: BLE001 - any pickling failure means "not recordable"
        raise NotRecordable(f"{type(e).__name__}: {e}") from None
    return buf.getvalue(), sorted(pickler.descriptors)


# --------------------------------------------------------------------------------------------
# The recorder (simulator side)

_lock = threading.Lock()
_seen: dict = {}  # ((id(fn), argtypes), folder) -> digest; fn kept alive in the value
_folder: Path | None = None


def _argtype(arg):
    import numba
    import numpy as np
    from numba.core.typing.typeof import Purpose

    from nvmath_device._sim._compat import unwrap

    value = getattr(arg, "value", arg) if type(arg).__name__ in ("In", "Out", "InOut") else arg
    value = unwrap(value)
    states = _curand_states(value)
    if states is not None:
        return states
    from nvmath_device import DevicePipeline

    if isinstance(value, DevicePipeline):  # all but its addresses: the numba layer's DevicePipelineType
        return ("device pipeline", value._key)
    if getattr(getattr(value, "dtype", None), "name", "") == "bfloat16":
        # numba's typeof knows no bfloat16 (numba-cuda types ml_dtypes.bfloat16 values and
        # arrays as __nv_bfloat16 ones): a spec that the compile step turns into that type
        if not isinstance(value, np.ndarray):
            return ("bfloat16",)
        layout = "C" if value.flags.c_contiguous else "F" if value.flags.f_contiguous else "A"
        return ("bfloat16 array", value.ndim, layout)
    return numba.typeof(value, Purpose.argument)


def _curand_states(value):
    """``("curand states", generator)`` for a ``random.States*`` object, or for a NumPy array of
    one generator's state dtype (the simulator's ``states.data``); None for anything else. The
    simulator's process cannot type them (numba-cuda's typing of the states lives in the numba
    layer, which the simulator does not import)."""
    import numpy as np

    from nvmath_device import random
    from nvmath_device._random_states import STATE_DTYPES

    if isinstance(value, random._States):
        return ("curand states", value.generator)
    if not isinstance(value, np.ndarray) or value.dtype.names is None:
        return None
    tagged = (value.dtype.metadata or {}).get("generator")
    if tagged in STATE_DTYPES:
        return ("curand states", tagged)
    matches = [g for g, dt in STATE_DTYPES.items() if dt == value.dtype]
    if len(matches) > 1:
        raise TypeError(f"a states array whose dtype fits several generators ({', '.join(matches)})")
    return ("curand states", matches[0]) if matches else None


def _resolve(argtype):
    if isinstance(argtype, tuple) and argtype[:1] == ("device pipeline",):
        from nvmath_device._numba.pipeline_numba import DevicePipelineType

        return DevicePipelineType(argtype[1])
    if isinstance(argtype, tuple) and argtype[:1] == ("curand states",):
        from numba.core import types

        from nvmath_device._numba.random_numba import STATE_TYPES

        return types.Array(STATE_TYPES[argtype[1]], 1, "C")
    if isinstance(argtype, tuple) and argtype[:1] in (("bfloat16",), ("bfloat16 array",)):
        from numba.core import types
        from numba.cuda.types import bfloat16

        return bfloat16 if len(argtype) == 1 else types.Array(bfloat16, argtype[1], argtype[2])
    return argtype


def record_launch(kernel, args, folder=None) -> None:
    """Record one launch of the simulated ``kernel`` with ``args`` into ``folder`` (default: the
    recorder's); what :func:`install_recorder`'s wrapper calls after each completed launch."""
    folder = Path(folder) if folder is not None else _folder
    fn = kernel.fn
    name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"
    try:
        argtypes = tuple(_argtype(a) for a in args)
        reason = None
    except Exception as e:  # noqa: BLE001
        argtypes, reason = None, f"argument numba cannot type: {type(e).__name__}: {e}"
    if reason is None and kernel.extensions:
        reason = "kernel with extensions (argument preparation is not replayed)"
    memo = (id(fn), argtypes) if argtypes is not None else None
    with _lock:
        if memo is not None and (memo, folder) in _seen:
            return
    payload = None
    if reason is None:
        try:
            payload, descriptors = dumps_function(fn)
        except NotRecordable as e:
            reason = f"closure/global not recordable: {e}"
    if reason is None:
        types_blob = pickle.dumps(argtypes, protocol=pickle.HIGHEST_PROTOCOL)
        digest = hashlib.sha256(payload + b"\0" + types_blob).hexdigest()[:24]
        record = {"name": name, "function": payload, "argtypes": types_blob,
                  "shown": ", ".join(str(t) for t in argtypes),
                  "family": json.dumps([name, [str(t) for t in argtypes], descriptors]),
                  "test": os.environ.get("PYTEST_CURRENT_TEST", "")}
        path = folder / f"{digest}.kernel"
        if not path.exists():
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_bytes(pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL))
            os.replace(tmp, path)
    else:
        digest = hashlib.sha256((name + reason).encode()).hexdigest()[:24]
        (folder / f"{digest}.skip.json").write_text(json.dumps(
            {"name": name, "reason": reason, "test": os.environ.get("PYTEST_CURRENT_TEST", "")}))
    with _lock:
        if memo is not None:
            _seen[memo, folder] = (digest, fn)


def install_recorder(folder) -> None:
    """Record every completed simulated kernel launch into ``folder`` (simulator only)."""
    global _folder
    from numba.cuda.simulator import kernel as simkernel

    import nvmath_device  # noqa: F401  (its simulator patches first: we wrap them)

    _folder = Path(folder)
    _folder.mkdir(parents=True, exist_ok=True)
    original = simkernel.FakeCUDAKernel.__call__
    if getattr(original, "_nmdx_recorder", False):
        return

    def __call__(self, *args, **kwargs):
        host_launch = not kwargs and not self._device and simkernel._get_kernel_context() is None
        result = original(self, *args, **kwargs)
        if host_launch:
            record_launch(self, args)
        return result

    __call__._nmdx_recorder = True
    __call__.__wrapped__ = original
    simkernel.FakeCUDAKernel.__call__ = __call__


# --------------------------------------------------------------------------------------------
# The compile step (CUDA target, no GPU)


def device_functions_without_gpu(cc=(9, 0)):
    """For a compile outside ``nvmath_device.aot`` (e.g. ``cuda.compile_ptx``): let numba-cuda
    compile ``cuda.jit(device=True)`` functions without a GPU, targeting ``cc`` (the library's
    own context manager, which ``compile_kernel`` uses)."""
    from nvmath_device._numba._compat import device_functions_for

    return device_functions_for(cc)


def _worker_init():
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    os.environ.setdefault("NUMBA_MATHDX_CACHE_DIR", str(REPO / ".nmdx-test-cache"))
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import nvmath_device  # noqa: F401


def compile_record(path: str) -> tuple[str, str, float, str | None]:
    """(name, argument types, seconds, error or None) of linking one record for sm_90."""
    _worker_init()
    from nvmath_device.aot import compile_kernel

    record = pickle.loads(Path(path).read_bytes())
    t0 = time.perf_counter()
    try:
        fn = pickle.loads(record["function"])
        argtypes = tuple(_resolve(t) for t in pickle.loads(record["argtypes"]))
        out = compile_kernel(fn, argtypes, sm=90)
        assert out.cubin[:4] == b"\x7fELF", "not an ELF cubin"
        error = None
    except Exception as e:  # noqa: BLE001 - reported per kernel
        error = f"{type(e).__name__}: {e}"
    return record["name"], record["shown"], time.perf_counter() - t0, error


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help=f"the folder the recorder wrote (${RECORD_ENV})")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--one-per-family", action="store_true",
                        help="link one kernel per family: same function, argument types and "
                             "descriptor kinds (FFT type/direction/execution/precision, GEMM "
                             "precision/data type/arrangement), sizes aside")
    args = parser.parse_args(argv)
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        print("run the compile step without NUMBA_ENABLE_CUDASIM", file=sys.stderr)
        return 2
    folder = Path(args.folder)
    records = sorted(str(p) for p in folder.glob("*.kernel"))
    skips = [json.loads(p.read_text()) for p in sorted(folder.glob("*.skip.json"))]
    if not records:
        print(f"no recorded kernels in {folder} (run the simulator suite with {RECORD_ENV}=...)",
              file=sys.stderr)
        return 2
    recorded = len(records)
    if args.one_per_family:
        families: dict = {}
        for path in records:
            family = pickle.loads(Path(path).read_bytes()).get("family", path)
            families.setdefault(family, path)
        records = sorted(families.values())
    t0 = time.perf_counter()
    failures = []
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: no simulator state
    with contextlib.ExitStack() as stack:
        if args.jobs > 1:
            pool = stack.enter_context(ProcessPoolExecutor(
                max_workers=args.jobs, mp_context=ctx, initializer=_worker_init))
            results = pool.map(compile_record, records)
        else:  # this process has no simulator (checked above)
            results = map(compile_record, records)
        for name, shown, secs, error in results:
            print(f"{'FAIL' if error else 'ok  '} {secs:6.1f} s  {name}({shown})", flush=True)
            if error:
                failures.append((name, shown, error))
    wall = time.perf_counter() - t0
    for skip in skips:
        print(f"not covered: {skip['name']}: {skip['reason']}  [{skip['test']}]")
    for name, shown, error in failures:
        print(f"\n--- {name}({shown}) failed to compile for sm_90:\n{error}")
    print(f"\n{recorded} distinct simulated kernels, {len(records)} compiled"
          f"{' (one per family)' if args.one_per_family else ''}: {len(records) - len(failures)} "
          f"linked for sm_90, {len(failures)} failed; {len(skips)} not covered; {wall:.1f} s "
          f"with {args.jobs} jobs")
    print(f"sm_90: {len(records) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
