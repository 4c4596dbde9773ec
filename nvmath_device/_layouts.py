# SPDX-License-Identifier: Apache-2.0
"""cuBLASDx layouts of a GEMM descriptor, as immutable Python objects (the Layout of ``Matmul``).

``Matmul.get_layout_gmem_a()``, ``Matmul.suggest_layout_smem_a()``, ``Matmul.suggest_layout_rmem_c()``
... return a :class:`Layout`: which descriptor, which of cuBLASDx's layouts, and that layout's
``size`` (elements it addresses, ``cute::size``) and ``cosize`` (elements a buffer needs,
``cute::cosize``: one past the largest offset), both read from compiled cuBLASDx code, never
computed here. A Layout works on the host, inside ``@cuda.jit`` kernels (captured as a global or a
closure variable, or made there by ``MM.get_layout_*()``; its ``size`` and ``cosize`` are
compile-time integer constants, e.g. the shape of ``cuda.local.array`` or a slice bound of a shared
buffer) and under the CUDA simulator (a plain Python object there).

The layouts and where their numbers come from (cuBLASDx 0.4, nvidia-mathdx 25.6):

======================================  =========================================================
``get_layout_gmem_a/b/c(ld=None)``      ``BLAS::get_layout_gmem_a(cute::Int<ld>)`` (default: the
                                        tight ld of the arrangement, m or k, ...)
``get_layout_smem_a/b/c()``             ``BLAS::get_layout_smem_a()`` (the descriptor's lda, ...)
``suggest_layout_smem_a/b/c()``         ``BLAS::suggest_layout_smem_a()`` (swizzled where
                                        cuBLASDx's database has a better layout)
``get_layout_rmem_c()``                 ``BLAS::get_partitioner().make_accumulator_fragment()``
``suggest_layout_rmem_c()``             ``BLAS::suggest_partitioner().make_accumulator_fragment()``
======================================  =========================================================

cuBLASDx 0.4 has no ``get_layout_rmem_c`` / ``suggest_layout_rmem_c`` functions (nvmath-python
1.0's names): its register layouts are those of the partitioners' accumulator fragments, which
is what these two return; nor does it have register layouts of A or B.

The tensor API
--------------
nvmath-python 1.0's device tensor API (``nvmath_device.common``) builds on these layouts:
``make_tensor(buffer, layout)`` views a global, shared or local array through a layout; ``copy``
/ ``copy_wait`` move whole tiles, ``copy_fragment`` moves a thread's register fragment, ``clear``
and ``axpby`` work on fragments, ``MM.execute(smem_a, smem_b, rmem_c)`` takes tensors, and the
partitioners (:mod:`nvmath_device._partitioners`) map fragments to coordinates. In kernels:
:mod:`nvmath_device._numba.tensor_numba`; under the simulator: :mod:`nvmath_device._sim.tensor`.

cuBLASDx 0.4 (nvidia-mathdx 25.6, the newest nvidia-mathdx on PyPI) has no device or tile
pipelines (nvmath-python's ``cublasdx_*_pipeline*`` examples: ``suggest_device_pipeline`` ...);
those would have to be written in this project, on top of the tensor functions.

This module is a leaf: it imports only the standard library and NumPy, and knows no numba and no
compiler (``nvmath_device.gemm`` makes the Layouts with the compiled numbers;
``nvmath_device._numba.layouts_numba`` types them in kernels).
"""

from __future__ import annotations

import numpy as np

__all__ = ["Layout", "LAYOUT_NAMES"]

# the Matmul methods that make layouts (nvmath-python 1.0's names) -> (memory, operand, suggested)
LAYOUT_NAMES = {
    "get_layout_gmem_a": ("gmem", "a", False),
    "get_layout_gmem_b": ("gmem", "b", False),
    "get_layout_gmem_c": ("gmem", "c", False),
    "get_layout_smem_a": ("smem", "a", False),
    "get_layout_smem_b": ("smem", "b", False),
    "get_layout_smem_c": ("smem", "c", False),
    "suggest_layout_smem_a": ("smem", "a", True),
    "suggest_layout_smem_b": ("smem", "b", True),
    "suggest_layout_smem_c": ("smem", "c", True),
    "get_layout_rmem_c": ("rmem", "c", False),
    "suggest_layout_rmem_c": ("rmem", "c", True),
}


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


