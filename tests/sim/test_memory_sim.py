# SPDX-License-Identifier: Apache-2.0
"""load_complex / store_complex and copy_async in kernels under the simulator (plain indexing and
immediate copies there)."""

import numpy as np
import pytest

from tests.memory_kernels import run, run_async


@pytest.mark.parametrize("ctype", [np.complex64, np.complex128])
def test_load_store_complex_move_values_exactly(ctype):
    got, want = run(ctype)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_copy_async_stages_rows_in_shared_memory(dtype):
    got, want = run_async(dtype)
    np.testing.assert_array_equal(got, want)
