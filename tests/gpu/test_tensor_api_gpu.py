# SPDX-License-Identifier: Apache-2.0
"""nvmath_device.common's tensor API on the GPU: each kernel of tests/tensor_kernels.py computes
out = alpha * A @ B + beta * C on one block; compared with NumPy in float64, out poisoned with NaN
before the launch (an element the kernel does not write fails the test)."""

import pytest

from tests import tensor_kernels as tk

pytestmark = pytest.mark.gpu

CASES = [
    # (m, n, k), arrangement, block size
    ((64, 64, 32), ("col_major", "row_major", "row_major"), 128),
    ((32, 48, 16), ("row_major", "col_major", "col_major"), 64),
]


@pytest.mark.parametrize("name", list(tk.KERNELS))
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[0])) + "-" + "".join(a[0] for a in c[1]))
def test_tensor_kernel_matches_numpy(name, case):
    size, arrangement, block_size = case
    tk.run_against_numpy(name, tk.descriptor(*size, arrangement=arrangement, block_size=block_size))
