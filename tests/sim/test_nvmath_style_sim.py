# SPDX-License-Identifier: Apache-2.0
"""Programs written as for nvmath-python's device API (only the import changed) under the
simulator, against NumPy.

Run: NUMBA_ENABLE_CUDASIM=1 python -m pytest -q tests/sim/test_nvmath_style_sim.py

Each ``program_*`` builds its descriptors the nvmath way (no ``sm=``: the current GPU, or sm_90
under the simulator without one), uses the nvmath spellings (``link=fft.files``, ``fft(td,
smem)``, ``MM(...)``, ``fft.block_dim.x``, ``MM.leading_dimension``, ``transpose_mode=``,
``MM.get_shared_storage_size()``, ``fft(shared_mem)`` on data in shared memory, host arrays shaped by ``fft.ffts_per_block``) and returns
``(result, reference, rtol)``. tests/gpu/test_nvmath_style_gpu.py runs the same programs on
the GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from nvmath_device import FFT, Dim3, Matmul

# the transpose_mode programs copy nvmath-python's example, which warns there as here
pytestmark = pytest.mark.filterwarnings("ignore:Matmul\\(transpose_mode:DeprecationWarning")


def _random_complex(shape, dtype=np.complex64, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _random_real(shape, dtype=np.float32, seed=0, order="C"):
    rng = np.random.default_rng(seed)
    return np.asarray(rng.standard_normal(shape), dtype=dtype, order=order)


# ---------------------------------------------------------------------------- FFT programs
def program_block_fft():
    """cufftdx_simple_fft_block.py's shape: one block, suggested knobs, ``fft(td, smem)``."""
    fft = FFT(fft_type="c2c", size=64, precision=np.float32, direction="forward", execution="Block")

    @cuda.jit(link=fft.files)
    def f(data):
        thread_data = cuda.local.array(shape=(fft.storage_size,), dtype=fft.value_type)
        local_fft_id = cuda.threadIdx.y
        index = cuda.threadIdx.x
        for i in range(fft.elements_per_thread):
            thread_data[i] = data[local_fft_id, index]
            index += fft.block_dim.x  # = fft.stride
        shared_mem = cuda.shared.array(shape=(0,), dtype=fft.value_type)
        fft(thread_data, shared_mem)
        index = cuda.threadIdx.x
        for i in range(fft.elements_per_thread):
            data[local_fft_id, index] = thread_data[i]
            index += fft.stride

    data = np.ones((fft.ffts_per_block, fft.size), dtype=np.complex64)
    data += _random_complex(data.shape)
    ref = np.fft.fft(data, axis=-1)
    data_d = cuda.to_device(data)
    f[1, fft.block_dim, 0, fft.shared_memory_size](data_d)
    cuda.synchronize()
    return data_d.copy_to_host(), ref, 1e-5


def program_convolution():
    """cufftdx_convolution.py's shape: forward, scale, inverse in one kernel over a grid."""
    batch = 5
    kw = dict(fft_type="c2c", size=32, precision=np.float32, execution="Block", elements_per_thread=4,
              ffts_per_block=2)
    fft = FFT(direction="forward", **kw)
    ifft = FFT(direction="inverse", **kw)
    assert fft.block_dim == ifft.block_dim == Dim3(8, 2)

    @cuda.jit(link=fft.files + ifft.files)
    def f(data, filt):
        thread_data = cuda.local.array(shape=(fft.storage_size,), dtype=fft.value_type)
        local_fft_id = cuda.threadIdx.y
        fft_id = cuda.blockIdx.x * fft.ffts_per_block + local_fft_id
        if fft_id < batch:
            index = cuda.threadIdx.x
            for i in range(fft.elements_per_thread):
                thread_data[i] = data[fft_id, index]
                index += fft.stride
        shared_mem = cuda.shared.array(shape=(0,), dtype=fft.value_type)
        fft(thread_data, shared_mem)
        index = cuda.threadIdx.x
        for i in range(fft.elements_per_thread):
            thread_data[i] = thread_data[i] * filt[index]
            index += fft.stride
        cuda.syncthreads()
        ifft.execute(thread_data, shared_mem)
        if fft_id < batch:
            index = cuda.threadIdx.x
            for i in range(fft.elements_per_thread):
                data[fft_id, index] = thread_data[i]
                index += fft.stride

    data = _random_complex((batch, fft.size))
    filt = _random_complex((fft.size,), seed=1)
    ref = np.fft.ifft(np.fft.fft(data, axis=-1) * filt, axis=-1) * fft.size
    data_d = cuda.to_device(data)
    grid = (batch + fft.ffts_per_block - 1) // fft.ffts_per_block
    f[grid, fft.block_dim, 0, fft.shared_memory_size](data_d, cuda.to_device(filt))
    cuda.synchronize()
    return data_d.copy_to_host(), ref, 1e-4


