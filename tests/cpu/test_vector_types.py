# SPDX-License-Identifier: Apache-2.0
"""The vector types (float16x2 ... uint32x4) and nvmath_device.types without a GPU: names, host
dtypes, numba typing, errors that name the argument, one vector access per value in the PTX,
and every kernel of tests/vector_kernels.py (the ones tests/sim and tests/gpu run) linked to an
sm_90 cubin."""

import re

import numpy as np
import pytest
from numba import cuda, from_dtype
from numba.core import types
from numba.core.errors import TypingError
from numba.cuda.core.errors import (
    TypingError as CudaTypingError,  # numba-cuda's own, for its messages
)

import nvmath_device as nd
import nvmath_device.types as ndt
from nvmath_device.aot import compile_kernel
from tests import vector_kernels as vk

# name -> (scalar, count, device bytes) as nvmath-python 1.0 defines them
EXPECTED = {
    "float16x2": (np.float16, 2, 4), "float16x4": (np.float16, 4, 8),
    "float32x2": (np.float32, 2, 8), "float32x4": (np.float32, 4, 16),
    "float64x2": (np.float64, 2, 16), "float64x4": (np.float64, 4, 32),
    "uint32x4": (np.uint32, 4, 16),
}
F32 = types.float32


def _ptx(fn, *argtypes):
    return cuda.compile_ptx(fn, argtypes, cc=(9, 0))[0]


def test_public_names_match_nvmath_python():
    for name in EXPECTED:
        assert name in nd.__all__ and f"{name}_type" in nd.__all__
    assert set(ndt.__all__) == {"Complex", "Vector", "complex32", "complex64", "complex128", "half2",
                                "half4", "np_float16x2", "np_float16x4", "REAL_NP_TYPES", "INT_NP_TYPES"}
    assert set(ndt.__all__) <= set(nd.__all__) and "types" in nd.__all__
    assert nd.complex64 is ndt.complex64 and nd.types is ndt


@pytest.mark.parametrize("name", EXPECTED)
def test_vector_type_objects(name):
    scalar, count, nbytes = EXPECTED[name]
    ty = getattr(nd, f"{name}_type")
    assert ty.make is getattr(nd, name) and ty.count == count and ty.itemsize == nbytes
    dt = np.dtype(ty)
    assert dt == ty.dtype and dt.names == ("x", "y", "z", "w")[:count] and dt.itemsize == nbytes
    assert all(dt.fields[f][0] == np.dtype(scalar) for f in dt.names)
    host = np.zeros(3, dt)
    assert host[1].x == 0  # records: elements read as attributes
    nbt = ty.numba_type
    assert str(nbt) == name and nbt.dtype == from_dtype(np.dtype(scalar)) and nbt.count == count
    arr = ty[::1]
    assert isinstance(arr, types.Array) and arr.dtype is nbt and arr.layout == "C"


def test_types_objects_host_side():
    assert ndt.complex64.dtype == np.complex64 and ndt.complex128.dtype == np.complex128
    assert ndt.complex32.dtype == ndt.np_float16x2 and ndt.complex32.real_dtype is np.float16
    assert ndt.half2.dtype == ndt.np_float16x2 and ndt.half4.dtype == ndt.np_float16x4
    assert ndt.half4.size == 4 and ndt.half2.vector_type is nd.float16x2_type
    assert np.dtype(ndt.complex64) == np.complex64  # usable wherever NumPy takes a dtype
    assert ndt.np_float16x2.itemsize == 4 and ndt.np_float16x4.itemsize == 8
    assert ndt.Complex(np.float32) == ndt.complex64 and ndt.Vector(np.float16, 2) == ndt.half2
    with pytest.raises(ValueError, match="size must be 2 or 4, got 3"):
        ndt.Vector(np.float16, 3)
    with pytest.raises(ValueError, match="real_dtype must be numpy.float16, got"):
        ndt.Vector(np.float32, 2)
    with pytest.raises(ValueError, match="real_dtype must be numpy.float16, numpy.float32 or numpy.float64"):
        ndt.Complex(np.int32)
    with pytest.deprecated_call():
        assert ndt.half4.make is nd.float16x4
    with pytest.deprecated_call():
        assert ndt.complex64.make is nd.float32x2 and ndt.complex32.make is nd.float16x2


def test_numba_types_of_the_types_objects():
    from nvmath_device._numba.vector import numba_type_of

    assert numba_type_of(ndt.complex64) == types.complex64
    assert numba_type_of(ndt.complex128) == types.complex128
    assert numba_type_of(ndt.complex32) is nd.float16x2_type.numba_type
    assert numba_type_of(ndt.half2) is nd.float16x2_type.numba_type
    assert numba_type_of(ndt.half4) is nd.float16x4_type.numba_type


def test_constructors_need_a_kernel_or_the_simulator():
    with pytest.raises(RuntimeError, match=r"float32x2\(...\) runs inside @cuda.jit kernels"):
        nd.float32x2(1.0, 2.0)


# ---------------------------------------------------------------- typing errors
def _bad_bool(out, a):
    out[0] = nd.float32x2(a[0], True).x


def _bad_count(out, a):
    out[0] = nd.float32x4(a[0], a[0]).x


def _bad_array(out, a):
    out[0] = nd.uint32x4(1, 2, 3, a).x


def _bad_field(out, a):
    out[0] = nd.float32x2(a[0], a[0]).z


