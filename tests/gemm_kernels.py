# SPDX-License-Identifier: Apache-2.0
"""The user-style GEMM kernel that the CPU (link), simulator and GPU tests share: one source, so
the cross-check and the link tests exercise exactly the kernel that runs on the GPU."""

from __future__ import annotations

import numpy as np
from numba import cuda


def user_kernel(MM):
    """A plain Python kernel function (``cuda.jit`` it, or link it with ``compile_kernel``):
    one GEMM per block, both forms on the same tiles, as a user writes it: dynamic shared
    memory sliced at the descriptor's offsets, copy helpers, ``C = alpha A B + beta C`` in shared
    memory, and ``D = alpha (A B) + beta D`` with the register accumulator."""
    a_off = MM.a_shared_memory_offset // MM.a_value_type.itemsize
    b_off = MM.b_shared_memory_offset // MM.b_value_type.itemsize
    c_off = MM.c_shared_memory_offset // MM.c_value_type.itemsize
    a_size, b_size, c_size = MM.a_size, MM.b_size, MM.c_size
    m, n = MM.m, MM.n

    def kernel(A, B, C, D, alpha, beta):
        g = cuda.blockIdx.x
        sa = cuda.shared.array(0, dtype=MM.a_value_type)[a_off:a_off + a_size]
        sb = cuda.shared.array(0, dtype=MM.b_value_type)[b_off:b_off + b_size]
        sc = cuda.shared.array(0, dtype=MM.c_value_type)[c_off:c_off + c_size]
        MM.load_a(A[g], sa)
        MM.load_b(B[g], sb)
        MM.load_c(C[g, :m, :n], sc)
        cuda.syncthreads()
        MM.execute(alpha, sa, sb, beta, sc)
        cuda.syncthreads()
        MM.store_c(sc, C[g, :m, :n])
        acc = cuda.local.array(MM.accumulator_size, dtype=MM.c_value_type)
        rows = cuda.local.array(MM.accumulator_size, dtype=np.int32)
        cols = cuda.local.array(MM.accumulator_size, dtype=np.int32)
        for i in range(MM.accumulator_size):
            acc[i] = 0
        MM.execute(sa, sb, acc)
        MM.fragment_coordinates(rows, cols)
        for i in range(MM.accumulator_size):
            r = rows[i]
            if r >= 0:
                D[g, r, cols[i]] = alpha * acc[i] + beta * D[g, r, cols[i]]

    return kernel


def several_per_block_kernel(MM):
    """A plain Python kernel function: ``blockDim.y`` GEMMs per block (``threadIdx.y`` picks
    one; cuBLASDx uses ``threadIdx.x`` only), each in its own ``MM.shared_memory_size`` bytes of
    dynamic shared memory, ``C[g] = A[g] @ B[g]`` through the register accumulator and
    ``fragment_coordinates``. Launch with ``MM.shared_memory_size * blockDim.y`` bytes."""
    per = MM.shared_memory_size // MM.a_value_type.itemsize
    b_off = MM.b_shared_memory_offset // MM.b_value_type.itemsize
    a_size, b_size, nacc = MM.a_size, MM.b_size, MM.accumulator_size
    adt, cdt = MM.a_value_type, MM.c_value_type

    def kernel(A, B, C):
        y = cuda.threadIdx.y
        g = cuda.blockIdx.x * cuda.blockDim.y + y
        base = y * per
        sa = cuda.shared.array(0, dtype=adt)[base:base + a_size]
        sb = cuda.shared.array(0, dtype=adt)[base + b_off:base + b_off + b_size]
        MM.load_a(A[g], sa)
        MM.load_b(B[g], sb)
        cuda.syncthreads()
        acc = cuda.local.array(nacc, dtype=cdt)
        rows = cuda.local.array(nacc, dtype=np.int32)
        cols = cuda.local.array(nacc, dtype=np.int32)
        for i in range(nacc):
            acc[i] = 0
        MM.execute(sa, sb, acc)
        MM.fragment_coordinates(rows, cols)
        for i in range(nacc):
            if rows[i] >= 0:
                C[g, rows[i], cols[i]] = acc[i]

    return kernel
