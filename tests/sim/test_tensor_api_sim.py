# SPDX-License-Identifier: Apache-2.0
"""nvmath_device.common's tensor API under the simulator: the kernels of tests/tensor_kernels.py
(the GPU suite runs the same ones) against NumPy float64, the shared tiles at cuBLASDx's swizzled
offsets, the partitioner queries against the compiled fragment tables, and misuse errors."""

import numpy as np
import pytest
from numba import cuda

from nvmath_device._build.gemm_sim_layouts import layout_offsets
from nvmath_device._build.gemm_sim_tables import fragment_table
from nvmath_device.common import copy, copy_fragment, copy_wait, make_tensor
from tests import tensor_kernels as tk

MM = tk.descriptor()  # 64 x 64 x 32, f16 f16 f32, col/row/row, 128 threads (as tests/cpu/test_tensor_api.py)
ODD = tk.descriptor(32, 48, 16, arrangement=("row_major", "col_major", "col_major"), block_size=64)


@pytest.mark.parametrize("mm", [MM, ODD], ids=["64x64x32-crr", "32x48x16-rcc"])
@pytest.mark.parametrize("name", list(tk.KERNELS))
def test_tensor_kernel_matches_numpy(name, mm):
    tk.run_against_numpy(name, mm)


def test_copy_writes_the_shared_tile_at_cublasdx_swizzled_offsets():
    lay = MM.suggest_layout_smem_a()
    size = lay.cosize

    @cuda.jit
    def k(a, raw):
        smem = cuda.shared.array(size, dtype=np.float16)
        copy(make_tensor(a, MM.get_layout_gmem_a()), make_tensor(smem, lay))
        copy_wait()
        for i in range(cuda.threadIdx.x, size, cuda.blockDim.x):
            raw[i] = smem[i]

    a = np.asfortranarray(np.arange(MM.m * MM.k).reshape(MM.m, MM.k).astype(np.float16))
    raw = np.zeros(size, np.float16)
    k[1, MM.block_dim](a, raw)
    off = layout_offsets(MM, lay.name)
    assert np.array_equal(raw[off], a)
    plain = np.arange(MM.m)[:, None] + MM.m * np.arange(MM.k)[None, :]
    assert not np.array_equal(off, plain)  # the suggested tile is swizzled: a plain copy would differ


def test_partitioner_queries_are_the_compiled_tables():
    c_size = MM.suggest_layout_rmem_c().size
    table, info = fragment_table(MM, True)
    nt = MM.block_dim[0]

    @cuda.jit
    def k(rows, cols, inb, active, pred):
        t = cuda.threadIdx.x
        acc = MM.suggest_accumulator()
        active[t] = acc.is_thread_active()
        pred[t] = acc.is_predicated()
        for i in range(c_size):
            r, c = acc.map_fragment_index(i)
            rows[t, i] = r
            cols[t, i] = c
            inb[t, i] = acc.is_index_in_bounds(i)

    rows, cols = np.full((nt, c_size), -9, np.int32), np.full((nt, c_size), -9, np.int32)
    inb, active, pred = np.zeros((nt, c_size), np.bool_), np.zeros(nt, np.bool_), np.ones(nt, np.bool_)
    k[1, MM.block_dim](rows, cols, inb, active, pred)
    assert np.array_equal(rows, info["coords"][..., 0]) and np.array_equal(cols, info["coords"][..., 1])
    assert np.array_equal(inb, table[..., 0] >= 0) and active.all() and not pred.any()
    # every element of C is held by exactly one (thread, index)
    held = np.zeros((MM.m, MM.n), int)
    np.add.at(held, (rows[inb], cols[inb]), 1)
    assert (held == 1).all()


def test_misuse_raises_naming_it():
    lay = MM.suggest_layout_smem_a()

    @cuda.jit
    def gmem_to_gmem(a, c):
        copy(make_tensor(a, MM.get_layout_gmem_a()), make_tensor(a, MM.get_layout_gmem_a()))

    @cuda.jit
    def short_buffer(a, c):
        smem = cuda.shared.array(16, dtype=np.float16)
        make_tensor(smem, lay)

    @cuda.jit
    def fragment_of_a(a, c):
        fr = make_tensor(cuda.local.array(MM.suggest_layout_rmem_c().cosize, dtype=np.float32),
                         MM.suggest_layout_rmem_c())
        copy_fragment(fr, make_tensor(a, MM.get_layout_gmem_a()))

    a = np.zeros((MM.m, MM.k), np.float16, order="F")
    c = np.zeros((MM.m, MM.n), np.float32)
    for kern, exc, match in ((gmem_to_gmem, TypeError, "copies one operand between global and shared memory"),
                             (short_buffer, ValueError, r"spans 16 elements, the layout spans 2048"),
                             (fragment_of_a, TypeError, "the memory tensor must be a C tensor")):
        with pytest.raises(exc, match=match):
            kern[1, 32](a, c)


def test_host_calls_outside_kernels_still_say_where_they_run():
    with pytest.raises(RuntimeError, match="can only be called inside a @cuda.jit kernel"):
        make_tensor(np.zeros(4, np.float16), MM.get_layout_gmem_a())
    assert type(MM.get_accumulator()).__name__ == "Accumulator"  # outside a kernel: the description
