# SPDX-License-Identifier: Apache-2.0
"""load_complex / store_complex: one vector access per complex value in the PTX for sm_90;
copy_async: PTX cp.async; typing errors that say what is allowed (no GPU)."""

import re

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


@pytest.mark.parametrize("dtype, size", [(np.float32, 4), (np.float64, 8), (np.complex64, 8), (np.complex128, 16)])
def test_copy_async_is_cp_async_and_links_for_sm90(dtype, size):
    """Every copy is one ``cp.async`` of the element's size, L2-only (``.cg``) for 16 bytes and
    ``.ca`` below (PTX allows ``.cg`` only at 16); its addresses are LLVM's casts to the shared
    and global spaces, folded into the arrays' own (no ``cvta`` per copy: a run of copies shares
    one base register); commits and ``wait_group 1`` as written; ptxas accepts it for sm_90."""
    from nvmath_device.aot import compile_kernel
    from tests.memory_kernels import make_async_kernel

    t = {np.float32: types.float32, np.float64: types.float64, np.complex64: types.complex64,
         np.complex128: types.complex128}[dtype]
    kern = make_async_kernel(dtype).py_func
    argtypes = (t[:, ::1], t[:, ::1], types.int64)
    ptx, _ = cuda.compile_ptx(kern, argtypes, cc=(9, 0))
    level = "cg" if size == 16 else "ca"
    copies = ptx.count("cp.async.") - ptx.count("cp.async.commit_group") - ptx.count("cp.async.wait_group")
    # the compiler may duplicate the loop's copy
    assert copies >= 2 and len(re.findall(rf"cvt\.u32\.u64 nmdx_s, %rd\d+; cp\.async\.{level}\.shared\.global "
                                          rf"\[nmdx_s\], \[%rd\d+\], {size};", ptx)) == copies
    assert "cvta.to.shared" not in ptx  # the shared array's own address, offsets added in registers
    assert ptx.count("cp.async.commit_group;") >= 2
    assert ptx.count("cp.async.wait_group 1;") >= 1 and ptx.count("cp.async.wait_group") == ptx.count(
        "cp.async.wait_group 1;")
    assert compile_kernel(kern, argtypes, sm=90).cubin[:4] == b"\x7fELF"


def test_copy_async_bad_arguments_are_typing_errors_that_name_the_rule():
    from nvmath_device import copy_async, copy_async_wait

    def copy(x, y):
        s = cuda.shared.array(8, dtype=np.float32)
        copy_async(s, 0, x, 0)
        y[0] = s[0]

    def copy2(x):
        s = cuda.shared.array(8, dtype=np.float32)
        copy_async(s, 0, x, 0)  # 2-D source, one index

    def copy_num(x):
        copy_async(1.0, 0, x, 0)

    def copy16(x):
        copy_async(x, 0, x, 0)

    def wait(n):
        copy_async_wait(n)  # not a constant

    def wait8():
        copy_async_wait(8)

    with pytest.raises(TypingError, match="copy_async: dst and src must have the same dtype, got float32 and float64"):
        _compile(copy, types.float64[::1], types.float32[::1])
    with pytest.raises(TypingError, match="copy_async: elements must be 4, 8 or 16 bytes"):
        _compile(copy16, types.int16[::1])
    with pytest.raises(TypingError, match="copy_async: src is 2-D and takes 2 indices, got 1"):
        _compile(copy2, types.float32[:, ::1])
    with pytest.raises(TypingError, match="copy_async: dst must be an array, got"):
        _compile(copy_num, types.float32[::1])
    with pytest.raises(TypingError, match="copy_async_wait: pending must be an integer constant from 0 to 7"):
        _compile(wait, types.int64)
    with pytest.raises(TypingError, match="copy_async_wait: pending must be an integer constant from 0 to 7"):
        _compile(wait8)


def test_copy_async_outside_kernels_copies():
    from nvmath_device import copy_async, copy_async_commit, copy_async_wait

    src, dst = np.arange(4.0), np.zeros(4)
    copy_async(dst, 2, src, 3)
    copy_async_commit()
    copy_async_wait(0)
    assert dst.tolist() == [0.0, 0.0, 3.0, 0.0]
