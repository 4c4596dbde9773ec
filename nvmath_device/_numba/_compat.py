# SPDX-License-Identifier: Apache-2.0
"""The seam to numba-cuda: every use of its internals, and every version gate, in one place.

The rest of the numba layer imports numba's public extension API (``numba.core.types``,
``numba.core.errors``, ``numba.cuda.extending``) and, from here, what lies beyond it (numba-cuda
0.30.x): the linkable-code class, constant lowering, the typing templates, LLVM-building
helpers, the kernel compiler without a driver, and three patches (each commented with its
upstream issue). Another numba front end (numba-cuda-mlir) would replace this module.
"""

from __future__ import annotations

import contextlib
import threading
import types
import warnings

from numba.cuda import cgutils  # noqa: F401  (array pointers, tuple unpacking in lowering)
from numba.cuda.core.imputils import lower_constant  # noqa: F401
from numba.cuda.cudadrv.linkable_code import LTOIR  # noqa: F401  (our LTO-IR as a linking file)
from numba.cuda.np.numpy_support import from_dtype  # noqa: F401  (ml_dtypes.bfloat16 -> bfloat16)
from numba.cuda.nvvmutils import declare_vprint  # noqa: F401  (printf in debug checks)
from numba.cuda.types import bfloat16  # noqa: F401
from numba.cuda.typing.templates import AbstractTemplate, AttributeTemplate, signature  # noqa: F401

# What stops working when a patch below cannot be applied (this numba-cuda's internals have
# another shape): said once per process as a RuntimeWarning, not logged at DEBUG where nobody
# sees it.
_NOT_APPLIED = {
    "cache_pickling": (
        "numba-cuda's CUDACodeLibrary changed shape; numba-mathdx's cache=True patch is not "
        "applied: @cuda.jit(cache=True) kernels that call an FFT/GEMM will not be cached (numba "
        "raises 'Cannot pickle CUDACodeLibrary with linking files', numba issue #8888)"),
    "bfloat16_arrays": (
        "numba-cuda's cudaimpl._generic_array changed shape; numba-mathdx's bfloat16 array patch "
        "is not applied: cuda.shared.array / cuda.local.array of bfloat16 will not compile "
        "(numba-cuda #198)"),
    "prune_unused_variables": (
        "numba-cuda's _Linker changed shape; numba-mathdx's unused-variable pruning is not "
        "applied: kernels that call an FFT keep all of cuFFTDx's twiddle tables (~2.3 MB cubins, "
        "links ~2x slower)"),
}
_warned: set = set()


def _not_applied(patch: str) -> bool:
    """Warn once per process that ``patch`` is not applied (and what that breaks); False."""
    msg = _NOT_APPLIED[patch]
    if patch not in _warned:
        _warned.add(patch)
        warnings.warn(msg, RuntimeWarning, stacklevel=3)
    return False


def compile_kernel_library(pyfunc, argtypes, cc, *, fastmath=False, opt=True, launch_bounds=None):
    """Type and lower ``pyfunc`` as a kernel for ``cc`` without touching the driver.

    numba-cuda's own ``compile()`` returns PTX/LTO-IR but drops the linking files that our
    extern calls attach, and ``_Kernel`` asks the driver for the current device; so we call
    ``compile_cuda`` as ``_Kernel.__init__`` does (numba-cuda 0.30.4, dispatcher.py).
    """
    from numba.core import types
    from numba.core.compiler_lock import global_compiler_lock
    from numba.cuda.compiler import compile_cuda, kernel_fixup

    nvvm_options = {"fastmath": fastmath, "opt": 3 if opt else 0}
    with global_compiler_lock, device_functions_for(cc):
        cres = compile_cuda(pyfunc, types.void, argtypes, debug=False, lineinfo=False,
                            fastmath=fastmath, nvvm_options=nvvm_options, cc=cc, lto=True)
    lib = cres.library
    entry = cres.fndesc.llvm_func_name
    kernel = lib.get_function(entry)
    lib._entry_name = entry
    kernel_fixup(kernel, False)
    if launch_bounds is not None:  # as _Kernel.__init__ does for @cuda.jit(launch_bounds=...)
        from numba.cuda.cudadrv import nvvm

        nvvm.set_launch_bounds(kernel, launch_bounds)
    if lib.use_cooperative:  # a grid sync (cuda.cg.this_grid().sync()) needs libcudadevrt, as
        lib.needs_cudadevrt = True  # _Kernel.__init__ arranges for numba-cuda's own launches
    return lib, entry


