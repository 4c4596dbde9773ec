# SPDX-License-Identifier: Apache-2.0
"""numba-cuda's simulator internals, in one place: the calling block thread and its kernel
context, the ndarray behind a simulated device array, and two patches of the simulator.

The patches make spellings that work in device code work in numba-cuda's simulator as well
(applied by :func:`install_simulator_compat` when ``nvmath_device`` is imported with the
simulator enabled):

- ``cuda.local.array(n, dtype, alignment=16)`` / ``cuda.shared.array(..., alignment=...)``:
  numba-cuda implements ``alignment=`` on the GPU (NVIDIA/numba-cuda#143) but its simulator
  (0.30.x, ``simulator/kernelapi.py``) raises "Array alignment is not supported in cudasim".
  Our README asks for ``alignment=16`` on real-typed register arrays, so the simulator must take it.
- ``dtype=numpy.complex64`` (a numpy scalar class rather than a ``numpy.dtype``) in
  ``cuda.shared.array(0, ...)``: the simulator reads ``dtype.itemsize`` and fails. The same
  holds for ``ml_dtypes.bfloat16``; ``dtype=numba.cuda.types.bfloat16`` has no NumPy mapping in
  the simulator: both become ``numpy.dtype(ml_dtypes.bfloat16)`` here, the dtype numba-cuda
  gives bfloat16 arrays.

Five more make the simulator take what numba-cuda's CUDA target takes (numba-cuda 0.30.4's
``simulator/kernelapi.py``, ``simulator/api.py`` and ``simulator/kernel.py``):

- ``cuda.shared.array(shape=(0,), ...)``: on the GPU any 1-D shape with no elements means
  dynamic shared memory (``cudaimpl._generic_array``: ``elemcount <= 0 and len(shape) == 1``);
  the simulator recognised only the integer ``0`` and gave ``(0,)`` a zero-length array. A
  multi-dimensional shape with no elements raises ``ValueError("array length <= 0")`` as on
  the GPU.
- ``cuda.jit(..., forceinline=, lineinfo=, launch_bounds=, lto=, extensions=, link=[])``: the
  simulator's ``jit`` has a shorter signature and raised ``TypeError`` for the first five and
  ``NotImplementedError`` for any ``link`` that is not ``None`` (``link=fft.files`` is ``[]``).
  The code-generation options are accepted and ignored, ``extensions`` are applied to the
  arguments as numba-cuda's kernels do, and a non-empty ``link`` still raises (the simulator
  cannot run linked CUDA code) with a message saying so.
- stores that convert in kernels: numba's CUDA target converts a complex number to a
  two-element float vector (float16x2/float32x2/float64x2) and back when storing into an array
  (nvmath_device._numba.vector); NumPy raised TypeError for both. Local and shared arrays of
  complex or vector dtype are ``_sim.vector.SimArray`` views and ``FakeCUDAArray.__setitem__``
  converts (``_sim.vector.convert_store``); a real number or tuple stored into a vector array in
  a kernel is a TypeError as kernels refuse it at compile time (NumPy copied it into every
  element). The values themselves (``_vector.VectorRecord``) do complex arithmetic.
- ``common_cuda.current_device_sm()`` without a GPU: the architecture descriptors without
  ``sm=`` target here (sm_90) instead of DriverError, so ``sm=current_device_sm()`` means what
  leaving ``sm`` out means, as on a GPU.
- keyword arguments in device-function calls (``f(x, scale=2.0)``): numba-cuda types them by
  folding the arguments into the signature; the simulator's ``FakeCUDAKernel.__call__`` took
  ``*args`` only and raised ``TypeError``. A kernel launch stays positional only, as on the GPU.
- ``ffi.from_buffer(array[i:])`` of a kernel argument (cffi): numba-cuda types it in kernels as
  a pointer to the array's data (nvmath-python's Sobol example passes the direction vectors to
  ``random.init`` this way); in the simulator the argument is a simulated array without the
  buffer protocol and cffi raised ``TypeError``. The patched ``cffi.FFI.from_buffer`` gives
  back the ndarray behind a simulated array (indexed as the pointer would be) and calls cffi
  for anything else. Applied only when cffi is installed.
- ``cuda.cg.this_grid().sync()`` in a launch of more than one block: the simulator runs one block
  after the other, and its grid sync was a ``syncthreads`` of the calling block, so a kernel that
  reads another block's results after it silently computed wrong values (nvmath-python's
  ``cufftdx_fft_2d_single_kernel`` failed its own check). It now raises ``RuntimeError`` saying
  so; a one-block grid syncs as before (then the block is the grid).
"""