def program_thread_fft():
    """cufftdx_simple_fft_thread.py's shape: ``fft(td)`` with Thread execution."""
    fft = FFT(fft_type="c2c", size=8, precision=np.float64, direction="forward", execution="Thread")
    assert fft.elements_per_thread == fft.size and fft.ffts_per_block == 1

    @cuda.jit(link=fft.files)
    def f(data):
        thread_data = cuda.local.array(shape=(fft.storage_size,), dtype=fft.value_type)
        for i in range(fft.size):
            thread_data[i] = data[cuda.threadIdx.x, i]
        fft(thread_data)
        for i in range(fft.size):
            data[cuda.threadIdx.x, i] = thread_data[i]

    data = _random_complex((2, fft.size), np.complex128)
    ref = np.fft.fft(data, axis=-1)
    data_d = cuda.to_device(data)
    f[1, 2](data_d)
    cuda.synchronize()
    return data_d.copy_to_host(), ref, 1e-12


def program_shared_memory_fft():
    """cufftdx_simple_fft_block_shared.py's shape: the data in shared memory, ``fft(shared_mem)``."""
    fft = FFT(fft_type="c2c", size=128, precision=np.float32, direction="forward", elements_per_thread=8,
              ffts_per_block=2, execution="Block")

    @cuda.jit(link=fft.files)
    def f(data):
        shared_mem = cuda.shared.array(shape=(0,), dtype=fft.value_type)
        local_fft_id = cuda.threadIdx.y
        index = cuda.threadIdx.x
        for _ in range(fft.elements_per_thread):
            shared_mem[local_fft_id * fft.size + index] = data[local_fft_id, index]
            index += fft.stride
        cuda.syncthreads()
        fft(shared_mem)
        cuda.syncthreads()
        index = cuda.threadIdx.x
        for _ in range(fft.elements_per_thread):
            data[local_fft_id, index] = shared_mem[local_fft_id * fft.size + index]
            index += fft.stride

    data = _random_complex((fft.ffts_per_block, fft.size))
    ref = np.fft.fft(data, axis=-1)
    data_d = cuda.to_device(data)
    smem = max(fft.shared_memory_size, np.complex64(1.0).itemsize * fft.size * fft.ffts_per_block)
    f[1, fft.block_dim, 0, smem](data_d)
    cuda.synchronize()
    return data_d.copy_to_host(), ref, 1e-5


