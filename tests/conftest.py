# SPDX-License-Identifier: Apache-2.0
"""Shared test setup: one disk cache for the whole test run (generated code is reused across tests)."""

import os

_here = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault(
    "NUMBA_MATHDX_CACHE_DIR", os.path.join(os.path.dirname(_here), ".nmdx-test-cache")
)
