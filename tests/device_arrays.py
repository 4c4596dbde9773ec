# SPDX-License-Identifier: Apache-2.0
"""Host <-> device copies that also take bfloat16 (GPU and simulator).

numba-cuda 0.30's ``cuda.to_device``/``copy_to_host`` go through NumPy's buffer protocol, which
has no bfloat16 format ("cannot include dtype 'E' in a buffer"): bfloat16 data moves as uint16
bits and is viewed back, as nvmath_device.Matmul's docstring tells users to do.
"""

from __future__ import annotations

import numpy as np
from numba import cuda


def to_device(x):
    """``cuda.to_device(x)``, bfloat16 included."""
    x = np.asarray(x)
    if x.dtype.name == "bfloat16":
        return cuda.to_device(x.view(np.uint16)).view(x.dtype)
    return cuda.to_device(x)


def to_host(d):
    """``d.copy_to_host()``, bfloat16 included."""
    if d.dtype.name == "bfloat16":
        return d.view(np.uint16).copy_to_host().view(d.dtype)
    return d.copy_to_host()