def program_shared_memory_fft_execute_inverse():
    """``ifft.execute(shared_mem)`` with suggested knobs (odd size, several FFTs per block)."""
    fft = FFT(fft_type="c2c", size=15, precision=np.float64, direction="inverse")
    nfft = fft.ffts_per_block

    @cuda.jit(link=fft.files)
    def f(data):
        shared_mem = cuda.shared.array(shape=(0,), dtype=fft.value_type)
        t = cuda.threadIdx.x + cuda.threadIdx.y * fft.block_dim.x
        for i in range(t, nfft * fft.size, fft.block_dim.x * fft.block_dim.y):
            shared_mem[i] = data[i // fft.size, i % fft.size]
        cuda.syncthreads()
        fft.execute(shared_mem)
        cuda.syncthreads()
        for i in range(t, nfft * fft.size, fft.block_dim.x * fft.block_dim.y):
            data[i // fft.size, i % fft.size] = shared_mem[i]

    data = _random_complex((nfft, fft.size), np.complex128)
    ref = np.fft.ifft(data, axis=-1) * fft.size
    data_d = cuda.to_device(data)
    smem = max(fft.shared_memory_size, 16 * fft.size * nfft)
    f[1, fft.block_dim, 0, smem](data_d)
    cuda.synchronize()
    return data_d.copy_to_host(), ref, 1e-12


# ---------------------------------------------------------------------------- GEMM programs
def program_simple_gemm():
    """cublasdx_simple_gemm_fp32.py's shape: ``MM(...)``, leading dimensions unpacked in the kernel,
    one dynamic shared buffer of ``MM.get_shared_storage_size()`` bytes."""
    m, n, k = 16, 8, 12
    MM = Matmul(size=(m, n, k), precision=np.float32, data_type="real",
                arrangement=("row_major", "col_major", "col_major"), execution="Block", block_size=64)
    a_size, b_size = MM.a_size, MM.b_size

    @cuda.jit(link=MM.files)
    def f(a, b, c, alpha, beta, output):
        [lda, ldb, ldc] = MM.leading_dimension
        smem = cuda.shared.array(shape=(0,), dtype=MM.a_value_type)
        smem_a = smem[0:]
        smem_b = smem[a_size:]
        smem_c = smem[a_size + b_size:]
        t = cuda.threadIdx.x
        for i in range(t, m * k, MM.block_size):
            r, col = i // k, i % k
            smem_a[r * lda + col] = a[r, col]  # row-major A
        for i in range(t, k * n, MM.block_size):
            r, col = i % k, i // k
            smem_b[r + col * ldb] = b[r, col]
        for i in range(t, m * n, MM.block_size):
            r, col = i % m, i // m
            smem_c[r + col * ldc] = c[r, col]
        cuda.syncthreads()
        MM(alpha, smem_a, smem_b, beta, smem_c)
        cuda.syncthreads()
        for i in range(t, m * n, MM.block_size):
            r, col = i % m, i // m
            output[r, col] = smem_c[r + col * ldc]

    a = _random_real(MM.a_dim)
    b = _random_real(MM.b_dim, seed=1)
    c = _random_real(MM.c_dim, seed=2)
    out = cuda.to_device(np.zeros_like(c))
    alpha, beta = 2.0, 0.5
    assert MM.get_shared_storage_size() == MM.get_shared_storage_size(*MM.leading_dimension)
    f[1, MM.block_dim, 0, MM.get_shared_storage_size()](cuda.to_device(a), cuda.to_device(b),
                                                         cuda.to_device(c), alpha, beta, out)
    cuda.synchronize()
    return out.copy_to_host(), alpha * (a @ b) + beta * c, 1e-5


def program_transpose_mode():
    """cublasdx_simple_gemm_transpose_mode.py's shape: ``transpose_mode=``, 2-D shared arrays of
    ``MM.a_dim[::-1]``, ``MM(...)``, and the reference ``a @ b.T``."""
    m, n, k = 16, 8, 24
    MM = Matmul(size=(m, n, k), precision=np.float32, data_type="real",
                transpose_mode=("non_transposed", "transposed"), execution="Block", block_size=64)

    @cuda.jit(link=MM.files)
    def f(a, b, c, alpha, beta, output):
        smem_a = cuda.shared.array(shape=MM.a_dim[::-1], dtype=MM.a_value_type)
        smem_b = cuda.shared.array(shape=MM.b_dim[::-1], dtype=MM.b_value_type)
        smem_c = cuda.shared.array(shape=MM.c_dim[::-1], dtype=MM.c_value_type)
        t = cuda.threadIdx.x
        for i in range(t, MM.a_dim[0] * MM.a_dim[1], MM.block_dim.x):
            smem_a[i // MM.a_dim[0], i % MM.a_dim[0]] = a[i % MM.a_dim[0], i // MM.a_dim[0]]
        for i in range(t, MM.b_dim[0] * MM.b_dim[1], MM.block_dim.x):
            smem_b[i // MM.b_dim[0], i % MM.b_dim[0]] = b[i % MM.b_dim[0], i // MM.b_dim[0]]
        for i in range(t, MM.c_dim[0] * MM.c_dim[1], MM.block_dim.x):
            smem_c[i // MM.c_dim[0], i % MM.c_dim[0]] = c[i % MM.c_dim[0], i // MM.c_dim[0]]
        cuda.syncthreads()
        MM(alpha, smem_a, smem_b, beta, smem_c)
        cuda.syncthreads()
        for i in range(t, MM.c_dim[0] * MM.c_dim[1], MM.block_dim.x):
            output[i % MM.c_dim[0], i // MM.c_dim[0]] = smem_c[i // MM.c_dim[0], i % MM.c_dim[0]]

    a = _random_real(MM.a_dim)
    b = _random_real(MM.b_dim, seed=1)
    c = _random_real(MM.c_dim, seed=2)
    out = cuda.to_device(np.zeros_like(c))
    alpha, beta = 2.0, 5.0
    f[1, MM.block_dim](cuda.to_device(a), cuda.to_device(b), cuda.to_device(c), alpha, beta, out)
    cuda.synchronize()
    return out.copy_to_host(), alpha * (a @ b.T) + beta * c, 1e-5


def program_transpose_mode_copy_helpers():
    """``transpose_mode=`` with the copy helpers: the global A is ``MM.a_dim`` = (k, m)."""
    m, n, k = 8, 16, 12
    MM = Matmul(size=(m, n, k), precision=np.float64, transpose_mode=("transposed", "non_transposed"),
                block_dim=Dim3(32, 2))

    @cuda.jit(link=MM.files)
    def f(a, b, c):
        sa = cuda.shared.array(MM.a_size, dtype=MM.a_value_type)
        sb = cuda.shared.array(MM.b_size, dtype=MM.b_value_type)
        sc = cuda.shared.array(MM.c_size, dtype=MM.c_value_type)
        MM.load_a(a, sa)
        MM.load_b(b, sb)
        cuda.syncthreads()
        MM(1.0, sa, sb, 0.0, sc)
        cuda.syncthreads()
        MM.store_c(sc, c)

    a = _random_real(MM.a_dim, np.float64)
    b = _random_real(MM.b_dim, np.float64, seed=1)
    c = cuda.to_device(np.zeros(MM.c_dim))
    f[1, MM.block_dim](cuda.to_device(a), cuda.to_device(b), c)
    cuda.synchronize()
    return c.copy_to_host(), a.T @ b, 1e-12


def program_gemm_then_fft():
    """cublasdx_gemm_fft.py's shape: a GEMM and an FFT sharing one block and one shared buffer of
    ``max(mm.get_shared_storage_size(), fft.shared_memory_size)`` bytes; C's columns are FFTs."""
    fft = FFT(fft_type="c2c", size=16, precision=np.float32, direction="forward", execution="Block",
              elements_per_thread=4, ffts_per_block=8)
    assert fft.block_dim == Dim3(4, 8, 1)
    mm = Matmul(size=(fft.size, fft.ffts_per_block, 8), precision=np.float32, data_type="complex",
                arrangement=("col_major", "col_major", "col_major"), block_dim=fft.block_dim)
    smem_size = max(mm.get_shared_storage_size(), fft.shared_memory_size)
    a_size, b_size = mm.a_size, mm.b_size

    @cuda.jit(link=mm.files + fft.files)
    def f(a, b, output):
        smem = cuda.shared.array(shape=(0,), dtype=mm.c_value_type)
        smem_a = smem[0:]
        smem_b = smem[a_size:]
        smem_c = smem[a_size + b_size:]
        [lda, ldb, ldc] = mm.leading_dimension
        t = cuda.threadIdx.x + cuda.threadIdx.y * fft.block_dim.x
        nthreads = mm.block_size
        for i in range(t, mm.m * mm.k, nthreads):
            smem_a[i % mm.m + (i // mm.m) * lda] = a[i % mm.m, i // mm.m]
        for i in range(t, mm.k * mm.n, nthreads):
            smem_b[i % mm.k + (i // mm.k) * ldb] = b[i % mm.k, i // mm.k]
        cuda.syncthreads()
        mm(1.0, smem_a, smem_b, 0.0, smem_c)
        cuda.syncthreads()
        thread_data = cuda.local.array(shape=(fft.storage_size,), dtype=fft.value_type)
        col = cuda.threadIdx.y
        index = cuda.threadIdx.x
        for i in range(fft.elements_per_thread):
            thread_data[i] = smem_c[index + col * ldc]
            index += fft.stride
        cuda.syncthreads()
        fft(thread_data, smem)
        index = cuda.threadIdx.x
        for i in range(fft.elements_per_thread):
            output[index, col] = thread_data[i]
            index += fft.stride

    a = _random_complex(mm.a_dim)
    b = _random_complex(mm.b_dim, seed=1)
    out = cuda.to_device(np.zeros(mm.c_dim, np.complex64))
    f[1, fft.block_dim, 0, smem_size](cuda.to_device(a), cuda.to_device(b), out)
    cuda.synchronize()
    return out.copy_to_host(), np.fft.fft(a @ b, axis=0), 1e-4


PROGRAMS = {name[len("program_"):]: fn for name, fn in dict(globals()).items() if name.startswith("program_")}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program(name):
    result, reference, rtol = PROGRAMS[name]()
    err = np.linalg.norm(result - reference) / np.linalg.norm(reference)
    assert err < rtol, f"{name}: relative error {err}"


def test_descriptors_without_sm_target_sm90_here_or_the_gpu():
    from nvmath_device import common_cuda

    fft = FFT(size=64, precision=np.float32, direction="forward")
    cc = common_cuda.current_device_cc()
    assert fft.sm == (90 if cc is None else cc[0] * 10 + cc[1])
    assert Matmul(size=(8, 8, 8)).sm == fft.sm


def test_shared_memory_form_misuse_raises():
    fft = FFT(fft_type="c2c", size=16, precision=np.float32, direction="forward", elements_per_thread=4,
              ffts_per_block=2)

    @cuda.jit
    def small(x):
        smem = cuda.shared.array(shape=(0,), dtype=fft.value_type)
        fft(smem[:8])

    from tests.harness import launch_guarded

    with pytest.raises(ValueError, match="need 32"):
        launch_guarded(small, 1, fft.block_dim, 1024, np.zeros(1))

    @cuda.jit
    def registers_only(x):
        td = cuda.local.array(fft.storage_size, dtype=fft.value_type)
        fft(td)

    with pytest.raises(TypeError, match="not shared memory"):
        launch_guarded(registers_only, 1, fft.block_dim, 1024, np.zeros(1))
