# SPDX-License-Identifier: Apache-2.0
"""Kernels written with nvmath_device.common's tensor API, shared by the CPU tests (typing, link to
sm_90) and the GPU tests (results against NumPy float64). Plain Python functions: the tests
compile them with ``aot.compile_kernel`` or ``cuda.jit``.

Each is the pattern of one of nvmath-python's public cuBLASDx tensor examples, written here:
``tensor_gemm`` (copy / clear / execute into a register tensor / copy_fragment / axpby),
``accumulator_gemm`` (an accumulator: make_partition_and_copy, get_results, partition_and_copy),
``partition_gemm`` (fragment coordinates: is_thread_active, is_predicated, is_index_in_bounds,
map_fragment_index; copies with ``alignment=16``), ``partition_like_gemm`` (C through
``partition_like_C`` views) and ``fragment_like_gemm`` (make_fragment_like to float64, fragment indexing).
"""

from __future__ import annotations

import numpy as np
from numba import cuda, types

from nvmath_device import Matmul
from nvmath_device.common import (
    axpby,
    clear,
    copy,
    copy_fragment,
    copy_wait,
    make_fragment_like,
    make_tensor,
)

SM = 90


def descriptor(m=64, n=64, k=32, arrangement=("col_major", "row_major", "row_major"), block_size=128,
               precision=(np.float16, np.float16, np.float32)):
    return Matmul(size=(m, n, k), precision=precision, data_type="real", arrangement=arrangement,
                  execution="Block", block_size=block_size, sm=SM)


def argtypes(MM, c_dtype=None):
    """Numba argument types (alpha, a, b, beta, c, out) with each global array in its arrangement."""
    def arr(dtype, arrangement):
        nb = {np.float16: types.float16, np.float32: types.float32, np.float64: types.float64}[dtype]
        return nb[::1, :] if arrangement == "col_major" else nb[:, ::1]
    at, bt, ct = (np.dtype(t).type for t in (MM.a_value_type, MM.b_value_type, MM.c_value_type))
    c = c_dtype or ct
    return (types.float64, arr(at, MM.arrangement[0]), arr(bt, MM.arrangement[1]), types.float64,
            arr(c, MM.arrangement[2]), arr(c, MM.arrangement[2]))


def tensor_gemm(MM, suggested=True):
    """out = alpha * A @ B + beta * C, C and the result through register fragments."""
    a_layout = MM.suggest_layout_smem_a() if suggested else MM.get_layout_smem_a()
    b_layout = MM.suggest_layout_smem_b() if suggested else MM.get_layout_smem_b()
    c_layout = MM.suggest_layout_rmem_c() if suggested else MM.get_layout_rmem_c()
    a_size, b_size, c_size = a_layout.cosize, b_layout.cosize, c_layout.cosize

    def kernel(alpha, a, b, beta, c, out):
        smem = cuda.shared.array(shape=(0,), dtype=MM.a_value_type, alignment=16)
        smem_a = make_tensor(smem[:a_size], a_layout)
        smem_b = make_tensor(smem[a_size:a_size + b_size], b_layout)
        acc = make_tensor(cuda.local.array(c_size, dtype=MM.c_value_type), c_layout)
        copy(make_tensor(a, MM.get_layout_gmem_a()), smem_a)
        copy(make_tensor(b, MM.get_layout_gmem_b()), smem_b)
        clear(acc)
        copy_wait()
        MM.execute(smem_a, smem_b, acc)
        cfrag = make_tensor(cuda.local.array(c_size, dtype=MM.c_value_type), c_layout)
        copy_fragment(make_tensor(c, MM.get_layout_gmem_c()), cfrag)
        axpby(alpha, acc, beta, cfrag)
        copy_fragment(cfrag, make_tensor(out, MM.get_layout_gmem_c()))

    return kernel


