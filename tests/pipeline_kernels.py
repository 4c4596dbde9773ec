# SPDX-License-Identifier: Apache-2.0
"""Kernels written with the device/tile pipeline API (nvmath-python's pipeline examples' pattern,
written here), shared by the CPU tests (typing, link to sm_90), the simulator tests and the GPU
tests: ``pipeline_gemm`` (out = alpha * A @ B + beta * C, one tile per block) and
``pipeline_gemm_3d`` (the sum over A's and B's batches of A_i @ B_j, the tile pipeline moved with
``reset_tile``)."""

from __future__ import annotations

import numpy as np
from numba import cuda

from nvmath_device import Matmul, axpby, make_tensor


def descriptor(tile=(32, 32, 16), precision=(np.float16, np.float16, np.float32),
               arrangement=("row_major", "col_major", "row_major"), block_size=64, sm=None):
    return Matmul(size=tile, precision=precision, data_type="real", arrangement=arrangement, alignment=16,
                  block_size=block_size, with_pipeline=True, enable_input_streaming=True, sm=sm)


def pipeline_gemm(MM, n):
    tm, tn, _ = MM.size

    def kernel(alpha, beta, c, out, device_pipeline):
        smem = cuda.shared.array(shape=(0,), dtype=np.byte, alignment=device_pipeline.buffer_alignment)
        bx, by = cuda.blockIdx.x, cuda.blockIdx.y
        c_tile = c[bx * tm:(bx + 1) * tm, by * tn:(by + 1) * tn]
        o_tile = out[bx * tm:(bx + 1) * tm, by * tn:(by + 1) * tn]
        tile_pipeline = device_pipeline.get_tile(smem, bx, by)
        accumulator = MM.suggest_accumulator()
        tile_pipeline.execute(accumulator)
        if accumulator.is_thread_active():
            frag = accumulator.make_partition_and_copy(make_tensor(c_tile, MM.get_layout_gmem_c(n)))
            axpby(alpha, accumulator.get_results(), beta, frag)
            accumulator.partition_and_copy(frag, make_tensor(o_tile, MM.get_layout_gmem_c(n)))
        tile_pipeline._del()

    return kernel


def pipeline_gemm_3d(MM, n, steps):
    tm, tn, _ = MM.size

    def kernel(alpha, beta, c, out, device_pipeline):
        smem = cuda.shared.array(shape=(0,), dtype=np.byte, alignment=device_pipeline.buffer_alignment)
        bx, by = cuda.blockIdx.x, cuda.blockIdx.y
        c_tile = c[bx * tm:(bx + 1) * tm, by * tn:(by + 1) * tn]
        o_tile = out[bx * tm:(bx + 1) * tm, by * tn:(by + 1) * tn]
        tile_pipeline = device_pipeline.get_tile(smem, (bx, np.int32(0)), (by, np.int32(0)))
        accumulator = MM.get_accumulator()
        tile_pipeline.execute(accumulator)
        for step in range(1, steps * steps):
            i = np.int32(step % steps)
            j = np.int32(step // steps)
            device_pipeline.reset_tile(tile_pipeline, (bx, i), (by, j))
            tile_pipeline.execute(accumulator)
        if accumulator.is_thread_active():
            frag = accumulator.make_partition_and_copy(make_tensor(c_tile, MM.get_layout_gmem_c(n)))
            axpby(alpha, accumulator.get_results(), beta, frag)
            accumulator.partition_and_copy(frag, make_tensor(o_tile, MM.get_layout_gmem_c(n)))
        tile_pipeline._del()

    return kernel


def operands(MM, m, n, k, steps=None, seed=0):
    """A, B (in MM's arrangements; with ``steps``: M x K x steps and K x N x steps as nvmath-python's
    3-D example lays them out), C, and out poisoned with NaN."""
    rng = np.random.default_rng(seed)
    at, bt, ct = (np.dtype(t) for t in (MM.a_value_type, MM.b_value_type, MM.c_value_type))
    order = {"row_major": "C", "col_major": "F"}
    if steps is None:
        a = np.asarray(rng.uniform(-1, 1, (m, k)), dtype=at, order=order[MM.arrangement[0]])
        b = np.asarray(rng.uniform(-1, 1, (k, n)), dtype=bt, order=order[MM.arrangement[1]])
    else:
        a = np.asarray(rng.uniform(-1, 1, (m, k, steps)), dtype=at, order=order[MM.arrangement[0]])
        b0 = np.ascontiguousarray(rng.uniform(-1, 1, (steps, k, n)).astype(bt))
        b = np.moveaxis(b0, 0, -1)  # K x N x steps, each b[:, :, j] row-major
    c = np.asarray(rng.uniform(-1, 1, (m, n)), dtype=ct, order="C")
    out = np.full((m, n), np.nan, dtype=ct)
    return a, b, c, out


def reference(alpha, a, b, beta, c):
    if a.ndim == 2:
        prod = a.astype(np.float64) @ b.astype(np.float64)
    else:
        s = a.shape[2]
        prod = sum(a[:, :, i].astype(np.float64) @ b[:, :, j].astype(np.float64) for i in range(s) for j in range(s))
    return alpha * prod + beta * c.astype(np.float64)
