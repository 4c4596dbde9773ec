# SPDX-License-Identifier: Apache-2.0
"""Module setup run by numba-cuda when a kernel that uses our device code is loaded.

cuFFTDx/cuBLASDx kernels often need more than 48 KiB of dynamic shared memory, which CUDA only
grants after the kernel opts in (MAX_DYNAMIC_SHARED_SIZE_BYTES). Users launch with
``kernel[grid, fft.block_dim, stream, fft.shared_memory_size]``; this callback opts every
kernel of the loaded module in to the device's maximum, so that launch just works.
"""

from __future__ import annotations


def _ok(err):
    from cuda.bindings import driver

    return err == driver.CUresult.CUDA_SUCCESS


def raise_shared_memory_limit(object_code) -> None:
    """Setup callback: let every kernel in the module use the device's opt-in shared memory."""
    from cuda.bindings import driver

    handle = getattr(object_code, "handle", object_code)
    err, dev = driver.cuCtxGetDevice()
    if not _ok(err):
        return
    A = driver.CUdevice_attribute
    err, optin = driver.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev)
    if not _ok(err):
        return
    F = driver.CUfunction_attribute
    if isinstance(handle, driver.CUlibrary):
        err, n = driver.cuLibraryGetKernelCount(handle)
        if not _ok(err) or n == 0:
            return
        err, kernels = driver.cuLibraryEnumerateKernels(n, handle)
        if not _ok(err):
            return
        for k in kernels:
            err, static = driver.cuKernelGetAttribute(F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k, dev)
            if _ok(err):
                driver.cuKernelSetAttribute(F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                            max(0, optin - static), k, dev)
    elif isinstance(handle, driver.CUmodule):
        err, n = driver.cuModuleGetFunctionCount(handle)
        if not _ok(err) or n == 0:
            return
        err, funcs = driver.cuModuleEnumerateFunctions(n, handle)
        if not _ok(err):
            return
        for f in funcs:
            err, static = driver.cuFuncGetAttribute(F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f)
            if _ok(err):
                driver.cuFuncSetAttribute(f, F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                          max(0, optin - static))
