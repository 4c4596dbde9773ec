# SPDX-License-Identifier: Apache-2.0
"""``@cuda.jit(cache=True)`` support without a GPU: a kernel library that links our LTO-IR
pickles through numba-cuda's own serializer and its real cache files (CUDACache), and a
second process loads it and gets the linked cubin without NVRTC, NVVM or nvJitLink.

What needs a GPU (numba's dispatcher compiling and launching) is in tests/gpu/test_cache_gpu.py.
Here the kernel is typed/lowered with numba's ``compile_cuda`` and linked for sm_90 with
nvJitLink, as ``_Kernel.__init__`` + ``bind()`` do; the only GPU-dependent input of numba's
cache index key (``codegen.magic_tuple()``, which asks the driver for the device's CC) is
replaced by a constant in the child processes.

The device function is a tiny ``extern "C"`` unit (a 0.1 s NVRTC compile), attached exactly as
FFT/GEMM descriptors attach theirs (``call_extern`` -> ``DescriptorLTOIR``).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from dataclasses import dataclass

import pytest
from numba import cuda

HERE = os.path.dirname(os.path.abspath(__file__))
CC = (9, 0)


# --- what the child processes run -----------------------------------------------------------

@dataclass(frozen=True)
class TinyUnit:
    """A stand-in descriptor: hashable, picklable (by reference), with ``symbol`` and ``ltoir()``."""

    value: int

    @property
    def symbol(self) -> str:
        return f"nmdx_test_tiny_{self.value}"

    def ltoir(self) -> bytes:
        from nvmath_device._build import cache
        from nvmath_device._build.toolchain import compile_source, toolchain_id

        src = f'extern "C" __device__ void {self.symbol}(void* p) {{ *(int*)p = {self.value}; }}\n'
        key = cache.make_key("test-tiny", src, toolchain_id(), 90)
        blob = cache.get(key)
        if blob is None:
            blob = compile_source(src, 90, "ltoir", name=f"{self.symbol}.cu")
            cache.put(key, blob)
        return blob


UNIT = TinyUnit(7)


def _store_tiny_intrinsic():
    from numba.core import types
    from numba.cuda.extending import intrinsic

    from nvmath_device._numba.common import call_extern, data_pointer

    @intrinsic
    def store_tiny(typingctx, arr):
        def codegen(context, builder, sig, args):
            call_extern(context, builder, UNIT, UNIT.symbol, [data_pointer(context, builder, sig.args[0], args[0])])
            return context.get_dummy_value()

        return types.void(arr), codegen

    return store_tiny


def kernel(a):
    store_tiny(a)  # noqa: F821  (bound in _child_setup)


def _child_setup():
    """Counters on everything that could compile or link; numba's GPU-only key part fixed."""
    import numba.cuda.cudadrv.driver as drv
    import numba.cuda.cudadrv.nvvm as nvvm
    from numba.cuda.codegen import JITCUDACodegen

    counts = {"numba_links": 0, "nvvm_compiles": 0}
    orig_linker, orig_compile_ir = drv._Linker, nvvm.compile_ir

    class CountingLinker(orig_linker):
        def __init__(self, *a, **k):
            counts["numba_links"] += 1
            super().__init__(*a, **k)

    def counting_compile_ir(*a, **k):
        counts["nvvm_compiles"] += 1
        return orig_compile_ir(*a, **k)

    drv._Linker = CountingLinker
    nvvm.compile_ir = counting_compile_ir
    JITCUDACodegen.magic_tuple = lambda self: ((13, 0), CC)  # the only part that needs a device
    globals()["store_tiny"] = _store_tiny_intrinsic()
    return counts


def _compile_kernel():
    """Type, lower and link ``kernel`` for sm_90 as numba's _Kernel(...) + bind() would."""
    from numba.core import types
    from numba.cuda.compiler import compile_cuda, kernel_fixup
    from numba.cuda.dispatcher import _Kernel

    cres = compile_cuda(kernel, types.void, (types.int32[::1],), nvvm_options={"opt": 3}, cc=CC, lto=True)
    lib = cres.library
    entry = cres.fndesc.llvm_func_name
    kernel_fixup(lib.get_function(entry), False)
    lib._entry_name = entry
    k = _Kernel._rebuild(cooperative=False, name=entry, signature=cres.signature, codelibrary=lib,
                         debug=False, lineinfo=False, call_helper=cres.call_helper, extensions=[])
    k.target_context = cres.target_context
    lib.get_cubin(cc=CC)  # the link numba's bind() does before it saves the kernel
    return k