from __future__ import annotations

import struct
import sys
import threading

import numpy as np


def _validate_alignment(alignment) -> None:
    # Same rules as numba-cuda's device-side check (cudaimpl._validate_alignment, 0.30.x).
    if alignment is None:
        return
    if isinstance(alignment, bool) or not isinstance(alignment, (int, np.integer)):
        raise ValueError("Alignment must be an integer")
    if alignment <= 0:
        raise ValueError("Alignment must be positive")
    if alignment & (alignment - 1):
        raise ValueError("Alignment must be a power of 2")
    pointer_size = struct.calcsize("P")
    if alignment % pointer_size:
        raise ValueError(f"Alignment must be a multiple of {pointer_size}")


def _as_dtype(dtype) -> np.dtype:
    from numba.core import types
    from numba.np import numpy_support

    if isinstance(dtype, types.Type):
        if str(dtype) == "__nv_bfloat16":  # numba.cuda.types.bfloat16: no numpy_support mapping
            from .._types import bfloat16_dtype

            return bfloat16_dtype()
        return numpy_support.as_dtype(dtype)
    return np.dtype(dtype)


def _aligned_empty(shape, dtype: np.dtype, alignment) -> np.ndarray:
    if alignment is None:
        return np.empty(shape, dtype)
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = count * dtype.itemsize
    buf = np.empty(nbytes + alignment, dtype=np.uint8)
    offset = (-buf.ctypes.data) % alignment
    return buf[offset : offset + nbytes].view(dtype).reshape(shape)


def _local_array(self, shape, dtype, alignment=None):
    _validate_alignment(alignment)
    return _sim_array(_aligned_empty(shape, _as_dtype(dtype), alignment))


def _sim_array(arr: np.ndarray) -> np.ndarray:
    from .vector import sim_array

    return sim_array(arr)


def _is_dynamic_shape(shape) -> bool:
    """numba-cuda's rule (cudaimpl._generic_array, 0.30.x): a 1-D shape with no elements asks
    for dynamic shared memory; more dimensions with no elements are an error."""
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in dims):
        return False  # let NumPy report the bad shape
    count = int(np.prod(dims, dtype=np.int64))
    if count > 0:
        return False
    if len(dims) != 1:
        raise ValueError("array length <= 0")
    return True


def _shared_array(self, shape, dtype, alignment=None):
    # Same semantics as numba-cuda 0.30.x FakeCUDAShared.array (dynamic shared memory: shape 0,
    # all such arrays alias one buffer; static arrays: one per source line), plus alignment=
    # and numpy scalar classes as dtype.
    _validate_alignment(alignment)
    dtype = _as_dtype(dtype)
    if _is_dynamic_shape(shape):
        count = self._dynshared_size // dtype.itemsize
        return _sim_array(np.frombuffer(self._dynshared.data, dtype=dtype, count=count))
    frame = sys._getframe(1)
    caller = (frame.f_code.co_filename, frame.f_lineno)
    res = self._allocations.get(caller)
    if res is None:
        res = _sim_array(_aligned_empty(shape, dtype, alignment))
        self._allocations[caller] = res
    return res


_installed = False


