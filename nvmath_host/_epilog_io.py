# SPDX-License-Identifier: Apache-2.0
"""Epilog inputs and outputs, one handler per kind: validated, laid out, handed to cuBLASLt.

:data:`~nvmath_host.epilogs.EPILOGS` names each epilog's inputs and outputs and
:data:`~nvmath_host.epilogs.DATA` says of what kind each is; :func:`bind` makes one handler
per input and output of a problem, chosen by its kind and direction:

=========  ========  ================  ===========================================
direction  kind      handler           cuBLASLt attributes
=========  ========  ================  ===========================================
input      vector    :class:`VectorIn`   BIAS_POINTER, BIAS_DATA_TYPE, BIAS_BATCH_STRIDE
input      matrix    :class:`MatrixIn`   EPILOGUE_AUX_POINTER, _LD, _BATCH_STRIDE
output     vector    :class:`VectorOut`  BIAS_POINTER (each launch), BIAS_BATCH_STRIDE
output     matrix    :class:`MatrixOut`  EPILOGUE_AUX_POINTER (each launch), _LD, _BATCH_STRIDE
=========  ========  ================  ===========================================

plus :class:`AmaxOut` for ``options.result_amax`` (AMAX_D_POINTER) and
``preferences.epilog.aux_amax`` (EPILOGUE_AUX_AMAX_POINTER). A handler reads the
problem's shape, order and types (duck-typed: any object with those attributes).
"""

from __future__ import annotations

import dataclasses

from mathdx_operands import DTYPES, UINT8, Operand

from . import _cublaslt as lt
from . import _rules as rules
from ._layout import batch_stride, dense_batch
from .epilogs import DATA, EPILOGS

#: the stored dtypes that are not the result's
_STORED = {"uint8": UINT8}

_A = lt.MatmulDescAttribute


def _what(name: str) -> str:
    return f"epilog_inputs[{name!r}]"


class _Handler:
    """One input or output of a planned epilog.

    Attributes
    ----------
    name : str
        Its name in ``epilog_inputs`` or in the auxiliary outputs.
    pointer_attr : int
        The descriptor attribute that takes its pointer.
    attrs : dict
        Other descriptor attributes it sets at plan time (attribute -> value).
    out : OutSpec or None
        For an output: the array each launch allocates.
    """

    pointer_attr: int
    out = None

    def set_attributes(self, desc, op: Operand | None = None) -> None:
        """Set its attributes on ``desc`` (and, for an input, the pointer of ``op``)."""
        if op is not None:
            desc.set_pointer(self.pointer_attr, op.ptr)
        for attr, value in self.attrs.items():
            desc.set(attr, value)


class VectorIn(_Handler):
    """An input vector along the result's contiguous axis: the bias."""

    pointer_attr = int(_A.BIAS_POINTER)
    binds_order = True  # its shape decides the result's order

    @staticmethod
    def order(name: str, op: Operand, m: int, n: int) -> str:
        """The result order its shape needs, or ValueError for a shape of neither order."""
        s = op.shape
        if (len(s) == 1 and s[0] == n) or (len(s) >= 2 and s[-2:] == (1, n)):
            return "C"
        if len(s) >= 2 and s[-2:] == (m, 1):
            return "F"
        raise ValueError(
            f"{_what(name)}: shape {s}; expected (N,)=({n},), (1, N)=(1, {n}) or "
            f"(M, 1)=({m}, 1), optionally with leading batch axes"
        )

    def __init__(self, name: str, op: Operand, p):
        self.name = name
        what = _what(name)
        d = p.d_dtype
        allowed, why = rules.bias_dtypes(p.fp8, d, p.c.dtype if p.c is not None else None)
        if op.dtype.name not in allowed:
            if not p.fp8:
                raise ValueError(
                    f"{what}: dtype {op.dtype.name} differs from the result's {d.name}"
                )
            raise ValueError(
                f"{what}: dtype {op.dtype.name}; with FP8 operands and a {d.name} result "
                f"cuBLASLt takes a {' or '.join(allowed)} bias" + (f" ({why})" if why else "")
            )
        length, axis = (p.N, -1) if p.order == "C" else (p.M, -2)
        if length > 1 and op.strides[axis] != 1:
            raise ValueError(f"{what}: the bias vector must be contiguous")
        bb = op.shape[:-2] if op.ndim >= 2 else ()
        if bb and bb != p.batch_shape:
            raise ValueError(
                f"{what}: batch shape {bb} does not match the result's {p.batch_shape}"
            )
        self.attrs = {}
        if p.fp8:
            self.attrs[int(_A.BIAS_DATA_TYPE)] = int(op.dtype.cuda)
        bs = batch_stride(bb, op.strides[:-2], what, op.package == "numpy") if bb else 0
        if bs:
            self.attrs[int(_A.BIAS_BATCH_STRIDE)] = bs


