# SPDX-License-Identifier: Apache-2.0
"""load_complex / store_complex: one vector access per complex value in the PTX for sm_90, and
typing errors that say what is allowed (no GPU)."""

import numpy as np
import pytest
from numba import cuda, types
from numba.core.errors import TypingError

from nvmath_device import load_complex, store_complex
from tests.memory_kernels import make_kernel


@pytest.mark.parametrize("ctype, part", [(np.complex64, "f32"), (np.complex128, "f64")])
def test_complex_values_move_as_one_vector_access(ctype, part):
    c = types.complex64 if ctype == np.complex64 else types.complex128
    r = types.float32 if ctype == np.complex64 else types.float64
    ptx, _ = cuda.compile_ptx(make_kernel(ctype).py_func, (c[::1], c[:, ::1], c[:, ::1], c[::1], r[::1], c[::1]),
                              cc=(9, 0))
    lines = [ln.strip() for ln in ptx.splitlines()]

    def count(op):
        return sum(1 for ln in lines if ln.startswith(op + " ") or ln.startswith(op + "\t"))

    assert count(f"ld.global.v2.{part}") == 3  # x, h2, x again (the stores between may alias it)
    assert count(f"st.global.v2.{part}") == 3  # y, z, g
    assert count(f"ld.global.{part}") == 0  # no value read part by part
    assert count(f"st.shared.v2.{part}") == 1 and count(f"ld.shared.v2.{part}") == 1
    assert count(f"st.global.{part}") == 1  # w: a real array, written as itself


def _compile(fn, *argtypes):
    return cuda.compile_ptx(fn, argtypes, cc=(9, 0))


def test_bad_arguments_are_typing_errors_that_name_the_rule():
    def load(x, out):
        out[0] = load_complex(x, 0)

    def load2(x, out):
        out[0] = load_complex(x, 0)  # 2-D array, one index

    def store(x, v):
        store_complex(x, 0, v)

    with pytest.raises(TypingError, match="load_complex: the array must be complex64 or complex128, got"):
        _compile(load, types.float32[::1], types.float32[::1])
    with pytest.raises(TypingError, match="load_complex: a 2-D array takes 2 indices, got 1"):
        _compile(load2, types.complex64[:, ::1], types.complex64[::1])
    with pytest.raises(TypingError, match="store_complex: the value must be a number, got"):
        _compile(store, types.complex64[::1], types.complex64[::1])
    with pytest.raises(TypingError, match="store_complex: the array must be complex64 or complex128"):
        _compile(store, types.int64[::1], types.int64)


def test_indices_of_mixed_integer_types():
    """(int32, int64) tuples index like numba's own indexing."""

    def k(x, y):
        i = cuda.threadIdx.x  # int32 after the cast below, the row an int64
        store_complex(y, (np.int64(0), np.int32(i)), load_complex(x, (np.int32(0), np.int64(i))))

    ptx, _ = _compile(k, types.complex64[:, ::1], types.complex64[:, ::1])
    assert "ld.global.v2.f32" in ptx and "st.global.v2.f32" in ptx


def test_outside_kernels_they_index():
    x = np.arange(4, dtype=np.complex64) * (1 + 2j)
    assert load_complex(x, 2) == x[2]
    store_complex(x, 1, 7)
    assert x[1] == 7
