# SPDX-License-Identifier: Apache-2.0
"""Many small GEMMs: numba-mathdx (cuBLASDx in a Numba kernel) vs cuBLAS batched (cupy.matmul)
vs nvmath-python's device Matmul (where importable).

C[i] = A[i] @ B[i] for i < batch, stacked row-major arrays. Our kernels:

- ``smem``: several GEMMs per block (``threadIdx.y`` picks one), A and B copied global->shared
  as flat 16-byte vectors (the shared tiles use the global row-major layout), ``MM.execute(1, a,
  b, 0, c)`` in shared memory, C stored back as flat 16-byte vectors;
- ``rmem``: the same loads, the register-accumulator form, C stored from registers;
- ``rpad``: ``rmem`` on cuBLASDx's padded tiles (its suggested leading dimensions);
- ``rpadc``: ``rpad`` with C staged through shared memory and stored as 16-byte vectors;
- ``lib``: the library's vector kernel (what ``kernels.batched_gemm`` runs when it applies, at
  shapes without a ``kernels.gemm._SLICE_PICKS`` entry; at 64^3 float64 it runs ``kc64x1r``
  at 128 threads): ``ppadv`` with the alpha/beta/C epilogue; ``libb2``: the same with launch
  bounds of 2 blocks per SM;
- ``rpadv``: ``rpadc`` with every global access one 16-byte ``load_complex``/``store_complex``
  (numba splits a complex128 element into two 8-byte accesses);
- ``ppad``: ``rpadc`` on a persistent grid, the next GEMM's A and B loaded into registers while
  the current one runs; ``ppadv``: the same with ``rpadv``'s accesses;
- ``pasync2`` / ``pasync3``: a persistent grid, one GEMM per block, the next 1 / 2 GEMMs' A and
  B copied global->shared with ``cp.async`` into a ring of 2 / 3 padded stages (no registers
  held for them: ``ppadv`` spills at 64^3 fp64), C through the stage it consumed;
  ``pasync1``: one stage, nothing in flight across GEMMs (its loads wait at once), so that
  several blocks fit on an SM and overlap one another's phases instead; ``pasync1b3``: ``pasync1``
  with launch bounds of 3 blocks per SM;
- ``kc<kc>x<depth>[b<blocks>][p]``: the library's K-slice kernel (``kernels.gemm._slice_kernel``):
  A and B streamed in K slices of ``kc`` through a ring of ``depth`` cp.async stages that runs
  across GEMM boundaries; launch bounds of ``blocks`` blocks per SM; the result through a C tile
  in shared memory as 16-byte vectors (its ``"stage"`` epilogue), with ``r`` through the ring's
  stage (``"ring"``), or with ``p`` straight from the registers as pairs of row neighbours
  (``"pairs"``).

Memory floor: bytes that C = A @ B must move (A and B read, C written) at 4.3e12 B/s; the
``floor4`` column also counts reading C (the ``beta != 0`` form), as the task defines it; the
``card floor`` column puts the floor's bytes at this card's copy rate, measured at the start of
the run (``benchmarks/ceilings.py``: 4.3e12 B/s is the H200's).

Run: ``python benchmarks/batched_gemm.py --out DIR`` (writes DIR/batched_gemm.json and .md).
``--shared-ab`` gives every GEMM the first GEMM's A and B (a batch stride of 0: they stay in L2),
so a kernel's time is its arithmetic, shared-memory work and C stores without A/B DRAM traffic:
what the memory pipeline has to hide (a diagnostic; the floor columns still count A and B).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time

import numpy as np
from numba import cuda  # a module global: the CUDA simulator swaps it inside simulated kernels

PEAK_BW = 4.3e12
CASES = [((16, 16, 16), np.float32), ((32, 32, 32), np.float32), ((64, 64, 64), np.float64)]


def _single_ms(fn, reps=15):
    """Median over ``reps`` of one launch timed alone (CUDA events; the GPU idle before each):
    against :func:`_median_ms`'s back-to-back launches it shows what a launch's start and end cost."""
    from numba import cuda

    fn()
    times = []
    for _ in range(reps):
        cuda.synchronize()
        e0, e1 = cuda.event(), cuda.event()
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        times.append(cuda.event_elapsed_time(e0, e1))
    return float(np.median(times))


def _median_ms(fn, reps=30, inner=10):
    """Median over ``reps`` of the mean time of ``inner`` back-to-back launches (CUDA events)."""
    from numba import cuda

    for _ in range(3):
        fn()
    cuda.synchronize()
    times = []
    for _ in range(reps):
        e0, e1 = cuda.event(), cuda.event()
        e0.record()
        for _ in range(inner):
            fn()
        e1.record()
        e1.synchronize()
        times.append(cuda.event_elapsed_time(e0, e1) / inner)
    return float(np.median(times))


def make_smem_kernel(MM, G):
    """G GEMMs per block, flat 16-byte copies, shared-memory execute."""
    from numba import cuda

    m, n, k = MM.size
    it = MM.a_value_type.itemsize
    v = 16 // it  # values per 16-byte vector
    a_vec, b_vec, c_vec = m * k // v, k * n // v, m * n // v
    per = MM.shared_memory_size  # bytes per GEMM (multiple of 16 below)
    per = (per + 15) // 16 * 16
    per_v = per // 16
    b_off_v = MM.b_shared_memory_offset // 16
    c_off_v = MM.c_shared_memory_offset // 16
    nt = MM.max_threads_per_block
    dt = MM.a_value_type

    @cuda.jit(fastmath=True)
    def kernel(A, B, C, batch):
        # A, B, C: (batch, elements) viewed as complex128 (16-byte vectors)
        tx = cuda.threadIdx.x
        y = cuda.threadIdx.y
        g = cuda.blockIdx.x * G + y
        s16 = cuda.shared.array(0, dtype=np.complex128)
        sv = cuda.shared.array(0, dtype=dt)
        base = y * per_v
        if g < batch:
            for i in range(tx, a_vec, nt):
                s16[base + i] = A[g, i]
            for i in range(tx, b_vec, nt):
                s16[base + b_off_v + i] = B[g, i]
        cuda.syncthreads()
        b0 = base * v
        sa = sv[b0:b0 + MM.a_size]
        sb = sv[b0 + b_off_v * v:b0 + b_off_v * v + MM.b_size]
        sc = sv[b0 + c_off_v * v:b0 + c_off_v * v + MM.c_size]
        MM.execute(1.0, sa, sb, 0.0, sc)
        cuda.syncthreads()
        if g < batch:
            for i in range(tx, c_vec, nt):
                C[g, i] = s16[base + c_off_v + i]

    return kernel, per * G


def make_rpad_kernel(MM, G, staged=False, vector=False):
    """G GEMMs per block, flat 16-byte loads into the descriptor's tiles, register accumulator,
    C stored from registers: ``rmem`` on an unpadded descriptor, ``rpad`` on one with padded
    leading dimensions (cuBLASDx's suggested ones, e.g. 36 for 32x32 fp32 tiles: rows of a
    row-major tile no longer fall on the same shared-memory banks), where each 16-byte vector
    of a global row goes to its row's place in the padded tile.
    ``staged`` (the ``rpadc`` variant): C goes through shared memory (A's slot, at the padded
    ldc) and is stored as 16-byte vectors; C is then (batch, m*n*itemsize/16) complex128.
    ``vector`` (the ``rpadv`` variant, with ``staged``): global loads and stores through
    ``nvmath_device.load_complex``/``store_complex``, one 16-byte access per vector where numba's
    indexing of a complex128 array makes two 8-byte ones (``LDG.E.64`` pairs in the sm_90 SASS)."""
    from numba import cuda

    from nvmath_device import load_complex, store_complex

    m, n, k = MM.size
    it = MM.a_value_type.itemsize
    v = 16 // it
    lda, ldb, ldc = MM.leading_dimension
    if (k % v or n % v or lda % v or ldb % v or MM.b_shared_memory_offset % 16
            or tuple(MM.arrangement) != ("row_major",) * 3 or (staged and (ldc % v or ldc > lda or n > k))):
        return None
    ka, kb, la, lb, lc = k // v, n // v, lda // v, ldb // v, ldc // v  # vectors per row: global, shared
    a_vec, b_vec, c_vec = m * ka, k * kb, m * kb
    per_v = (MM.shared_memory_size_ab + 15) // 16
    b_off_v = MM.b_shared_memory_offset // 16
    nt = MM.max_threads_per_block
    dt = MM.a_value_type
    acc_n = MM.accumulator_size

    @cuda.jit(fastmath=True)
    def kernel(A, B, C, batch):
        tx = cuda.threadIdx.x
        y = cuda.threadIdx.y
        g = cuda.blockIdx.x * G + y
        s16 = cuda.shared.array(0, dtype=np.complex128)
        sv = cuda.shared.array(0, dtype=dt)
        base = y * per_v
        if g < batch:
            for i in range(tx, a_vec, nt):
                r = i // ka
                s16[base + r * la + i - r * ka] = load_complex(A, (g, i)) if vector else A[g, i]
            for i in range(tx, b_vec, nt):
                r = i // kb
                s16[base + b_off_v + r * lb + i - r * kb] = load_complex(B, (g, i)) if vector else B[g, i]
        cuda.syncthreads()
        b0 = base * v
        sa = sv[b0:b0 + MM.a_size]
        sb = sv[b0 + b_off_v * v:b0 + b_off_v * v + MM.b_size]
        acc = cuda.local.array(acc_n, dtype=dt)
        rows = cuda.local.array(acc_n, dtype=np.int32)
        cols = cuda.local.array(acc_n, dtype=np.int32)
        for i in range(acc_n):
            acc[i] = 0
        MM.execute(sa, sb, acc)
        MM.fragment_coordinates(rows, cols)
        if staged:
            cuda.syncthreads()  # every thread is done reading A: its slot takes C
            for i in range(acc_n):
                r = rows[i]
                if r >= 0:
                    sv[b0 + r * ldc + cols[i]] = acc[i]
            cuda.syncthreads()
            if g < batch:
                for i in range(tx, c_vec, nt):
                    r = i // kb
                    if vector:
                        store_complex(C, (g, i), s16[base + r * lc + i - r * kb])
                    else:
                        C[g, i] = s16[base + r * lc + i - r * kb]
        elif g < batch:
            for i in range(acc_n):
                r = rows[i]
                if r >= 0:
                    C[g, r * n + cols[i]] = acc[i]

    return kernel, per_v * 16 * G


def make_ppad_kernel(MM, G, vector=False):
    """``rpadc`` on a persistent grid, software-pipelined: each slot walks the batch (stride
    ``gridDim.x * G``) and loads the next GEMM's A and B into registers (16-byte vectors) while
    the current GEMM runs, so loads stay in flight with fewer resident warps (what a 32-thread
    GEMM, with half the shared-memory reads of a 64-thread one, needs). Launch with as many
    blocks as fit at once. None when A or B does not split evenly into vectors over the threads
    or the tiles do not fit ``rpadc``. ``vector`` (``ppadv``): global accesses as in ``rpadv``."""
    from numba import cuda

    from nvmath_device import load_complex, store_complex

    m, n, k = MM.size
    it = MM.a_value_type.itemsize
    v = 16 // it
    lda, ldb, ldc = MM.leading_dimension
    nt = MM.max_threads_per_block
    if (k % v or n % v or lda % v or ldb % v or ldc % v or ldc > lda or n > k or MM.b_shared_memory_offset % 16
            or tuple(MM.arrangement) != ("row_major",) * 3 or (m * k // v) % nt or (k * n // v) % nt):
        return None
    ka, kb, la, lb, lc = k // v, n // v, lda // v, ldb // v, ldc // v
    na, nb, c_vec = m * ka // nt, k * kb // nt, m * kb
    per_v = (MM.shared_memory_size_ab + 15) // 16
    b_off_v = MM.b_shared_memory_offset // 16
    dt = MM.a_value_type
    acc_n = MM.accumulator_size
    zero16 = np.complex128(0)

    @cuda.jit(fastmath=True)
    def kernel(A, B, C, batch):
        tx = cuda.threadIdx.x
        y = cuda.threadIdx.y
        s16 = cuda.shared.array(0, dtype=np.complex128)
        sv = cuda.shared.array(0, dtype=dt)
        base = y * per_v
        b0 = base * v
        sa = sv[b0:b0 + MM.a_size]
        sb = sv[b0 + b_off_v * v:b0 + b_off_v * v + MM.b_size]
        ra = cuda.local.array(na, dtype=np.complex128)
        rb = cuda.local.array(nb, dtype=np.complex128)
        acc = cuda.local.array(acc_n, dtype=dt)
        rows = cuda.local.array(acc_n, dtype=np.int32)
        cols = cuda.local.array(acc_n, dtype=np.int32)
        MM.fragment_coordinates(rows, cols)
        stride = cuda.gridDim.x * G
        g = cuda.blockIdx.x * G + y
        for j in range(na):
            ra[j] = (load_complex(A, (g, tx + j * nt)) if vector else A[g, tx + j * nt]) if g < batch else zero16
        for j in range(nb):
            rb[j] = (load_complex(B, (g, tx + j * nt)) if vector else B[g, tx + j * nt]) if g < batch else zero16
        for _ in range((batch + stride - 1) // stride):  # the same count in every block
            cuda.syncthreads()  # the slot's previous result has been stored
            for j in range(na):
                i = tx + j * nt
                r = i // ka
                s16[base + r * la + i - r * ka] = ra[j]
            for j in range(nb):
                i = tx + j * nt
                r = i // kb
                s16[base + b_off_v + r * lb + i - r * kb] = rb[j]
            cuda.syncthreads()
            gn = g + stride
            if gn < batch:  # the next GEMM's loads, in flight during this one
                for j in range(na):
                    ra[j] = load_complex(A, (gn, tx + j * nt)) if vector else A[gn, tx + j * nt]
                for j in range(nb):
                    rb[j] = load_complex(B, (gn, tx + j * nt)) if vector else B[gn, tx + j * nt]
            for i in range(acc_n):
                acc[i] = 0
            MM.execute(sa, sb, acc)
            cuda.syncthreads()  # A and B have been read: the slot takes C
            for i in range(acc_n):
                r = rows[i]
                if r >= 0:
                    sv[b0 + r * ldc + cols[i]] = acc[i]
            cuda.syncthreads()
            if g < batch:
                for i in range(tx, c_vec, nt):
                    r = i // kb
                    if vector:
                        store_complex(C, (g, i), s16[base + r * lc + i - r * kb])
                    else:
                        C[g, i] = s16[base + r * lc + i - r * kb]
            g = gn

    return kernel, per_v * 16 * G


def make_pasync_kernel(MM, G, depth=2, min_blocks=None):
    """A persistent grid of one GEMM per block whose next ``depth - 1`` GEMMs' A and B are in
    flight during the current one, copied global -> shared with ``cp.async``
    (``nvmath_device.copy_async``: 16-byte vectors straight into a ring of ``depth`` stages of
    cuBLASDx's padded tiles, no registers held: ``ppadv`` holds them in registers and spills at
    64^3 fp64). Per GEMM: wait for its stage, execute into the register accumulator, write the
    result into the stage it consumed, store it to C as 16-byte vectors, and the stage takes the
    loads of the GEMM ``depth - 1`` ahead (``depth`` 1: its own, waited for at once). Launch with
    as many blocks as fit at once (``depth`` stages of shared memory each). None when ``G`` is not
    1, ``depth`` is not 1 to 8 or the tiles do not split into 16-byte vectors. ``min_blocks``: launch
    bounds (threads, ``min_blocks``) (``pasync1`` at 64^3 fp64, 256 threads: 76 registers at 3,
    118 without bounds)."""
    from nvmath_device import copy_async, copy_async_commit, copy_async_wait, store_complex

    m, n, k = MM.size
    it = MM.a_value_type.itemsize
    v = 16 // it
    lda, ldb, ldc = MM.leading_dimension
    nt = MM.max_threads_per_block
    if (G != 1 or depth < 1 or depth > 8 or k % v or n % v or lda % v or ldb % v or ldc % v
            or MM.b_shared_memory_offset % 16 or tuple(MM.arrangement) != ("row_major",) * 3
            or MM.block_dim[1] * MM.block_dim[2] != 1):
        return None
    ka, kb, la, lb, lc = k // v, n // v, lda // v, ldb // v, ldc // v
    a_vec, b_vec, c_vec = m * ka, k * kb, m * kb
    stage_v = max((MM.shared_memory_size_ab + 15) // 16, (m - 1) * lc + kb)  # A and B; or C
    b_off_v = MM.b_shared_memory_offset // 16
    dt = MM.a_value_type
    acc_n = MM.accumulator_size
    a_size, b_size = MM.a_size, MM.b_size
    ahead = depth - 1  # GEMMs in flight behind the current one: cp.async groups left pending

    @cuda.jit(device=True, forceinline=True)
    def load_stage(s16, base, A, B, g, tx):
        """Start this thread's share of GEMM ``g``'s A and B copies into the stage at ``base``."""
        for i in range(tx, a_vec, nt):
            r = i // ka
            copy_async(s16, base + r * la + i - r * ka, A, (g, i))
        for i in range(tx, b_vec, nt):
            r = i // kb
            copy_async(s16, base + b_off_v + r * lb + i - r * kb, B, (g, i))

    @cuda.jit(fastmath=True, **({"launch_bounds": (nt, min_blocks)} if min_blocks else {}))
    def kernel(A, B, C, batch):
        tx = cuda.threadIdx.x
        s16 = cuda.shared.array(0, dtype=np.complex128)
        sv = cuda.shared.array(0, dtype=dt)
        acc = cuda.local.array(acc_n, dtype=dt)
        rows = cuda.local.array(acc_n, dtype=np.int32)
        cols = cuda.local.array(acc_n, dtype=np.int32)
        MM.fragment_coordinates(rows, cols)
        stride = cuda.gridDim.x
        g0 = cuda.blockIdx.x
        for p in range(ahead):  # the first GEMMs' loads; one group each, empty past the batch
            g = g0 + p * stride
            if g < batch:
                load_stage(s16, p * stage_v, A, B, g, tx)
            copy_async_commit()
        g = g0
        j = 0  # this GEMM's stage
        while g < batch:
            gn = g + ahead * stride
            if gn < batch:  # into the stage the previous GEMM left
                load_stage(s16, ((j + ahead) % depth) * stage_v, A, B, gn, tx)
            copy_async_commit()
            copy_async_wait(ahead)  # this GEMM's group has landed (the newer ones may not have)
            cuda.syncthreads()
            base = j * stage_v
            b0 = base * v
            for i in range(acc_n):
                acc[i] = 0
            MM.execute(sv[b0:b0 + a_size], sv[b0 + b_off_v * v:b0 + b_off_v * v + b_size], acc)
            cuda.syncthreads()  # A and B have been read: the stage takes C
            for i in range(acc_n):
                r = rows[i]
                if r >= 0:
                    sv[b0 + r * ldc + cols[i]] = acc[i]
            cuda.syncthreads()
            for i in range(tx, c_vec, nt):
                r = i // kb
                store_complex(C, (g, i), s16[base + r * lc + i - r * kb])
            cuda.syncthreads()  # C has left the stage: the next round's loads may land there
            g += stride
            j = (j + 1) % depth
        copy_async_wait(0)  # nothing in flight when the block ends

    return kernel, stage_v * 16 * depth


def make_kchunk_kernel(MM, G, depth=4, kc=16, min_blocks=None, epilogue="stage"):
    """The library's K-slice kernel (``kernels.gemm._slice_kernel``, ``_batched_gemm(...,
    slices=(kc, depth, min_blocks))``: A and B streamed in K slices of ``kc`` through a ring of
    ``depth`` cp.async stages that runs across GEMM boundaries) on the library's ``(m, n, kc)``
    slice descriptor of ``MM``'s block. Called as ``kernel(A16, B16, C, D, alpha, beta, batch)``
    with C and D as ``epilogue`` takes them: complex128 vectors (``"stage"``, through a shared C
    tile) or pairs of values (``"pairs"``, from the registers, :func:`kernels.gemm._pair_dtype`).
    None when ``G`` is not 1 or it does not apply."""
    from kernels.gemm import _slice_descriptor, _slice_kernel

    m, n, k = MM.size
    if G != 1 or k % kc or MM.block_dim[1] * MM.block_dim[2] != 1:
        return None
    SM = _slice_descriptor(m, n, kc, np.dtype(MM.c_value_type), MM.block_dim[0], sm=MM.sm)
    return _slice_kernel(SM, k, depth, False, min_blocks, epilogue)


def make_lib_kernel(MM, G, min_blocks=None, offsets=False):
    """The library's kernel (``kernels.gemm._vector_kernel``, what ``kernels.batched_gemm``
    runs): ``ppadv`` with alpha/beta/C. Called as ``kernel(A16, B16, C16, D16, alpha, beta,
    batch)`` with ``D = alpha * A @ B`` here (no C operand). None when the tiles do not fit.
    ``offsets``: the result's places as one register and constants (``libo``)."""
    from kernels.gemm import _vector_kernel

    return _vector_kernel(MM, G, False, min_blocks, offsets)