def install_simulator_compat() -> None:
    """Apply the patches of this module's docstring to numba-cuda's simulator.

    Idempotent; does nothing when the simulator is not enabled.
    """
    global _installed
    if _installed:
        return
    from numba.cuda.simulator import kernel, kernelapi

    kernelapi.FakeCUDALocal.array = _local_array
    kernelapi.FakeCUDAShared.array = _shared_array
    _install_jit_options()
    _install_vector_stores()
    _answer_current_device_sm()
    _install_cffi_from_buffer()
    _refuse_multi_block_grid_sync()
    _original_call = kernel.FakeCUDAKernel.__call__
    if not getattr(_original_call, "_nvmath_device_kwargs", False):
        kernel.FakeCUDAKernel.__call__ = _call_with_keywords(_original_call)
    _installed = True


# numba-cuda 0.30.4 decorators.jit's own keyword arguments and the option keywords it reads;
# the simulator's jit (simulator/api.py) knows only some of them: e.g. forceinline= came to
# cuda.jit with NVIDIA/numba-cuda#246/#247 (NVVM-level inlining) and never to the simulator
# (the same gap as numba/numba#6049, "Cudasim jit does not support bind=").
_CODEGEN_ONLY = ("forceinline", "lineinfo", "launch_bounds", "lto")


def _install_jit_options() -> None:
    import numba.cuda
    from numba.cuda import simulator, simulator_init
    from numba.cuda.simulator import api

    original = api.jit
    if getattr(original, "_nvmath_device_options", False):
        return

    def jit(func_or_sig=None, device=False, inline="never", link=None, extensions=None, **kws):
        # Options that only steer code generation mean nothing to the simulator.
        for name in _CODEGEN_ONLY:
            kws.pop(name, None)
        if link:  # link=None / () / [] (e.g. link=fft.files) link nothing: same kernel
            raise NotImplementedError(
                f"the CUDA simulator cannot run linked CUDA code (cuda.jit(link={link!r})); "
                "nvmath_device descriptors need no link= (their .files is [])"
            )
        if isinstance(inline, str):  # "never"/"always": numba IR-level inlining
            inline = inline == "always"
        made = original(func_or_sig, device=device, inline=inline, **kws)
        if not extensions:
            return made
        if callable(made) and not hasattr(made, "extensions"):  # jit(sig, ...) -> decorator
            return lambda fn: _with_extensions(made(fn), extensions)
        return _with_extensions(made, extensions)

    jit._nvmath_device_options = True
    jit.__doc__ = original.__doc__
    jit.__wrapped__ = original
    for module in (api, simulator, simulator_init, numba.cuda):
        if getattr(module, "jit", None) is original:
            module.jit = jit


def _install_cffi_from_buffer() -> None:
    try:
        from cffi import api
    except ImportError:  # cffi is not a dependency; without it no kernel can call ffi.from_buffer
        return
    original = api.FFI.from_buffer
    if getattr(original, "_nvmath_device_sim", False):
        return
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray, FakeWithinKernelCUDAArray

    def from_buffer(self, *args, **kwargs):
        data = args[-1] if args else kwargs.get("python_buffer")
        if isinstance(data, (FakeCUDAArray, FakeWithinKernelCUDAArray)):
            if len(args) > 1 or set(kwargs) - {"python_buffer"}:
                raise TypeError("ffi.from_buffer(cdecl, array) / require_writable= of a simulated device "
                                "array: only ffi.from_buffer(array) is supported under the CUDA simulator")
            return unwrap(data)
        return original(self, *args, **kwargs)

    from_buffer._nvmath_device_sim = True
    from_buffer.__wrapped__ = original
    api.FFI.from_buffer = from_buffer