def child_save(out_dir: str) -> None:
    """Compile + link the kernel; save it through numba's CUDACache and as a bare pickle.
    Then, as a new process would, load a pickle taken *before* the link: it links again from
    our objects, whose LTO-IR comes from the disk cache (nvJitLink runs, NVRTC does not)."""
    from numba.core import types
    from numba.cuda import serialize
    from numba.cuda.dispatcher import CUDACache

    from nvmath_device._build import cache, toolchain
    from nvmath_device._numba import common

    counts = _child_setup()
    k = _compile_kernel()
    lib = k._codelibrary
    cubin = bytes(lib.get_cubin(cc=CC).code)
    with open(os.path.join(out_dir, "lib.pkl"), "wb") as f:
        f.write(serialize.dumps(lib))
    with open(os.path.join(out_dir, "cubin.bin"), "wb") as f:
        f.write(cubin)
    CUDACache(kernel).save_overload((types.int32[::1],), k)
    saved = dict(counts, nvrtc_compiles=toolchain.stats["nvrtc_compiles"],
                 linking=sorted(getattr(f, "name", str(f)) for f in lib._linking_files))

    cubins, linkerinfo = dict(lib._cubin_cache), dict(lib._linkerinfo_cache)
    lib._cubin_cache.clear()
    lib._linkerinfo_cache.clear()
    data = serialize.dumps(lib)
    lib._cubin_cache.update(cubins)
    lib._linkerinfo_cache.update(linkerinfo)
    cache._memory.clear()  # as in a new process: the LTO-IR must come from disk
    common._ltoir_objects.clear()
    n_nvrtc, n_links, n_hits = toolchain.stats["nvrtc_compiles"], counts["numba_links"], cache.stats["hits"]
    relinked = bytes(pickle.loads(data).get_cubin(cc=CC).code)
    print("RESULT " + json.dumps({"saved": saved, "relink": {
        "nvrtc_compiles": toolchain.stats["nvrtc_compiles"] - n_nvrtc,
        "numba_links": counts["numba_links"] - n_links,
        "disk_hits": cache.stats["hits"] - n_hits, "same_size": len(relinked) == len(cubin)}}))


def child_load(out_dir: str) -> None:
    """Load the kernel through numba's CUDACache, then the bare pickle; report what ran to get
    their cubins."""
    from numba.core import types
    from numba.cuda.descriptor import cuda_target
    from numba.cuda.dispatcher import CUDACache

    from nvmath_device._build import toolchain
    from nvmath_device._numba.common import DescriptorLTOIR
    from nvmath_device._numba.launch import raise_shared_memory_limit

    counts = _child_setup()
    with open(os.path.join(out_dir, "cubin.bin"), "rb") as f:
        expected = f.read()
    out = {}
    for how in ("cache", "pickle"):
        if how == "cache":
            k = CUDACache(kernel).load_overload((types.int32[::1],), cuda_target.target_context)
            assert k is not None, "numba's cache had no entry"
            lib = k._codelibrary
        else:
            with open(os.path.join(out_dir, "lib.pkl"), "rb") as f:
                lib = pickle.loads(f.read())
        cubin = bytes(lib.get_cubin(cc=CC).code)
        ours = [f for f in lib._linking_files if isinstance(f, DescriptorLTOIR)]
        out[how] = dict(counts, nvrtc_compiles=toolchain.stats["nvrtc_compiles"],
                        nvjitlink_links=toolchain.stats["nvjitlink_links"], same_cubin=cubin == expected,
                        ours=[f.name for f in ours], ltoir_loaded=any(f.loaded for f in ours),
                        setup_ok=lib._setup_functions == [raise_shared_memory_limit],
                        descriptor_ok=[f.descriptor for f in ours] == [UNIT])
    print("RESULT " + json.dumps(out))


# --- the tests ------------------------------------------------------------------------------

def _run(env, *args):
    code = (f"import sys; sys.path.insert(0, {HERE!r}); import test_cache_numba as t; "
            f"t.{args[0]}(*{list(args[1:])!r})")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, p.stdout + p.stderr
    return json.loads(line[-1][len("RESULT "):])


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ)
    e["NUMBA_MATHDX_CACHE_DIR"] = str(tmp_path / "mathdx")
    e["NUMBA_CACHE_DIR"] = str(tmp_path / "numba")
    return e


def test_kernel_cache_second_process_runs_no_compiler(tmp_path, env):
    got = _run(env, "child_save", str(tmp_path))
    saved, relink = got["saved"], got["relink"]
    assert saved["nvrtc_compiles"] == 1  # the tiny unit, once
    assert saved["numba_links"] == 1 and saved["nvvm_compiles"] >= 1
    assert saved["linking"] == [f"{UNIT.symbol}.ltoir"]
    # a pickle without a cubin links again, with the LTO-IR from our disk cache, no NVRTC
    assert relink == {"nvrtc_compiles": 0, "numba_links": 1, "disk_hits": 1, "same_size": True}
    # Our disk cache is emptied: the loaded kernel must not need the LTO-IR at all.
    for root, _, files in os.walk(tmp_path / "mathdx"):
        for f in files:
            os.unlink(os.path.join(root, f))
    got = _run(env, "child_load", str(tmp_path))
    for how in ("cache", "pickle"):
        assert got[how] == {
            "numba_links": 0, "nvvm_compiles": 0, "nvrtc_compiles": 0, "nvjitlink_links": 0,
            "same_cubin": True, "ours": [f"{UNIT.symbol}.ltoir"], "ltoir_loaded": False,
            "setup_ok": True, "descriptor_ok": True,
        }, how


