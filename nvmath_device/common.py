# SPDX-License-Identifier: Apache-2.0
"""cuBLASDx's tensor API inside ``@cuda.jit`` kernels (nvmath-python 1.0's ``nvmath.device.common``).

A tensor is a buffer seen through one of a GEMM descriptor's layouts
(:class:`~nvmath_device._layouts.Layout`, made by ``MM.get_layout_gmem_a()``,
``MM.suggest_layout_smem_a()``, ``MM.suggest_layout_rmem_c()`` ...)::

    gmem_a = make_tensor(a, MM.get_layout_gmem_a())            # a: the kernel's global array
    smem_a = make_tensor(smem_buffer, MM.suggest_layout_smem_a())
    rmem_c = make_tensor(cuda.local.array(c_layout.cosize, MM.c_value_type), c_layout)
    copy(gmem_a, smem_a); copy(gmem_b, smem_b); clear(rmem_c); copy_wait()
    MM.execute(smem_a, smem_b, rmem_c)                         # rmem_c += A @ B
    copy_fragment(gmem_c, rmem_c_out); axpby(alpha, rmem_c, beta, rmem_c_out)
    copy_fragment(rmem_c_out, gmem_out)

Each operation is cuBLASDx's own (``cublasdx::copy``, ``copy_fragment``, the tensor ``execute``),
compiled per operation and operand types into LTO-IR and linked into the kernel
(:mod:`nvmath_device._build.tensor_codegen`); ``clear``, ``axpby``, ``make_fragment_like`` and
indexing a register fragment (``rmem_c[i]``) are plain Numba code on the fragment's buffer
(element ``i`` of a fragment is ``buffer[i]``: its layout is compact).

Rules checked when the kernel compiles (a TypingError names the argument and what is allowed):
a tensor's array has the element kind (real/complex) of its operand; a global 2-D array is
C-contiguous for a row-major operand and F-contiguous for a column-major one (the layout's
leading dimension, not the array's strides, addresses it); shared and register buffers are 1-D;
``copy`` moves one operand between global and shared memory with equal element types;
``copy_fragment`` moves a C fragment to or from a C tensor in global or shared memory;
``alignment=`` is a compile-time 1, 2, 4, 8 or 16, at least the element size. The lengths of
buffers are not checked (a ``cosize`` shorter than the layout's is the caller's error, as in
C++).

Under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the same programs run in NumPy with
cuBLASDx's own layouts: shared tiles are written at the swizzled offsets the GPU uses (read from
compiled code by :mod:`nvmath_device._build.gemm_sim_layouts`), and a fragment's element ``i``
is C's element ``map_fragment_index(i)`` of the partitioner the GEMM runs (the tables of
:mod:`nvmath_device._build.gemm_sim_tables`). ``copy`` and the shared-C ``execute`` are collective
(every thread of the block calls them, as on the GPU).
"""

from __future__ import annotations

from . import _dispatch
from ._layouts import Layout
from ._partitioners import Accumulator, Partitioner

__all__ = [
    "OpaqueTensor", "Layout", "Partitioner", "Accumulator", "make_tensor", "make_fragment_like",
    "copy", "copy_fragment", "copy_wait", "clear", "axpby", "MAX_ALIGNMENT",
]

MAX_ALIGNMENT = 16
"""The largest alignment (bytes) of cuBLASDx's copies and of a descriptor's ``alignment``."""


def _kernel_only(name: str, *args):
    """The simulator's implementation of ``name`` (registered under NUMBA_ENABLE_CUDASIM=1), else the
    error that says where the function runs."""
    impl = _dispatch.implementation(
        f"common.{name}",
        f"nvmath_device.common.{name} runs inside @cuda.jit kernels (on the GPU, or under the CUDA "
        f"simulator); it has no host form")
    return impl(*args)


class OpaqueTensor:
    """A buffer seen through a cuBLASDx layout (made by :func:`make_tensor` in a kernel).

    In kernels: ``t.layout`` (its :class:`Layout`), ``t.buffer`` (the array), and for register
    fragments ``t[i]`` / ``t[i] = v`` (element ``i`` of the fragment).

    Attributes
    ----------
    layout : Layout
        The cuBLASDx layout the buffer is seen through.
    buffer : array
        The array given to :func:`make_tensor` (or the fragment's storage).
    """

    def __init__(self, *args, **kwargs):
        _kernel_only("OpaqueTensor")


def make_tensor(array, layout: Layout):
    """A tensor over ``array`` with ``layout`` (inside kernels).

    Parameters
    ----------
    array : array
        Global memory (a kernel argument, 1-D or 2-D), shared memory (a 1-D ``cuda.shared.array``
        or a slice of one) or local memory (a 1-D ``cuda.local.array``), of ``layout.cosize``
        elements at least, of the operand's element kind (real or complex).
    layout : Layout
        One of the descriptor's layouts (``MM.get_layout_*()`` / ``MM.suggest_layout_*()``).

    Returns
    -------
    OpaqueTensor
    """
    return _kernel_only("make_tensor", array, layout)


def make_fragment_like(tensor, dtype):
    """A new register fragment with ``tensor``'s layout and elements of ``dtype`` (uninitialised).

    Parameters
    ----------
    tensor : OpaqueTensor
        A register fragment (layout ``get_layout_rmem_c`` / ``suggest_layout_rmem_c``).
    dtype : NumPy scalar type
    """
    return _kernel_only("make_fragment_like", tensor, dtype)


def copy(src, dst, alignment=None):
    """Copy one operand's tile between global and shared memory, by the whole block
    (``cublasdx::copy``; asynchronous where the hardware allows: call :func:`copy_wait` before
    reading ``dst``).

    Parameters
    ----------
    src, dst : OpaqueTensor
        A global and a shared tensor of the same operand and element type (either direction).
    alignment : int, optional
        Bytes both buffers are aligned to (1, 2, 4, 8 or 16, a compile-time constant); default:
        the descriptor's alignment of the operand.
    """
    return _kernel_only("copy", src, dst, alignment)


def copy_fragment(src, dst, alignment=None):
    """Copy between this thread's C fragment (registers) and a C tensor in global or shared
    memory (``cublasdx::copy_fragment`` with the fragment's partitioner; elements outside C are
    skipped).

    Parameters
    ----------
    src, dst : OpaqueTensor
        One register fragment and one C tensor (global or shared), equal element types.
    alignment : int, optional
        Bytes (1, 2, 4, 8 or 16, a compile-time constant); default: the partitioner's.
    """
    return _kernel_only("copy_fragment", src, dst, alignment)


def copy_wait():
    """Wait for this block's :func:`copy` operations and synchronise the block (cuBLASDx's
    ``copy_wait``: commit, wait for all groups of ``cp.async``, ``__syncthreads``)."""
    return _kernel_only("copy_wait")


def clear(tensor):
    """Set every element of a register fragment to zero.

    Parameters
    ----------
    tensor : OpaqueTensor
        A register fragment.
    """
    return _kernel_only("clear", tensor)


def axpby(alpha, x, beta, y):
    """``y = alpha * x + beta * y`` element by element on register fragments of one layout
    (cuBLASDx's ``axpby``; with ``beta == 0``, ``y = alpha * x`` without reading ``y``).

    Parameters
    ----------
    alpha, beta : scalars
        Converted to the element types of ``x`` and ``y``.
    x, y : OpaqueTensor
        Register fragments with the same layout.
    """
    return _kernel_only("axpby", alpha, x, beta, y)
