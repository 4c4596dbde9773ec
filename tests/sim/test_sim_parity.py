# SPDX-License-Identifier: Apache-2.0
"""The simulator takes what numba-cuda's CUDA target takes (nvmath_device/_sim/_compat.py):
dynamic shared memory spelled ``shape=(0,)``, ``cuda.jit`` options such as ``forceinline=``,
device functions called with keyword arguments. tests/cpu/test_sim_parity_links.py compiles
the same kernels (tests/sim_parity_kernels.py) to sm_90 cubins."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import nvmath_device
from tests import sim_parity_kernels as K
from tests.fft_kernels import random_input, reference
from tests.harness import launch_guarded

N = 8


def _run(kernel, *args, threads=N, smem=0):
    launch_guarded(kernel, 1, threads, smem, *args)


@pytest.mark.parametrize("kernel", K.DYNAMIC_SHARED_KERNELS, ids=lambda k: k.__name__)
def test_dynamic_shared_memory_shape_spellings(kernel):
    x = np.arange(N, dtype=np.float32)
    y = np.zeros(N, np.float32)
    _run(kernel, x, y, smem=N * 4)
    np.testing.assert_array_equal(y, x[::-1])


def test_dynamic_shared_arrays_alias_one_buffer():
    x = np.arange(N, dtype=np.float32)
    y = np.zeros(N, np.float32)
    _run(K.dynamic_arrays_alias, x, y, smem=N * 4)
    np.testing.assert_array_equal(y, 2 * x)


def test_multidimensional_empty_shared_array_is_an_error():
    @cuda.jit
    def kernel(y):
        s = cuda.shared.array((0, 4), dtype=np.float32)
        y[0] = s.size

    with pytest.raises(ValueError, match="array length <= 0"):
        _run(kernel, np.zeros(1, np.float32), threads=1)


def test_jit_options_of_the_cuda_target():
    x = np.arange(N, dtype=np.float32)
    _run(K.options_kernel, x)
    np.testing.assert_array_equal(x, 3 * np.arange(N) + 1)
    y = np.arange(N, dtype=np.float32)
    _run(K.calls_forceinline, y)
    np.testing.assert_array_equal(y, np.arange(N) + 1)


def test_link_of_a_descriptor_files_is_accepted():
    fft = nvmath_device.FFT(size=8, precision=np.float32, fft_type="c2c", direction="forward",
                            elements_per_thread=8, ffts_per_block=1, execution="Thread", sm=90)

    @cuda.jit(link=fft.files)  # nvmath-python programs' spelling; [] here
    def kernel(x):
        x[0] = 1.0

    x = np.zeros(1, np.float32)
    _run(kernel, x, threads=1)
    assert x[0] == 1.0


def test_link_of_real_code_still_refused_clearly():
    with pytest.raises(NotImplementedError, match="cannot run linked CUDA code"):
        cuda.jit(link=["user_code.cu"])(lambda x: None)


def test_extensions_prepare_the_arguments():
    class Doubler:  # numba-cuda's extension protocol: prepare_args(ty, val, stream, retr)
        def prepare_args(self, ty, val, stream=0, retr=None):
            if isinstance(val, np.ndarray):
                val *= 2
            return ty, val

    @cuda.jit(extensions=[Doubler()])
    def kernel(x):
        x[cuda.threadIdx.x] += 1

    x = np.arange(N, dtype=np.float32)
    _run(kernel, x)
    np.testing.assert_array_equal(x, 2 * np.arange(N) + 1)


@pytest.mark.parametrize("kernel, expect", [(K.keyword_call, lambda x: 3 * x + 1),
                                            (K.keyword_call_defaults, lambda x: 2 * x + 5)],
                         ids=["keywords", "keyword-and-default"])
def test_device_function_keyword_arguments(kernel, expect):
    x = np.arange(N, dtype=np.float32)
    _run(kernel, x)
    np.testing.assert_array_equal(x, expect(np.arange(N, dtype=np.float32)))


def test_kernel_launch_stays_positional():
    with pytest.raises(TypeError, match="positional arguments only"):
        K.keyword_call[1, N](x=np.zeros(N, np.float32))


def test_r2c_registers_sized_outside_the_kernel():
    fft = nvmath_device.FFT(size=64, precision=np.float32, fft_type="r2c", direction="forward",
                            elements_per_thread=4, ffts_per_block=2, sm=90)
    x = random_input(fft, 4, np.random.default_rng(1))
    y = np.full((4, fft.output_length), np.nan, np.complex64)
    kernel = K.make_r2c_kernel(fft)
    launch_guarded(kernel, 2, fft.block_dim, fft.shared_memory_size, x, y)
    np.testing.assert_allclose(y, reference(fft, x), rtol=1e-4, atol=1e-4)


def test_a_recorded_closure_kernel_links_for_sm90(tmp_path):
    # tests/sim_kernels_compile.py end to end: a factory-made kernel (closure over an int and a
    # dtype, calling a device function with keywords) recorded here, linked in a child process
    # without the simulator.
    import os
    import subprocess
    import sys

    from tests.harness import REPO
    from tests.sim_kernels_compile import record_launch

    def make(offset, dtype):
        @cuda.jit
        def kernel(x):
            i = cuda.threadIdx.x
            x[i] = K.axpb(x[i], b=offset) + dtype(1)

        return kernel

    kernel = make(5.0, np.float32)
    x = np.zeros(N, np.float32)
    _run(kernel, x)
    np.testing.assert_array_equal(x, np.full(N, 6.0))
    record_launch(kernel, (x,), tmp_path)
    record_launch(kernel, (np.zeros(N, np.float32),), tmp_path)  # same kernel and types: deduped
    assert len(list(tmp_path.glob("*.kernel"))) == 1
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run([sys.executable, "-m", "tests.sim_kernels_compile", str(tmp_path),
                           "--jobs", "1"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 linked for sm_90, 0 failed" in done.stdout, done.stdout