@contextlib.contextmanager
def device_functions_for(cc):
    """While a kernel compiles for ``cc`` without a GPU: numba-cuda 0.30.4 compiles each
    ``@cuda.jit(device=True)`` function it calls through ``CUDADispatcher.compile_device``, which
    asks the driver for the current device only to read its compute capability
    (dispatcher.py, ``get_current_device().compute_capability``); answer ``cc`` instead.
    :func:`compile_kernel_library` holds it under numba's compiler lock, so no other compile
    sees it. numba keys a device function's
    compiled overloads by argument types only, so one compiled here for ``cc`` is reused for
    later targets, as numba itself does."""
    from numba.cuda import dispatcher

    class _Target:
        compute_capability = tuple(cc)

    saved = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: _Target()
    try:
        yield
    finally:
        dispatcher.get_current_device = saved


def linked_cubin(lib, cc) -> tuple[bytes, tuple[str, ...]]:
    """The cubin of a library from :func:`compile_kernel_library` linked for ``cc``, and the
    names of the linking files in it (numba-cuda 0.30 returns a cuda.core ObjectCode)."""
    cubin = lib.get_cubin(cc=cc)
    cubin = bytes(getattr(cubin, "code", cubin))
    return cubin, tuple(sorted(getattr(f, "name", str(f)) for f in lib._linking_files))


# --- @cuda.jit(cache=True) for kernels that link our LTO-IR ---------------------------------
#
# numba-cuda 0.30.4 (codegen.py, CUDACodeLibrary._reduce_states) refuses to pickle a code
# library that has linking files other than its NRT library: "Cannot pickle CUDACodeLibrary
# with linking files" -- upstream numba issue #8888 ("cache=True with external code",
# https://github.com/numba/numba/issues/8888). Every kernel that calls an FFT/GEMM of ours has
# such a file (the descriptor's LTO-IR), so ``cache=True`` failed for all of them.
#
# Our linkable objects (nvmath_device._numba.common.DescriptorLTOIR) pickle as their
# descriptor. The patch below lets a library whose linking files are only ours (plus NRT)
# pickle: the state numba keeps (LLVM IR, PTX, the linked cubin per arch, linker log) plus our
# objects under one extra key; on rebuild they are added back with ``add_linking_file``, which
# also re-installs their setup callbacks (the >48 KiB shared-memory opt-in). A library with
# any other linking file still raises numba's own error. Version gate: the patch is applied
# only where ``_reduce_states``/``_rebuild`` have the 0.30.x shape checked below.

# A second gap, same numba-cuda version: module setup callbacks run only in
# ``_Kernel.bind()``, which the dispatcher calls after a compile but not after a cache hit
# (dispatcher.py: ``kernel = self._cache.load_overload(...)`` then ``kernel.launch`` ->
# ``get_cufunc()``, no ``initialize_once``). A kernel loaded from the cache therefore never got
# its shared-memory opt-in and failed to launch with > 48 KiB (CUDA_ERROR_INVALID_VALUE).
# Libraries rebuilt by the patch get a ``get_cufunc`` that runs the module's setup
# once, under a lock, the first time the module is loaded in a context.

_LINKS_KEY = "nvmath_device_links"
_setup_lock = threading.Lock()


def _get_cufunc_with_setup(library):
    cufunc = type(library).get_cufunc(library)
    module = cufunc.module
    if not module.initialized:
        with _setup_lock:
            if not module.initialized:
                module.setup()
    return cufunc

_patched = {"cache_pickling": False, "bfloat16_arrays": False, "prune_unused_variables": False}


def picklable_link(obj) -> bool:
    """Whether ``obj`` is one of our linking files that pickle (marked ``nvmath_device_picklable``)."""
    return bool(getattr(type(obj), "nvmath_device_picklable", False))


