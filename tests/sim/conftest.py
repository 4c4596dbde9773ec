# SPDX-License-Identifier: Apache-2.0
"""The simulator suite needs NUMBA_ENABLE_CUDASIM=1 before numba.cuda is first imported."""

import os

import pytest


def pytest_collection_modifyitems(config, items):
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0"):
        skip = pytest.mark.skip(reason="run with NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/sim")
        for item in items:
            if "tests/sim/" in str(item.fspath).replace(os.sep, "/"):
                item.add_marker(skip)