def make_nvmath_kernel(size, dtype, sm):
    """A straightforward nvmath-python kernel: one GEMM per block, element copies."""
    from numba import cuda
    from nvmath.device import Matmul as NMatmul

    m, n, k = size
    MM = NMatmul(size=size, precision=dtype, data_type="real", sm=sm,
                 arrangement=("row_major", "row_major", "row_major"), execution="Block")
    bdim = MM.block_dim
    nt = bdim[0] * bdim[1] * bdim[2]
    a_size, b_size, c_size = m * k, k * n, m * n

    @cuda.jit
    def kernel(A, B, C, batch):
        g = cuda.blockIdx.x
        t = cuda.threadIdx.x
        sa = cuda.shared.array(a_size, dtype=dtype)
        sb = cuda.shared.array(b_size, dtype=dtype)
        sc = cuda.shared.array(c_size, dtype=dtype)
        for i in range(t, a_size, nt):
            sa[i] = A[g, i]
        for i in range(t, b_size, nt):
            sb[i] = B[g, i]
        cuda.syncthreads()
        MM.execute(1.0, sa, sb, 0.0, sc)
        cuda.syncthreads()
        for i in range(t, c_size, nt):
            C[g, i] = sc[i]

    return kernel, (bdim[0], bdim[1], bdim[2])


