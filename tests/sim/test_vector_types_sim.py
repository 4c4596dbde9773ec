# SPDX-License-Identifier: Apache-2.0
"""The vector types and nvmath_device.types in kernels under the simulator, against NumPy: the
kernels of tests/vector_kernels.py (tests/cpu links each for sm_90, tests/gpu runs them on a
GPU), host values of the constructors, and float32x2 <-> complex conversions as on the GPU."""

import numpy as np
import pytest

import nvmath_device as nd
from tests import vector_kernels as vk
from tests.harness import launch_guarded


def _launch(kernel, grid, block, smem, *args):
    launch_guarded(kernel, grid, block, smem, *args)


@pytest.mark.parametrize("name", vk.NAMES)
def test_roundtrip_through_registers_local_and_shared_memory(name):
    got, want = vk.run_roundtrip(name, launch=_launch)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_types_objects_as_local_array_dtypes():
    got, want = vk.run_types(launch=_launch)
    np.testing.assert_array_equal(got, want)


def test_host_values_are_records_of_the_host_dtype():
    v = nd.float32x2(1.5, 2)
    assert v.dtype == np.dtype(nd.float32x2_type) and (v.x, v.y) == (1.5, 2.0)
    c = nd.float64x2(1 + 2j)
    assert (c.x, c.y) == (1.0, 2.0)
    h = nd.float16x4(0.1, 1, 2, 3)
    assert h.x == np.float16(0.1) and h.w == 3
    u = nd.uint32x4(1, 2.7, -1.5, 5e10)  # as PTX cvt.rzi.u32: towards zero, saturating
    assert (u.x, u.y, u.z, u.w) == (1, 2, 0, 2**32 - 1)
    assert nd.uint32x4(-1, 0, 0, 0).x == 2**32 - 1  # an integer wraps
    arr = np.zeros(2, nd.float32x4_type.dtype)
    arr[1] = nd.float32x4_type(1, 2, 3, 4)
    assert arr[1].z == 3


def test_bad_host_arguments_are_type_errors_naming_the_argument():
    with pytest.raises(TypeError, match=r"float32x2\(\): y \(the 2nd argument\) must be a real number"):
        nd.float32x2(1.0, True)
    with pytest.raises(TypeError, match=r"float32x4\(\) takes 4 numbers \(x, y, z, w\), got 2"):
        nd.float32x4(1.0, 2.0)
    with pytest.raises(TypeError, match=r"uint32x4\(\) takes 4 numbers \(x, y, z, w\), got 1"):
        nd.uint32x4(1 + 2j)


def test_complex_arithmetic_on_vectors_as_on_the_gpu():
    """A float32x2 converts to and from complex as on the GPU (tests/gpu runs the same
    complex_kernel): a complex stored into a float32x2 array, ``v / 4`` and ``v * v`` as complex
    arithmetic, float64x2(c)."""
    got, want = vk.run_complex(launch=_launch)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_fft_on_registers_declared_with_types_complex64():
    got, want = vk.run_fft(launch=_launch)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
