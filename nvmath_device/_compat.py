# SPDX-License-Identifier: Apache-2.0
"""Version gates and uses of numba-cuda internals, in one place (numba-cuda 0.30.x)."""

from __future__ import annotations


def compile_kernel_library(pyfunc, argtypes, cc, *, fastmath=False, opt=True):
    """Type and lower ``pyfunc`` as a kernel for ``cc`` without touching the driver.

    numba-cuda's own ``compile()`` returns PTX/LTO-IR but drops the linking files that our
    extern calls attach, and ``_Kernel`` asks the driver for the current device; so we call
    ``compile_cuda`` as ``_Kernel.__init__`` does (numba-cuda 0.30.4, dispatcher.py).
    """
    from numba.core import types
    from numba.cuda.compiler import compile_cuda, kernel_fixup

    nvvm_options = {"fastmath": fastmath, "opt": 3 if opt else 0}
    cres = compile_cuda(pyfunc, types.void, argtypes, debug=False, lineinfo=False,
                        fastmath=fastmath, nvvm_options=nvvm_options, cc=cc, lto=True)
    lib = cres.library
    entry = cres.fndesc.llvm_func_name
    kernel = lib.get_function(entry)
    lib._entry_name = entry
    kernel_fixup(kernel, False)
    return lib, entry