def accumulator_gemm(MM):
    """The same GEMM with an accumulator object."""
    a_layout, b_layout = MM.get_layout_smem_a(), MM.get_layout_smem_b()
    a_size, b_size = a_layout.cosize, b_layout.cosize

    def kernel(alpha, a, b, beta, c, out):
        smem = cuda.shared.array(shape=(0,), dtype=MM.a_value_type, alignment=16)
        smem_a = make_tensor(smem[:a_size], a_layout)
        smem_b = make_tensor(smem[a_size:a_size + b_size], b_layout)
        copy(make_tensor(a, MM.get_layout_gmem_a()), smem_a)
        copy(make_tensor(b, MM.get_layout_gmem_b()), smem_b)
        copy_wait()
        accumulator = MM.get_accumulator()
        c_frag = accumulator.make_partition_and_copy(make_tensor(c, MM.get_layout_gmem_c()))
        MM.execute(smem_a, smem_b, accumulator)
        axpby(alpha, accumulator.get_results(), beta, c_frag)
        accumulator.partition_and_copy(c_frag, make_tensor(out, MM.get_layout_gmem_c()))

    return kernel


def partition_gemm(MM):
    """The GEMM with C read and written element by element through map_fragment_index."""
    a_layout, b_layout = MM.suggest_layout_smem_a(), MM.suggest_layout_smem_b()
    c_layout = MM.suggest_layout_rmem_c()
    a_size, b_size, c_size = a_layout.cosize, b_layout.cosize, c_layout.size

    def kernel(alpha, a, b, beta, c, out):
        smem = cuda.shared.array(shape=(0,), dtype=MM.a_value_type, alignment=16)
        smem_a = make_tensor(smem[:a_size], a_layout)
        smem_b = make_tensor(smem[a_size:a_size + b_size], b_layout)
        buf = cuda.local.array(c_size, dtype=MM.c_value_type)
        out_buf = cuda.local.array(c_size, dtype=MM.c_value_type)
        rmem_c = make_tensor(buf, c_layout)
        rmem_out = make_tensor(out_buf, c_layout)
        copy(make_tensor(a, MM.get_layout_gmem_a()), smem_a, alignment=16)
        copy(make_tensor(b, MM.get_layout_gmem_b()), smem_b, alignment=16)
        clear(rmem_c)
        copy_wait()
        MM.execute(smem_a, smem_b, rmem_c)
        acc = MM.suggest_accumulator()
        if acc.is_thread_active():
            for i in range(c_size):
                if (not acc.is_predicated()) or acc.is_index_in_bounds(i):
                    x, y = acc.map_fragment_index(i)
                    out_buf[i] = c[x, y]
        axpby(alpha, rmem_c, beta, rmem_out)
        if acc.is_thread_active():
            for i in range(c_size):
                if (not acc.is_predicated()) or acc.is_index_in_bounds(i):
                    x, y = acc.map_fragment_index(i)
                    out[x, y] = rmem_out[i]

    return kernel


def partition_like_gemm(MM):
    """The partition kernel's pattern with C read and written through partition_like_C views."""
    a_layout, b_layout = MM.suggest_layout_smem_a(), MM.suggest_layout_smem_b()
    c_layout = MM.suggest_layout_rmem_c()
    a_size, b_size, c_size = a_layout.cosize, b_layout.cosize, c_layout.size

    def kernel(alpha, a, b, beta, c, out):
        smem = cuda.shared.array(shape=(0,), dtype=MM.a_value_type, alignment=16)
        smem_a = make_tensor(smem[:a_size], a_layout)
        smem_b = make_tensor(smem[a_size:a_size + b_size], b_layout)
        rmem_c = make_tensor(cuda.local.array(c_size, dtype=MM.c_value_type), c_layout)
        copy(make_tensor(a, MM.get_layout_gmem_a()), smem_a, alignment=16)
        copy(make_tensor(b, MM.get_layout_gmem_b()), smem_b, alignment=16)
        clear(rmem_c)
        copy_wait()
        MM.execute(smem_a, smem_b, rmem_c)
        part = MM.suggest_partitioner()
        pc = part.partition_like_C(make_tensor(c, MM.get_layout_gmem_c()))
        po = part.partition_like_C(make_tensor(out, MM.get_layout_gmem_c()))
        if part.is_thread_active():
            for i in range(c_size):
                if (not part.is_predicated()) or part.is_index_in_bounds(i):
                    po[i] = alpha * rmem_c[i] + beta * pc[i]

    return kernel


