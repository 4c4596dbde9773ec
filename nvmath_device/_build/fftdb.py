# SPDX-License-Identifier: Apache-2.0
"""cuFFTDx's own implementation database (the JSON records shipped in the nvidia-mathdx headers).

Used to validate sizes and elements_per_thread in Python, before NVRTC runs: a size with a
record runs without a workspace; a size without one needs cuFFTDx's Bluestein workspace.
"""

from __future__ import annotations

import functools
import os
import re

from .toolchain import mathdx_root

# Architecture whose records an SM uses (cufftdx/database/detail/block_fft.hpp forwards these).
_RECORD_ARCH = {70: 700, 72: 700, 75: 750, 80: 800, 86: 700, 87: 800, 89: 890, 90: 900,
                100: 1000, 101: 1000, 103: 1000, 120: 1200, 121: 1200}
# cufftdx/detail/fft_sizes.hpp: largest Block FFT per SM and precision (fp16, fp32, fp64).
_BLOCK_MAX = {
    70: (24389, 24389, 12167), 72: (24389, 24389, 12167), 75: (16384, 16384, 8192),
    80: (32768, 32768, 16384), 86: (24389, 24389, 12167), 87: (32768, 32768, 16384),
    89: (24389, 24389, 12167), 90: (32768, 32768, 16384), 100: (32768, 32768, 16384),
    101: (32768, 32768, 16384), 103: (32768, 32768, 16384), 120: (24389, 24389, 12167),
    121: (24389, 24389, 12167),
}
THREAD_MAX = {"fp16": 64, "fp32": 64, "fp64": 40}
_PREC_INDEX = {"fp16": 0, "fp32": 1, "fp64": 2}


def block_max_size(sm: int, prec: str) -> int:
    """Largest workspace-free Block FFT size cuFFTDx implements for ``sm`` and precision ``prec``."""
    return _BLOCK_MAX[sm][_PREC_INDEX[prec]]


# The records hold one object per (size, blob); only each size's elements_per_thread values are
# used. Scanning the text for them (instead of json.load) keeps the ~1000 parsed objects off the
# heap of a process that has just imported numba: building them set off a full garbage
# collection (~90 ms on the 2-core CI machine) in the middle of a warm-cache kernel load.
_SIZE = re.compile(r'"size"\s*:\s*(\d+)')
_EPT = re.compile(r'"ept"\s*:\s*(\d+)')


@functools.cache
def records(sm: int, prec: str) -> dict[int, tuple[int, ...]]:
    """{size: sorted elements_per_thread values} of cuFFTDx's records for sm and precision
    ('fp16'|'fp32'|'fp64'); a size without a record needs a workspace."""
    arch = _RECORD_ARCH[sm]
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
