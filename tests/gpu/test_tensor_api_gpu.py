# SPDX-License-Identifier: Apache-2.0
"""nvmath_device.common's tensor API on the GPU: each kernel of tests/tensor_kernels.py computes
out = alpha * A @ B + beta * C on one block; compared with NumPy in float64, out poisoned with NaN
before the launch (an element the kernel does not write fails the test)."""

import numpy as np
import pytest
from numba import cuda

from tests import tensor_kernels as tk

pytestmark = pytest.mark.gpu

CASES = [
    # (m, n, k), arrangement, block size
    ((64, 64, 32), ("col_major", "row_major", "row_major"), 128),
    ((32, 48, 16), ("row_major", "col_major", "col_major"), 64),
]


def _array(rng, shape, dtype, arrangement):
    x = rng.uniform(-1, 1, shape).astype(dtype)
    return np.asfortranarray(x) if arrangement == "col_major" else np.ascontiguousarray(x)


@pytest.mark.parametrize("name", list(tk.KERNELS))
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[0])) + "-" + "".join(a[0] for a in c[1]))
def test_tensor_kernel_matches_numpy(name, case):
    size, arrangement, block_size = case
    MM = tk.descriptor(*size, arrangement=arrangement, block_size=block_size)
    m, n, k = size
    rng = np.random.default_rng([m, n, k, len(name)])
    c_dtype = np.float64 if name == "fragment_like" else np.float32
    a = _array(rng, (m, k), np.float16, arrangement[0])
    b = _array(rng, (k, n), np.float16, arrangement[1])
    c = _array(rng, (m, n), c_dtype, arrangement[2])
    out = _array(rng, (m, n), c_dtype, arrangement[2])
    out[...] = np.nan
    alpha, beta = 1.5, -0.75
    kernel = cuda.jit(tk.KERNELS[name](MM))
    d_out = cuda.to_device(out)
    kernel[1, MM.block_dim, 0, tk.shared_bytes(MM, name)](alpha, cuda.to_device(a), cuda.to_device(b), beta,
                                                          cuda.to_device(c), d_out)
    got = d_out.copy_to_host()
    ref = alpha * (a.astype(np.float64) @ b.astype(np.float64)) + beta * c.astype(np.float64)
    assert not np.isnan(got).any(), f"{np.isnan(got).sum()} of {got.size} elements not written"
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err < 1e-5, f"relative error {err:.3g}"
