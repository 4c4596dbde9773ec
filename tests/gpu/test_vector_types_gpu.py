# SPDX-License-Identifier: Apache-2.0
"""The vector types and nvmath_device.types in kernels on a GPU, against NumPy: the kernels of
tests/vector_kernels.py (tests/cpu links each for sm_90, tests/sim runs them under the
simulator), and nvmath-python's complex conversions of float32x2 / float64x2."""

import numpy as np
import pytest

from tests import vector_kernels as vk

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", vk.NAMES)
def test_roundtrip_through_registers_local_and_shared_memory(name):
    got, want = vk.run_roundtrip(name)
    np.testing.assert_array_equal(got, want)


def test_types_objects_as_local_array_dtypes():
    got, want = vk.run_types()
    np.testing.assert_array_equal(got, want)


def test_float32x2_converts_to_and_from_complex():
    got, want = vk.run_complex()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)  # v * v may be contracted to FMAs


def test_fft_on_registers_declared_with_types_complex64():
    got, want = vk.run_fft()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