class MatrixIn(_Handler):
    """An input matrix with one value per result element: relu_aux, gelu_aux."""

    pointer_attr = int(_A.EPILOGUE_AUX_POINTER)
    binds_order = False  # it only hints at the result's order

    @staticmethod
    def order(name: str, op: Operand, m: int, n: int) -> str | None:
        """The result order it fits, if only one: a bit-mask by its shape, a copy of the
        result by its strides."""
        if op.ndim < 2:
            return None
        data = DATA[name]
        if data.bits == 1:
            if op.shape[-2:] != (m, n):
                return None
            sr, sc = op.strides[-2:]
            return "C" if sc == 1 else ("F" if sr == 1 else None)
        fits = [x for x in ("C", "F") if op.shape[-2:] == data.matrix_shape(m, n, x)]
        return fits[0] if len(fits) == 1 else None

    def __init__(self, name: str, op: Operand, p):
        self.name = name
        data = DATA[name]
        what = _what(name)
        if data.dtype is not None:
            if op.dtype.name != data.dtype:
                raise ValueError(
                    f"{what}: dtype {op.dtype.name}; expected {data.dtype} ({data.note})"
                )
        elif op.dtype.name != p.d_dtype.name:
            raise ValueError(
                f"{what}: dtype {op.dtype.name} differs from the result's {p.d_dtype.name}"
            )
        M, N, order = p.M, p.N, p.order
        r, c = ms = data.matrix_shape(M, N, order)
        if op.ndim < 2 or op.shape[-2:] != ms:
            tail = (
                f" for a {order}-ordered ({M}, {N}) result (as {_producer(name)} returns it)"
                if data.bits > 1
                else ""
            )
            raise ValueError(f"{what}: shape {op.shape}; expected (..., {r}, {c}){tail}")
        align, bits = data.align, data.bits
        sr, sc = op.strides[-2:]
        inner, ld, extent = (sc, sr, c) if order == "C" else (sr, sc, r)
        if inner != 1 or ld < extent or ld % align:
            raise ValueError(
                f"{what}: strides {op.strides}: the {order}-ordered layout needs a unit inner "
                f"stride and a leading dimension >= {extent} divisible by {align}"
            )
        ab = op.shape[:-2]
        if ab and ab != p.batch_shape:
            raise ValueError(
                f"{what}: batch shape {ab} does not match the result's {p.batch_shape}"
            )
        bs = batch_stride(ab, op.strides[:-2], what, op.package == "numpy") if ab else 0
        if bs % align:
            raise ValueError(f"{what}: batch stride {bs} must be divisible by {align}")
        self.attrs = {
            int(_A.EPILOGUE_AUX_LD): ld * bits,
            int(_A.EPILOGUE_AUX_BATCH_STRIDE): bs * bits,
        }


def _producer(name: str) -> str:
    """The first epilog that outputs ``name`` (how messages say where an input comes from)."""
    return next(e.name for e, s in EPILOGS.items() if s.aux_output == name)