def fragment_like_gemm(MM):
    """The GEMM finished in float64 fragments: out (float64) = alpha * A @ B + beta * C (float64)."""
    a_layout, b_layout = MM.suggest_layout_smem_a(), MM.suggest_layout_smem_b()
    a_size, b_size = a_layout.cosize, b_layout.cosize

    def kernel(alpha, a, b, beta, c, out):
        smem = cuda.shared.array(shape=(0,), dtype=MM.a_value_type, alignment=16)
        smem_a = make_tensor(smem[:a_size], a_layout)
        smem_b = make_tensor(smem[a_size:a_size + b_size], b_layout)
        accumulator = MM.suggest_accumulator()
        copy(make_tensor(a, MM.get_layout_gmem_a()), smem_a)
        copy(make_tensor(b, MM.get_layout_gmem_b()), smem_b)
        copy_wait()
        MM.execute(smem_a, smem_b, accumulator)
        rmem_c = accumulator.get_results()
        c64 = make_fragment_like(rmem_c, np.float64)
        for i in range(rmem_c.layout.cosize):
            c64[i] = np.float64(rmem_c[i])
        d = accumulator.make_partition_and_copy(make_tensor(c, MM.get_layout_gmem_c()))
        axpby(alpha, c64, beta, d)
        copy_fragment(d, make_tensor(out, MM.get_layout_gmem_c()))

    return kernel


KERNELS = {"tensor": tensor_gemm, "accumulator": accumulator_gemm, "partition": partition_gemm,
           "partition_like": partition_like_gemm, "fragment_like": fragment_like_gemm}


def shared_bytes(MM, name):
    if name in ("accumulator",):
        return MM.get_shared_storage_size_ab(MM.get_layout_smem_a(), MM.get_layout_smem_b())
    return MM.get_shared_storage_size_ab(MM.suggest_layout_smem_a(), MM.suggest_layout_smem_b())


def _array(rng, shape, dtype, arrangement):
    x = rng.uniform(-1, 1, shape).astype(dtype)
    return np.asfortranarray(x) if arrangement == "col_major" else np.ascontiguousarray(x)


def run_against_numpy(name, MM, alpha=1.5, beta=-0.75):
    """Run kernel ``name`` on one block (GPU or simulator: whichever ``numba.cuda`` is) for fresh
    random A, B, C with ``out`` poisoned with NaN; assert every element was written and the relative
    error against NumPy float64 is below 1e-5."""
    m, n, k = MM.size
    arr = MM.arrangement
    rng = np.random.default_rng([m, n, k, len(name)])
    c_dtype = np.float64 if name == "fragment_like" else np.float32
    a = _array(rng, (m, k), np.float16, arr[0])
    b = _array(rng, (k, n), np.float16, arr[1])
    c = _array(rng, (m, n), c_dtype, arr[2])
    out = _array(rng, (m, n), c_dtype, arr[2])
    out[...] = np.nan
    d_out = cuda.to_device(out)
    cuda.jit(KERNELS[name](MM))[1, MM.block_dim, 0, shared_bytes(MM, name)](
        alpha, cuda.to_device(a), cuda.to_device(b), beta, cuda.to_device(c), d_out)
    got = d_out.copy_to_host()
    ref = alpha * (a.astype(np.float64) @ b.astype(np.float64)) + beta * c.astype(np.float64)
    assert not np.isnan(got).any(), f"{np.isnan(got).sum()} of {got.size} elements not written"
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err < 1e-5, f"relative error {err:.3g}"
