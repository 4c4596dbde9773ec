# SPDX-License-Identifier: Apache-2.0
"""load_complex / store_complex in a kernel under the simulator (plain indexing there)."""

import numpy as np
import pytest

from tests.memory_kernels import run


@pytest.mark.parametrize("ctype", [np.complex64, np.complex128])
def test_load_store_complex_move_values_exactly(ctype):
    got, want = run(ctype)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