# our kernels by variant name (rmem and rpad are one kernel: on an unpadded descriptor its row
# mapping is the identity); every one but rmem and rpad stores C as 16-byte vectors
MAKERS = {"smem": make_smem_kernel, "rmem": make_rpad_kernel, "rpad": make_rpad_kernel,
          "rpadc": functools.partial(make_rpad_kernel, staged=True),
          "rpadv": functools.partial(make_rpad_kernel, staged=True, vector=True),
          "lib": make_lib_kernel, "libb2": functools.partial(make_lib_kernel, min_blocks=2),
          "libo": functools.partial(make_lib_kernel, offsets=True),
          "libob2": functools.partial(make_lib_kernel, min_blocks=2, offsets=True),
          "ppad": make_ppad_kernel, "ppadv": functools.partial(make_ppad_kernel, vector=True),
          "pasync1": functools.partial(make_pasync_kernel, depth=1),
          "pasync2": functools.partial(make_pasync_kernel, depth=2),
          "pasync3": functools.partial(make_pasync_kernel, depth=3),
          "pasync1b3": functools.partial(make_pasync_kernel, depth=1, min_blocks=3)}
# K-slice rings: kc<slice width>x<stages>[b<min blocks per SM in the launch bounds>]
MAKERS.update({f"kc{kc}x{depth}" + (f"b{mb}" if mb else ""):
               functools.partial(make_kchunk_kernel, depth=depth, kc=kc, min_blocks=mb)
               for kc, depth in ((8, 8), (16, 2), (16, 3), (16, 4), (16, 6), (32, 2), (32, 3), (64, 1))
               for mb in (None, 2, 3, 4)})
