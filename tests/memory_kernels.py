# SPDX-License-Identifier: Apache-2.0
"""A kernel that moves complex values only through nvmath_device.load_complex / store_complex
(global 1-D and 2-D arrays, shared memory, a local array, a real value stored into a complex
array), and one that stages rows in shared memory with copy_async, run by tests/sim (the
simulator) and tests/gpu (the GPU) against NumPy."""

from __future__ import annotations

import numpy as np
from numba import cuda

from nvmath_device import (
    copy_async,
    copy_async_commit,
    copy_async_wait,
    load_complex,
    store_complex,
)
from tests.device_arrays import to_device, to_host

THREADS = 64


def make_kernel(ctype):
    ctype = np.dtype(ctype)
    rtype = np.float32 if ctype == np.complex64 else np.float64

    @cuda.jit
    def kernel(x, h2, y, z, w, g):
        t = cuda.threadIdx.x
        row = cuda.blockIdx.x
        s = cuda.shared.array(THREADS, dtype=ctype)
        r = cuda.local.array(2, dtype=ctype)
        i = row * THREADS + t
        store_complex(s, t, load_complex(x, i))  # global -> shared
        cuda.syncthreads()
        v = load_complex(s, THREADS - 1 - t)  # another thread's value, from shared memory
        store_complex(r, 1, v)  # a local array
        store_complex(y, (row, t), load_complex(r, 1))  # 2-D index
        store_complex(g, i, load_complex(h2, (row, t)))
        store_complex(z, i, rtype(t))  # a real value: imaginary part 0
        w[i] = load_complex(x, i).imag  # the parts come back in order

    return kernel


def run(ctype, rows=3):
    """(outputs, expected): y = x reversed per row, z = thread index, w = imag(x), g = h2 (flat)."""
    rng = np.random.default_rng(5)
    n = rows * THREADS
    x = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(ctype)
    h2 = (rng.standard_normal((rows, THREADS)) + 1j * rng.standard_normal((rows, THREADS))).astype(ctype)
    rtype = np.float32 if np.dtype(ctype) == np.complex64 else np.float64
    dx, dh = to_device(x), to_device(h2)
    dy = to_device(np.full((rows, THREADS), np.nan, ctype))
    dz = to_device(np.full(n, np.nan, ctype))
    dw = to_device(np.full(n, np.nan, rtype))
    dg = to_device(np.full(n, np.nan, ctype))
    make_kernel(ctype)[rows, THREADS](dx, dh, dy, dz, dw, dg)
    want_y = x.reshape(rows, THREADS)[:, ::-1]
    want_z = np.tile(np.arange(THREADS), rows).astype(ctype)
    return (to_host(dy), to_host(dz), to_host(dw), to_host(dg)), (want_y, want_z, x.imag, h2.ravel())


def make_async_kernel(dtype):
    """Rows of x staged in shared memory by copy_async, two buffers: row r + 1 is copied while
    row r is read (by another thread: y[row, t] = 2 * x[row, THREADS - 1 - t])."""
    dtype = np.dtype(dtype)

    @cuda.jit
    def kernel(x, y, rounds):
        t = cuda.threadIdx.x
        s = cuda.shared.array((2, THREADS), dtype=dtype)
        first = cuda.blockIdx.x * rounds
        copy_async(s, (0, t), x, (first, t))
        copy_async_commit()
        for r in range(rounds):
            if r + 1 < rounds:
                copy_async(s, ((r + 1) % 2, t), x, (first + r + 1, t))
            copy_async_commit()  # an empty group in the last round
            copy_async_wait(1)  # every group but the newest has landed: row r
            cuda.syncthreads()  # ... for every thread of the block
            y[first + r, t] = s[r % 2, THREADS - 1 - t] * 2
            cuda.syncthreads()  # buffer r % 2 is read before round r + 1 refills it

    return kernel


def run_async(dtype, blocks=2, rounds=3):
    """(output, expected) of :func:`make_async_kernel`."""
    rng = np.random.default_rng(6)
    shape = (blocks * rounds, THREADS)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    x = x.astype(dtype)
    dy = to_device(np.full(shape, np.nan, dtype))
    make_async_kernel(dtype)[blocks, THREADS](to_device(x), dy, rounds)
    return to_host(dy), 2 * x[:, ::-1]