def _refuse_multi_block_grid_sync() -> None:
    from numba.cuda.simulator import kernelapi

    original = kernelapi.GridGroup.sync
    if getattr(original, "_nvmath_device_sim", False):
        return

    def sync(self):
        _, ctx = kernel_context("cuda.cg.this_grid().sync()")
        blocks = int(np.prod(tuple(ctx.gridDim)))
        if blocks > 1:
            raise RuntimeError(
                f"cuda.cg.this_grid().sync() in a grid of {tuple(ctx.gridDim)} blocks: numba-cuda's CUDA "
                "simulator runs the blocks one after the other, so it cannot synchronise them (its grid "
                "sync only synchronised the calling block, and a kernel reading other blocks' results "
                "after it got wrong values). Run this kernel on a GPU, or launch one block under the "
                "simulator.")
        return original(self)

    sync._nvmath_device_sim = True
    sync.__wrapped__ = original
    kernelapi.GridGroup.sync = sync


def _answer_current_device_sm() -> None:
    """``common_cuda.current_device_sm()`` without a GPU answers the architecture descriptors
    without ``sm=`` target here (``_descriptor.SIMULATOR_DEFAULT_SM``), so that nvmath-style
    ``FFT(..., sm=current_device_sm())`` means what leaving ``sm`` out means (it raised
    DriverError)."""
    from .. import common_cuda
    from .._descriptor import SIMULATOR_DEFAULT_SM

    common_cuda._no_gpu_sm = common_cuda.ComputeCapability(*divmod(SIMULATOR_DEFAULT_SM, 10))


def _install_vector_stores() -> None:
    """Stores into simulated device arrays of complex numbers or vectors convert as in kernels
    (``nvmath_device._sim.vector.convert_store``): ``FakeCUDAArray.__setitem__`` (which the
    in-kernel ``FakeWithinKernelCUDAArray`` calls) passed the value to NumPy as is."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    from numba.cuda.simulator.kernel import _get_kernel_context

    from .vector import convert_store

    original = FakeCUDAArray.__setitem__
    if getattr(original, "_nvmath_device_vectors", False):
        return

    def __setitem__(self, idx, val):
        dtype = self._ary.dtype
        if dtype.kind in "cV":
            val = convert_store(dtype, val, in_kernel=_get_kernel_context() is not None)
        return original(self, idx, val)

    __setitem__._nvmath_device_vectors = True
    __setitem__.__wrapped__ = original
    FakeCUDAArray.__setitem__ = __setitem__


def _with_extensions(kernel, extensions):
    kernel.extensions = list(extensions)
    return kernel


def _call_with_keywords(original):
    def __call__(self, *args, **kwargs):
        if not kwargs:
            return original(self, *args)
        from numba.cuda.simulator import kernel
        from numba.cuda.simulator.kernelapi import swapped_cuda_module

        context = kernel._get_kernel_context()
        if not (self._device or context):
            raise TypeError(
                f"a kernel launch takes positional arguments only, got keywords {sorted(kwargs)}"
            )
        with swapped_cuda_module(self.fn, context):
            return self.fn(*args, **kwargs)

    __call__._nvmath_device_kwargs = True
    __call__.__wrapped__ = original
    return __call__


def kernel_context(what: str):
    """(thread, kernel context) of the calling simulator thread; RuntimeError outside a kernel."""
    from numba.cuda.simulator.kernel import BlockThread, _get_kernel_context

    thread = threading.current_thread()
    ctx = _get_kernel_context()
    if ctx is None or not isinstance(thread, BlockThread):
        raise RuntimeError(
            f"{what} can only be called inside a @cuda.jit kernel (here: the CUDA simulator)"
        )
    return thread, ctx


def unwrap(x):
    """The ndarray behind a simulator kernel argument (FakeWithinKernelCUDAArray / FakeCUDAArray)."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray, FakeWithinKernelCUDAArray

    if isinstance(x, FakeWithinKernelCUDAArray):
        x = x.__dict__["_item"]
    if isinstance(x, FakeCUDAArray):
        x = x._ary
    return x
