# SPDX-License-Identifier: Apache-2.0
"""Host-side Python overhead of ``Matmul.execute()`` and ``matmul()``, on the CPU, no GPU.

This measures ONLY the Python part of a call, on the CPU; it is NOT the GPU benchmark
(``benchmarks/host_matmul.py`` is). Everything that would touch a GPU is replaced by cheap
fakes, so the figures are what nvmath_host itself costs per call, without the device, the
driver, the allocator or the synchronisation:

* the operands are fake ``torch`` tensors (a class whose module is ``torch``; shape, stride,
  dtype, ``data_ptr()``, ``get_device()``), and ``mathdx_operands._packages._PACKAGES["torch"]`` is a
  ``_Torch`` whose ``torch`` is a stand-in namespace (``empty_strided`` returns a new fake
  tensor; the current raw stream is a constant);
* the cuBLASLt descriptors are real (libcublasLt works without a driver), but the handle is
  a null pointer, the heuristic returns one zeroed algorithm, the device count is 1;
* the final ``cublasLtMatmul`` is a no-op C function of the same ctypes signature (compiled
  with the system C compiler into a temporary directory; a Python function of the same
  arity if there is none), so ctypes' argument conversion is still measured.

Usage: ``python benchmarks/host_overhead.py [--n 5000] [--repeat 40] [--profile]``. Prints
per-call microseconds for ``Matmul.execute()`` (128^3 float16, RELU_BIAS and RELU_AUX_BIAS)
and for ``matmul()`` on a plan-cache hit: min and median over repeated ``timeit`` runs of
the thread's CPU time. Compare the min: other load on the machine inflates the median. Of
each figure, the fake allocation (~0.5 us per array) and the ctypes call (~1.2-1.5 us) are
not nvmath_host's Python.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from types import SimpleNamespace

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

import mathdx_operands  # noqa: E402
from mathdx_operands import _packages  # noqa: E402
from nvmath_host import _cublaslt as lt  # noqa: E402
from nvmath_host import _function, _gpu  # noqa: E402

# ------------------------------------------------------------------------------- fake torch

_ptrs = itertools.count(1 << 32, 1 << 20)  # 1 MiB apart: 16-byte aligned, distinct


class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


class FakeDevice:
    def __init__(self, index):
        self.index = index
        self.type = "cuda"


class FakeTensor:
    """What ``mathdx_operands.wrap`` and its ``_Torch`` adapter read of a CUDA ``torch.Tensor``."""

    __module__ = "torch"  # mathdx_operands.package_of goes by the type's module
    is_cuda = True
    requires_grad = False

    def is_conj(self):  # torch's lazy conjugate and negative bits: never set here
        return False

    def is_neg(self):
        return False

    def __init__(self, shape, strides, dtype, device):
        self.shape = tuple(shape)
        self._strides = tuple(strides)
        self.dtype = dtype
        self.device = device
        self._ptr = next(_ptrs)

    def data_ptr(self):
        return self._ptr

    def get_device(self):
        return self.device.index

    def stride(self):
        return self._strides

    def new_empty_strided(self, shape, strides):
        return FakeTensor(shape, strides, self.dtype, self.device)

    def as_strided(self, shape, strides):
        t = FakeTensor(shape, strides, self.dtype, self.device)
        t._ptr = self._ptr
        return t


def _c_strides(shape):
    return mathdx_operands.c_strides(shape)


FLOAT16 = FakeDtype("float16")
DEV0 = FakeDevice(0)
FAKE_TORCH = SimpleNamespace(
    float16=FLOAT16,
    float32=FakeDtype("float32"),
    uint8=FakeDtype("uint8"),
    device=lambda kind, index: DEV0,
    empty_strided=lambda shape, strides, dtype, device: FakeTensor(shape, strides, dtype, device),
    empty=lambda n, dtype, device: FakeTensor(n if isinstance(n, tuple) else (n,), (1,), dtype, device),
    cuda=SimpleNamespace(),
)
STREAM = 0x5000  # the fake current stream


def tensor(*shape):
    return FakeTensor(shape, _c_strides(shape), FLOAT16, DEV0)


# ------------------------------------------------------------------------- no-op cuBLASLt call

_NOOP_C = (
    "int noop_matmul(void*a0,void*a1,void*a2,void*a3,void*a4,void*a5,void*a6,void*a7,"
    "void*a8,void*a9,void*a10,void*a11,void*a12,void*a13,unsigned long a14,void*a15)"
    "{return 0;}\n"
)


def _noop_matmul():
    """A C no-op with cublasLtMatmul's ctypes signature, else a Python one."""
    real = lt.lib().raw_cublasLtMatmul
    cc = os.environ.get("CC", "cc")
    d = tempfile.mkdtemp(prefix="nvmath_host_noop_")
    src, so = os.path.join(d, "noop.c"), os.path.join(d, "noop.so")
    try:
        with open(src, "w") as f:
            f.write(_NOOP_C)
        subprocess.run(
            [cc, "-O2", "-shared", "-fPIC", src, "-o", so], check=True, capture_output=True
        )
        fn = ctypes.CDLL(so).noop_matmul
        shutil.rmtree(d, ignore_errors=True)  # (the loaded library stays mapped)
        fn.argtypes, fn.restype = real.argtypes, real.restype
        return fn, "C no-op through ctypes (argument conversion included)"
    except (OSError, subprocess.CalledProcessError):
        shutil.rmtree(d, ignore_errors=True)

        def fn(*args):
            assert len(args) == 16
            return 0

        return fn, "Python no-op (no C compiler: ctypes conversion NOT included)"