MAKERS.update({name + suffix: functools.partial(MAKERS[name], epilogue=epilogue)
               for name in list(MAKERS) if name.startswith("kc")
               for suffix, epilogue in (("p", "pairs"), ("r", "ring"))})


def _vectors(X, batch, cp):
    """(batch, elements) view of ``X`` as 16-byte vectors; a batch stride of 0 kept."""
    if X.strides[0] == 0:
        row = X[0].reshape(1, -1).view(cp.complex128)
        return cp.lib.stride_tricks.as_strided(row, (batch, row.shape[1]), (0, 16))
    return X.reshape(batch, -1).view(cp.complex128)


def _bench_case(size, dtype, batch, check, descs, kernel_choices, dev, peers=True, shared_ab=False):
    """Time every implementation on one (size, dtype); returns the table rows. ``shared_ab``: every
    GEMM multiplies the first GEMM's A and B (batch stride 0)."""
    import cupy as cp
    from numba import cuda

    from kernels.gemm import _pair_dtype

    sm = descs[next(iter(descs))].sm
    rows = []
    m, n, k = size
    dt = np.dtype(dtype)
    rng = np.random.default_rng(0)
    A = cp.asarray(rng.uniform(-1, 1, (batch, m, k)).astype(dt))
    B = cp.asarray(rng.uniform(-1, 1, (batch, k, n)).astype(dt))
    if shared_ab:  # every GEMM reads GEMM 0's operands
        A, B = (cp.lib.stride_tricks.as_strided(X[:1], X.shape, (0,) + X.strides[1:]) for X in (A, B))
    ref = None
    if check:
        ref = cp.matmul(A[:64].astype(cp.float64), B[:64].astype(cp.float64)).get()
    C = cp.empty((batch, m, n), dt)
    # numba views: (batch, elements) of 16-byte vectors; and (batch, elements) of values
    nA16, nB16 = (cuda.as_cuda_array(_vectors(X, batch, cp), sync=False) for X in (A, B))
    nC16 = cuda.as_cuda_array(C.reshape(batch, -1).view(cp.complex128), sync=False)
    nC = cuda.as_cuda_array(C.reshape(batch, -1), sync=False)
    pair = _pair_dtype(dt)
    nC2 = cuda.as_cuda_array(C.reshape(batch, -1).view(pair), sync=False) if pair is not None and n % 2 == 0 else None
    nbytes3 = batch * (m * k + k * n + m * n) * dt.itemsize
    nbytes4 = nbytes3 + batch * m * n * dt.itemsize
    floor3 = nbytes3 / PEAK_BW * 1e3
    floor4 = nbytes4 / PEAK_BW * 1e3

    def add(name, ms, ok, note="", ms_single=None):
        rows.append(dict(case=f"{m}x{n}x{k} {dt.name}", impl=name, ms=ms, floor_ms=floor3, floor4_ms=floor4,
                         frac_floor=floor3 / ms if ms else None, frac_floor4=floor4 / ms if ms else None,
                         correct=ok, note=note, ms_single=ms_single))
        print(f"{m}x{n}x{k} {dt.name:8s} {name:34s} {ms:8.4f} ms  floor {floor3:.4f} ms "
              f"({floor3 / ms * 100:5.1f}%)  correct={ok} {note}"
              + (f" single launch {ms_single:.4f} ms" if ms_single else ""), flush=True)

    def verify(Cout):
        if ref is None:
            return None
        got = Cout[:64].get().astype(np.float64)
        tol = 1e-4 if dt.itemsize == 4 else 1e-10
        return bool(np.abs(got - ref).max() <= tol * max(1.0, np.abs(ref).max()))

    # cuBLAS batched through cupy
    cp.matmul(A, B, out=C)
    t_cublas = _median_ms(lambda: cp.matmul(A, B, out=C))
    add("cupy.matmul (cuBLAS batched)", t_cublas, verify(C), ms_single=_single_ms(lambda: cp.matmul(A, B, out=C)))

    # ours: every descriptor x variant x GEMMs per block
    best = None
    for (sz, pname, bd, _al, _ld), MM in descs.items():
        if sz != size or pname != dt.name:
            continue
        for variant, G in kernel_choices[(bd, _ld)]:
            maker = MAKERS[variant]
            try:
                made = maker(MM, G)
                if made is None:
                    continue
                kernel, smem = made
                if smem > dev.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
                    continue
                bx, by, bz = MM.block_dim
                if bx * by * bz * G > 1024 or by * bz != 1:
                    continue
                if variant.startswith("lib"):  # the library kernel: D = alpha * A @ B (+ beta * C, unused)
                    args = (nA16, nB16, nC16, nC16, dt.type(1), dt.type(0), batch)
                elif variant.startswith("kc"):  # the library's K-slice kernel, C and D as vectors or pairs
                    nCk = nC2 if variant.endswith("p") else nC16
                    args = (nA16, nB16, nCk, nCk, dt.type(1), dt.type(0), batch)
                else:
                    args = (nA16, nB16, nC if variant in ("rmem", "rpad") else nC16, batch)
                from numba import typeof

                kern = kernel.compile(tuple(typeof(a) for a in args))
                attrs = kern._codelibrary.get_cufunc().attrs
                grid = (batch + G - 1) // G
                if variant.startswith(("ppad", "pasync", "kc", "lib")):  # persistent: the blocks that fit at once
                    grid = min(grid, kern.max_cooperative_grid_blocks((bx, G), smem))
                cfg = kernel[grid, (bx, G), 0, smem]
                C.fill(cp.nan)
                cfg(*args)
                cuda.synchronize()
                ok = verify(C)
                ms = _median_ms(lambda cfg=cfg, args=args: cfg(*args))
                ms1 = _single_ms(lambda cfg=cfg, args=args: cfg(*args))
            except Exception as e:  # report, keep going
                print(f"# ours {variant} {MM.block_dim} G={G} failed: {type(e).__name__}: {e}"[:400])
                continue
            name = f"ours {variant} bd={MM.block_dim[0]} G={G}"
            note = f"regs={attrs.regs} local={attrs.local} grid={grid}"
            rows.append(dict(case=f"{m}x{n}x{k} {dt.name}", impl=name, ms=ms, floor_ms=floor3,
                             floor4_ms=floor4, frac_floor=floor3 / ms, frac_floor4=floor4 / ms,
                             correct=ok, note="candidate", kernel=note, ms_single=ms1))
            print(f"#   {name:30s} {ms:8.4f} ms correct={ok} {note} single launch {ms1:.4f} ms", flush=True)
            if ok and (best is None or ms < best[1]):
                best = (name, ms, ok, note, ms1)
    if best:
        add("numba-mathdx best: " + best[0].removeprefix("ours "), best[1], best[2],
            f"speedup vs cuBLAS {t_cublas / best[1]:.2f}x; {best[3]}", ms_single=best[4])

    # nvmath-python device Matmul
    try:
        if not peers:
            raise RuntimeError("skipped (--skip-peers)")
        kernel, bdim = make_nvmath_kernel(size, dt.type, sm)
        nA, nB = (cuda.as_cuda_array(cp.lib.stride_tricks.as_strided(X, (batch, X[0].size), (X.strides[0], dt.itemsize)),
                                     sync=False) for X in (A, B))
        cfg = kernel[batch, bdim, 0, 0]
        C.fill(cp.nan)
        cfg(nA, nB, nC, batch)
        cuda.synchronize()
        ok = verify(C)
        add("nvmath-python device Matmul", _median_ms(lambda: cfg(nA, nB, nC, batch)), ok,
            "one GEMM per block")
    except Exception as e:
        msg = f"{type(e).__name__}: {e}".splitlines()[0][:200]
        print(f"# nvmath-python unavailable: {msg}")
        rows.append(dict(case=f"{m}x{n}x{k} {dt.name}", impl="nvmath-python device Matmul", ms=None,
                         floor_ms=floor3, floor4_ms=floor4, frac_floor=None, frac_floor4=None,
                         correct=None, note=f"not run: {msg}"))

    return rows


