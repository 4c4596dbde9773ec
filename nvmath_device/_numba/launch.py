# SPDX-License-Identifier: Apache-2.0
"""Module setup run by numba-cuda when a kernel that uses our device code is loaded.

cuFFTDx/cuBLASDx kernels often need more than 48 KiB of dynamic shared memory, which CUDA only
grants after the kernel opts in (MAX_DYNAMIC_SHARED_SIZE_BYTES). Users launch with
``kernel[grid, fft.block_dim, stream, fft.shared_memory_size]``; this callback opts every
kernel of the loaded module in to the device's maximum, so that launch just works.

A driver call that fails here raises :class:`~nvmath_device._errors.DriverError` naming the
call and the driver's error: before, the callback returned quietly and the launch that needed
the opt-in failed later with a bare CUDA_ERROR_INVALID_VALUE.
"""

from __future__ import annotations

from .. import common_cuda
from .._errors import DriverError

_WHY = "opting the kernels of a module in to more than 48 KiB of dynamic shared memory"


def _check(driver, err, call: str, why: str = _WHY) -> None:
    if err != driver.CUresult.CUDA_SUCCESS:
        name = getattr(err, "name", None) or repr(err)
        raise DriverError(f"numba-mathdx: {call} failed with {name} while {why}")


def _kernel_name(driver, kernel) -> str:
    try:
        err, name = driver.cuKernelGetName(kernel)
        if err == driver.CUresult.CUDA_SUCCESS:
            return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: S110 - only for the message
        pass
    return repr(kernel)


def _device_id(device):
    try:
        return int(device)
    except (TypeError, ValueError):
        return device


def set_kernel_max_dynamic_shared_memory(kernel, nbytes: int, device: int, driver=None) -> None:
    """``cuKernelSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes, kernel, device)``; raises
    :class:`DriverError` (kernel, bytes, device and the driver's error) when it fails."""
    driver = driver or common_cuda._driver()
    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    (err,) = driver.cuKernelSetAttribute(attr, int(nbytes), kernel, device)
    _check(driver, err, "cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)",
           f"allowing kernel {_kernel_name(driver, kernel)} {int(nbytes)} bytes of dynamic shared "
           f"memory on device {_device_id(device)}")


def set_function_max_dynamic_shared_memory(func, nbytes: int, driver=None) -> None:
    """``cuFuncSetAttribute(func, MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)`` for a ``CUfunction``
    (a module's, not a library's ``CUkernel``); raises :class:`DriverError` when it fails."""
    driver = driver or common_cuda._driver()
    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    (err,) = driver.cuFuncSetAttribute(func, attr, int(nbytes))
    _check(driver, err, "cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)",
           f"allowing function {func!r} {int(nbytes)} bytes of dynamic shared memory")


def raise_shared_memory_limit(object_code) -> None:
    """Setup callback: let every kernel in the module use the device's opt-in shared memory.

    Raises
    ------
    DriverError
        A driver call failed (its name and error code are in the message).
    """
    driver = common_cuda._driver()
    handle = getattr(object_code, "handle", object_code)
    err, dev = common_cuda.current_device(driver)  # no cuCtxGetDevice without a current context
    _check(driver, err, "cuDeviceGet/cuCtxGetDevice")
    A = driver.CUdevice_attribute
    err, optin = driver.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev)
    _check(driver, err, "cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)")
    F = driver.CUfunction_attribute
    if isinstance(handle, driver.CUlibrary):
        err, n = driver.cuLibraryGetKernelCount(handle)
        _check(driver, err, "cuLibraryGetKernelCount")
        if n == 0:
            return
        err, kernels = driver.cuLibraryEnumerateKernels(n, handle)
        _check(driver, err, "cuLibraryEnumerateKernels")
        for k in kernels:
            err, static = driver.cuKernelGetAttribute(F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k, dev)
            _check(driver, err, "cuKernelGetAttribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)")
            set_kernel_max_dynamic_shared_memory(k, max(0, optin - static), dev, driver)
    elif isinstance(handle, driver.CUmodule):
        err, n = driver.cuModuleGetFunctionCount(handle)
        _check(driver, err, "cuModuleGetFunctionCount")
        if n == 0:
            return
        err, funcs = driver.cuModuleEnumerateFunctions(n, handle)
        _check(driver, err, "cuModuleEnumerateFunctions")
        for f in funcs:
            err, static = driver.cuFuncGetAttribute(F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f)
            _check(driver, err, "cuFuncGetAttribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)")
            set_function_max_dynamic_shared_memory(f, max(0, optin - static), driver)