class MatrixOut(_Handler):
    """An output matrix with one value per result element: relu_aux, gelu_aux."""

    pointer_attr = int(_A.EPILOGUE_AUX_POINTER)

    def __init__(self, name: str, p):
        self.name = name
        data = DATA[name]
        M, N, order = p.M, p.N, p.order
        own = name == "gelu_aux" and p.aux_dtype is not None  # preferences.epilog.aux_type
        dtype = _STORED[data.dtype] if data.dtype else (p.aux_dtype if own else p.d_dtype)
        if dtype.itemsize == 1 and data.bits == 1:  # an FP8 gelu_aux: 16-byte rows, as the rest
            data = dataclasses.replace(data, align=16)
        shape = data.matrix_shape(M, N, order)
        ld = data.stored(N if order == "C" else M)
        strides = (ld, 1) if order == "C" else (1, ld)
        mat = (M if order == "C" else N) * ld
        self.attrs = {
            int(_A.EPILOGUE_AUX_LD): ld * data.bits,
            int(_A.EPILOGUE_AUX_BATCH_STRIDE): mat * data.bits,
        }
        if own and p.aux_type_given:
            self.attrs[int(_A.EPILOGUE_AUX_DATA_TYPE)] = dtype.cuda
        self.out = dense_batch(name, dtype, p.batch_shape, shape, strides, mat, self.pointer_attr)


class VectorOut(_Handler):
    """An output vector: bgrad, the sum of the result or of an operand (``spec.bgrad``)."""

    pointer_attr = int(_A.BIAS_POINTER)

    def __init__(self, name: str, p):
        self.name = name
        side = p.spec.bgrad
        # cuBLASLt runs BGRADA only with TRANSA=N and BGRADB only with TRANSB=T (else its
        # heuristic answers NOT_SUPPORTED). In our terms, in either result order: BGRADA
        # needs a column-major a, BGRADB a row-major b.
        if side == "a" and p.mem["a"] != "col" and p.K > 1 and p.M > 1:
            raise ValueError(
                "a: BGRADA needs a column-major (F-ordered) a, e.g. x.T for a C-ordered x "
                f"(cuBLASLt's restriction); got strides {p.a.strides[-2:]}"
            )
        if side == "b" and p.mem["b"] != "row" and p.K > 1 and p.N > 1:
            raise ValueError(
                "b: BGRADB needs a row-major (C-ordered) b (cuBLASLt's restriction); got strides "
                f"{p.b.strides[-2:]}"
            )
        if side == "d":
            shape = (p.N,) if p.order == "C" else (p.M, 1)
        else:
            shape = (p.M,) if side == "a" else (p.N,)
        length = shape[0]
        self.attrs = {int(_A.BIAS_BATCH_STRIDE): length}
        strides = (1,) if len(shape) == 1 else (1, 1)
        self.out = dense_batch(
            name, p.d_dtype, p.batch_shape, shape, strides, length, self.pointer_attr
        )


class AmaxOut(_Handler):
    """One float32 amax, no batch: ``options.result_amax`` (``max |D|``, AMAX_D_POINTER) or
    ``preferences.epilog.aux_amax`` (``max |gelu_aux|``, EPILOGUE_AUX_AMAX_POINTER)."""

    attrs: dict = {}

    def __init__(self, name: str, pointer_attr: int):
        self.name, self.pointer_attr = name, int(pointer_attr)
        self.out = dense_batch(name, DTYPES["float32"], (), (1,), (1,), 1, self.pointer_attr)


INPUTS = {"vector": VectorIn, "matrix": MatrixIn}
OUTPUTS = {"vector": VectorOut, "matrix": MatrixOut}


def input_handler(name: str):
    """The handler class of the epilog input ``name``."""
    return INPUTS[DATA[name].kind]


def lt_epilogue(epilog, spec, swap: bool) -> lt.Epilogue:
    """cuBLASLt's epilogue for ours: BGRADA and BGRADB trade places when the result is handed
    over transposed (``swap``)."""
    if swap and spec.bgrad in ("a", "b"):
        return lt.Epilogue.BGRADB if spec.bgrad == "a" else lt.Epilogue.BGRADA
    return lt.Epilogue(int(epilog))


def bind(p) -> tuple[dict[str, _Handler], tuple[_Handler, ...]]:
    """The handlers of problem ``p``'s epilog inputs (by name) and outputs (in order);
    each validates its part of ``p`` as it is made."""
    inputs = {n: input_handler(n)(n, p.inputs[n], p) for n in p.spec.inputs}
    outputs = tuple(OUTPUTS[DATA[n].kind](n, p) for n in p.spec.outputs)
    if p.aux_amax:
        outputs += (AmaxOut("gelu_aux_amax", _A.EPILOGUE_AUX_AMAX_POINTER),)
    if p.options.result_amax:
        outputs += (AmaxOut("result_amax", _A.AMAX_D_POINTER),)
    return inputs, outputs
