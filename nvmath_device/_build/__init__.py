# SPDX-License-Identifier: Apache-2.0
"""The build: descriptor -> C++ shim text -> NVRTC -> LTO-IR and traits, kept in the disk cache.

Knows nothing of numba or the simulator: callers say what to build (e.g. ``fft_traits(...,
from_unit=...)``). Imports only ``_types`` and ``_errors`` of the package.
"""
