# SPDX-License-Identifier: Apache-2.0
"""The simulator suite needs NUMBA_ENABLE_CUDASIM=1 before numba.cuda is first imported.

With ``NMDX_RECORD_SIM_KERNELS=<folder>`` set as well, every kernel the suite runs is recorded
in ``<folder>``; ``python -m tests.sim_kernels_compile <folder>`` then links each one for sm_90
without the simulator (tests/sim_kernels_compile.py says how and what is not covered).
"""

import os

import pytest

_SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")

if _SIM and os.environ.get("NMDX_RECORD_SIM_KERNELS"):
    from tests.sim_kernels_compile import install_recorder

    install_recorder(os.environ["NMDX_RECORD_SIM_KERNELS"])


def pytest_collection_modifyitems(config, items):
    if not _SIM:
        skip = pytest.mark.skip(reason="run with NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/sim")
        for item in items:
            if "tests/sim/" in str(item.fspath).replace(os.sep, "/"):
                item.add_marker(skip)