def test_other_linking_files_still_refuse_to_pickle():
    """The patch widens numba's rule only for our objects: a foreign linking file still raises."""
    from numba.cuda import serialize
    from numba.cuda.codegen import CUDACodeLibrary, JITCUDACodegen
    from numba.cuda.cudadrv.linkable_code import LTOIR

    from nvmath_device._numba.common import linkable_ltoir

    lib = CUDACodeLibrary(JITCUDACodegen("t"), "t")
    lib._finalized = True
    lib._llvm_strs = []
    lib.add_linking_file(linkable_ltoir(UNIT))
    assert pickle.loads(serialize.dumps(lib))._linking_files == {linkable_ltoir(UNIT)}
    lib.add_linking_file(LTOIR(b"x", name="foreign.ltoir"))
    with pytest.raises(RuntimeError, match="Cannot pickle CUDACodeLibrary with linking files"):
        serialize.dumps(lib)


def test_descriptor_linkable_pickles_as_descriptor_and_is_lazy():
    from nvmath_device import FFT
    from nvmath_device._numba.common import DescriptorLTOIR, linkable_ltoir
    from nvmath_device._numba.launch import raise_shared_memory_limit

    fft = FFT(size=64, precision="float32", fft_type="c2c", direction="forward", sm=90)
    obj = linkable_ltoir(fft)
    assert isinstance(obj, DescriptorLTOIR) and obj is linkable_ltoir(fft)
    assert not obj.loaded and obj.setup_callback is raise_shared_memory_limit
    assert obj.name == f"{fft.symbol}.ltoir"
    assert pickle.loads(pickle.dumps(obj)) is obj  # same process: the same object (linked once)
    assert not obj.loaded  # pickling needs no NVRTC


def test_rebuilt_library_runs_module_setup_on_first_load(monkeypatch):
    # numba-cuda runs module setup callbacks only in _Kernel.bind(), which a cache hit skips:
    # the rebuilt library must run them itself when its module is first loaded.
    from numba.core import serialize
    from numba.cuda.codegen import CUDACodeLibrary, JITCUDACodegen

    from nvmath_device._numba.common import linkable_ltoir
    from nvmath_device._numba.launch import raise_shared_memory_limit

    lib = CUDACodeLibrary(JITCUDACodegen("t"), "t", entry_name="k")
    lib._finalized = True
    lib._llvm_strs = []
    lib.add_linking_file(linkable_ltoir(UNIT))
    rebuilt = pickle.loads(serialize.dumps(lib))
    assert rebuilt._setup_functions == [raise_shared_memory_limit]

    class FakeModule:
        initialized = False
        calls = 0

        def setup(self):
            assert not self.initialized, "setup ran twice"
            FakeModule.calls += 1
            self.initialized = True

    module = FakeModule()
    cufunc = type("FakeCufunc", (), {"module": module})()
    monkeypatch.setattr(CUDACodeLibrary, "get_cufunc", lambda self: cufunc)
    assert rebuilt.get_cufunc() is cufunc and FakeModule.calls == 1
    assert rebuilt.get_cufunc() is cufunc and FakeModule.calls == 1  # once per module
    assert lib.get_cufunc() is cufunc and FakeModule.calls == 1  # a compiled library binds itself


def _fft_kernel(x):
    td = cuda.local.array(_FFT64.storage_size, dtype=_FFT64.value_type)
    smem = cuda.shared.array(0, dtype=_FFT64.value_type)
    for i in range(_FFT64.storage_size):
        td[i] = x[i]
    _FFT64.execute(td, smem)
    for i in range(_FFT64.storage_size):
        x[i] = td[i]


_FFT64 = None


def test_fft_kernel_library_pickles_with_its_twiddle_tables(monkeypatch):
    # A real FFT kernel links its unit and the shared twiddle-table module; both must come back
    # from numba's cache (as lazy linkable objects), or a cache=True kernel could not relink.
    import numpy as np
    from numba import types
    from numba.core import serialize

    from nvmath_device import FFT
    from nvmath_device._build.fft_codegen import TwiddleTables
    from nvmath_device._numba._compat import compile_kernel_library

    fft = FFT(size=64, precision=np.float32, fft_type="c2c", direction="forward", sm=90)
    monkeypatch.setitem(globals(), "_FFT64", fft)
    lib, _ = compile_kernel_library(_fft_kernel, (types.complex64[::1],), CC)
    cubin = bytes(lib.get_cubin(cc=CC).code)
    back = pickle.loads(serialize.dumps(lib))
    names = sorted(f.name for f in back._linking_files)
    assert names == sorted([f"{fft.symbol}.ltoir", f"{TwiddleTables(90).symbol}.ltoir"])
    assert bytes(back.get_cubin(cc=CC).code) == cubin  # the linked cubin travels, no relink
