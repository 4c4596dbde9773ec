# SPDX-License-Identifier: Apache-2.0
"""cuFFTDx's own implementation database (the JSON records shipped in the nvidia-mathdx headers).

Used to validate sizes and elements_per_thread in Python, before NVRTC runs: a size with a
record runs without a workspace; a size without one needs cuFFTDx's Bluestein workspace.
"""

from __future__ import annotations

import functools
import os
import re

from .._types import FFT_BLOCK_MAX, FFT_PRECISION_INDEX, FFT_RECORD_ARCH
from .toolchain import mathdx_root

def block_max_size(sm: int, prec: str) -> int:
    """Largest workspace-free Block FFT size cuFFTDx implements for ``sm`` and precision ``prec``."""
    return FFT_BLOCK_MAX[sm][FFT_PRECISION_INDEX[prec]]


# The records hold one object per (size, blob); only each size's elements_per_thread values are
# used. Scanning the text for them (instead of json.load) keeps the ~1000 parsed objects off the
# heap of a process that has just loaded numba: building them can set off a full garbage
# collection in the middle of a warm-cache kernel load.
_SIZE = re.compile(r'"size"\s*:\s*(\d+)')
_EPT = re.compile(r'"ept"\s*:\s*(\d+)')


@functools.cache
def records(sm: int, prec: str) -> dict[int, tuple[int, ...]]:
    """{size: sorted elements_per_thread values} of cuFFTDx's records for sm and precision
    ('fp16'|'fp32'|'fp64'); a size without a record needs a workspace."""
    arch = FFT_RECORD_ARCH[sm]
    path = os.path.join(mathdx_root(), "include", "cufftdx", "database", "records", str(arch),
                        f"database_{prec}_fwd.json")
    with open(path) as f:
        text = f.read()
    starts = [(m.start(), int(m.group(1))) for m in _SIZE.finditer(text)]
    ends = [pos for pos, _ in starts[1:]] + [len(text)]
    return {size: tuple(sorted({int(e) for e in _EPT.findall(text, pos, end)}))
            for (pos, size), end in zip(starts, ends)}


def valid_epts(sm: int, prec: str, size: int) -> tuple[int, ...]:
    """Sorted elements_per_thread values cuFFTDx implements for this C2C size (empty: Bluestein)."""
    return records(sm, prec).get(size, ())
