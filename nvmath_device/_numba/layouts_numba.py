# SPDX-License-Identifier: Apache-2.0
"""cuBLASDx layouts (:class:`nvmath_device._layouts.Layout`) inside @cuda.jit kernels.

A Layout is a compile-time constant, as the descriptors are (one numba type per Layout, an
opaque dummy value): captured as a global or closure variable, or made in the kernel by
``MM.get_layout_gmem_a()``, ``MM.suggest_layout_smem_a()``, ``MM.suggest_layout_rmem_c()`` ...
(``get_layout_gmem_*`` take an optional leading dimension that must be a compile-time integer
constant). Its ``size`` and ``cosize`` are integer literals: usable as the shape of
``cuda.local.array`` / ``cuda.shared.array`` and as slice bounds.
"""

from __future__ import annotations

from numba.core import types
from numba.core.errors import TypingError
from numba.cuda.extending import infer_getattr, lower_builtin, typeof_impl

from .._layouts import LAYOUT_NAMES, Layout
from ._compat import AbstractTemplate, AttributeTemplate, signature
from .common import DescriptorType, register_descriptor_type
from .gemm_numba import MatmulType

_KERNEL_ATTRS = ("size", "cosize", "alignment")


class LayoutType(DescriptorType):
    """The numba type of one cuBLASDx Layout (a compile-time constant inside kernels)."""

    def __init__(self, layout: Layout):
        super().__init__(layout, "Layout")


@typeof_impl.register(Layout)
def _typeof_layout(val, c):
    return LayoutType(val)


def _attr(layout, name):
    if name not in _KERNEL_ATTRS:
        raise AttributeError(name)
    return getattr(layout, name)


register_descriptor_type(LayoutType, _attr)


# ---------------------------------------------------------------- MM.get_layout_*() in kernels
def _method_key(name: str) -> str:
    return f"Matmul.{name}"


def _make_layout_method(name: str):
    takes_ld = name.startswith("get_layout_gmem_")

    class _LayoutMethod(AbstractTemplate):
        key = _method_key(name)
        prefer_literal = True  # a leading dimension must arrive as a literal

        def generic(self, args, kws):
            if kws:
                raise TypingError(f"Matmul.{name} takes positional arguments only in kernels, got "
                                  f"keywords {sorted(kws)}")
            mm = self.this.descriptor
            if not takes_ld:
                if args:
                    raise TypingError(f"Matmul.{name}() takes no arguments, got {len(args)}")
                layout = getattr(mm, name)()
            else:
                if len(args) > 1:
                    raise TypingError(f"Matmul.{name} takes at most one argument (leading_dimension), "
                                      f"got {len(args)}")
                ld = None
                if args:
                    a = args[0]
                    if isinstance(a, types.IntegerLiteral):
                        ld = a.literal_value
                    elif isinstance(a, (types.NoneType, types.Omitted)):
                        ld = None
                    else:  # prefer_literal: a constant int arrives as an IntegerLiteral first
                        raise TypingError(f"Matmul.{name}: leading_dimension must be a compile-time "
                                          f"integer constant (a literal, or a global or closure int) "
                                          f"or None in kernels, got {a}")
                try:
                    layout = getattr(mm, name)(ld)
                except (TypeError, ValueError) as e:
                    raise TypingError(str(e)) from None
            return signature(LayoutType(layout), *args).replace(recvr=self.this)

    _LayoutMethod.__name__ = f"_Type_{name}"
    return _LayoutMethod


_LAYOUT_METHODS = {name: _make_layout_method(name) for name in LAYOUT_NAMES}


@infer_getattr
class _MatmulLayoutMethods(AttributeTemplate):
    """``MM.get_layout_*`` / ``MM.suggest_layout_*`` as bound methods of the Matmul type (the
    descriptor's own attribute template resolves none of these names, so this one does)."""

    key = MatmulType

    def generic_resolve(self, ty, attr):
        template = _LAYOUT_METHODS.get(attr)
        if template is not None:
            return types.BoundFunction(template, ty)
        return None


def _lower_layout(context, builder, sig, args):
    return context.get_dummy_value()  # the layout is its type; nothing runs


for _name in LAYOUT_NAMES:
    lower_builtin(_method_key(_name), MatmulType, types.VarArg(types.Any))(_lower_layout)
