# SPDX-License-Identifier: Apache-2.0
"""A kernel that moves complex values only through nvmath_device.load_complex / store_complex
(global 1-D and 2-D arrays, shared memory, a local array, a real value stored into a complex
array), run by tests/sim (the simulator) and tests/gpu (the GPU) against NumPy."""

from __future__ import annotations

import numpy as np
from numba import cuda

from nvmath_device import load_complex, store_complex
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
