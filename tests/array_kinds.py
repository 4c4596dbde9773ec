# SPDX-License-Identifier: Apache-2.0
"""The array kinds the ``kernels`` functions accept, for GPU tests: a NumPy array as one of them,
and any of them back as NumPy."""

from __future__ import annotations

import numpy as np

KINDS = ("numpy", "cupy", "torch", "numba")


def as_kind(kind: str, x: np.ndarray):
    """``x`` as a ``kind`` array (one of :data:`KINDS`; device kinds on the current GPU)."""
    if kind == "numpy":
        return x
    if kind == "cupy":
        import cupy

        return cupy.asarray(x)
    if kind == "torch":
        import torch

        return torch.as_tensor(x, device="cuda")
    from numba import cuda

    return cuda.to_device(x)


def to_host(y) -> np.ndarray:
    """A NumPy array of ``y`` (NumPy, CuPy, PyTorch or Numba device array)."""
    if isinstance(y, np.ndarray):
        return y
    if hasattr(y, "get"):
        return y.get()
    if hasattr(y, "cpu"):
        return y.cpu().numpy()
    return y.copy_to_host()