def _bad_setattr(out, a):
    v = nd.float32x2(a[0], a[0])
    v.x = 1.0
    out[0] = v.x


def _bad_complex_for_x4(out, a):
    out[0] = nd.float32x4(complex(a[0], a[0])).x


@pytest.mark.parametrize("fn, message", [
    (_bad_bool, r"float32x2\(\): y \(the 2nd argument\) must be a real number \(an integer or a float\), got bool"),
    (_bad_count, r"float32x4\(\) takes 4 numbers \(x, y, z, w\), got 2 argument"),
    (_bad_array, r"uint32x4\(\): w \(the 4th argument\) must be a real number .*got array"),
    (_bad_field, r"Unknown attribute 'z' of type float32x2"),
    (_bad_setattr, r"float32x2.x is read-only"),
    (_bad_complex_for_x4, r"float32x4\(\) takes 4 numbers \(x, y, z, w\), got 1 argument"),
])
def test_bad_input_is_a_typing_error_naming_the_argument(fn, message):
    with pytest.raises((TypingError, CudaTypingError), match=message):
        _ptx(fn, F32[::1], F32[::1])


# ---------------------------------------------------------------- code
@pytest.mark.parametrize("name, ld", [
    ("float16x2", "ld.global.v2.u16"), ("float16x4", "ld.global.v4.u16"),
    ("float32x2", "ld.global.v2.f32"), ("float32x4", "ld.global.v4.f32"),
    ("float64x2", "ld.global.v2.f64"), ("uint32x4", "ld.global.v4.u32"),
])
def test_vector_arrays_move_one_vector_access_per_value(name, ld):
    ty = getattr(nd, f"{name}_type")

    def copy(dst, src):
        i = cuda.threadIdx.x
        dst[i] = src[i]

    lines = [ln.strip() for ln in _ptx(copy, ty[::1], ty[::1]).splitlines()]
    loads = [ln for ln in lines if ln.startswith("ld.global")]
    stores = [ln for ln in lines if ln.startswith("st.global")]
    assert len(loads) == 1 and loads[0].startswith(ld + " ")
    assert len(stores) == 1 and stores[0].startswith(ld.replace("ld.", "st.") + " ")


def test_float64x4_moves_as_two_16_byte_accesses():
    ty = nd.float64x4_type

    def copy(dst, src):
        i = cuda.threadIdx.x
        dst[i] = src[i]

    lines = [ln.strip() for ln in _ptx(copy, ty[::1], ty[::1]).splitlines()]
    assert sum(ln.startswith("ld.global.v2.f64 ") for ln in lines) == 2
    assert sum(ln.startswith("st.global.v2.f64 ") for ln in lines) == 2


def test_elements_are_the_constructor_arguments_in_order():
    """Swizzling in registers compiles to no memory traffic: the four loads go straight to one
    vector store, reversed."""

    def swizzle(dst, a):
        i = cuda.threadIdx.x
        v = nd.float32x4(a[4 * i], a[4 * i + 1], a[4 * i + 2], a[4 * i + 3])
        dst[i] = nd.float32x4(v.w, v.z, v.y, v.x)

    lines = [ln.strip() for ln in _ptx(swizzle, nd.float32x4_type[::1], F32[::1]).splitlines()]
    offset = {}  # register -> byte offset of the a[] element it holds
    for ln in lines:
        m = re.match(r"ld\.global\.f32\s+(%f\d+), \[%rd\d+(?:\+(\d+))?\];", ln)
        if m:
            offset[m.group(1)] = int(m.group(2) or 0)
    store = [ln for ln in lines if ln.startswith("st.global.v4.f32")]
    assert len(offset) == 4 and len(store) == 1
    regs = store[0].split("{")[1].rstrip("};").replace(" ", "").split(",")
    assert [offset[r] for r in regs] == [12, 8, 4, 0]  # (w, z, y, x) of v


# ---------------------------------------------------------------- the kernels tests/sim and tests/gpu run
ROUNDTRIP_ARGS = {name: (types.Array(from_dtype(np.dtype(EXPECTED[name][0])), 2, "C"),) * 2
                  for name in EXPECTED}
F32_2D = types.Array(F32, 2, "C")


@pytest.mark.parametrize("name", EXPECTED)
def test_roundtrip_kernel_links_for_sm90(name):
    ck = compile_kernel(vk.make_roundtrip(name), ROUNDTRIP_ARGS[name], sm=90)
    assert ck.cubin[:4] == b"\x7fELF" and ck.sm == 90 and ck.linked == ()


@pytest.mark.parametrize("kernel", [vk.types_kernel, vk.complex_kernel], ids=["types", "complex"])
def test_types_and_complex_kernels_link_for_sm90(kernel):
    ck = compile_kernel(kernel, (F32_2D, F32[::1], F32[::1]), sm=90)
    assert ck.cubin[:4] == b"\x7fELF"


def test_the_sim_and_gpu_kernels_are_the_ones_linked_here():
    assert set(vk.NAMES) == set(EXPECTED)


def test_fft_kernel_with_types_complex64_registers_links_for_sm90():
    """nvmath_device.types.complex64 in a kernel is the value type FFT.execute takes."""
    fft = vk.thread_fft()
    c64 = types.Array(types.complex64, 2, "C")
    ck = compile_kernel(vk.make_fft_kernel(fft), (c64, c64), sm=90)
    assert ck.cubin[:4] == b"\x7fELF" and any(n.startswith(fft.symbol) for n in ck.linked)
