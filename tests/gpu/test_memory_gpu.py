# SPDX-License-Identifier: Apache-2.0
"""load_complex / store_complex on the GPU: the values of plain indexing, bit for bit, through
global (1-D and 2-D), shared and local memory, for complex64 and complex128."""

import numpy as np
import pytest

from tests.memory_kernels import run

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("ctype", [np.complex64, np.complex128])
def test_load_store_complex_move_values_exactly(ctype):
    got, want = run(ctype, rows=40)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
