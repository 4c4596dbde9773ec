# SPDX-License-Identifier: Apache-2.0
"""The simulator: NumPy implementations of the descriptors' methods, with the devices' layouts.

Imported (by ``nvmath_device/__init__.py``) only under NUMBA_ENABLE_CUDASIM=1; importing it
registers the implementations of ``_sim/fft.py`` and ``_sim/gemm.py`` with the descriptors
(:mod:`nvmath_device._dispatch`).
numba-cuda's simulator internals are used only through :mod:`._compat`.
"""

from __future__ import annotations

import os

from . import _compat
from . import vector as _vector  # noqa: F401  (registers the vector types' host values)


def running_in_simulator() -> bool:
    """True when numba-cuda's simulator is enabled for this process."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


if running_in_simulator():
    _compat.install_simulator_compat()


def _register() -> None:
    """Give the descriptors their host-side implementations: the NumPy ones of this package."""
    from .. import _dispatch
    from .fft import sim_execute as fft_execute
    from .gemm import sim_copy, sim_execute, sim_fragment_coordinates

    _dispatch.register({"FFT.execute": fft_execute, "Matmul.execute": sim_execute,
                        "Matmul.fragment_coordinates": sim_fragment_coordinates,
                        "Matmul.copy": sim_copy, "prepare": _prepare_gemms}, links_device_code=False)
    from .random import IMPLEMENTATIONS as random_implementations

    _dispatch.register(random_implementations, links_device_code=False)
    from . import tensor

    def execute(mm, *args):  # MM.execute: the tensor forms (nvmath_device.common) or the array forms
        if tensor.is_tensor_call(args):
            return tensor.sim_tensor_execute(mm, *args)
        return sim_execute(mm, *args)

    _dispatch.register({**tensor.IMPLEMENTATIONS, "Matmul.execute": execute}, links_device_code=False)
    from .pipeline import IMPLEMENTATIONS as pipeline_implementations

    _dispatch.register(pipeline_implementations, links_device_code=False)


def _prepare_gemms(mms) -> None:
    """``nvmath_device.prepare`` under the simulator: the GEMMs' register-fragment tables too."""
    if mms:
        from .._build.gemm_sim_tables import prefetch_fragment_tables

        prefetch_fragment_tables(mms)


_register()  # the simulator registers itself when imported