def install_cache_pickling() -> bool:
    """Patch numba-cuda's ``CUDACodeLibrary`` pickling (see the comment above); idempotent.

    Returns
    -------
    bool
        True when the patch is in place, False when this numba-cuda's code library does not
        have the expected shape (then ``cache=True`` fails as upstream).
    """
    if _patched["cache_pickling"]:
        return True
    import inspect

    try:
        from numba.cuda.codegen import CUDACodeLibrary
    except ImportError:  # pragma: no cover
        return False
    reduce_fn = CUDACodeLibrary.__dict__.get("_reduce_states")
    rebuild_cm = CUDACodeLibrary.__dict__.get("_rebuild")
    expected = {"codegen", "name", "entry_name", "cubin_cache", "nrt", "lto"}
    try:
        params = set(inspect.signature(rebuild_cm.__func__).parameters)
    except (AttributeError, TypeError, ValueError):
        params = set()
    if reduce_fn is None or not isinstance(rebuild_cm, classmethod) or not expected <= params \
            or _LINKS_KEY in params:
        return _not_applied("cache_pickling")
    orig_reduce = reduce_fn
    orig_rebuild = rebuild_cm.__func__

    def _reduce_states(self):
        files = self._linking_files
        ours = [f for f in files if picklable_link(f)]
        if not ours:
            return orig_reduce(self)
        # A shallow stand-in without our files, so numba's checks and state apply unchanged
        # (and a library with any other linking file still raises numba's own error).
        standin = object.__new__(type(self))
        standin.__dict__.update(self.__dict__)
        standin._linking_files = {f for f in files if not picklable_link(f)}
        state = dict(orig_reduce(standin))
        state[_LINKS_KEY] = tuple(sorted(ours, key=lambda f: f.name))
        return state

    def _rebuild(cls, **states):
        ours = states.pop(_LINKS_KEY, ())
        instance = orig_rebuild(cls, **states)
        for f in ours:
            instance.add_linking_file(f)  # also re-installs its setup/teardown callbacks
        if ours:
            instance.get_cufunc = types.MethodType(_get_cufunc_with_setup, instance)
        return instance

    _reduce_states.__doc__ = orig_reduce.__doc__
    _reduce_states._nvmath_device_original = orig_reduce
    CUDACodeLibrary._reduce_states = _reduce_states
    CUDACodeLibrary._rebuild = classmethod(_rebuild)
    _patched["cache_pickling"] = True
    return True


# --- bfloat16 shared and local arrays ----------------------------------------------------------
#
# numba-cuda 0.30.4 types ``cuda.shared.array(n, dtype=<bfloat16>)`` and ``cuda.local.array(...)``
# (the dtype being ``numpy.dtype(ml_dtypes.bfloat16)``, ``ml_dtypes.bfloat16`` or
# ``numba.cuda.types.bfloat16``) but refuses to lower them: ``cudaimpl._generic_array`` takes only
# the types of ``number_domain``, records, booleans, struct models and float16, and bfloat16 (a
# primitive model over i16) is none of those -> "TypeError: unsupported type: __nv_bfloat16".
# Upstream: NVIDIA/numba-cuda#198 ("Support bfloat16 data type", open); the review of
# NVIDIA/numba-cuda#166 added expected-failure tests for exactly these shared/local arrays.
#
# A bfloat16 array is 16-bit storage with 2-byte alignment, like an int16 one, and an
# Array(bfloat16) value has the same LLVM type as an Array(int16) one (its data pointer is i16*).
# The patch lets ``_generic_array`` allocate a bfloat16 array as the int16 array it would build
# and returns that value. Version gate: applied only while numba-cuda's ``_generic_array`` has the
# 0.30.x signature and bfloat16 is still outside ``number_domain``.


