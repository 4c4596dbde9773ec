# SPDX-License-Identifier: Apache-2.0
"""Complex loads and stores as one memory access, for use inside ``@cuda.jit`` kernels."""

from __future__ import annotations


def load_complex(array, index):
    """``array[index]`` of a complex array, read as one vector access.

    numba moves a complex value as two accesses, real part and imaginary part (two 4-byte
    ``LDG.E`` per complex64 on sm_90). Where neighbouring threads read values a row apart, as in
    cuFFTDx's register layout (thread ``t`` holds elements ``t, t + stride, ...``), that doubles
    the L1 work per byte. This reads the value as one 8-byte (complex64) or 16-byte (complex128)
    access.

    Parameters
    ----------
    array : complex64 or complex128 array (in a kernel: global, shared or local memory)
        The element's address must be a multiple of the element size (true for every array
        allocated with that dtype; not for, e.g., a complex64 view of a float32 array that
        starts at an odd element).
    index : int or tuple of ints
        One non-negative index per dimension; no bounds check (as numba's indexing in kernels).

    Returns
    -------
    The element, of the array's complex type. Outside kernels and under the CUDA simulator this
    is ``array[index]``.
    """
    return array[index]


def store_complex(array, index, value):
    """``array[index] = value`` for a complex array, written as one vector access.

    The counterpart of :func:`load_complex` (one 8- or 16-byte store instead of two).

    Parameters
    ----------
    array : complex64 or complex128 array
        Alignment as for :func:`load_complex`.
    index : int or tuple of ints
        One non-negative index per dimension; no bounds check.
    value : number
        Converted to the array's complex type, as ``array[index] = value`` would.
    """
    array[index] = value
