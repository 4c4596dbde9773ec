# SPDX-License-Identifier: Apache-2.0
"""NumPy implementations used under NUMBA_ENABLE_CUDASIM=1."""

import os


def running_in_simulator() -> bool:
    """True when numba-cuda's simulator is enabled for this process."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