def install_bfloat16_arrays() -> bool:
    """Let ``cuda.shared.array`` / ``cuda.local.array`` of bfloat16 compile (see the comment above).

    Idempotent.

    Returns
    -------
    bool
        True when the patch is in place, False when this numba-cuda does not need it or its
        ``_generic_array`` does not have the expected shape.
    """
    if _patched["bfloat16_arrays"]:
        return True
    import inspect

    try:
        from numba.cuda import cudaimpl
        from numba.cuda import types as cuda_types
    except ImportError:  # pragma: no cover
        return False
    bf16 = getattr(cuda_types, "bfloat16", None)
    orig = getattr(cudaimpl, "_generic_array", None)
    try:
        params = list(inspect.signature(orig).parameters)
    except (TypeError, ValueError):
        params = []
    if bf16 is None or params[:4] != ["context", "builder", "shape", "dtype"]:
        return _not_applied("bfloat16_arrays")
    if bf16 in cuda_types.number_domain:  # fixed upstream
        return False

    def _generic_array(context, builder, shape, dtype, *args, **kwargs):
        if dtype == bf16:
            dtype = cuda_types.int16  # same storage, same array value (see above)
        return orig(context, builder, shape, dtype, *args, **kwargs)

    _generic_array._nvmath_device_original = orig
    cudaimpl._generic_array = _generic_array
    _patched["bfloat16_arrays"] = True
    return True


# --- pruning unused device variables when a kernel links our LTO-IR ------------------------
#
# cuFFTDx's twiddle tables are ``__device__`` arrays (megabytes for all sizes). nvJitLink keeps
# every device variable through LTO unless told otherwise, so each FFT kernel's cubin would
# carry all of them (and link slower). nvJitLink's -optimize-unused-variables drops the ones no
# kernel references.
# numba-cuda 0.30.4's ``_Linker._get_linker_options`` has no way to ask for it, so a linker
# that is given one of our linkable objects turns it on (only for those links: a kernel
# without our code links exactly as numba does it). Variables a kernel references, numba's
# own included, are kept; only host-side lookups of unreferenced variables would miss them.


def install_prune_unused_variables() -> bool:
    """Patch numba-cuda's ``_Linker`` as described above; idempotent.

    Returns
    -------
    bool
        True when the patch is in place, False when this numba-cuda's linker does not have the
        expected shape (then kernels link with all device variables, as upstream).
    """
    if _patched["prune_unused_variables"]:
        return True
    import inspect

    try:
        from cuda.core import LinkerOptions
        from numba.cuda.cudadrv import driver
    except ImportError:  # pragma: no cover
        return False
    linker = getattr(driver, "_Linker", None)
    add = getattr(linker, "add_file_guess_ext", None)
    opts = getattr(linker, "_get_linker_options", None)
    if add is None or opts is None or "optimize_unused_variables" not in inspect.signature(LinkerOptions).parameters:
        return _not_applied("prune_unused_variables")

    def add_file_guess_ext(self, path_or_code, ignore_nonlto=False):
        if picklable_link(path_or_code):
            self._nvmath_device_prune = True
        return add(self, path_or_code, ignore_nonlto)

    def _get_linker_options(self, ptx):
        options = opts(self, ptx)
        if getattr(self, "_nvmath_device_prune", False) and getattr(self, "_has_ltoir", False):
            options.optimize_unused_variables = True
        return options

    add_file_guess_ext.__doc__ = add.__doc__
    linker.add_file_guess_ext = add_file_guess_ext
    linker._get_linker_options = _get_linker_options
    _patched["prune_unused_variables"] = True
    return True


def register_global_template(func, template) -> None:
    """Type calls of the Python function ``func`` in kernels with ``template`` (an
    :class:`AbstractTemplate` subclass whose ``key`` is ``func``), as ``type_callable`` does but
    without its signature folding: numba-cuda's ``type_callable`` takes the typer's Python
    signature, so a function of ``*args`` (``nvmath_device.random.init``) would have its arguments
    folded into one tuple at lowering (numba-cuda 0.30.4, typing/templates.py ``fold_arguments``)."""
    from numba.cuda import types as cuda_types
    from numba.cuda.typing.templates import infer, infer_global

    infer(template)
    infer_global(func, cuda_types.Function(template))


def local_array(context, builder, dtype, count: int, alignment: int | None = None):
    """A 1-D C-contiguous array value of ``count`` ``dtype`` in the thread's local memory (an
    ``alloca`` in the entry block, as ``cuda.local.array(count, dtype)`` makes; registers once
    LLVM promotes it), for storage that typing creates (register fragments of the tensor API)."""
    from numba.cuda import cudaimpl, nvvm

    return cudaimpl._generic_array(context, builder, (int(count),), dtype, "nmdx_fragment",
                                   nvvm.ADDRSPACE_LOCAL, alignment=alignment)
