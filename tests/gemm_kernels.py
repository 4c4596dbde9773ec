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


# ---------------------------------------------------------------------------- more value types
# Descriptors (sm aside) that the CPU, simulator and GPU tests of the value types and the
# run-time leading-dimension form share, so one compile serves all three.
RCC = ("row_major", "col_major", "col_major")
TYPES_CASES = {
    "i8-i8-i32-rcc": dict(size=(16, 16, 16), precision=(np.int8, np.int8, np.int32), arrangement=RCC, block_dim=64),
    "u8-u8-u32-crr": dict(size=(8, 24, 16), precision=(np.uint8, np.uint8, np.uint32),
                          arrangement=("col_major", "row_major", "row_major"), block_dim=32),
    "i16-i16-i64-ccc": dict(size=(8, 8, 8), precision=(np.int16, np.int16, np.int64), block_dim=32),
    "c16-rcc": dict(size=(16, 16, 16), precision=np.float16, data_type="complex", arrangement=RCC, block_dim=64),
    "c16-c16-c32-crc": dict(size=(16, 8, 16), precision=(np.float16, np.float16, np.float32), data_type="complex",
                            arrangement=("col_major", "row_major", "col_major"), block_dim=32),
    "c16-ccr-ld": dict(size=(8, 12, 16), precision=np.float16, data_type="complex",
                       arrangement=("col_major", "col_major", "row_major"), leading_dimension=(10, 17, 14),
                       block_dim=32),
}
# run-time leading dimensions: (Matmul arguments, (lda, ldb, ldc) passed at run time)
RUNTIME_LD_CASES = {
    "f64-rcc": (dict(size=(10, 11, 13), precision=np.float64, arrangement=RCC, block_dim=32), (14, 15, 12)),
    "f32-ccr": (dict(size=(16, 8, 12), precision=np.float32, arrangement=("col_major", "col_major", "row_major"),
                     block_dim=32), (16, 13, 9)),
}


def complex_half_kernel(MM):
    """A plain Python kernel function for a complex float16 GEMM (A and B ``types.complex32``:
    float16x2_type in kernels; C complex32 or complex64) as nvmath-python programs write it:
    complex64 global data, converted by the copy helpers; ``C = alpha A B + beta C`` in shared
    memory, and ``D = A B`` from the register accumulator (float16x2 values read as ``.x``/``.y``)."""
    import nvmath_device as nd
    from nvmath_device.types import Complex

    a_size, b_size, c_size = MM.a_size, MM.b_size, MM.c_size
    b_off = MM.b_shared_memory_offset // 4
    c_off = MM.c_shared_memory_offset // np.dtype(MM.c_value_type).itemsize
    c_half = isinstance(MM.c_value_type, Complex)

    if c_half:
        def kernel(A, B, C, D, alpha, beta):
            g = cuda.blockIdx.x
            sa = cuda.shared.array(0, dtype=MM.a_value_type)[0:a_size]
            sb = cuda.shared.array(0, dtype=MM.b_value_type)[b_off:b_off + b_size]
            sc = cuda.shared.array(0, dtype=MM.c_value_type)[c_off:c_off + c_size]
            MM.load_a(A[g], sa)
            MM.load_b(B[g], sb)
            MM.load_c(C[g], sc)
            cuda.syncthreads()
            MM.execute(alpha, sa, sb, beta, sc)
            cuda.syncthreads()
            MM.store_c(sc, C[g])
            acc = cuda.local.array(MM.accumulator_size, dtype=MM.c_value_type)
            rows = cuda.local.array(MM.accumulator_size, dtype=np.int32)
            cols = cuda.local.array(MM.accumulator_size, dtype=np.int32)
            for i in range(MM.accumulator_size):
                acc[i] = nd.float16x2(0.0, 0.0)
            MM.execute(sa, sb, acc)
            MM.fragment_coordinates(rows, cols)
            for i in range(MM.accumulator_size):
                if rows[i] >= 0:
                    v = acc[i]
                    D[g, rows[i], cols[i]] = complex(np.float32(v.x), np.float32(v.y))
    else:
        def kernel(A, B, C, D, alpha, beta):
            g = cuda.blockIdx.x
            sa = cuda.shared.array(0, dtype=MM.a_value_type)[0:a_size]
            sb = cuda.shared.array(0, dtype=MM.b_value_type)[b_off:b_off + b_size]
            sc = cuda.shared.array(0, dtype=MM.c_value_type)[c_off:c_off + c_size]
            MM.load_a(A[g], sa)
            MM.load_b(B[g], sb)
            MM.load_c(C[g], sc)
            cuda.syncthreads()
            MM.execute(alpha, sa, sb, beta, sc)
            cuda.syncthreads()
            MM.store_c(sc, C[g])
            acc = cuda.local.array(MM.accumulator_size, dtype=MM.c_value_type)
            rows = cuda.local.array(MM.accumulator_size, dtype=np.int32)
            cols = cuda.local.array(MM.accumulator_size, dtype=np.int32)
            for i in range(MM.accumulator_size):
                acc[i] = 0
            MM.execute(sa, sb, acc)
            MM.fragment_coordinates(rows, cols)
            for i in range(MM.accumulator_size):
                if rows[i] >= 0:
                    D[g, rows[i], cols[i]] = acc[i]

    return kernel