def _slice_descriptors(descs, kernel_choices):
    """The ``(m, n, kc)`` descriptors that the ``kc`` variants among ``kernel_choices`` build on
    ``descs`` (where the K-slice kernel applies), so that their LTO-IR is compiled up front."""
    from kernels.gemm import _slice_descriptor

    out = []
    for (_sz, _p, bd, _al, ld), MM in descs.items():
        m, n, k = MM.size
        for variant, _G in kernel_choices[(bd, ld)]:
            kc = getattr(MAKERS[variant], "keywords", {}).get("kc") if variant.startswith("kc") else None
            if kc and k % kc == 0 and MM.block_dim[1] * MM.block_dim[2] == 1:
                out.append(_slice_descriptor(m, n, kc, np.dtype(MM.c_value_type), MM.block_dim[0], sm=MM.sm))
    return list(dict.fromkeys(out))


def run(out_dir, batch=65536, check=True, peers=True, sweep=False, sizes=None, variants=None, threads=None,
        shared_ab=False):
    import cupy as cp
    from numba import cuda

    from nvmath_device import Matmul
    from nvmath_device._build import gemm_codegen
    from nvmath_device.common_cuda import get_current_device_cc

    cc = get_current_device_cc()
    sm = cc[0] * 10 + cc[1]
    dev = cuda.get_current_device()
    gpu = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    # (block_dim, alignment, leading_dimension) per case; (variant, GEMMs per block) per descriptor
    al = (16, 16, 16)
    DESC_CHOICES = (("suggested", al, None), ("suggested", al, "suggested"), (32, al, "suggested"),
                    (256, al, "suggested"), (512, al, "suggested"))
    KERNEL_CHOICES = {("suggested", None): (("smem", 2), ("rmem", 4)),
                      ("suggested", "suggested"): (("rpad", 1), ("rpadc", 2), ("rpadv", 2), ("lib", 1), ("lib", 2),
                                                   ("lib", 4), ("libo", 1), ("libo", 2), ("libo", 4), ("ppad", 1), ("ppad", 2), ("ppadv", 1), ("ppadv", 2),
                                                   ("pasync1", 1), ("pasync2", 1), ("pasync3", 1), ("kc16x4b2", 1),
                                                   ("kc16x4b2p", 1), ("kc16x3b2", 1),
                                                   ("kc16x4b3p", 1), ("kc32x2b3p", 1), ("kc16x2b3", 1),
                                                   ("kc16x4r", 1), ("kc16x4b3r", 1), ("kc16x3b3r", 1), ("kc16x3b4r", 1),
                                                   ("kc32x2b3r", 1), ("kc16x6b2r", 1), ("kc64x1r", 1), ("kc64x1b3r", 1)),
                      (32, "suggested"): (("lib", 1), ("lib", 2), ("lib", 4), ("libo", 1), ("libo", 2), ("libo", 4), ("ppad", 2), ("ppad", 4), ("ppadv", 2), ("ppadv", 4)),
                      # 64^3 fp64: the library kernel spills at 128 threads (sm_90 SASS: 47 STL), not at 256
                      # cuBLASDx's sm_90 database at 64^3 fp64: 16x8x4 DMMA at 128 threads, 8x8x4 at 256 and 512
                      (256, "suggested"): (("lib", 1), ("libb2", 1), ("libo", 1), ("libob2", 1), ("pasync1", 1), ("pasync2", 1), ("pasync3", 1), ("pasync1b3", 1),
                                           ("kc16x4b2", 1), ("kc16x4b3", 1), ("kc16x3b3", 1), ("kc16x3b4", 1),
                                           ("kc8x8b2", 1), ("kc8x8b3", 1), ("kc32x3b2", 1), ("kc16x4b2p", 1),
                                           ("kc32x3b2p", 1), ("kc16x4b2r", 1), ("kc16x3b2r", 1), ("kc64x1r", 1)),
                      # 16 warps per SM in one block: 128 registers for lib, 91 for pasync1 (no spills)
                      (512, "suggested"): (("lib", 1), ("libo", 1), ("pasync1", 1), ("pasync2", 1))}
    if sweep:  # --sweep: more block sizes and GEMMs per block (a longer run, for tuning)
        DESC_CHOICES = tuple((bd, al, "suggested") for bd in ("suggested", 128, 256))
        KERNEL_CHOICES = {(bd, ld): tuple((v, g) for v in ("rpad", "rpadc", "rpadv", "lib", "ppad", "ppadv")
                                          for g in (1, 2))
                          for bd, _, ld in DESC_CHOICES}
    if variants:  # only these kernels, and only the descriptors they run on
        KERNEL_CHOICES = {key: tuple(c for c in choices if c[0] in variants) for key, choices in KERNEL_CHOICES.items()}
        DESC_CHOICES = tuple(d for d in DESC_CHOICES if KERNEL_CHOICES[(d[0], d[2])])
    cases = [c for c in CASES if sizes is None or c[0][0] in sizes]

    descs = {}
    for size, dtype in cases:
        for bd, al, ld in DESC_CHOICES:
            if bd in (256, 512) and size[0] < 64 and not sweep:
                continue
            if bd in (32, 128) and size[0] >= 64:
                continue
            MM = Matmul(size=size, precision=dtype, arrangement=("row_major",) * 3, leading_dimension=ld,
                        block_dim=bd, alignment=al, sm=sm)
            if threads is None or MM.block_dim[0] in threads:
                descs[(size, np.dtype(dtype).name, bd, al, ld)] = MM
    t0 = time.perf_counter()
    todo = list(descs.values()) + _slice_descriptors(descs, KERNEL_CHOICES)
    gemm_codegen.prefetch_ltoir(todo)  # in parallel processes, the K-slice kernels' descriptors too
    print(f"# LTO-IR for {len(todo)} descriptors ready in {time.perf_counter() - t0:.0f} s", flush=True)

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ceilings.py
    from ceilings import measure_copy_rate

    copy_bps = measure_copy_rate()  # this card's floors: the same bytes at its own copy rate
    print(f"# device copy rate: {copy_bps / 1e12:.2f} TB/s", flush=True)
    rows = []
    for size, dtype in cases:
        rows += _bench_case(size, dtype, batch, check, descs, KERNEL_CHOICES, dev, peers, shared_ab)
        cp.get_default_memory_pool().free_all_blocks()

    result = dict(gpu=gpu, sm=sm, batch=batch, peak_bw=PEAK_BW, copy_bps=copy_bps, rows=rows, shared_ab=shared_ab,
                  command="python benchmarks/batched_gemm.py --out DIR" + (" --shared-ab" if shared_ab else ""))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "batched_gemm.json"), "w") as f:
        json.dump(result, f, indent=1)
    lines = [f"Batched GEMM, {batch} GEMMs, {gpu} (sm_{sm}); floor = (A+B read + C written) / 4.3e12 B/s; "
             "floor4 also reads C; card floor = the floor's bytes at this card's measured copy rate, "
             f"{copy_bps / 1e12:.2f} TB/s" + ("; --shared-ab: every GEMM reads GEMM 0's A and B" if shared_ab else ""), "",
             "| case | implementation | ms | floor ms | % of floor | % of floor4 | % of card floor | correct | note |",
             "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        if r["note"] == "candidate":
            continue
        ms = f"{r['ms']:.4f}" if r["ms"] else "-"
        fr = f"{r['frac_floor'] * 100:.0f}%" if r["frac_floor"] else "-"
        fr4 = f"{r['frac_floor4'] * 100:.0f}%" if r["frac_floor4"] else "-"
        frc = f"{r['frac_floor'] * PEAK_BW / copy_bps * 100:.0f}%" if r["frac_floor"] else "-"
        lines.append(f"| {r['case']} | {r['impl']} | {ms} | {r['floor_ms']:.4f} | {fr} | {fr4} | {frc} | {r['correct']} "
                     f"| {r['note']} |")
    md = "\n".join(lines) + "\n"
    with open(os.path.join(out_dir, "batched_gemm.md"), "w") as f:
        f.write(md)
    print(md)
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="benchmarks/results")
    p.add_argument("--batch", type=int, default=65536)
    p.add_argument("--no-check", action="store_true")
    p.add_argument("--skip-peers", action="store_true", help="do not run nvmath-python")
    p.add_argument("--sweep", action="store_true", help="try more block sizes and GEMMs per block")
    p.add_argument("--sizes", type=int, nargs="+", help="only these m (=n=k) cases, e.g. 32")
    p.add_argument("--variants", nargs="+", choices=tuple(MAKERS), help="only these kernels of ours")
    p.add_argument("--threads", type=int, nargs="+", help="only descriptors of these block sizes, e.g. 256")
    p.add_argument("--shared-ab", action="store_true",
                   help="every GEMM reads the first GEMM's A and B (batch stride 0): time without A/B DRAM traffic")
    a = p.parse_args(argv)
    run(a.out, batch=a.batch, check=not a.no_check, peers=not a.skip_peers, sweep=a.sweep, sizes=a.sizes,
        variants=a.variants, threads=a.threads, shared_ab=a.shared_ab)


if __name__ == "__main__":
    sys.exit(main())
