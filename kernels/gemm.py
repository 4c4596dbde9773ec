# SPDX-License-Identifier: Apache-2.0
"""Batched small GEMMs (several per block) and a GEMM -> FFT fusion (beamforming), one kernel each."""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from mathdx_operands import on_device, resolve_stream, simulator
from nvmath_device import (
    FFT,
    Matmul,
    copy_async,
    copy_async_commit,
    copy_async_wait,
    load_complex,
    store_complex,
)
from nvmath_device.common_cuda import shared_memory_limit

from . import _fused
from ._arrays import Operand, Output, host_numbers
from ._consts import to_device_const
from ._fused import aligned, copy_1d, vectors_ok
from ._launch import launch, resident_blocks
from ._regfft import MAX_SHARED as OWN_MAX_SHARED
from ._regfft import SIZES as OWN_SIZES
from ._regfft import RegFFT
from ._regfft import descriptor as own_descriptor

_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.complex64), np.dtype(np.complex128))


def _sm():
    return 90 if simulator() else None


@functools.cache  # descriptors are immutable: validate and resolve each shape once per process
def _gemm_descriptor(m, n, k, dtype, block_dim="suggested", sm=None, alignment=None, leading_dimension=None):
    dtype = np.dtype(dtype)
    single = dtype in (np.dtype(np.float32), np.dtype(np.complex64))
    return Matmul(size=(m, n, k), precision=np.float32 if single else np.float64,
                  data_type="complex" if dtype.kind == "c" else "real",
                  arrangement=("row_major", "row_major", "row_major"), block_dim=block_dim,
                  alignment=alignment, leading_dimension=leading_dimension, sm=sm or _sm())


