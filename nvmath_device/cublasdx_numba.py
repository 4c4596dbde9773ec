# SPDX-License-Identifier: Apache-2.0
"""nvmath-python's ``nvmath.device.cublasdx_numba`` name: ``pipeline_extensions``, the launch
extensions a kernel taking a :class:`~nvmath_device.DevicePipeline` needs
(``@cuda.jit(extensions=pipeline_extensions)``). Under the simulator, an empty list (the
simulated kernel receives the Python object itself)."""

from __future__ import annotations

from . import _dispatch

__all__ = ["pipeline_extensions"]

if _dispatch.links_device_code():
    from ._numba.pipeline_numba import pipeline_extensions
else:
    pipeline_extensions = []
