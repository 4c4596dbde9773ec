# SPDX-License-Identifier: Apache-2.0
"""benchmarks/device_gemm.py without a GPU: it says why it cannot run (exit 2, no traceback), and
its pipeline kernels (plain, and with the bias + ReLU epilogue on the accumulator's fragment
coordinates) link for sm_90."""

from __future__ import annotations

import numpy as np
import pytest
from numba import types
from numba.cuda.typing.typeof import typeof

from nvmath_device import Matmul, aot
from tests.benchmark_script import load


def _bench():
    return load("device_gemm")


class Dev:
    def __init__(self, shape, dtype, order="C"):
        dt = np.dtype(dtype)
        self.__cuda_array_interface__ = {"shape": shape, "typestr": dt.str, "data": (1 << 20, False),
                                         "strides": np.empty(shape, dt, order=order).strides, "version": 3}


def test_without_a_gpu_it_exits_2_with_the_reason(tmp_path, capsys, monkeypatch):
    bench = _bench()
    monkeypatch.setattr(bench, "no_gpu_reason", lambda: "numba-cuda finds no usable GPU")
    assert bench.main(["--out", str(tmp_path), "--size", "256"]) == 2
    assert "no GPU to benchmark on: numba-cuda finds no usable GPU" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--size", "100"])


@pytest.mark.parametrize("fused", [False, True])
def test_benchmark_kernels_link_for_sm90(fused):
    bench = _bench()
    mm = Matmul(size=(32, 32, 16), precision=(np.float16, np.float16, np.float32), arrangement=("row_major", "col_major",
                "row_major"), alignment=16, block_size=64, with_pipeline=True, static_block_dim=True, sm=90)
    dp = mm.suggest_device_pipeline(3, Dev((256, 256), np.float16), Dev((256, 256), np.float16, "F"))
    kern = bench._kernel(mm, 256, fused)
    out = aot.compile_kernel(kern, (types.float32[:, ::1], types.float32[::1], typeof(dp)), sm=90)
    assert any(n.startswith("nvmathdx_pipeline_") for n in out.linked) and out.frame_bytes == 0
