# SPDX-License-Identifier: Apache-2.0
"""Target architecture parsing and detection of the current GPU (driver optional)."""

from __future__ import annotations

import functools
import re

# Compute capabilities cuFFTDx/cuBLASDx 25.6 know (value = major * 10 + minor).
SUPPORTED_SM = (70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121)


def parse_sm(sm, argname: str = "sm") -> int:
    """Normalise ``sm`` to an int like 90.

    Accepts 90, (9, 0), "sm_90", "90", "sm_90a", or None (the current GPU).
    """
    if sm is None:
        cc = current_device_cc()
        if cc is None:
            raise ValueError(
                f"{argname}=None means 'the current GPU', but no CUDA GPU/driver is available here; "
                f"pass {argname} explicitly, e.g. {argname}=90 (allowed: {', '.join(map(str, SUPPORTED_SM))})"
            )
        value = cc[0] * 10 + cc[1]
    elif isinstance(sm, bool):
        raise TypeError(f"{argname} must be an int like 90, a tuple like (9, 0) or a string like 'sm_90', got {sm!r}")
    elif isinstance(sm, int):
        value = sm
    elif isinstance(sm, tuple) and len(sm) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in sm):
        value = sm[0] * 10 + sm[1]
    elif isinstance(sm, str):
        m = re.fullmatch(r"(?:sm_|compute_)?(\d+)a?", sm.strip().lower())
        if not m:
            raise ValueError(f"{argname}={sm!r} is not an architecture string; use e.g. 'sm_90'")
        value = int(m.group(1))
    else:
        raise TypeError(f"{argname} must be an int like 90, a tuple like (9, 0) or a string like 'sm_90', got {sm!r}")
    if value not in SUPPORTED_SM:
        raise ValueError(f"{argname}={sm!r} is not supported; allowed: {', '.join(map(str, SUPPORTED_SM))}")
    return value


def _driver():
    """``cuda.bindings.driver`` (a function, so that tests can hand in a fake driver)."""
    from cuda.bindings import driver

    return driver


def current_device(driver):
    """``(err, device)``: the device of the current context, else device 0.

    ``cuCtxGetDevice`` is only asked when a context is current: without one it fails with
    CUDA_ERROR_INVALID_CONTEXT, which compute-sanitizer reports as an API error of the
    program. ``cuCtxGetCurrent`` returns a null context (and success) when none is current.
    """
    err, ctx = driver.cuCtxGetCurrent()
    if err == driver.CUresult.CUDA_SUCCESS and ctx is not None and int(ctx) != 0:
        err, dev = driver.cuCtxGetDevice()
        if err == driver.CUresult.CUDA_SUCCESS:
            return err, dev
    return driver.cuDeviceGet(0)


@functools.lru_cache(maxsize=1)
def current_device_cc():
    """(major, minor) of the current context's device (else device 0) through the driver API,
    or None when there is no driver/GPU.

    Never initialises numba's CUDA context and never raises.
    """
    try:
        driver = _driver()
    except Exception:  # pragma: no cover - cuda-bindings is a dependency
        return None
    try:
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        err, dev = current_device(driver)
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        attr = driver.CUdevice_attribute
        err1, major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        err2, minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
        if err1 != driver.CUresult.CUDA_SUCCESS or err2 != driver.CUresult.CUDA_SUCCESS:
            return None
        return int(major), int(minor)
    except Exception:
        return None