class Layout:
    """One of cuBLASDx's layouts of one GEMM descriptor (made by ``Matmul.get_layout_*`` /
    ``Matmul.suggest_layout_*``; not constructed by users).

    Immutable and hashable; equal when made by the same method of equal descriptors with the
    same leading dimension. Usable in ``@cuda.jit`` kernels, where :attr:`size` and
    :attr:`cosize` are compile-time integer constants.

    Attributes
    ----------
    descriptor : Matmul
        The GEMM whose layout this is.
    name : str
        The method that made it, e.g. ``"suggest_layout_smem_a"``.
    memory : {"gmem", "smem", "rmem"}
        Where a tensor of this layout lives.
    operand : {"a", "b", "c"}
    suggested : bool
        Whether it is cuBLASDx's suggested layout (``suggest_layout_*``).
    leading_dimension : int or None
        The leading dimension of a global-memory layout; None for the others (their leading
        dimensions are the descriptor's).
    size : int
        Elements the layout addresses (``cute::size``): rows x columns, or the elements of one
        thread's register fragment.
    cosize : int
        Elements of a buffer that holds the layout (``cute::cosize``): one past its largest offset.
    """

    __slots__ = ("_descriptor", "_name", "_leading_dimension", "_size", "_cosize")

    def __init__(self, descriptor, name: str, leading_dimension, size: int, cosize: int):
        if name not in LAYOUT_NAMES:
            raise ValueError(f"name must be one of {tuple(LAYOUT_NAMES)}, got {name!r}")
        if leading_dimension is not None and not _is_int(leading_dimension):
            raise TypeError(f"leading_dimension must be None or an int, got {leading_dimension!r}")
        for what, v in (("size", size), ("cosize", cosize)):
            if not _is_int(v) or v < 0:
                raise TypeError(f"{what} must be a non-negative int, got {v!r}")
        hash(descriptor)  # a descriptor is hashable (frozen); refuse anything else early
        for slot, v in (("_descriptor", descriptor), ("_name", name),
                        ("_leading_dimension", None if leading_dimension is None else int(leading_dimension)),
                        ("_size", int(size)), ("_cosize", int(cosize))):
            object.__setattr__(self, slot, v)

    # ------------------------------------------------------------------ read-only attributes
    @property
    def descriptor(self):
        """The GEMM descriptor (``Matmul``) this layout belongs to."""
        return self._descriptor

    @property
    def name(self) -> str:
        """The ``Matmul`` method that made this layout, e.g. ``"get_layout_gmem_a"``."""
        return self._name

    @property
    def memory(self) -> str:
        """``"gmem"``, ``"smem"`` or ``"rmem"``: where a tensor of this layout lives."""
        return LAYOUT_NAMES[self._name][0]

    @property
    def operand(self) -> str:
        """``"a"``, ``"b"`` or ``"c"``."""
        return LAYOUT_NAMES[self._name][1]

    @property
    def suggested(self) -> bool:
        """Whether this is cuBLASDx's suggested layout (made by a ``suggest_layout_*`` method)."""
        return LAYOUT_NAMES[self._name][2]

    @property
    def leading_dimension(self) -> int | None:
        """The leading dimension of a global-memory layout (None for shared and register ones)."""
        return self._leading_dimension

    @property
    def size(self) -> int:
        """Elements the layout addresses (cuBLASDx's ``cute::size``, read from compiled code)."""
        return self._size

    @property
    def cosize(self) -> int:
        """Elements of a buffer that holds the layout (cuBLASDx's ``cute::cosize``, read from
        compiled code): the length of the shared or local array a tensor of it needs."""
        return self._cosize

    @property
    def alignment(self) -> int:
        """Bytes a buffer of this layout must be aligned to: the descriptor's alignment of its
        operand (``Matmul.alignment``; cuBLASDx's ``alignment_of``)."""
        return int(self._descriptor.alignment["abc".index(self.operand)])

    @property
    def _key(self):
        return (self._name, self._descriptor, self._leading_dimension)

    # ------------------------------------------------------------------ value semantics
    def __setattr__(self, name, value):
        raise AttributeError(f"Layout is immutable: cannot set {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"Layout is immutable: cannot delete {name!r}")

    def __eq__(self, other):
        if type(other) is not Layout:
            return NotImplemented
        return self._key == other._key

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return hash(("Layout", self._key))

    def __reduce__(self):
        return (Layout, (self._descriptor, self._name, self._leading_dimension, self._size, self._cosize))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __repr__(self):
        args = "" if self._leading_dimension is None else f"leading_dimension={self._leading_dimension}"
        return (f"Layout({self._descriptor!r}.{self._name}({args}), size={self._size}, "
                f"cosize={self._cosize})")

