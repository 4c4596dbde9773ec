# SPDX-License-Identifier: Apache-2.0
"""Shared helpers of the numba layer: descriptor types, constant attributes, LTO-IR attachment."""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import types
from numba.core.errors import TypingError
from numba.cuda.extending import core_models, infer_getattr, lower_getattr_generic, register_model

from .._tensor_code import TensorOp
from ..types import Vector
from ._compat import (
    LTOIR,
    AbstractTemplate,
    AttributeTemplate,
    from_dtype,
    install_bfloat16_arrays,
    install_cache_pickling,
    install_prune_unused_variables,
    lower_constant,
    signature,
)

_ltoir_objects: dict = {}


class DescriptorLTOIR(LTOIR):
    """The LTO-IR of one FFT/GEMM descriptor, as a numba ``LTOIR`` linkable object.

    The bytes are fetched from ``descriptor.ltoir()`` (disk cache, else NVRTC) only when a
    link reads :attr:`data`. The object pickles as its descriptor, so a Numba kernel library
    that links it can be cached (``@cuda.jit(cache=True)``): a process that loads the cached
    kernel gets the already-linked cubin, this object back (with its setup callback) and
    never compiles or reads the LTO-IR unless it has to link again.

    Parameters
    ----------
    descriptor : FFT or Matmul
        A frozen, hashable, picklable descriptor with ``symbol`` and ``ltoir()``.
    """

    nvmath_device_picklable = True  # see nvmath_device._numba._compat.install_cache_pickling

    def __init__(self, descriptor):
        from .launch import raise_shared_memory_limit

        super().__init__(None, name=f"{descriptor.symbol}.ltoir", setup_callback=raise_shared_memory_limit)
        self.descriptor = descriptor

    @property
    def data(self) -> bytes:
        """The LTO-IR bytes (fetched on first use)."""
        if self._data is None:
            if isinstance(self.descriptor, TensorOp):
                # a tensor-API kernel links several small units: the ones lowered in this process and
                # not built yet compile together, in parallel processes, before this one is read
                pending = [o.descriptor for o in list(_ltoir_objects.values())
                           if o._data is None and isinstance(o.descriptor, TensorOp)]
                if len(pending) > 1:
                    from .._build.parallel import build_tensor_ops

                    build_tensor_ops(pending)
            self._data = self.descriptor.ltoir()
        return self._data

    @property
    def loaded(self) -> bool:
        """Whether the LTO-IR bytes have been fetched in this process."""
        return self._data is not None

    def __reduce__(self):
        return (linkable_ltoir, (self.descriptor,))

    def __repr__(self):
        return f"DescriptorLTOIR({self.descriptor!r})"


def linkable_ltoir(descriptor) -> DescriptorLTOIR:
    """One linkable LTO-IR object per descriptor and process, so a kernel links each symbol once
    (also the unpickling hook of :class:`DescriptorLTOIR`)."""
    obj = _ltoir_objects.get(descriptor)
    if obj is None:
        obj = _ltoir_objects.setdefault(descriptor, DescriptorLTOIR(descriptor))
    return obj


install_cache_pickling()  # numba issue #8888: let kernels linking DescriptorLTOIR pickle
install_bfloat16_arrays()  # numba-cuda #198: cuda.shared.array / cuda.local.array of bfloat16
install_prune_unused_variables()  # kernels linking our code keep only the device variables they use


def call_extern(context, builder, descriptor, symbol, pointers):
    """Attach the descriptor's LTO-IR to the kernel being built and call ``void symbol(i8*...)``."""
    context.active_code_library.add_linking_file(linkable_ltoir(descriptor))  # picklable: see _compat
    i8p = ir.IntType(8).as_pointer()
    fnty = ir.FunctionType(ir.VoidType(), [i8p] * len(pointers))
    fn = builder.module.globals.get(symbol)
    if fn is None:
        fn = ir.Function(builder.module, fnty, symbol)
    builder.call(fn, [builder.bitcast(p, i8p) for p in pointers])


def data_pointer(context, builder, arytype, value):
    """The data pointer (LLVM value) of a numba array value."""
    return context.make_array(arytype)(context, builder, value).data


