# SPDX-License-Identifier: Apache-2.0
"""load_complex / store_complex and copy_async on the GPU: the values of plain indexing, bit for bit, through
global (1-D and 2-D), shared and local memory, for complex64 and complex128."""

import numpy as np
import pytest

from tests.memory_kernels import run, run_async

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("ctype", [np.complex64, np.complex128])
def test_load_store_complex_move_values_exactly(ctype):
    got, want = run(ctype, rows=40)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_copy_async_stages_rows_in_shared_memory(dtype):
    """cp.async of 4, 8, 8 and 16-byte elements, two buffers, wait_group 1: bit-exact rows."""
    got, want = run_async(dtype, blocks=132, rounds=7)
    np.testing.assert_array_equal(got, want)
