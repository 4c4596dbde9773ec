# SPDX-License-Identifier: Apache-2.0
"""cuBLASDx's partitioners and accumulators of a GEMM descriptor's register fragments, as values
(``Matmul.get_partitioner()`` ... make them; the numba layer types them in kernels, the simulator
answers their device methods through :mod:`nvmath_device._dispatch`)."""

from __future__ import annotations

from . import _dispatch
from ._layouts import Layout

__all__ = ["Partitioner", "Accumulator"]


class Partitioner:
    """cuBLASDx's partitioner of a GEMM's register fragments (``Matmul.get_partitioner()`` /
    ``Matmul.suggest_partitioner()``; not constructed by users).

    Inside ``@cuda.jit`` kernels it answers, for the calling thread: ``is_thread_active()``,
    ``is_predicated()``, ``is_index_in_bounds(i)``, ``map_fragment_index(i)`` (the (row, col) of
    C that fragment element ``i`` holds) and makes fragments (``make_accumulator_fragment()``);
    ``partition_and_copy(src, dst)`` / ``make_partition_and_copy(gmem_c)`` copy between a
    fragment and a C tensor. Its fragments have the layout :attr:`layout`
    (``Matmul.get_layout_rmem_c()`` or ``suggest_layout_rmem_c()``).

    The coordinates are those of the MMA that ``MM.execute(smem_a, smem_b, fragment)`` runs for a
    fragment of that layout: cuBLASDx picks the suggested (swizzled) MMA whenever the fragment's
    layout type equals the suggested partitioner's, so where ``get_partitioner()``'s fragment
    layout equals ``suggest_partitioner()``'s, both report the suggested MMA's coordinates.

    On the host it is a value (immutable, hashable, usable as a global or closure variable in a
    kernel); its device methods raise RuntimeError there.

    Parameters
    ----------
    descriptor : Matmul
        The GEMM.
    suggested : bool
        True for ``suggest_*``'s object (fragments of ``suggest_layout_rmem_c()``), False for
        ``get_*``'s (``get_layout_rmem_c()``).
    """

    __slots__ = ("_descriptor", "_suggested")
    _kind = "partitioner"

    def __init__(self, descriptor, suggested: bool):
        hash(descriptor)
        object.__setattr__(self, "_descriptor", descriptor)
        object.__setattr__(self, "_suggested", bool(suggested))

    @property
    def descriptor(self):
        """The GEMM descriptor (``Matmul``)."""
        return self._descriptor

    @property
    def suggested(self) -> bool:
        """Whether this is ``suggest_*`` 's object (fragments of ``suggest_layout_rmem_c()``)."""
        return self._suggested

    @property
    def layout(self) -> Layout:
        """The layout of this object's register fragments."""
        return getattr(self._descriptor, "suggest_layout_rmem_c" if self._suggested else "get_layout_rmem_c")()

    def _device_only(self, name, *args):
        impl = _dispatch.implementation(
            f"Partitioner.{name}", f"{type(self).__name__}.{name}() runs inside @cuda.jit kernels (on the GPU); "
                                   f"it has no value on the host")
        return impl(self, *args)

    def is_thread_active(self):
        """Whether the calling thread holds part of C (device only)."""
        return self._device_only("is_thread_active")

    def is_predicated(self):
        """Whether fragments may hold elements outside C (the tile does not divide C; device only)."""
        return self._device_only("is_predicated")

    def is_index_in_bounds(self, index):
        """Whether fragment element ``index`` of the calling thread lies inside C (device only).

        Parameters
        ----------
        index : int
            A fragment element, ``0 <= index < layout.size``.
        """
        return self._device_only("is_index_in_bounds", index)

    def map_fragment_index(self, index):
        """(row, col) of C held by fragment element ``index`` of the calling thread (device only).

        Parameters
        ----------
        index : int
            A fragment element, ``0 <= index < layout.size``.
        """
        return self._device_only("map_fragment_index", index)

    def make_accumulator_fragment(self):
        """A new register fragment of :attr:`layout` (uninitialised; device only)."""
        return self._device_only("make_accumulator_fragment")

    def partition_like_C(self, gmem_c):
        """This thread's part of the global C tensor ``gmem_c``: element ``i`` (``pc[i]``, read and
        written) is C's element ``map_fragment_index(i)`` (device only).

        Parameters
        ----------
        gmem_c : OpaqueTensor
            A C tensor in global memory (``get_layout_gmem_c``).
        """
        return self._device_only("partition_like_C", gmem_c)

    def make_empty_fragment(self):
        """The same as :meth:`make_accumulator_fragment` (nvmath-python's name; device only)."""
        return self._device_only("make_accumulator_fragment")

    def partition_and_copy(self, src, dst):
        """Copy between a fragment and a C tensor in global or shared memory (device only).

        Parameters
        ----------
        src, dst : OpaqueTensor
            A register fragment of :attr:`layout` and a C tensor, in either order.
        """
        return self._device_only("partition_and_copy", src, dst)

    def make_partition_and_copy(self, src):
        """A new fragment holding the calling thread's part of C tensor ``src`` (device only).

        Parameters
        ----------
        src : OpaqueTensor
            A C tensor in global or shared memory; the fragment has its element type.
        """
        return self._device_only("make_partition_and_copy", src)

    @property
    def _key(self):
        return (self._kind, self._descriptor._key, self._suggested)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name!r}")

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return (self._descriptor, self._suggested) == (other._descriptor, other._suggested)

    def __hash__(self):
        return hash((type(self).__name__, self._descriptor, self._suggested))

    def __reduce__(self):
        return (type(self), (self._descriptor, self._suggested))

    def __repr__(self):
        return f"{self._descriptor!r}.{'suggest' if self._suggested else 'get'}_{self._kind}()"


class Accumulator(Partitioner):
    """A partitioner that owns a register fragment: ``MM.get_accumulator()`` /
    ``MM.suggest_accumulator()`` make one (its fragment cleared to zero) inside a kernel;
    ``MM.execute(smem_a, smem_b, accumulator)`` adds ``A @ B`` into it, ``get_results()`` is
    that fragment. Everything else as :class:`Partitioner`.

    Parameters
    ----------
    descriptor : Matmul
        The GEMM.
    suggested : bool
        Whether its fragment has ``suggest_layout_rmem_c()`` (else ``get_layout_rmem_c()``).
    """

    __slots__ = ()
    _kind = "accumulator"

    def get_results(self):
        """The accumulator's register fragment (device only)."""
        return self._device_only("get_results")
