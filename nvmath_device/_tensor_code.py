# SPDX-License-Identifier: Apache-2.0
"""One cuBLASDx tensor operation of one GEMM descriptor as linkable code (what the numba layer
links for ``copy``, ``copy_fragment``, a tensor ``execute`` or a partitioner query).

:class:`TensorOp` stands where the numba layer expects a descriptor to link: ``symbol``,
``sm``, ``ltoir()``; hashable and picklable (a kernel cached with ``cache=True`` pickles what it
links). Two equal operations are one object's worth of code: a kernel links each once.
"""

from __future__ import annotations

__all__ = ["TensorOp"]


class TensorOp:
    """A tensor operation of ``mm``.

    Parameters
    ----------
    mm : Matmul
    kind : {"copy", "copy_fragment", "execute_rmem", "execute_smem", "partitioner"}
    tensors : tuple of (layout name, leading dimension or None, dtype name)
        One per tensor the operation takes, in its argument order (see
        :mod:`nvmath_device._build.tensor_codegen`).
    alignment : int or None
        Bytes (the ``alignment=`` of ``copy`` / ``copy_fragment``), None for cuBLASDx's default.
    """

    __slots__ = ("mm", "kind", "tensors", "alignment")

    def __init__(self, mm, kind: str, tensors, alignment=None):
        object.__setattr__(self, "mm", mm)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "tensors", tuple(tuple(t) for t in tensors))
        object.__setattr__(self, "alignment", None if alignment is None else int(alignment))

    def __setattr__(self, name, value):
        raise AttributeError(f"TensorOp is immutable: cannot set {name!r}")

    @property
    def symbol(self) -> str:
        from ._build.tensor_codegen import tensor_symbol

        return tensor_symbol(self.mm, self.kind, self.tensors, self.alignment)

    @property
    def sm(self) -> int:
        return self.mm.sm

    def ltoir(self) -> bytes:
        from ._build.tensor_codegen import tensor_ltoir

        return tensor_ltoir(self.mm, self.kind, self.tensors, self.alignment)

    def source(self) -> str:
        """The C++ of this operation's unit (what NVRTC compiles)."""
        from ._build.tensor_codegen import render_tensor_source

        return render_tensor_source(self.mm, self.kind, self.tensors, self.alignment)

    def _k(self):
        return (self.mm, self.kind, self.tensors, self.alignment)

    def __eq__(self, other):
        return type(other) is TensorOp and other._k() == self._k()

    def __hash__(self):
        return hash(("TensorOp", self._k()))

    def __reduce__(self):
        return (TensorOp, self._k())

    def __repr__(self):
        return f"TensorOp({self.kind}, {self.tensors}, alignment={self.alignment}, mm={self.mm!r})"
