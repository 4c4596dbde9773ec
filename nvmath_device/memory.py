# SPDX-License-Identifier: Apache-2.0
"""Complex loads and stores as one memory access, for use inside ``@cuda.jit`` kernels."""

from __future__ import annotations

import sys
import threading


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


def copy_async(dst, dst_index, src, src_index):
    """Start copying ``src[src_index]`` (global memory) to ``dst[dst_index]`` (shared memory)
    without passing through registers (PTX ``cp.async``, sm_80 and newer; 16-byte elements are
    cached in L2 only, ``cp.async.cg``, smaller ones also in L1, ``cp.async.ca``).

    The copy runs while the thread goes on; :func:`copy_async_commit` closes the group of copies
    the thread has started, and :func:`copy_async_wait` waits for groups to land. A thread sees
    its own copies after the wait; other threads of the block after a ``cuda.syncthreads()``
    that follows it. The usual use is a pipeline: start the next item's loads, work on the
    current one (its loads were started an item earlier), wait, repeat: the loads stay in flight
    through the work without holding registers.

    Parameters
    ----------
    dst : array in shared memory (``cuda.shared.array`` or a slice of one)
        Any other memory is an error the hardware does not report (the address is converted to
        a shared-memory address).
    dst_index, src_index : int or tuple of ints
        One non-negative index per dimension; no bounds check.
    src : array in global memory (a kernel argument), same dtype as ``dst``
        Elements of 4, 8 or 16 bytes (e.g. float32, float64 or complex64, complex128), each at
        an address that is a multiple of its size.

    Outside kernels this is ``dst[dst_index] = src[src_index]``. Under the CUDA simulator the
    source is read at the call and the copy lands at the :func:`copy_async_wait` that waits for
    its group, not before: a kernel that reads the destination before its wait sees the old
    value there, as it may on the GPU.
    """
    groups = _sim_groups()
    if groups is None:
        dst[dst_index] = src[src_index]
    else:
        groups[-1].append((dst, dst_index, src[src_index]))


def _sim_groups():
    """This simulated CUDA thread's copies in flight (a list of groups, the last one open), or
    None outside a kernel under the simulator."""
    sim = sys.modules.get("numba.cuda.simulator.kernel")
    thread = threading.current_thread()
    if sim is None or not isinstance(thread, sim.BlockThread):
        return None
    return thread.__dict__.setdefault("_nmdx_copy_groups", [[]])


def copy_async_commit():
    """Close the group of :func:`copy_async` copies this thread has started since the last
    commit (PTX ``cp.async.commit_group``). A no-op outside kernels."""
    groups = _sim_groups()
    if groups is not None:
        groups.append([])


def copy_async_wait(pending):
    """Wait until at most ``pending`` of this thread's most recent committed groups of
    :func:`copy_async` copies are still in flight (PTX ``cp.async.wait_group``).

    Parameters
    ----------
    pending : int
        A constant from 0 to 7 known when the kernel compiles; ``0`` waits for every group.

    A no-op outside kernels; under the simulator the copies of the groups waited for land here.
    """
    groups = _sim_groups()
    if groups is not None:
        committed = len(groups) - 1
        landing = groups[:max(0, committed - pending)]
        for group in landing:
            for dst, index, value in group:
                dst[index] = value
        del groups[:len(landing)]
