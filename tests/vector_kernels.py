# SPDX-License-Identifier: Apache-2.0
"""Kernels that use the vector types (``float16x2`` ... ``uint32x4``) and the
``nvmath_device.types`` objects, as plain Python functions: tests/cpu links each for sm_90,
tests/sim runs them under the simulator and tests/gpu on a GPU, both against :func:`expected`.

Global arrays are scalar (a ``(n, count)`` array per vector); the vectors live in registers,
local arrays and shared arrays, as in nvmath-python's examples.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

import nvmath_device as nd
from nvmath_device.types import complex32, complex64, complex128, half2, half4

THREADS = 32
NAMES = ("float16x2", "float16x4", "float32x2", "float32x4", "float64x2", "float64x4", "uint32x4")
SCALAR = {"float16": np.float16, "float32": np.float32, "float64": np.float64, "uint32": np.uint32}


def spec(name):
    """(constructor, type object, numpy scalar type, count) of a vector type name."""
    ty = getattr(nd, f"{name}_type")
    return getattr(nd, name), ty, SCALAR[ty.scalar.name], ty.count


def make_roundtrip(name):
    """Thread ``t`` builds a vector from row ``t`` of ``a``, stores it into a local array, builds
    the reversed vector from the elements it reads back, passes it through shared memory to
    thread ``t - 1`` and writes what it receives, element by element, into row ``t - 1`` of
    ``out``; plus the vector type called as a constructor (``float32x2_type(x, y)``)."""
    make, vtype, _, count = spec(name)

    if count == 2:

        def kernel(out, a):
            t = cuda.threadIdx.x
            regs = cuda.local.array(2, dtype=vtype)
            regs[0] = make(a[t, 0], a[t, 1])
            v = regs[0]
            regs[1] = vtype(v.y, v.x)
            smem = cuda.shared.array(THREADS, dtype=vtype)
            smem[t] = regs[1]
            cuda.syncthreads()
            w = smem[(t + 1) % THREADS]
            out[t, 0] = w.x
            out[t, 1] = w.y

    else:

        def kernel(out, a):
            t = cuda.threadIdx.x
            regs = cuda.local.array(2, dtype=vtype)
            regs[0] = make(a[t, 0], a[t, 1], a[t, 2], a[t, 3])
            v = regs[0]
            regs[1] = vtype(v.w, v.z, v.y, v.x)
            smem = cuda.shared.array(THREADS, dtype=vtype)
            smem[t] = regs[1]
            cuda.syncthreads()
            w = smem[(t + 1) % THREADS]
            out[t, 0] = w.x
            out[t, 1] = w.y
            out[t, 2] = w.z
            out[t, 3] = w.w

    kernel.__name__ = f"roundtrip_{name}"
    return kernel


def roundtrip_inputs(name, seed=0):
    """The input of :func:`make_roundtrip`'s kernel: ``(THREADS, count)`` of the scalar type."""
    _, _, scalar, count = spec(name)
    rng = np.random.default_rng(seed)
    if scalar is np.uint32:
        return rng.integers(0, 2**32, size=(THREADS, count), dtype=np.uint64).astype(np.uint32)
    return rng.standard_normal((THREADS, count)).astype(scalar)


def roundtrip_expected(a):
    """Row ``t`` of the result: row ``t + 1`` of ``a`` reversed."""
    return np.roll(a, -1, axis=0)[:, ::-1].copy()


def types_kernel(out, re, im):
    """The ``nvmath_device.types`` objects as local array dtypes: complex64 / complex128 hold
    numba complex values; complex32 and half2 hold float16x2, half4 float16x4."""
    t = cuda.threadIdx.x
    c64 = cuda.local.array(1, dtype=complex64)
    c128 = cuda.local.array(1, dtype=complex128)
    c32 = cuda.local.array(1, dtype=complex32)
    h2 = cuda.local.array(1, dtype=half2)
    h4 = cuda.local.array(1, dtype=half4)
    c64[0] = complex(re[t], im[t])
    c128[0] = complex(re[t], im[t])
    c32[0] = nd.float16x2(re[t], im[t])
    h2[0] = nd.float16x2(im[t], re[t])
    h4[0] = nd.float16x4(re[t], im[t], re[t], im[t])
    out[t, 0] = c64[0].real
    out[t, 1] = c128[0].imag
    out[t, 2] = c32[0].x
    out[t, 3] = h2[0].x
    out[t, 4] = h4[0].w