def runtime_ld_kernel(MM, lds):
    """A plain Python kernel function: nvmath-python's run-time leading-dimension form,
    ``MM.execute(alpha, a, lda, b, ldb, beta, c, ldc)``, with ``lda, ldb, ldc`` kernel arguments
    (the tiles loaded by hand with them) in dynamic shared memory of
    ``MM.get_shared_storage_size(lda, ldb, ldc)`` bytes; ``lds`` only places the tiles."""
    from nvmath_device.gemm import runtime_tile_sizes

    sizes = runtime_tile_sizes(MM, lds)
    item = np.dtype(MM.a_value_type).itemsize
    al = MM.alignment
    b_off = -(-sizes[0] * item // al.b) * al.b // item
    c_off = -(-(b_off + sizes[1]) * item // al.c) * al.c // item
    a_size, b_size, c_size = sizes
    (m, k), (_, n) = (MM.m, MM.k), (MM.k, MM.n)
    a_row, b_row, c_row = (x == "row_major" for x in MM.arrangement)
    nthreads = MM.block_size

    def kernel(alpha, A, lda, B, ldb, beta, C, ldc):
        smem = cuda.shared.array(0, dtype=MM.a_value_type)
        sa = smem[0:a_size]
        sb = smem[b_off:b_off + b_size]
        sc = smem[c_off:c_off + c_size]
        t = cuda.threadIdx.x
        for i in range(t, m * k, nthreads):
            r, c = i // k, i % k
            sa[r * lda + c if a_row else r + c * lda] = A[r, c]
        for i in range(t, k * n, nthreads):
            r, c = i // n, i % n
            sb[r * ldb + c if b_row else r + c * ldb] = B[r, c]
        for i in range(t, m * n, nthreads):
            r, c = i // n, i % n
            sc[r * ldc + c if c_row else r + c * ldc] = C[r, c]
        cuda.syncthreads()
        MM.execute(alpha, sa, lda, sb, ldb, beta, sc, ldc)
        cuda.syncthreads()
        for i in range(t, m * n, nthreads):
            r, c = i // n, i % n
            C[r, c] = sc[r * ldc + c if c_row else r + c * ldc]

    return kernel


# ---------------------------------------------------------------------------- runners (sim and GPU)
def _launch(kernel, grid, block, smem, *args):
    from tests.harness import launch_guarded

    launch_guarded(cuda.jit(kernel), grid, block, smem, *args, timeout=600)
    cuda.synchronize()


def run_integer(MM, batch=1, seed=0):
    """:func:`user_kernel` on an integer GEMM with small random integers (no overflow: the
    result is exact). C and D sit in larger buffers poisoned with a sentinel. Returns
    ``(C, D, reference, sentinel)``; ``C``/``D`` are the whole buffers."""
    from tests.device_arrays import to_device, to_host

    rng = np.random.default_rng(seed)
    m, n, k = MM.size

    def ints(shape, dt):
        dt = np.dtype(dt)
        lo, hi = (-2, 2) if dt.kind == "i" else (0, 4)
        return rng.integers(lo, hi, size=shape).astype(dt)

    A, B = ints((batch, m, k), MM.a_value_type), ints((batch, k, n), MM.b_value_type)
    ct = np.dtype(MM.c_value_type)
    sentinel = np.iinfo(ct).min if ct.kind == "i" else np.iinfo(ct).max
    C = np.full((batch, m + 3, n + 5), sentinel, dtype=ct)
    C[:, :m, :n] = ints((batch, m, n), ct)
    alpha, beta = (3, -2) if ct.kind == "i" else (3, 2)
    ref = alpha * np.matmul(A.astype(np.int64), B.astype(np.int64)) + beta * C[:, :m, :n].astype(np.int64)
    dC, dD = to_device(C), to_device(C.copy())
    _launch(user_kernel(MM), batch, MM.block_dim, MM.shared_memory_size,
            to_device(A), to_device(B), dC, dD[:, :m, :n], alpha, beta)
    return to_host(dC), to_host(dD), ref, sentinel


def run_complex_half(MM, batch=1, seed=0):
    """:func:`complex_half_kernel` with complex64 data whose parts are float16 values; C and D
    in larger NaN-poisoned buffers. Returns ``(C, D, C_reference, D_reference)`` (whole C/D
    buffers; references complex128 of the m x n results)."""
    from tests.device_arrays import to_device, to_host

    rng = np.random.default_rng(seed)
    m, n, k = MM.size

    def cplx(shape):
        re = rng.uniform(-1, 1, shape).astype(np.float16)
        im = rng.uniform(-1, 1, shape).astype(np.float16)
        return (re.astype(np.float32) + 1j * im.astype(np.float32)).astype(np.complex64)

    A, B = cplx((batch, m, k)), cplx((batch, k, n))
    C = np.full((batch, m + 3, n + 5), np.nan, dtype=np.complex64)
    C[:, :m, :n] = cplx((batch, m, n))
    D = np.full_like(C, np.nan)
    alpha, beta = 1.0 + 0.5j, -0.75  # both exact in float16
    prod = np.matmul(A.astype(np.complex128), B.astype(np.complex128))
    ref_c = alpha * prod + beta * C[:, :m, :n].astype(np.complex128)
    dC, dD = to_device(C), to_device(D)
    _launch(complex_half_kernel(MM), batch, MM.block_dim, MM.shared_memory_size,
            to_device(A), to_device(B), dC[:, :m, :n], dD[:, :m, :n], alpha, beta)
    return to_host(dC), to_host(dD), ref_c, prod


def run_runtime_ld(MM, lds, seed=0):
    """:func:`runtime_ld_kernel` (one GEMM) with ``lds`` passed at run time; C inside a larger
    NaN-poisoned buffer. Returns ``(C, reference)`` (whole C buffer; float64 m x n reference)."""
    from tests.device_arrays import to_device, to_host

    rng = np.random.default_rng(seed)
    m, n, k = MM.size
    dt = np.dtype(MM.a_value_type)
    A = rng.uniform(-1, 1, (m, k)).astype(dt)
    B = rng.uniform(-1, 1, (k, n)).astype(dt)
    C = np.full((m + 2, n + 3), np.nan, dtype=dt)
    C[:m, :n] = rng.uniform(-1, 1, (m, n))
    alpha, beta = 1.25, -0.5
    ref = alpha * (A.astype(np.float64) @ B.astype(np.float64)) + beta * C[:m, :n].astype(np.float64)
    dC = to_device(C)
    lda, ldb, ldc = lds
    _launch(runtime_ld_kernel(MM, lds), 1, MM.block_dim, MM.get_shared_storage_size(*lds),
            alpha, to_device(A), lda, to_device(B), ldb, beta, dC[:m, :n], ldc)
    return to_host(dC), ref
