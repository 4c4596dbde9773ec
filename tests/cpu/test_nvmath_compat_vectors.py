# SPDX-License-Identifier: Apache-2.0
"""The kernels of tests/sim/test_nvmath_compat_vectors.py without a GPU: the programs that mix
vector values and complex numbers link to sm_90 cubins, and every store or operation the
simulator refuses there fails numba's CUDA typing here (simulator and GPU agree)."""

import numpy as np
import pytest
from numba import cuda
from numba.core import types
from numba.core.errors import TypingError
from numba.cuda.core.errors import TypingError as CudaTypingError

import nvmath_device as nd
from nvmath_device.aot import compile_kernel
from tests.sim import test_nvmath_compat_vectors as prog

C64, F32 = types.complex64, types.float32
TYPING_ERRORS = (TypingError, CudaTypingError)


def _elf(out):
    assert out.cubin[:4] == b"\x7fELF"


def test_fft_program_links_for_sm90():
    _, kernel, _ = prog.make_fft_program(sm=90)
    _elf(compile_kernel(kernel.py_func, (F32[:, ::1], F32[:, ::1], C64[:, ::1], C64[:, ::1]), sm=90))


def test_vector_program_links_for_sm90():
    _elf(compile_kernel(prog.make_vector_program(), (C64[::1], C64[:, ::1]), sm=90))


@pytest.mark.parametrize("fn", list(prog.MISUSE), ids=lambda f: f.__name__)
def test_stores_the_simulator_refuses_fail_typing(fn):
    with pytest.raises(TYPING_ERRORS, match="setitem"):
        compile_kernel(fn, (C64[::1], C64[::1]), sm=90)


def test_element_assignment_and_four_vector_arithmetic_fail_typing():
    def assign_element(out):
        v = nd.float32x2(1.0, 2.0)
        v.x = 3.0
        out[0] = v

    def four_arithmetic(out):
        out[0] = nd.float32x4(1.0, 2.0, 3.0, 4.0) * 2

    for fn in (assign_element, four_arithmetic):
        with pytest.raises(TYPING_ERRORS):
            compile_kernel(fn, (C64[::1],), sm=90)


def test_complex_of_a_two_float_vector_is_complex128():
    """``complex(v)`` (which the simulator's value answers) types in kernels too."""

    @cuda.jit(device=True)
    def as_complex(v):
        return complex(v)

    for name in ("float16x2", "float32x2", "float64x2"):
        ty = getattr(nd, f"{name}_type").numba_type
        _, resty = cuda.compile_ptx(as_complex.py_func, (ty,), device=True, cc=(9, 0))
        assert resty == types.complex128, name


def test_complex_of_other_vectors_fails_to_compile():
    """The simulator's float32x4 / uint32x4 value refuses complex() (TypeError); so do kernels."""

    @cuda.jit(device=True)
    def as_complex(v):
        return complex(v)

    for name in ("float32x4", "uint32x4", "float16x4"):
        ty = getattr(nd, f"{name}_type").numba_type
        with pytest.raises(Exception, match=rf"complex\(\) of a {name} value: only float16x2"):
            cuda.compile_ptx(as_complex.py_func, (ty,), device=True, cc=(9, 0))


def test_host_dtype_keeps_equal_to_the_plain_record_dtype():
    """The vector dtype's scalar type is VectorRecord (what does the complex arithmetic), but the
    dtype compares and types in numba as the plain record of the same fields."""
    dt = np.dtype(nd.float32x2_type)
    plain = np.dtype((np.record, np.dtype([("x", np.float32), ("y", np.float32)], align=True)))
    assert dt == plain and dt.type.__name__ == "VectorRecord"
    from numba import typeof

    assert typeof(np.zeros(2, dt)) == typeof(np.zeros(2, plain))