def numba_dtype(dt: np.dtype):
    """The numba type of a numpy dtype (numba-cuda's mapping: ``ml_dtypes.bfloat16`` -> ``bfloat16``)."""
    return from_dtype(np.dtype(dt))


class DescriptorType(types.Type):
    """A numba type standing for one frozen descriptor (an FFT or a GEMM)."""

    def __init__(self, descriptor, kind):
        self.descriptor = descriptor
        super().__init__(name=f"{kind}({descriptor._key})")

    @property
    def key(self):
        """The descriptor itself: equal descriptors give equal numba types."""
        return self.descriptor


def constant_value_type(value):
    """The numba type of a constant attribute value (a value type of ``nvmath_device.types``,
    such as float16's ``half4``, is its number class: a dtype in kernels)."""
    if isinstance(value, Vector):
        # imported here, not at the top: importing .vector registers the vector number types,
        # and numba-cuda's npydecl (imported later, by install_bfloat16_arrays) looks every
        # number type up as a NumPy attribute, which fails for them
        from .vector import numba_type_of
        return types.NumberClass(numba_type_of(value))
    if isinstance(value, (bool, np.bool_)):
        return types.boolean
    if isinstance(value, (int, np.integer)):
        return types.IntegerLiteral(int(value))
    if isinstance(value, tuple) and all(isinstance(v, (int, np.integer)) for v in value):
        if value and hasattr(type(value), "_fields"):  # Dim3, LeadingDimension: .x / .a in kernels
            return types.NamedUniTuple(types.intp, len(value), type(value))
        if value and len(value) == 2:
            # (rows, cols) shapes such as MM.a_dim: a tuple of literals, so that
            # cuda.shared.array(MM.a_dim[::-1], ...) takes it (and its slices) as a constant shape
            return types.Tuple([types.IntegerLiteral(int(v)) for v in value])
        return types.UniTuple(types.intp, len(value)) if value else types.Tuple(())
    if isinstance(value, np.dtype):
        return types.DType(numba_dtype(value))
    if isinstance(value, str):
        return types.StringLiteral(value)
    return None


def register_descriptor_type(type_cls, attribute_getter, methods=None):
    """Register model, constant lowering and compile-time-constant attributes for ``type_cls``.

    ``attribute_getter(descriptor, name)`` returns the Python value of an attribute or raises
    AttributeError; ints become IntegerLiterals (usable as ``cuda.local.array`` shapes), dtypes
    become DType constants.
    """
    register_model(type_cls)(core_models.OpaqueModel)

    @lower_constant(type_cls)
    def _lower_const(context, builder, ty, pyval):
        return context.get_dummy_value()

    @infer_getattr
    class _Attrs(AttributeTemplate):
        key = type_cls

        def generic_resolve(self, ty, attr):
            if methods and attr in methods:
                return types.BoundFunction(methods[attr], ty)
            try:
                value = attribute_getter(ty.descriptor, attr)
            except AttributeError:
                return None
            except NotImplementedError as e:
                raise TypingError(str(e)) from None
            return constant_value_type(value)

    @lower_getattr_generic(type_cls)
    def _lower_attr(context, builder, ty, val, attr):
        value = attribute_getter(ty.descriptor, attr)
        if isinstance(value, np.dtype):
            return context.get_dummy_value()
        if isinstance(value, (bool, np.bool_)):
            return context.get_constant(types.boolean, bool(value))
        if isinstance(value, (int, np.integer)):
            return context.get_constant(types.intp, int(value))
        if isinstance(value, tuple):
            return context.make_tuple(builder, constant_value_type(value),
                                      [context.get_constant(types.intp, int(v)) for v in value])
        return context.get_dummy_value()


def method_template(key, typer):
    """A bound-method typing template: ``typer(descriptor, args)`` returns the argument types
    (after raising TypingError with a helpful message for anything else)."""

    class _Method(AbstractTemplate):
        def generic(self, args, kws):
            if kws:
                raise TypingError(f"{key} takes positional arguments only, got keywords {sorted(kws)}")
            argtys = typer(self.this.descriptor, tuple(args))
            return signature(types.none, *argtys).replace(recvr=self.this)

    _Method.key = key
    return _Method
