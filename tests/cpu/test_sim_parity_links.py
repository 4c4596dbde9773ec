# SPDX-License-Identifier: Apache-2.0
"""The kernels of tests/sim/test_sim_parity.py (tests/sim_parity_kernels.py), linked to sm_90
cubins by numba's CUDA target without a GPU: what the patched simulator accepts, the CUDA
target accepts too, with the same meaning. And the README's r2c register spelling: the form
that works in both, and the in-kernel form that numba's typing refuses."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, types
from numba.core.errors import TypingError

import nvmath_device
from nvmath_device.aot import compile_kernel
from tests import sim_parity_kernels as K
from tests.sim_kernels_compile import device_functions_without_gpu

F1 = types.float32[::1]


def _ptx(kernel, argtypes):
    with device_functions_without_gpu():
        ptx, _ = cuda.compile_ptx(kernel.py_func, argtypes, cc=(9, 0))
    return ptx


def _link(kernel, argtypes):
    with device_functions_without_gpu():
        out = compile_kernel(kernel, argtypes, sm=90)
    assert out.cubin[:4] == b"\x7fELF"
    return out


@pytest.mark.parametrize("kernel", K.DYNAMIC_SHARED_KERNELS + (K.dynamic_arrays_alias,),
                         ids=lambda k: k.__name__)
def test_zero_shapes_are_dynamic_shared_memory(kernel):
    _link(kernel, (F1, F1))
    ptx = _ptx(kernel, (F1, F1))
    # dynamic shared memory: an extern array of unknown size, no static shared array
    decls = [ln.strip() for ln in ptx.splitlines() if ln.strip().startswith((".shared", ".extern"))]
    assert decls and all(d.startswith(".extern .shared") and d.endswith("[];") for d in decls), decls


def test_multidimensional_empty_shared_array_is_an_error():
    def kernel(y):
        s = cuda.shared.array((0, 4), dtype=np.float32)
        y[0] = s[0, 0]

    with pytest.raises(Exception, match="array length <= 0"):
        compile_kernel(kernel, (F1,), sm=90)


def test_jit_options_are_cuda_target_options():
    assert K.axpb.targetoptions["forceinline"] is True
    opts = K.options_kernel.targetoptions
    assert opts["lineinfo"] is True and opts["launch_bounds"] == (32,) and opts["lto"] is True
    _link(K.options_kernel, (F1,))
    _link(K.calls_forceinline, (F1,))


@pytest.mark.parametrize("kernel", [K.keyword_call, K.keyword_call_defaults],
                         ids=lambda k: k.__name__)
def test_device_function_keyword_arguments(kernel):
    _link(kernel, (F1,))


def test_keyword_arguments_bind_by_name():
    # axpb(x, a=2.0, b=0.0) called as axpb(x[i], b=1.0, a=3.0): 3 * x + 1, not 1 * x + 3
    ptx = _ptx(K.keyword_call, (F1,))
    # a, b are float64 defaults: one fma with 3.0 (0d4008...) then 1.0 (0d3FF0...)
    assert "0d4008000000000000, 0d3FF0000000000000;" in ptx


def _r2c_fft():
    return nvmath_device.FFT(size=64, precision=np.float32, fft_type="r2c", direction="forward",
                             elements_per_thread=4, ffts_per_block=2, sm=90)


R2C_ARGS = (types.float32[:, ::1], types.complex64[:, ::1])


def test_r2c_registers_sized_outside_the_kernel_link():
    fft = _r2c_fft()
    out = _link(K.make_r2c_kernel(fft), R2C_ARGS)
    assert any(fft.symbol in name for name in out.linked)


def test_r2c_registers_sized_inside_the_kernel_is_a_typing_error():
    # numba types 2 * fft.storage_size (Literal[int] * Literal[int]) as a plain int64; the
    # shape of cuda.local.array must be an integer literal (numba-cuda cudadecl.py,
    # Cuda_array_decl): no match. alignment= plays no part.
    with pytest.raises(TypingError, match=r"local\.array.*\n(.*\n)*.*array\(int64, dtype="):
        compile_kernel(K.readme_r2c_kernel(_r2c_fft()), R2C_ARGS, sm=90)


def test_compile_kernel_links_kernels_that_call_device_functions_without_a_gpu():
    """nvmath_device.aot.compile_kernel answers numba-cuda's question for the current device
    itself while it compiles a kernel's device functions (no GPU, no helper needed)."""
    out = compile_kernel(K.keyword_call, (F1,), sm=90)
    assert out.cubin[:4] == b"\x7fELF"


def _grid_synced(x):
    g = cuda.cg.this_grid()
    x[cuda.grid(1)] += 1
    g.sync()
    x[cuda.grid(1)] *= 2


def test_compile_kernel_links_a_grid_sync_with_libcudadevrt():
    """A kernel with cuda.cg.this_grid().sync() (nvmath-python's fft_2d_single_kernel example
    does it) links without a GPU: libcudadevrt goes in, as numba-cuda's own launch arranges
    (nvJitLink stopped at the unresolved cudaCGGetIntrinsicHandle before)."""
    out = compile_kernel(_grid_synced, (types.float32[::1],), sm=90)
    assert out.cubin[:4] == b"\x7fELF"