@functools.cache
def _batched_kernel(mm: Matmul, per_block: int, use_c: bool):
    m, n, _ = mm.size
    a_off = mm.a_shared_memory_offset // mm.a_value_type.itemsize
    b_off = mm.b_shared_memory_offset // mm.b_value_type.itemsize
    c_off = mm.c_shared_memory_offset // mm.c_value_type.itemsize
    per = -(-mm.shared_memory_size // 16) * 16 // mm.c_value_type.itemsize  # values per GEMM slot
    a_size, b_size, c_size = mm.a_size, mm.b_size, mm.c_size
    vt = mm.c_value_type

    @cuda.jit
    def kernel(A, B, C, D, alpha, beta, batch):
        y = cuda.threadIdx.y
        g = cuda.blockIdx.x * per_block + y
        gg = g if g < batch else batch - 1  # idle slots redo the last GEMM and do not store it
        smem = cuda.shared.array(0, dtype=vt)
        base = y * per
        sa = smem[base + a_off:base + a_off + a_size]
        sb = smem[base + b_off:base + b_off + b_size]
        sc = smem[base + c_off:base + c_off + c_size]
        mm.load_a(A[gg], sa)
        mm.load_b(B[gg], sb)
        if use_c:
            mm.load_c(C[gg], sc)
        cuda.syncthreads()
        mm.execute(alpha, sa, sb, beta, sc)
        cuda.syncthreads()
        if g < batch:
            mm.store_c(sc, D[g])

    return kernel, per * vt.itemsize * per_block


def _place_offsets(mm: Matmul, ld: int) -> np.ndarray | None:
    """``o`` (int32, one per accumulator value) such that every thread's value ``i`` sits at
    ``row * ld + col = p(tx) + o[i]`` in a row-major tile of leading dimension ``ld``, ``p(tx)``
    the place of the thread's value 0; None where that does not hold for every thread or some
    value is unused. From cuBLASDx's partitioner on the host
    (:meth:`~nvmath_device.Matmul.fragment_coordinates_table`, no GPU): it holds for every whole
    tile the batched kernels run (fp64 64 x 64 at 128 / 256 threads, fp32 16^3 and 32^3, ...),
    not where a tile has unused values (20^3 fp32)."""
    table = mm.fragment_coordinates_table().astype(np.int64)
    rows, cols = table[..., 0], table[..., 1]
    if (rows < 0).any():
        return None
    places = rows * ld + cols
    offsets = places - places[:, :1]
    if not (offsets == offsets[0]).all():
        return None
    return offsets[0].astype(np.int32)


def _places(mm: Matmul, ld: int, offsets: bool = True):
    """Where each accumulator value of a thread goes in a row-major tile of leading dimension
    ``ld``: ``(n_keep, fill, at, all_used)``. A kernel makes ``keep = cuda.local.array(n_keep,
    np.int32)``, calls ``fill(keep, origin)`` once (``origin``: the tile's first value) and reads
    value ``i``'s place as ``at(keep, i)`` (-1: unused, never where ``all_used``). With
    ``offsets`` and where :func:`_place_offsets` holds, ``keep`` is one register (the thread's
    first place) and the offsets are constants; otherwise ``keep`` holds one place per value
    through the whole kernel. sm_90 code of the vector kernel with offsets (64^3 fp64 / 256
    threads, 32^3 fp32 / 32, 16^3 fp32 / 64 x 4): 208 -> 162, 242 -> 210 and 48 -> 40 registers,
    960 -> 928, 2056 -> 1920 and 560 -> 536 instructions; on an H100 no faster (-4 to +1 %:
    benchmarks/RESULTS.md, thirtieth session)."""
    acc_n = mm.accumulator_size
    offsets = _place_offsets(mm, ld) if offsets else None

    if offsets is not None:
        @cuda.jit(device=True, forceinline=True)
        def fill(keep, origin):
            rows = cuda.local.array(acc_n, dtype=np.int32)
            cols = cuda.local.array(acc_n, dtype=np.int32)
            mm.fragment_coordinates(rows, cols)
            keep[0] = origin + rows[0] * ld + cols[0]

        @cuda.jit(device=True, forceinline=True)
        def at(keep, i):
            return keep[0] + cuda.const.array_like(offsets)[i]

        return 1, fill, at, True

    @cuda.jit(device=True, forceinline=True)
    def fill(keep, origin):
        cols = cuda.local.array(acc_n, dtype=np.int32)
        mm.fragment_coordinates(keep, cols)
        for i in range(acc_n):
            keep[i] = origin + keep[i] * ld + cols[i] if keep[i] >= 0 else -1

    @cuda.jit(device=True, forceinline=True)
    def at(keep, i):
        return keep[i]

    return acc_n, fill, at, False


def _through_tile(nt: int, c_vec: int, off_c, acc_n: int, use_c: bool, at, all_used: bool,
                  passes: int = 1, ring: tuple | None = None):
    """The device function ``through_tile(C, D, g, live, base, keep, acc, alpha, beta, s16, sv,
    tx)`` that writes GEMM ``g``'s result, ``D[g] = alpha * acc (+ beta * C[g])``, through a
    shared tile at vector ``base`` of ``s16``: C's 16-byte vectors in (``use_c``), each thread's
    accumulator values combined at their places ``at(keep, i)`` (values of ``sv``, :func:`_places`),
    D's vectors out, consecutive threads on consecutive vectors (whole 32-byte sectors per
    store). ``off_c(tx, j)``: thread ``tx``'s vector ``j`` in the tile (:func:`_tile_offset`);
    ``c_vec`` vectors per result over ``nt`` threads. Every thread of the block calls it (it has
    block barriers); ``live`` False: a thread of a slot with no GEMM, which only meets the
    barriers.

    ``ring`` None: a C tile, free when it is called, and ``keep``'s places are in ``sv`` (from
    the tile's first value). ``ring = (v, win)``: a ring stage of :func:`_slice_kernel`, which
    the slice just multiplied may still be reading (a barrier first), and the places are from
    0 (leading dimension ``ldc``, ``v`` values per vector); the result goes through in
    ``passes`` bands of ``c_vec // passes`` vectors of D, ``win`` values of places each, a
    barrier before each band (the one before it stored)."""
    w_vec = c_vec // passes  # a band's vectors in D (all of them without a ring)
    nc, all_c = -(-w_vec // nt), w_vec % nt == 0  # vectors per thread; every thread's last one exists
    relative = ring is not None
    v, win = ring if relative else (1, 0)

    @cuda.jit(device=True, forceinline=True)
    def band(C, D, g, live, base, keep, acc, alpha, beta, s16, sv, tx, h):
        """Band ``h`` (the whole tile without a ring)."""
        if relative:
            cuda.syncthreads()  # the stage is free: its slice multiplied, the band before stored
        if use_c:
            if live:
                for j in range(nc):
                    if all_c or tx + j * nt < w_vec:
                        s16[base + off_c(tx, j)] = load_complex(C, (g, h * w_vec + tx + j * nt))
            cuda.syncthreads()
        for i in range(acc_n):
            e = at(keep, i)
            if (all_used or e >= 0) and (not relative or h * win <= e < (h + 1) * win):
                x = base * v + e - h * win if relative else e
                if use_c:
                    sv[x] = alpha * acc[i] + beta * sv[x]
                else:
                    sv[x] = alpha * acc[i]
        cuda.syncthreads()
        if live:
            for j in range(nc):
                if all_c or tx + j * nt < w_vec:
                    store_complex(D, (g, h * w_vec + tx + j * nt), s16[base + off_c(tx, j)])

    # A C tile: one band with no loop around it. A ring keeps the loop and the band test even for
    # one band. Either way each kernel's sm_90 code is the same as it was with two functions
    # (benchmarks/gemm_sass.py compares it, instruction for instruction). A ring's
    # one band without them changed it: 64^3 fp64 in one 64-wide slice, 128 threads: 144 -> 182 registers.
    if not relative:
        @cuda.jit(device=True, forceinline=True)
        def through_tile(C, D, g, live, base, keep, acc, alpha, beta, s16, sv, tx):
            band(C, D, g, live, base, keep, acc, alpha, beta, s16, sv, tx, 0)
    else:
        @cuda.jit(device=True, forceinline=True)
        def through_tile(C, D, g, live, base, keep, acc, alpha, beta, s16, sv, tx):
            for h in range(passes):
                band(C, D, g, live, base, keep, acc, alpha, beta, s16, sv, tx, h)

    return through_tile


_SLICE_EPILOGUES = ("stage", "ring", "pairs", "values")
# The order in which :func:`_slice_epilogue` tries them ("ring", three blocks per SM where "stage"
# gets two, was 2 % slower than "stage" at 64^3 fp64 on an H100: benchmarks/RESULTS.md)
_SLICE_EPILOGUE_ORDER = ("stage", "pairs", "values")


def _ring_passes(m: int, lc: int, stage_v: int) -> int | None:
    """The fewest bands (a divisor of ``m``) whose rows, ``lc`` 16-byte vectors each, fit a ring
    stage of ``stage_v`` vectors (:func:`_slice_kernel`'s ``"ring"`` epilogue); None if a row
    does not."""
    return next((p for p in range(1, m + 1) if m % p == 0 and (m // p) * lc <= stage_v), None)


def _tile_offset(per_row: int, padded: int, nt: int):
    """A device function ``(tx, j) -> offset``: where vector ``i = tx + j * nt`` of a row-major
    tile of ``per_row`` vectors per row goes in the padded tile (rows of ``padded`` vectors),
    i.e. ``(i // per_row) * padded + i % per_row``. Where ``nt`` is a multiple of ``per_row``
    (or the other way round) that is a part fixed per thread plus one fixed per ``j``, so that
    the division leaves the loops (the copy loops run ``j`` over unrolled constants)."""
    if nt % per_row == 0:
        step = nt // per_row * padded  # each j moves nt // per_row whole rows

        @cuda.jit(device=True, forceinline=True)
        def offset(tx, j):
            return (tx // per_row) * padded + tx % per_row + j * step
    elif per_row % nt == 0:
        q = per_row // nt  # each row takes q rounds of the block

        @cuda.jit(device=True, forceinline=True)
        def offset(tx, j):
            return (j // q) * padded + (j % q) * nt + tx
    else:
        @cuda.jit(device=True, forceinline=True)
        def offset(tx, j):
            i = tx + j * nt
            r = i // per_row
            return r * padded + i - r * per_row
    return offset


@functools.cache
def _vector_kernel(mm: Matmul, per_block: int, use_c: bool, min_blocks: int | None = None, offsets: bool = False):
    """``D[g] = alpha * A[g] @ B[g] (+ beta * C[g])`` with every tile moved as 16-byte vectors,
    on a persistent grid, the next GEMM's A and B in flight while the current one runs.

    ``per_block`` GEMM slots per block (``threadIdx.y`` picks the slot); each slot walks the
    batch with stride ``gridDim.x * per_block`` (launch as many blocks as fit on the GPU at
    once: :func:`kernels._launch.resident_blocks`; any grid is correct). Per GEMM: the A and B
    vectors loaded into registers during the previous GEMM go to cuBLASDx's padded shared tiles
    (the descriptor's suggested leading dimensions, e.g. 36 for 32 x 32 fp32: rows of a
    row-major tile off the same banks), the next GEMM's vectors are loaded, the GEMM accumulates
    in registers, and the result goes back through the slot's shared memory (free once the GEMM
    has read it) so that D, and C when ``use_c``, move as whole vectors as well. Global accesses
    go through ``load_complex``/``store_complex``: numba's indexing of the complex128 views would
    split each 16-byte vector into two 8-byte accesses (``LDG.E.64`` pairs in the sm_90 SASS).

    Its measured speed is in benchmarks/RESULTS.md (``benchmarks/batched_gemm.py``, ``lib``
    rows). ``min_blocks``: launch bounds of that many blocks per SM (None: none; what
    :func:`batched_gemm` runs; the benchmark's ``libb2`` times 2). ``offsets``: the result's
    places as one register and constants (:func:`_places`; the benchmark's ``libo``), not yet
    what :func:`batched_gemm` runs: it has not been timed on a GPU.

    Arguments: ``A`` (batch, m*k*itemsize/16), ``B`` (batch, k*n*itemsize/16), ``C`` and ``D``
    (batch, m*n*itemsize/16), complex128 views of C-contiguous, 16-byte aligned operands (bit
    copies only); ``alpha``, ``beta`` of the value type; ``batch``.

    Returns ``(kernel, dynamic shared memory bytes)``, or None when the descriptor does not fit:
    row-major tiles, a 1-D ``block_dim``, one value type, rows (global and padded) a whole
    number of 16-byte vectors.
    """
    m, n, k = mm.size
    dt = mm.c_value_type
    isz = dt.itemsize
    lda, ldb, ldc = mm.leading_dimension
    if (tuple(mm.arrangement) != ("row_major",) * 3 or mm.block_dim[1] * mm.block_dim[2] != 1
            or mm.a_value_type != dt or mm.b_value_type != dt or 16 % isz):
        return None
    v = 16 // isz  # values per 16-byte vector
    if k % v or n % v or lda % v or ldb % v or ldc % v or mm.b_shared_memory_offset % 16:
        return None
    ka, kn = k // v, n // v  # vectors per row: of A; of B, C and D
    la, lb, lc = lda // v, ldb // v, ldc // v  # ... of the padded shared tiles
    a_vec, b_vec, c_vec = m * ka, k * kn, m * kn
    slot_v = -(-max(mm.shared_memory_size_ab, ((m - 1) * ldc + n) * isz) // 16)  # vectors per slot
    b_off_v = mm.b_shared_memory_offset // 16
    a_size, b_size, acc_n = mm.a_size, mm.b_size, mm.accumulator_size
    nt = mm.max_threads_per_block
    na, nb = -(-a_vec // nt), -(-b_vec // nt)  # vectors per thread in flight: of A, of B
    all_a, all_b = a_vec % nt == 0, b_vec % nt == 0  # every thread's last vector exists
    off_a, off_b = _tile_offset(ka, la, nt), _tile_offset(kn, lb, nt)
    n_keep, fill_places, at, all_used = _places(mm, ldc, offsets)
    through_tile = _through_tile(nt, c_vec, _tile_offset(kn, lc, nt), acc_n, use_c, at, all_used)
    zero, zero16 = dt.type(0), np.complex128(0)

    # No fastmath: the arithmetic here is only the alpha/beta epilogue (and the GEMM itself is
    # cuBLASDx's LTO-IR); fastmath would buy nothing measurable and allow flushing denormals.
    @cuda.jit(**({"launch_bounds": (nt * per_block, min_blocks)} if min_blocks else {}))
    def kernel(A, B, C, D, alpha, beta, batch):
        tx = cuda.threadIdx.x
        s16 = cuda.shared.array(0, dtype=np.complex128)  # the dynamic buffer, as vectors
        sv = cuda.shared.array(0, dtype=dt)  # ... and as values
        base = cuda.threadIdx.y * slot_v
        b0 = base * v
        ra = cuda.local.array(na, dtype=np.complex128)
        rb = cuda.local.array(nb, dtype=np.complex128)
        acc = cuda.local.array(acc_n, dtype=dt)
        keep = cuda.local.array(n_keep, dtype=np.int32)
        fill_places(keep, b0)  # the accumulator values' offsets in the slot
        stride = cuda.gridDim.x * per_block
        g = cuda.blockIdx.x * per_block + cuda.threadIdx.y
        for j in range(na):
            i = tx + j * nt
            ra[j] = load_complex(A, (g, i)) if g < batch and (all_a or i < a_vec) else zero16
        for j in range(nb):
            i = tx + j * nt
            rb[j] = load_complex(B, (g, i)) if g < batch and (all_b or i < b_vec) else zero16
        for _ in range((batch + stride - 1) // stride):  # the same count in every block
            cuda.syncthreads()  # the slot's previous result has been stored
            for j in range(na):
                if all_a or tx + j * nt < a_vec:
                    s16[base + off_a(tx, j)] = ra[j]
            for j in range(nb):
                if all_b or tx + j * nt < b_vec:
                    s16[base + b_off_v + off_b(tx, j)] = rb[j]
            cuda.syncthreads()
            gn = g + stride
            if gn < batch:  # the next GEMM's loads, in flight during this one
                for j in range(na):
                    i = tx + j * nt
                    if all_a or i < a_vec:
                        ra[j] = load_complex(A, (gn, i))
                for j in range(nb):
                    i = tx + j * nt
                    if all_b or i < b_vec:
                        rb[j] = load_complex(B, (gn, i))
            for i in range(acc_n):
                acc[i] = zero
            mm.execute(sv[b0:b0 + a_size], sv[b0 + b_off_v * v:b0 + b_off_v * v + b_size], acc)
            cuda.syncthreads()  # A and B have been read: the slot takes the result
            # an idle slot (g past the batch) still takes part in every block-wide step
            through_tile(C, D, g, g < batch, base, keep, acc, alpha, beta, s16, sv, tx)
            g = gn

    return kernel, slot_v * 16 * per_block


@functools.cache
def _slice_kernel(mm: Matmul, k: int, depth: int, use_c: bool, min_blocks: int | None, epilogue: str = "stage"):
    """``D[g] = alpha * A[g] @ B[g] (+ beta * C[g])`` for GEMMs of ``mm``'s m and n and K = ``k``,
    A and B streamed in K slices of ``mm.k`` (``mm`` is the slice's descriptor: m x kc of A,
    kc x n of B, padded tiles), on a persistent grid. Each block keeps a ring of ``depth``
    shared-memory stages filled with ``cp.async`` 16-byte copies ``depth - 1`` slices ahead; the
    ring runs on across GEMM boundaries (the next GEMM's first slices land while this one's last
    are multiplied), each slice is ``acc += a @ b`` in the register accumulator, and after a
    GEMM's last slice its result leaves as ``epilogue`` says. A stage is
    ``kc / k`` of a whole GEMM's A and B, so several blocks fit on an SM where the whole-GEMM
    kernel (:func:`_vector_kernel`) fits one. ``depth`` 1: one stage, each slice loaded and
    waited for at once, the overlap left to the SM's other blocks (with ``kc = k`` and
    ``"ring"``, the benchmark's ``pasync1`` with alpha, beta and C). Launch bounds: the block's
    threads and ``min_blocks`` blocks per SM (what the compiler keeps the registers to; None: threads only).

    ``epilogue``: how a result leaves the registers.

    - ``"stage"``: through a C tile in shared memory past the ring (the descriptor's padded
      ``ldc``, ``m * ldc`` values more per block), C read into it and D written from it as
      16-byte vectors by consecutive threads, so every store fills whole 32-byte sectors; C and
      D are (batch, m*n*itemsize/16) complex128 views, 16-byte aligned.
    - ``"pairs"``: straight from the registers, two row neighbours per access, where
      :func:`_slice_pairs` (the fp64 tensor-core fragments); C and D are (batch, m*n/2) views of
      pairs (:func:`_pair_dtype`) aligned to one.
    - ``"values"``: straight from the registers, one value per access; C and D (batch, m*n)
      values. Single 8-byte stores half-fill 32-byte sectors: they took 4x the L2 write traffic
      of the result, pairs 2x (Nsight Compute, benchmarks/RESULTS.md).
    - ``"ring"``: as ``"stage"``, but through the ring stage the GEMM's last slice used (free
      until the next slice's barrier), in ``passes`` bands of ``m / passes`` rows, the fewest
      whose band fits a stage: no shared memory past the ring, so the block takes no more than
      its stages (64 x 64 x 16 fp64 at 4 stages: 70.5 KiB, three blocks per SM, where "stage"
      takes 104 KiB, two). C and D as for ``"stage"``.

    The result's places are one register and constants where :func:`_place_offsets` holds
    (sm_90, 64 x 64 x 16 fp64 slices, ``"stage"``: 218 -> 158 registers at 128 threads, 116 ->
    128 at 256).

    Not picked by :func:`batched_gemm`: it is reached through ``_batched_gemm(...,
    slices=...)``. Against the vector kernel at 64^3 fp64 (benchmarks/batched_gemm.py, ``kc``
    variants; benchmarks/RESULTS.md): on an H100 its 128-thread forms were up to 3 % faster
    (``kc16x4b2`` 2.217 against 2.281 ms), on the H200 its 256-thread forms 9 % slower (1.985
    against 1.822 ms); its 128-thread forms have not run on an H200.

    Arguments: ``A`` (batch, m*k*itemsize/16), ``B`` (batch, k*n*itemsize/16) complex128 views of
    C-contiguous, 16-byte aligned operands; ``C`` and ``D`` as ``epilogue`` says; ``alpha``,
    ``beta``; ``batch``. Returns ``(kernel, dynamic shared memory bytes)``, or None when the
    descriptor does not fit: row-major tiles, a 1-D ``block_dim``, one value type, ``k`` a
    multiple of ``mm.k``, slices' rows (global and padded) whole 16-byte vectors, ``depth`` 1 to 9
    (``cp.async.wait_group`` takes 0 to 7 groups in flight); for ``"stage"`` the padded C tile's
    rows whole vectors too, for ``"pairs"`` :func:`_slice_pairs`.
    """
    m, n, kc = mm.size
    dt = mm.c_value_type
    isz = dt.itemsize
    lda, ldb, ldc = mm.leading_dimension
    if (tuple(mm.arrangement) != ("row_major",) * 3 or mm.block_dim[1] * mm.block_dim[2] != 1
            or mm.a_value_type != dt or mm.b_value_type != dt or 16 % isz or not 1 <= depth <= 9 or k % kc):
        return None
    if epilogue not in _SLICE_EPILOGUES:
        raise ValueError(f"epilogue must be one of {', '.join(map(repr, _SLICE_EPILOGUES))}, got {epilogue!r}")
    v = 16 // isz
    tiled = epilogue in ("stage", "ring")  # the result through shared memory as 16-byte vectors
    if (kc % v or n % v or lda % v or ldb % v or mm.b_shared_memory_offset % 16
            or (tiled and ldc % v) or (epilogue == "pairs" and not _slice_pairs(mm))):
        return None
    ka, kn, sa = k // v, n // v, kc // v  # vectors per row: of A, of B; of a slice of A's row
    la, lb = lda // v, ldb // v  # ... of the padded shared tiles
    a_vec, b_vec = m * sa, kc * kn  # vectors per slice
    stage_v = -(-mm.shared_memory_size_ab // 16)
    b_off_v = mm.b_shared_memory_offset // 16
    slices, ahead, pending = k // kc, depth - 1, max(depth - 2, 0)
    single = depth == 1  # each slice loaded and waited for at once: the SM's other blocks overlap it
    nt = mm.max_threads_per_block
    na, nb = -(-a_vec // nt), -(-b_vec // nt)  # vectors per thread per slice
    all_a, all_b = a_vec % nt == 0, b_vec % nt == 0  # every thread's last vector exists
    step_b = kc * kn  # a slice's step along B's rows, in vectors
    # where thread tx's vector j of a slice goes in a stage (A, B) and comes from in A's row
    sh_a, sh_b, gl_a = _tile_offset(sa, la, nt), _tile_offset(kn, lb, nt), _tile_offset(sa, ka, nt)
    a_size, b_size, acc_n = mm.a_size, mm.b_size, mm.accumulator_size
    zero = dt.type(0)
    c_v, lc = depth * stage_v, ldc // v  # the C tile ("stage"): its first vector; vectors per row
    passes = _ring_passes(m, lc, stage_v) if epilogue == "ring" else 1
    if passes is None:
        return None
    # where value (r, c) of a result goes: the C tile ("stage"), a band's tile ("ring", from
    # the stage's start) or D's row-major place
    place_r, place_0 = (ldc, c_v * v if epilogue == "stage" else 0) if tiled else (n, 0)
    n_keep, fill_places, at, all_used = _places(mm, place_r)

    @cuda.jit(device=True, forceinline=True)
    def load_slice(s16, base, A, B, g, q, tx):
        """Start this thread's copies of slice ``q`` of GEMM ``g`` into the stage at ``base``."""
        for j in range(na):
            if all_a or tx + j * nt < a_vec:
                copy_async(s16, base + sh_a(tx, j), A, (g, gl_a(tx, j) + q * sa))
        for j in range(nb):
            if all_b or tx + j * nt < b_vec:
                copy_async(s16, base + b_off_v + sh_b(tx, j), B, (g, tx + j * nt + q * step_b))

    if epilogue == "stage":
        through_tile = _through_tile(nt, m * kn, _tile_offset(kn, lc, nt), acc_n, use_c, at, all_used)

        @cuda.jit(device=True, forceinline=True)
        def store(C, D, g, keep, acc, alpha, beta, s16, sv, tx, js):
            """GEMM ``g``'s result through the C tile (its last readers, the previous GEMM's,
            have passed a slice's barrier since)."""
            through_tile(C, D, g, True, c_v, keep, acc, alpha, beta, s16, sv, tx)
    elif epilogue == "ring":
        through_bands = _through_tile(nt, m * kn, _tile_offset(kn, lc, nt), acc_n, use_c, at, all_used,
                                      passes, (v, m // passes * ldc))

        @cuda.jit(device=True, forceinline=True)
        def store(C, D, g, keep, acc, alpha, beta, s16, sv, tx, js):
            """GEMM ``g``'s result through ring stage ``js``, the one its last slice used, in
            ``passes`` bands of rows."""
            through_bands(C, D, g, True, js * stage_v, keep, acc, alpha, beta, s16, sv, tx)
    elif epilogue == "pairs":
        pair = _pair_dtype(dt).type
        ps = _pair_stride(mm)

        @cuda.jit(device=True, forceinline=True)
        def store(C2, D2, g, keep, acc, alpha, beta, s16, sv, tx, js):
            """GEMM ``g``'s result: values i and i + ps are neighbours, one access per pair."""
            for p in range(acc_n // 2):
                i = (p // ps) * 2 * ps + p % ps
                e = at(keep, i)
                if all_used or e >= 0:
                    x, y = alpha * acc[i], alpha * acc[i + ps]
                    if use_c:
                        c = load_complex(C2, (g, e // 2))
                        x, y = x + beta * c.real, y + beta * c.imag
                    store_complex(D2, (g, e // 2), pair(complex(x, y)))  # one 8/16-byte access
    else:
        @cuda.jit(device=True, forceinline=True)
        def store(C, D, g, keep, acc, alpha, beta, s16, sv, tx, js):
            """GEMM ``g``'s result, one value per access."""
            for i in range(acc_n):
                e = at(keep, i)
                if all_used or e >= 0:
                    if use_c:
                        D[g, e] = alpha * acc[i] + beta * C[g, e]
                    else:
                        D[g, e] = alpha * acc[i]

    @cuda.jit(device=True, forceinline=True)
    def next_slice(q, g, stride):
        """The slice after slice ``q`` of GEMM ``g`` (the block's GEMMs are ``stride`` apart)."""
        return (0, g + stride) if q + 1 == slices else (q + 1, g)

    # No fastmath, as in _vector_kernel: only the epilogue is ours
    @cuda.jit(launch_bounds=(nt, min_blocks) if min_blocks else nt)
    def kernel(A, B, C, D, alpha, beta, batch):
        tx = cuda.threadIdx.x
        s16 = cuda.shared.array(0, dtype=np.complex128)
        sv = cuda.shared.array(0, dtype=dt)
        acc = cuda.local.array(acc_n, dtype=dt)
        keep = cuda.local.array(n_keep, dtype=np.int32)
        fill_places(keep, place_0)  # the accumulator values' places
        stride = cuda.gridDim.x
        g0 = cuda.blockIdx.x  # the block's slices: slice q of GEMM g0, g0 + stride, ...
        total = ((batch - 1 - g0) // stride + 1) * slices if g0 < batch else 0
        gl, ql = g0, 0  # the next slice to load
        for t in range(ahead):  # the first slices; one group each, empty past the end
            if t < total:
                load_slice(s16, t * stage_v, A, B, gl, ql, tx)
            copy_async_commit()
            ql, gl = next_slice(ql, gl, stride)
        for i in range(acc_n):
            acc[i] = zero
        j, jl = 0, ahead  # this slice's stage; the stage the next load goes to
        g, q = g0, 0  # this slice
        for t in range(total):
            if single:  # one stage: free once every thread is done with slice t - 1 and its result
                cuda.syncthreads()
                load_slice(s16, 0, A, B, gl, ql, tx)
                copy_async_commit()
                ql, gl = next_slice(ql, gl, stride)
            copy_async_wait(pending)  # slice t has landed (the newer ones may not have)
            cuda.syncthreads()  # ... for every thread; and every thread is done with slice t - 1
            if not single:
                if t + ahead < total:  # into the stage slice t - 1 left
                    load_slice(s16, jl * stage_v, A, B, gl, ql, tx)
                copy_async_commit()
                ql, gl = next_slice(ql, gl, stride)
                jl = jl + 1 if jl + 1 < depth else 0
            b0 = j * stage_v * v
            mm.execute(sv[b0:b0 + a_size], sv[b0 + b_off_v * v:b0 + b_off_v * v + b_size], acc)
            js = j  # the stage this slice used
            j = j + 1 if j + 1 < depth else 0
            q += 1
            if q == slices:  # the GEMM's last slice: its result from the registers
                store(C, D, g, keep, acc, alpha, beta, s16, sv, tx, js)
                for i in range(acc_n):
                    acc[i] = zero
                q = 0
                g += stride
        copy_async_wait(0)  # nothing in flight when the block ends

    return kernel, (c_v + (m * lc if epilogue == "stage" else 0)) * 16


@functools.cache
def _pair_stride(mm: Matmul) -> int | None:
    """``s`` such that, in every thread's register accumulator of ``mm``, value ``i + s`` is the
    right-hand neighbour in C's row of value ``i`` at an even column, for each ``i`` with ``(i //
    s) % 2 == 0`` (or both are unused); the smallest such power of two, or None. From cuBLASDx's
    partitioner on the host (:meth:`~nvmath_device.Matmul.fragment_coordinates_table`, no GPU):
    fp64 tensor-core fragments at 64 x 64 x 16 / 256 threads pair value i with i + 4."""
    table = mm.fragment_coordinates_table()
    rows, cols = table[..., 0], table[..., 1]
    acc_n = table.shape[1]
    s = 1
    while s <= acc_n // 2 and acc_n % (2 * s) == 0:
        lo = np.array([i for i in range(acc_n) if (i // s) % 2 == 0])
        r0, c0, r1, c1 = rows[:, lo], cols[:, lo], rows[:, lo + s], cols[:, lo + s]
        unused = (r0 < 0) & (r1 < 0)
        if np.all(unused | ((r0 >= 0) & (r1 == r0) & (c0 % 2 == 0) & (c1 == c0 + 1))):
            return s
        s *= 2
    return None


def _slice_pairs(mm: Matmul) -> bool:
    """Whether :func:`_slice_kernel`'s ``"pairs"`` epilogue applies to ``mm``."""
    return _pair_dtype(mm.c_value_type) is not None and mm.size[1] % 2 == 0 and _pair_stride(mm) is not None


def _pair_dtype(dtype) -> np.dtype | None:
    """The complex type that is two neighbouring values of a real ``dtype`` (float32:
    complex64, float64: complex128), or None (complex and other values)."""
    return {4: np.dtype(np.complex64), 8: np.dtype(np.complex128)}.get(np.dtype(dtype).itemsize) \
        if np.dtype(dtype).kind == "f" else None


# GEMM slots per block of the (persistent) vector kernel: one; each block walks the batch (1, 2
# and 4 per block were measured: benchmarks/RESULTS.md, batched GEMMs).
_VECTOR_PER_BLOCK = 1
# The vector kernel's result places as one register and constants (:func:`_places`): fewer
# registers and instructions in the sm_90 code, but no faster on an H100 (the benchmark's ``libo``:
# -4 to +1 %, benchmarks/RESULTS.md, thirtieth session)
_VECTOR_OFFSETS = False


def _block_threads(m: int, n: int, k: int, dtype) -> int | str:
    """Threads per GEMM: 32 (one warp) for GEMMs of at least 32^3 multiply-adds whose result
    is at most 32 registers per thread of one warp, else cuBLASDx's suggestion (which
    :func:`_batched_descriptor` then enlarges while the result takes more than 32 registers per
    thread). One warp issues fewer shared-memory reads per multiply-add (the sm_90 SASS of 32^3
    fp32: 96 ``LDS.128`` per 1024 ``FFMA`` against 80 per 512 with 64 threads), which the
    persistent kernel's loads in flight make up for in occupancy (below 32^3, too little work
    per GEMM: the suggested block stays; the measurements are in benchmarks/RESULTS.md)."""
    return 32 if m * n * k >= 32 ** 3 and _result_registers(m, n, dtype, 32) <= 32 else "suggested"


def _result_registers(m: int, n: int, dtype, threads: int) -> int:
    """32-bit registers per thread that an m x n result of ``dtype`` takes over ``threads``."""
    return m * n * np.dtype(dtype).itemsize // 4 // threads


def _batched_descriptor(m: int, n: int, k: int, dtype, sm=None) -> Matmul:
    """:func:`_batched_descriptor_for` on the current device's architecture (``sm`` None)."""
    return _batched_descriptor_for(m, n, k, np.dtype(dtype), sm or _sm())


@functools.cache
def _batched_descriptor_for(m: int, n: int, k: int, dtype: np.dtype, sm: int) -> Matmul:
    """The descriptor of :func:`batched_gemm`'s kernels: :func:`_block_threads` threads,
    16-byte aligned shared tiles with cuBLASDx's suggested (padded) leading dimensions. Where
    cuBLASDx's suggested block leaves more than 32 registers of result per thread, the block is
    doubled (up to 1024 threads) until it does not: the vector kernel holds the next GEMM's A
    and B in registers as well, and at 64^3 fp64 the suggested 128 threads spill (255
    registers, 184 bytes of local memory) where 256 do not (212 registers): 2.011 against
    1.876-1.887 ms for 65536 GEMMs on the H200 (benchmarks/RESULTS.md, batched GEMMs)."""
    def make(threads):
        return _gemm_descriptor(m, n, k, dtype, block_dim=threads, sm=sm, alignment=(16, 16, 16),
                                leading_dimension="suggested")

    mm = make(_block_threads(m, n, k, dtype))
    threads = mm.block_dim[0] * mm.block_dim[1] * mm.block_dim[2]
    want = threads
    while _result_registers(m, n, dtype, want) > 32 and want < 1024:
        want *= 2
    if want != threads:
        try:
            return make(want)
        except ValueError:  # a block cuBLASDx does not take for this size: its suggestion stays
            return mm
    return mm


def batched_gemm(a, b, *, c=None, alpha=1.0, beta=0.0, stream=None):
    """``alpha * a[i] @ b[i] + beta * c[i]`` for every i: many small GEMMs in one kernel (cuBLASDx).

    Parameters
    ----------
    a : array, shape (batch, m, k)
        float32, float64, complex64 or complex128, C-contiguous; CuPy / PyTorch / Numba device
        arrays are used in place, NumPy arrays are copied to the GPU and back.
    b : array, shape (batch, k, n), same dtype and kind as ``a``
    c : array, shape (batch, m, n), optional
        Added with weight ``beta`` (required when ``beta != 0``); not modified.
    alpha, beta : scalars
    stream : optional
        As for :func:`kernels.fft_convolve`.

    Returns
    -------
    array, shape (batch, m, n): a new array of ``a``'s kind.

    Notes
    -----
    m, n, k up to what one block's shared memory holds (cuBLASDx's limits; an error names the
    size otherwise). Two kernels: when the operands are 16-byte aligned and rows of k and of n
    values are whole 16-byte vectors (e.g. multiples of 4 in float32), a persistent grid (the
    blocks that fit on the GPU at once) walks the batch, each block loading the next GEMM's
    tiles as 16-byte vectors while it multiplies the current one in cuBLASDx's padded
    shared-memory layout (one warp per GEMM from 32^3 up to a 32-register result per thread,
    cuBLASDx's suggested block otherwise); else blocks of 256 threads hold
    ``256 // threads_per_gemm`` GEMMs each and copy element by element.
    """
    return _batched_gemm(a, b, c, alpha, beta, stream)[0]


def _batched_gemm(a, b, c, alpha, beta, stream, vector=True, per_block=None, blocks=None, slices=None):
    """:func:`batched_gemm`, plus which kernel ran ("vector", "slices" or "smem"). ``vector=False``
    forces the shared-memory kernel, ``per_block`` the vector kernel's GEMMs per block, ``blocks``
    the persistent kernels' grid (tests: any grid is correct). ``slices=(kc, depth, min_blocks[,
    threads])`` runs :func:`_slice_kernel` (K slices of ``kc``, ``depth`` stages, ``threads`` per
    block: default the vector kernel's) where it applies, in place of the vector kernel;
    ValueError where it does not. Without ``slices``, a shape in ``_SLICE_PICKS`` runs its
    entry where it applies and the vector kernel where it does not."""
    ao = Operand("a", a, _DTYPES, (3,), None)
    bo = Operand("b", b, (ao.dtype,), (3,), None)
    batch, m, k = ao.shape
    if bo.shape[0] != batch or bo.shape[1] != k:
        raise ValueError(f"b must have shape (batch={batch}, k={k}, n), got {bo.shape}")
    n = bo.shape[2]
    if beta != 0 and c is None:
        raise ValueError("c is required when beta != 0")
    co = Operand("c", c, (ao.dtype,), (3,), None) if c is not None else None
    if co is not None and co.shape != (batch, m, n):
        raise ValueError(f"c must have shape {(batch, m, n)}, got {co.shape}")
    for name, v in (("alpha", alpha), ("beta", beta)):
        if not isinstance(v, (int, float, complex, np.number)) or isinstance(v, bool):
            raise TypeError(f"{name} must be a number, got {v!r}")
        if ao.dtype.kind != "c" and isinstance(v, complex):
            raise TypeError(f"{name} is complex but a is real ({ao.dtype.name})")
    s = resolve_stream(stream, ao)
    # padded (cuBLASDx's suggested leading dimensions), 16-byte aligned shared tiles; the
    # shared-memory kernel uses the same descriptor (one cuBLASDx compile per shape)
    mm = _batched_descriptor(m, n, k, ao.dtype)
    threads = mm.block_dim[0] * mm.block_dim[1] * mm.block_dim[2]
    out = Output((batch, m, n), ao.dtype, ao, s)
    if batch == 0:
        return out.result(s), None
    scal = ao.dtype.type
    use_c = co is not None and beta != 0
    pick = _SLICE_PICKS.get((m, n, k, ao.dtype.name)) if slices is None and vector else None
    if slices is not None or pick is not None:
        slices, order = (slices, None) if pick is None else pick  # None: _SLICE_EPILOGUE_ORDER
        try:
            ran = _run_slices(ao, bo, co if use_c else None, out, alpha, beta, s, slices, blocks, threads, order)
            return out.result(s), ran
        except _SlicesDoNotApply:
            if pick is None:  # asked for: say so
                raise
    G = per_block or _VECTOR_PER_BLOCK
    vec = _vector_kernel(mm, G, use_c, offsets=_VECTOR_OFFSETS) if vector else None
    if vec is not None:  # rows are whole 16-byte vectors: the operands as complex128 vectors
        a16, b16, d16 = (dev.reshape(batch, cols).view(np.complex128)
                         for dev, cols in ((ao.dev, m * k), (bo.dev, k * n), (out.dev, m * n)))
        c16 = co.dev.reshape(batch, m * n).view(np.complex128) if use_c else d16
        if vectors_ok(a16, b16, c16):  # 16-byte aligned (e.g. not a CuPy slice a[1:] of float32)
            kernel, smem = vec
            args = (a16, b16, c16, d16, scal(alpha), scal(beta), batch)
            grid = -(-batch // G)  # persistent: at most the blocks that fit at once
            grid = max(1, min(grid, blocks or resident_blocks(kernel, (threads, G), smem, *args) or grid))
            launch(kernel, grid, (threads, G, 1), s, smem, *args)
            return out.result(s), "vector"
    per_block = max(1, 256 // threads)
    kernel, smem = _batched_kernel(mm, per_block, co is not None)
    cdev = co.dev if co is not None else out.dev
    grid = max(1, -(-batch // per_block))
    launch(kernel, grid, (threads, per_block, 1), s, smem, ao.dev, bo.dev, cdev, out.dev, scal(alpha), scal(beta),
           batch)
    return out.result(s), "smem"


class _SlicesDoNotApply(ValueError):
    """The K-slice kernel does not apply to these operands (an explicit ``slices=`` says so; a
    ``_SLICE_PICKS`` entry falls back to the vector kernel)."""


# (m, n, k, dtype name) -> (``slices``, epilogue order) that :func:`batched_gemm` runs for that
# shape in place of the vector kernel, where the K-slice kernel applies. 64^3 float64: one K slice
# of 64, one stage, 128 threads, the result out through the ring's stage ("kc64x1r" in
# benchmarks/batched_gemm.py). On an H100 (thirty-second session, one run): 2.1883 ms against the
# vector kernel's 2.3213 (256 threads) and cuBLAS's 2.1168 (benchmarks/RESULTS.md).
_SLICE_PICKS: dict = {(64, 64, 64, "float64"): ((64, 1, None, 128), ("ring", "stage", "pairs", "values"))}


def _run_slices(ao, bo, co, out, alpha, beta, s, slices, blocks, threads, order):
    """Launch :func:`_slice_kernel` for ``_batched_gemm(..., slices=(kc, depth, min_blocks[,
    threads]))`` with ``threads`` per block unless ``slices`` names its own (``co`` None: no C
    term), its epilogue the first of ``order`` (None: ``_SLICE_EPILOGUE_ORDER``) that applies;
    returns "slices", or raises ValueError naming what does not fit (:class:`_SlicesDoNotApply`
    where the arguments are valid but the kernel does not apply)."""
    if not isinstance(slices, tuple) or len(slices) not in (3, 4):
        raise ValueError(f"slices must be (kc, depth, min_blocks) or (kc, depth, min_blocks, threads), got {slices!r}")
    kc, depth, min_blocks = slices[:3]
    if len(slices) == 4:
        threads = slices[3]
        if isinstance(threads, bool) or not isinstance(threads, int) or threads % 32 or not 32 <= threads <= 1024:
            raise ValueError(f"slices: threads must be a multiple of 32 from 32 to 1024, got {threads!r}")
    batch, m, k = ao.shape
    n = bo.shape[2]
    if not isinstance(kc, int) or kc < 1 or k % kc:
        raise ValueError(f"slices: kc must be a positive divisor of k = {k}, got {kc!r}")
    if min_blocks is not None and (not isinstance(min_blocks, int) or min_blocks < 1):
        raise ValueError(f"slices: min_blocks must be None or a positive int (blocks per SM), got {min_blocks!r}")
    mm = _slice_descriptor(m, n, kc, ao.dtype, threads)
    d = out.dev.reshape(batch, m * n)
    made, c, d = _slice_epilogue(mm, k, depth, co is not None, min_blocks, co.dev.reshape(batch, m * n)
                                 if co is not None else d, d, order)
    a16 = ao.dev.reshape(batch, m * k).view(np.complex128)
    b16 = bo.dev.reshape(batch, k * n).view(np.complex128)
    if made is None or not vectors_ok(a16, b16, a16):
        raise _SlicesDoNotApply(f"slices={slices!r}: the K-slice kernel does not apply to ({m}, {n}, {k}) "
                                f"{ao.dtype.name} with these operands (see kernels.gemm._slice_kernel)")
    kernel, smem = made
    scal = ao.dtype.type
    args = (a16, b16, c, d, scal(alpha), scal(beta), batch)
    grid = max(1, min(batch, blocks or resident_blocks(kernel, (threads, 1), smem, *args) or batch))
    launch(kernel, grid, (threads, 1, 1), s, smem, *args)
    return "slices"


def _slice_descriptor(m: int, n: int, kc: int, dtype, threads: int, sm=None) -> Matmul:
    """The ``(m, n, kc)`` descriptor of one K slice that :func:`_slice_kernel` runs: ``threads``
    per block, 16-byte aligned, cuBLASDx's suggested (padded) leading dimensions."""
    return _gemm_descriptor(m, n, kc, dtype, block_dim=threads, sm=sm, alignment=(16, 16, 16),
                            leading_dimension="suggested")


def _slice_epilogue(mm: Matmul, k, depth, use_c, min_blocks, c, d, order=None):
    """``(made, C, D)``: :func:`_slice_kernel` with the first epilogue that applies to the
    (batch, m*n) value arrays ``c`` and ``d`` (``c`` is ``d`` without a C term), and the views of
    them it takes, in ``order`` (default ``_SLICE_EPILOGUE_ORDER``): "stage" or "ring" where they are
    16-byte aligned and the block's shared memory holds the ring (and C tile), "pairs" where
    they are aligned to a pair and :func:`_slice_pairs`, "values" always; ``made`` None when the
    kernel does not apply at all."""
    n = mm.size[1]
    isz = mm.c_value_type.itemsize
    views_of = {"stage": np.dtype(np.complex128), "ring": np.dtype(np.complex128), "pairs": _pair_dtype(mm.c_value_type),
                "values": None}
    for epilogue in order or _SLICE_EPILOGUE_ORDER:
        vt = views_of[epilogue]
        if epilogue == "values":  # as they are
            views = (c, d)
        elif vt is None or (n * isz) % vt.itemsize:
            continue
        else:  # one view object where C is D (the simulator copies each argument on its own)
            dv = d.view(vt)
            views = (c.view(vt) if c is not d else dv, dv)
            if not vectors_ok(*views):  # a view that starts off its element size
                continue
        made = _slice_kernel(mm, k, depth, use_c, min_blocks, epilogue)
        if made is not None and made[1] <= shared_memory_limit(mm.sm):  # the C tile may not fit
            return made, *views
    return None, c, d


def _beamform_fft(beams, nsamp, prec, sm, own=False):
    """The beamforming kernel's FFT: one forward FFT of ``nsamp`` per beam, all beams in a block
    (8 elements per thread from 256 samples up, else 4). ``own``: kernels._regfft's (float32,
    its own elements per thread), where it has the size and its rows fit 48 KiB of shared memory."""
    if own and np.dtype(prec) == np.float32 and nsamp in OWN_SIZES:
        fft = own_descriptor(nsamp, "forward", None, beams)  # None where the rows need > 48 KiB
        if fft is not None:
            return fft
    return FFT(size=nsamp, precision=prec, direction="forward", elements_per_thread=8 if nsamp >= 256 else 4,
               ffts_per_block=beams, sm=sm)


@functools.cache
def _beamform_plan(beams, nsamp, channels, prec, sm):
    """(kernel, shared memory bytes, block) of one beamforming shape: the FFT (one per beam) and
    the GEMM sharing its block."""
    fft = _beamform_fft(beams, nsamp, prec, sm)
    mm = Matmul(size=(beams, nsamp, channels), precision=prec, data_type="complex",
                arrangement=("row_major", "row_major", "row_major"), block_dim=fft.block_dim, sm=sm)
    return (*_beamform_kernel(mm, fft), fft.block_dim)


def _beamform_fft_offset(mm: Matmul, fft: FFT) -> int:
    """Byte offset of the FFT's shared-memory workspace in the beamforming kernel's buffer: 0
    (over the GEMM's A and B tiles, dead once the GEMM is done) when the workspace ends before
    cuBLASDx's C tile, which the FFT's input is read from; else after the GEMM's buffer (16-byte
    aligned). On the H200 the main shape (16 beams, 256 samples, 16 channels) needs 66 KiB
    instead of 98 KiB per block: 3 blocks per SM instead of 2."""
    if fft.shared_memory_size <= mm.c_shared_memory_offset:
        return 0
    return -(-mm.shared_memory_size // 16) * 16


@functools.cache
def _beamform_kernel(mm: Matmul, fft: FFT):
    beams, nsamp, _ = mm.size
    isz = mm.c_value_type.itemsize
    a_off, b_off, c_off = (mm.a_shared_memory_offset // isz, mm.b_shared_memory_offset // isz,
                           mm.c_shared_memory_offset // isz)
    a_size, b_size, c_size = mm.a_size, mm.b_size, mm.c_size
    fft_off = _beamform_fft_offset(mm, fft) // isz
    ept, stride, storage = fft.elements_per_thread_value, fft.stride, fft.storage_size
    vt = mm.c_value_type

    @cuda.jit
    def kernel(W, X, Y):
        b = cuda.blockIdx.x
        smem = cuda.shared.array(0, dtype=vt)
        sa = smem[a_off:a_off + a_size]
        sb = smem[b_off:b_off + b_size]
        sc = smem[c_off:c_off + c_size]
        mm.load_a(W, sa)
        mm.load_b(X[b], sb)
        cuda.syncthreads()
        mm.execute(1.0, sa, sb, 0.0, sc)            # beams x samples, row-major, in shared memory
        cuda.syncthreads()
        td = cuda.local.array(storage, dtype=vt)
        beam = cuda.threadIdx.y
        for i in range(ept):
            td[i] = sc[beam * nsamp + cuda.threadIdx.x + i * stride]
        # one FFT per beam, fused after the GEMM; its workspace may lie over A and B (every
        # thread is past the GEMM: the syncthreads above), never over C (read just above)
        fft.execute(td, smem[fft_off:])
        for i in range(ept):
            Y[b, beam, cuda.threadIdx.x + i * stride] = td[i]

    return kernel, max(mm.shared_memory_size, fft_off * isz + fft.shared_memory_size)


# The beamforming kernel beamform_spectra runs: "direct" (the weighted sums in registers straight
# from global memory, then the FFTs: _beamform_direct_kernel) or "gemm" (cuBLASDx's GEMM in shared
# memory, then the FFTs: _beamform_kernel). benchmarks/fused_kernels.py --beamform-kernel times
# either: 16384 x 16 channels x 256 samples, 8 beams, complex64, H200 (2026-12-03, tree 4399263):
# direct 0.293 ms (64 % of the memory floor), gemm 0.410 ms (46 %), CuPy 0.777-0.780 ms.
BEAMFORM_KERNEL = "direct"


def _beamform_direct(beams, nsamp, channels, prec, sm):
    """(FFT, kernel, shared memory bytes) of the direct beamforming kernel: with our own FFT where
    ``OWN_FFT`` asks for it and the whole kernel fits 48 KiB of shared memory (our kernels link
    no code that opts them in to more; cuFFTDx's do), else with cuFFTDx's."""
    if "beamform_spectra" in _fused.OWN_FFT:
        fft = _beamform_fft(beams, nsamp, prec, sm, own=True)
        if isinstance(fft, RegFFT):
            kernel, smem = _beamform_direct_kernel(channels, fft)
            if smem <= OWN_MAX_SHARED:
                return fft, kernel, smem
    fft = _beamform_fft(beams, nsamp, prec, sm)
    return (fft, *_beamform_direct_kernel(channels, fft))


@functools.cache
def _beamform_direct_kernel(channels: int, fft: FFT):
    """``Y[b] = fft(W @ X[b], axis=-1)`` with the weighted sums done in registers: no GEMM tiles.

    ``fft`` is :func:`_beamform_fft`'s descriptor (one FFT per beam and block: ``block_dim =
    (nsamp / ept, beams)``). Each thread owns sample columns ``t`` (``nsamp // threads`` of them,
    or one when the block has more threads than samples) and a run of ``nb`` consecutive beams
    (``beams`` divided among the ``threads // nsamp`` groups that share a column; every beam
    when there is one group), so that ``nb`` times its columns is ``ept`` outputs per thread.
    It reads ``X[b, c, t]`` for every channel straight from global memory (consecutive threads,
    consecutive samples: coalesced; one ``load_complex`` each) and ``W`` from shared memory
    (one copy per block; every thread of a warp reads the same weight), accumulates its ``nb``
    beams in registers, and writes them to a beams x samples tile in shared memory; after a
    barrier each FFT thread takes its ``ept`` elements of its beam's row, and after a second
    barrier the FFTs' workspace lies over the tile (dead by then). W is ``(beams, channels)``,
    X ``(batch, channels, nsamp)``, Y ``(batch, beams, nsamp)``, all of the FFT's value type,
    C-contiguous, accepted by :func:`kernels._fused.vectors_ok`.

    Returns ``(kernel, dynamic shared memory bytes)``."""
    nsamp = fft.size
    bx, beams = fft.block_dim[0], fft.block_dim[1]
    nt = bx * beams
    ept, stride, storage = fft.elements_per_thread_value, fft.stride, fft.storage_size
    vt = fft.value_type
    isz = np.dtype(vt).itemsize
    groups = max(1, nt // nsamp)  # threads that share one sample column
    nb = beams // groups  # beams per thread
    ncol = max(1, nsamp // nt)  # sample columns per thread
    chunk = min(channels, 16)  # channels whose samples are in flight at once
    tile = beams * nsamp  # the beams x samples tile, then W after it
    smem = max((tile + beams * channels) * isz, fft.shared_memory_size)
    zero = vt.type(0)

    @cuda.jit
    def kernel(W, X, Y):
        b = cuda.blockIdx.x
        tid = cuda.threadIdx.y * bx + cuda.threadIdx.x
        sv = cuda.shared.array(0, dtype=vt)
        for i in range(tid, beams * channels, nt):
            sv[tile + i] = W[i // channels, i % channels]
        cuda.syncthreads()
        beam0 = (tid // nsamp) * nb if groups > 1 else 0
        xr = cuda.local.array(chunk, dtype=vt)
        acc = cuda.local.array(nb, dtype=vt)
        for j in range(ncol):
            t = (tid % nsamp if groups > 1 else tid) + j * nt
            for k in range(nb):
                acc[k] = zero
            for c0 in range(0, channels, chunk):
                for c in range(chunk):
                    if c0 + c < channels:
                        xr[c] = load_complex(X, (b, c0 + c, t))
                wb = tile + beam0 * channels + c0  # this chunk's weights of the thread's first beam
                for c in range(chunk):
                    if c0 + c < channels:
                        for k in range(nb):
                            acc[k] += sv[wb + k * channels + c] * xr[c]
            for k in range(nb):
                sv[(beam0 + k) * nsamp + t] = acc[k]
        cuda.syncthreads()
        td = cuda.local.array(storage, dtype=vt)
        beam = cuda.threadIdx.y
        for i in range(ept):
            td[i] = sv[beam * nsamp + cuda.threadIdx.x + i * stride]
        cuda.syncthreads()  # every thread has its elements: the FFTs' workspace may take the tile
        fft.execute(td, sv)
        for i in range(ept):
            store_complex(Y, (b, beam, cuda.threadIdx.x + i * stride), td[i])

    return kernel, smem


def beamform_spectra(x, weights, *, stream=None):
    """Beamforming then spectra in one kernel: ``fft(weights @ x[b], axis=-1)`` for every b.

    Parameters
    ----------
    x : array, shape (batch, channels, samples), complex64 or complex128
        ``samples`` a power of 2 from 32 to 1024.
    weights : array_like, shape (beams, channels)
        Beam weights; ``beams`` a power of 2 from 1 to 16 (one FFT per beam and block); the
        weights and a beams x samples tile share one block's shared memory (with 8 complex128
        beams of 1024 samples, up to 792 channels on sm_90; ValueError beyond). Host
        weights are kept on the device for later calls; device weights (CuPy, PyTorch, Numba)
        are read in place, converted on the device (on ``stream``) when their dtype differs
        from ``x``'s; never copied to the host.

    Returns
    -------
    array, shape (batch, beams, samples): the beams' spectra, ``x``'s kind of array.
    """
    xo = Operand("x", x, (np.dtype(np.complex64), np.dtype(np.complex128)), (3,), None)
    batch, channels, nsamp = xo.shape
    if on_device(weights):  # device weights stay there (converted there to x's dtype)
        w = Operand("weights", weights, _DTYPES, (1, 2, 3), None)
    else:
        w = host_numbers("weights", weights).astype(xo.dtype)
    if len(w.shape) != 2 or w.shape[1] != channels:
        raise ValueError(f"weights must have shape (beams, channels={channels}), got {w.shape}")
    beams = w.shape[0]
    if beams < 1 or beams > 16 or beams & (beams - 1):
        raise ValueError(f"weights must have a power-of-2 number of beams from 1 to 16, got {beams}")
    if nsamp < 32 or nsamp > 1024 or nsamp & (nsamp - 1):
        raise ValueError(f"x must have a power-of-2 number of samples from 32 to 1024, got {nsamp}")
    s = resolve_stream(stream, xo)
    prec = np.float32 if xo.dtype == np.dtype(np.complex64) else np.float64
    direct = BEAMFORM_KERNEL == "direct"  # read once: the kernel and its operands agree
    try:
        if direct:
            sm = _sm()
            fft, kernel, smem = _beamform_direct(beams, nsamp, channels, prec, sm)
            block = fft.block_dim
            limit = shared_memory_limit(sm)
            if smem > limit:  # the tile and W: W grows with the channels
                raise ValueError(f"needs {smem} bytes of shared memory per block (the {beams} x {nsamp} "
                                 f"tile and the {beams} x {channels} weights); sm_{sm} allows "
                                 f"{limit}: use fewer channels, beams or samples")
        else:
            kernel, smem, block = _beamform_plan(beams, nsamp, channels, prec, _sm())
    except ValueError as e:  # e.g. too few threads for cuBLASDx: name the arguments' sizes
        raise ValueError(f"x and weights: {beams} beams of {nsamp} samples from {channels} channels do "
                         f"not fit one block: {e}") from None
    if not isinstance(w, Operand):
        wd = to_device_const(w, s)
    elif simulator():
        wd = np.asarray(w.dev).astype(xo.dtype)
    elif w.dtype != xo.dtype:
        wd = Output(w.shape, xo.dtype, xo, s).dev
        copy_1d(w.dev.reshape(w.dev.size), wd.reshape(wd.size), s)
    else:
        wd = w.dev
    out = Output((batch, beams, nsamp), xo.dtype, xo, s)
    xd = aligned(xo.dev, xo, s) if direct else xo.dev  # the direct kernel's loads: one access per value
    launch(kernel, batch, block, s, smem, wd, xd, out.dev)
    return out.result(s)
