# SPDX-License-Identifier: Apache-2.0
"""Where descriptor methods called outside a kernel go: the implementations that the layer
picked at import (``nvmath_device/__init__.py``) registered, once.

The descriptors import neither numba nor the simulator. Inside a ``@cuda.jit`` kernel the numba
layer types and lowers their methods; a call from Python reaches :func:`implementation`, which
returns what the simulator registered when it was imported, or raises the error that says the
method runs only inside kernels. :func:`links_device_code` tells the descriptors whether kernels
will link compiled device code (the numba layer) or not (the simulator), so that they ask the
build for what is needed and no more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

__all__ = ["hook", "implementation", "links_device_code", "register"]

_implementations: dict[str, Callable] = {}
_links_device_code = True


def register(implementations: Mapping[str, Callable], *, links_device_code: bool) -> None:
    """Install host-side implementations of descriptor methods (keys like ``"FFT.execute"``)
    and say whether kernels link compiled device code. Called by the layer picked at import."""
    global _links_device_code
    _implementations.update(implementations)
    _links_device_code = bool(links_device_code)


def implementation(name: str, outside_kernel: str) -> Callable:
    """The registered implementation of method ``name``; RuntimeError(``outside_kernel``) if none."""
    impl = _implementations.get(name)
    if impl is None:
        raise RuntimeError(outside_kernel)
    return impl


def hook(name: str) -> Callable | None:
    """The registered implementation of ``name``, or None (for optional steps such as
    ``"prepare"``: what the simulator builds beyond the traits)."""
    return _implementations.get(name)


def links_device_code() -> bool:
    """Whether kernels link the descriptors' compiled device code (False under the simulator)."""
    return _links_device_code
