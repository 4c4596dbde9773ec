# SPDX-License-Identifier: Apache-2.0
"""nvmath-python's ``nvmath.device.cublasdx`` names: the GEMM descriptor and the tensor API's
helpers (``from nvmath_device.cublasdx import Matmul, MAX_ALIGNMENT, SharedStorageCalc``)."""

from __future__ import annotations

from ._layouts import Layout
from ._partitioners import Accumulator, Partitioner
from ._pipeline import DevicePipeline, TilePipeline
from .common import MAX_ALIGNMENT
from .gemm import Matmul

__all__ = ["Matmul", "MAX_ALIGNMENT", "SharedStorageCalc", "Layout", "Partitioner", "Accumulator", "DevicePipeline",
           "TilePipeline"]


def _round_up(n: int, a: int) -> int:
    return (n + a - 1) // a * a


class SharedStorageCalc:
    """Adds up the bytes of shared-memory buffers, each aligned (cuBLASDx's
    ``shared_storage_calculator``): ``add(alignment, nbytes)``, ``add(alignment, itemsize, count)``
    or ``add(alignment, itemsize, layout)`` (``layout.cosize`` elements); ``get()`` is the total."""

    def __init__(self):
        self._total = 0

    def add(self, alignment, *args) -> None:
        """Append one buffer: ``(alignment, nbytes)``, ``(alignment, itemsize, count)`` or
        ``(alignment, itemsize, layout)``."""
        if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment < 1 or alignment & (alignment - 1):
            raise ValueError(f"SharedStorageCalc.add: alignment must be a power of 2 (bytes), got {alignment!r}")
        if len(args) == 1:
            nbytes = args[0]
        elif len(args) == 2:
            itemsize, count = args
            if isinstance(count, Layout):
                count = count.cosize
            if not isinstance(itemsize, int) or not isinstance(count, int) or itemsize < 1 or count < 0:
                raise TypeError(f"SharedStorageCalc.add: itemsize and count must be non-negative ints (or a "
                                f"Layout for the count), got {itemsize!r}, {count!r}")
            nbytes = itemsize * count
        else:
            raise TypeError("SharedStorageCalc.add takes (alignment, nbytes), (alignment, itemsize, count) or "
                            f"(alignment, itemsize, layout), got {1 + len(args)} arguments")
        if not isinstance(nbytes, int) or nbytes < 0:
            raise TypeError(f"SharedStorageCalc.add: nbytes must be a non-negative int, got {nbytes!r}")
        self._total = _round_up(self._total, alignment) + nbytes

    def get(self) -> int:
        """The total in bytes."""
        return self._total