def types_inputs(seed=1):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(THREADS).astype(np.float32), rng.standard_normal(THREADS).astype(np.float32))


def types_expected(re, im):
    f16 = np.float16
    return np.stack([re, im, re.astype(f16), im.astype(f16), im.astype(f16)], axis=1).astype(np.float32)


def complex_kernel(out, re, im):
    """nvmath-python's conversions: a complex stored into a float32x2 array, a float32x2 in
    complex arithmetic (``v / 4``, ``v * v``), ``float64x2(c)`` from a complex; the same values
    on the GPU and under the simulator (whose two-float vector values do complex arithmetic)."""
    t = cuda.threadIdx.x
    regs = cuda.local.array(3, dtype=nd.float32x2_type)
    regs[0] = complex(re[t], im[t])
    regs[1] = regs[0] / 4
    regs[2] = regs[0] * regs[0]
    d = nd.float64x2(complex(re[t], im[t]))
    out[t, 0] = regs[1].x
    out[t, 1] = regs[1].y
    out[t, 2] = regs[2].x
    out[t, 3] = regs[2].y
    out[t, 4] = d.y


def complex_expected(re, im):
    c = (re + 1j * im).astype(np.complex64)
    q, s = c / np.float32(4), c * c
    return np.stack([q.real, q.imag, s.real, s.imag, im], axis=1).astype(np.float32)


def run_roundtrip(name, launch=None):
    """Run the round-trip kernel of ``name`` (simulator or GPU); (got, want)."""
    a = roundtrip_inputs(name)
    out = np.zeros_like(a)
    _launch(make_roundtrip(name), out, a, launch=launch)
    return out, roundtrip_expected(a)


def run_types(launch=None):
    re, im = types_inputs()
    out = np.zeros((THREADS, 5), np.float32)
    _launch(types_kernel, out, re, im, launch=launch)
    return out, types_expected(re, im)


def run_complex(launch=None):
    re, im = types_inputs(seed=2)
    out = np.zeros((THREADS, 5), np.float32)
    _launch(complex_kernel, out, re, im, launch=launch)
    return out, complex_expected(re, im)


def _launch(pyfunc, out, *args, launch=None):
    from tests.device_arrays import to_device, to_host

    kernel = cuda.jit(pyfunc)
    dout = to_device(out)
    dargs = [to_device(a) for a in args]
    if launch is None:
        kernel[1, THREADS](dout, *dargs)
    else:
        launch(kernel, 1, THREADS, 0, dout, *dargs)
    out[...] = to_host(dout)


def thread_fft():
    """A small Thread FFT (c2c, 8 points, float32) for :func:`make_fft_kernel`."""
    return nd.FFT(size=8, precision=np.float32, fft_type="c2c", direction="forward", execution="Thread",
                  sm=90)


def make_fft_kernel(fft):
    """Thread ``t`` transforms row ``t`` in registers declared with ``nvmath_device.types``'
    ``complex64`` (what nvmath-python programs write) rather than ``fft.value_type``."""
    size = fft.size

    def kernel(y, x):
        t = cuda.threadIdx.x
        regs = cuda.local.array(fft.storage_size, dtype=complex64)
        for i in range(size):
            regs[i] = x[t, i]
        fft.execute(regs)
        for i in range(size):
            y[t, i] = regs[i]

    return kernel


def run_fft(launch=None):
    fft = thread_fft()
    nd.prepare(fft)  # code generation (or the cache) here, not inside a launch's hang guard
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((THREADS, fft.size)) + 1j * rng.standard_normal((THREADS, fft.size)))
    x = x.astype(np.complex64)
    y = np.zeros_like(x)
    _launch(make_fft_kernel(fft), y, x, launch=launch)
    return y, np.fft.fft(x, axis=1)