def install_fakes():
    """Patch nvmath_host so that planning and executing need no GPU. Returns a note."""
    pkg = object.__new__(_packages._Torch)
    pkg.torch = FAKE_TORCH
    pkg._raw_stream = lambda device: STREAM
    pkg._ext, pkg._dtypes, pkg._devices = {}, {}, {}
    _packages._PACKAGES["torch"] = pkg
    _gpu.PRETEND = True
    null_handle = SimpleNamespace(ptr=ctypes.c_void_p(0))
    _gpu.handle = lambda device: null_handle
    _gpu._DEVICE_COUNT = 1
    _gpu.DeviceScope = lambda device: contextlib.nullcontext()
    lt.heuristic = lambda *args: [lt.HeuristicResult()]
    fn, note = _noop_matmul()
    lt.lib().raw_cublasLtMatmul = fn
    return note


# ------------------------------------------------------------------------------------- timing


def per_call_us(fn, n, repeat):
    t = timeit.Timer(fn, timer=time.thread_time)  # CPU time: less noise from other loads
    t.timeit(max(n // 20, 100))  # warm
    runs = [t.timeit(n) / n * 1e6 for _ in range(repeat)]
    return min(runs), statistics.median(runs)


def cases(m=128, n=128, k=128):
    from nvmath_host import Matmul, MatmulEpilog, matmul

    a, b, bias = tensor(m, k), tensor(k, n), tensor(n)
    out = {}
    for name, ep in (
        ("RELU_BIAS", MatmulEpilog.RELU_BIAS),
        ("RELU_AUX_BIAS", MatmulEpilog.RELU_AUX_BIAS),
    ):
        mm = Matmul(a, b)
        mm.plan(epilog=ep, epilog_inputs={"bias": bias})
        out[f"Matmul.execute() {m}x{n}x{k} fp16 {name}"] = mm.execute
    _function.clear_plan_cache()
    ep = {"epilog": MatmulEpilog.RELU_BIAS, "epilog_inputs": {"bias": bias}}
    matmul(a, b, **ep)  # plans and caches

    def fn_form():
        return matmul(a, b, **ep)

    out[f"matmul() cache hit {m}x{n}x{k} fp16 RELU_BIAS"] = fn_form
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000, help="calls per timing run")
    ap.add_argument("--repeat", type=int, default=40, help="timing runs (min/median taken)")
    ap.add_argument("--profile", action="store_true", help="cProfile each case instead")
    args = ap.parse_args(argv)
    note = install_fakes()
    print(f"CPU-only Python overhead (not the GPU benchmark); cublasLtMatmul: {note}")
    for name, fn in cases().items():
        fn()
        if args.profile:
            import cProfile
            import pstats

            pr = cProfile.Profile()
            pr.enable()
            for _ in range(args.n // 10):
                fn()
            pr.disable()
            print(f"== {name}")
            pstats.Stats(pr).sort_stats("tottime").print_stats(12)
            continue
        lo, med = per_call_us(fn, args.n, args.repeat)
        print(f"{name:48s} min {lo:6.3f} us   median {med:6.3f} us per call")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
