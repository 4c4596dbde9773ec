# SPDX-License-Identifier: Apache-2.0
"""What the CUDA driver and runtime say: simulator switch, current context, device count, pointers."""

from __future__ import annotations

import functools
import os


@functools.cache  # numba-cuda reads the variable once too, when numba.cuda is imported
def simulator() -> bool:
    """Whether numba-cuda's CUDA simulator is enabled.

    Read once from ``NUMBA_ENABLE_CUDASIM`` (any value other than empty or ``"0"`` enables it),
    as numba-cuda does when ``numba.cuda`` is imported.

    Returns
    -------
    bool
        True under the simulator: no driver is used and device arrays are the simulator's.
    """
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


_driver_module = None  # cuda.bindings.driver once loaded (never under the simulator)
_SUCCESS = None  # its CUresult.CUDA_SUCCESS


def _driver():
    """``cuda.bindings.driver``, imported on first use; kept (no import per call) unless
    simulated, so that :func:`current_context` finds it only on a GPU."""
    global _driver_module, _SUCCESS
    if _driver_module is not None:
        return _driver_module
    from cuda.bindings import driver

    if not simulator():
        _SUCCESS = driver.CUresult.CUDA_SUCCESS
        _driver_module = driver
    return driver


def current_context() -> int:
    """This thread's current CUDA context.

    Cheap enough to be asked at every kernel launch: one driver call once the driver is loaded.

    Returns
    -------
    int
        The ``CUcontext`` as an int; 0 when the thread has none, the driver reports an error,
        or under the simulator. Never creates a context.
    """
    drv = _driver_module
    if drv is None:
        if simulator():
            return 0
        drv = _driver()
    err, ctx = drv.cuCtxGetCurrent()
    return int(ctx) if err == _SUCCESS else 0


def ensure_context() -> int:
    """This thread's current CUDA context, numba-cuda's made current first if there is none.

    Returns
    -------
    int
        The ``CUcontext`` as an int (0 under the simulator).
    """
    ctx = current_context()
    if ctx or simulator():
        return ctx
    from numba import cuda

    cuda.current_context()
    return current_context()


def _runtime():
    from cuda.bindings import runtime

    return runtime


_GPU = None


def gpu_available() -> bool:
    """Whether a CUDA device can be used.

    Returns
    -------
    bool
        True when the CUDA runtime reports at least one device. Asked once and cached; never
        raises (no driver, no device: False).
    """
    global _GPU
    if _GPU is None:
        try:
            rt = _runtime()
            err, count = rt.cudaGetDeviceCount()
            _GPU = err == rt.cudaError_t.cudaSuccess and count > 0
        except Exception:
            _GPU = False
    return _GPU


def pointer_device(ptr: int) -> int:
    """The ordinal of the device that owns the memory at ``ptr``.

    Parameters
    ----------
    ptr : int
        A device address; 0 (an empty array's) means the runtime's current device.

    Returns
    -------
    int
        The device ordinal.

    Raises
    ------
    ValueError
        The driver cannot tell (e.g. ``ptr`` is not device memory).
    """
    if not ptr:
        return _runtime().cudaGetDevice()[1]
    drv = _driver()
    err, dev = drv.cuPointerGetAttribute(
        drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr
    )
    if err != drv.CUresult.CUDA_SUCCESS:
        raise ValueError(f"cannot tell the device of pointer {ptr:#x}: {err}")
    return int(dev)
