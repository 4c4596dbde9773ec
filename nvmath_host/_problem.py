# SPDX-License-Identifier: Apache-2.0
"""A matmul's operands validated into a problem and its cuBLASLt layouts (no CUDA, no pointers).

How a problem reaches cuBLASLt (column-major only): a C-ordered (row-major) result ``D`` of
shape ``(M, N)`` is handed over as the column-major ``N x M`` matrix ``D^T = B^T A^T``, so
cuBLASLt's "A" is our ``b`` and its "B" our ``a``; an F-ordered result is handed over as is.
Each operand's own layout (C, F, transposed view) becomes a ``TRANSA``/``TRANSB`` flag and a
leading dimension, never a copy. cuBLASLt's bias is a vector along its rows, i.e. along ``N``
for a C-ordered result: that is why a ``(N,)`` bias gives a C-ordered result and a ``(M, 1)``
bias an F-ordered one.
"""

from __future__ import annotations

import dataclasses
import math

from mathdx_operands import Operand

from . import _cublaslt as lt
from . import _epilog_io as io
from . import _rules as rules
from ._layout import Layout, OutSpec, batch_stride, dense_batch, matrix_memory
from ._options import MatmulOptions
from .epilogs import EPILOGS, _as_epilog


class Problem:
    """Everything about a matmul that does not depend on pointers, validated.

    Built in the order the checks report errors: shapes, types, epilog (and its auxiliary
    output's type, ``epilog_prefs``: a checked :class:`MatmulEpilogPreferences` or None) and
    options, the result's order, the operands' and the result's layouts, the epilog's inputs
    and outputs, the FP8 scales.
    """

    def __init__(
        self,
        a: Operand,
        b: Operand,
        c: Operand | None,
        options: MatmulOptions,
        epilog,
        inputs: dict[str, Operand],
        scales: dict,
        conj: tuple[bool, bool] = (False, False),
        epilog_prefs=None,
    ):
        self.options = options
        self.conj_a, self.conj_b = conj
        self.a, self.b, self.c = a, b, c
        self.M, self.N, self.K = _dims(a, b)
        self.batch_shape, self.batch = _batch(a, b)
        # ---- types
        self.fp8 = rules.fp8_operands(a.dtype, b.dtype)
        c_dtype = c.dtype if c is not None else None
        self.d_dtype = rules.result_dtype(a.dtype, b.dtype, c_dtype, options.result_type)
        if c is not None:
            rules.check_c_dtype(c.dtype, self.d_dtype)
        bias = inputs.get("bias")
        self.c_dtype = rules.c_matrix_dtype(
            c_dtype, self.d_dtype, bias.dtype if bias is not None else None
        )
        self.compute_type = rules.compute_type(a.dtype, options.compute_type)
        self.scale_type, self.scale_np = rules.scale_type(self.compute_type, a.dtype)
        # ---- epilog and options
        self.epilog = _as_epilog(epilog)
        self.spec = EPILOGS[self.epilog]
        rules.check_epilog(self.epilog, a.dtype, self.d_dtype)
        # the gelu_aux output's type and amax (preferences.epilog: a MatmulEpilogPreferences)
        self.aux_type_given = epilog_prefs is not None and epilog_prefs.aux_type is not None
        self.aux_amax = bool(epilog_prefs is not None and epilog_prefs.aux_amax)
        self.aux_dtype = rules.aux_dtype(self.epilog, self.spec, self.d_dtype, epilog_prefs)
        if self.aux_dtype is not None and self.d_dtype.kind == "f8":
            self.c_dtype = rules.fp8_aux_c_type(c_dtype, bias.dtype if bias is not None else None)
        _check_input_names(self.epilog, self.spec, inputs)
        self.inputs = inputs
        self.inplace = bool(options.inplace)
        rules.check_result_options(options, self.fp8, self.d_dtype, c is not None)
        # ---- layouts
        conj_orders = _conjugate_orders(a, b, conj)
        self.order = _choose_order(self.M, self.N, c, inputs, options.result_order, conj_orders)
        self.swap = self.order == "C"
        self.mem, (self.layout_a, self.layout_b), (self.trans_a, self.trans_b) = _operand_layouts(
            a, b, self.swap, self.batch, conj
        )
        if self.fp8:
            rules.check_fp8_layout(self.trans_a, self.trans_b, a.strides[-2:], b.strides[-2:])
        self.layout_d, self.d_out = _result_layout(self)
        self.layout_c = _c_layout(self)
        self.c_ptr_from = _c_pointer_source(self)
        self.lt_epilog = io.lt_epilogue(self.epilog, self.spec, self.swap)
        # ---- epilog inputs and outputs: one handler each
        self.input_handlers, self.output_handlers = io.bind(self)
        self.outputs: list[OutSpec] = [h.out for h in self.output_handlers]
        # ---- FP8 scales
        self.scales = scales
        rules.check_scales(scales, self.fp8, self.d_dtype)
        rules.check_aux_scale(scales, self.aux_dtype)


def _dims(a: Operand, b: Operand) -> tuple[int, int, int]:
    """``(M, N, K)`` of ``a @ b``."""
    if a.ndim < 2:
        raise ValueError(f"a: expected at least 2 dimensions (..., M, K); got shape {a.shape}")
    if b.ndim < 2:
        raise ValueError(f"b: expected at least 2 dimensions (..., K, N); got shape {b.shape}")
    M, K = a.shape[-2:]
    K2, N = b.shape[-2:]
    if K != K2:
        raise ValueError(f"b: K mismatch: a has shape {a.shape} (K={K}), b has {b.shape} (K={K2})")
    if min(M, N, K) < 1:
        raise ValueError(f"a, b: empty matrices are not supported (M={M}, N={N}, K={K})")
    return M, N, K


def _batch(a: Operand, b: Operand) -> tuple[tuple, int]:
    """The batch shape (one operand may have none: it is broadcast) and its size."""
    ba, bb = a.shape[:-2], b.shape[:-2]
    if ba and bb and ba != bb:
        raise ValueError(
            f"b: batch shape {bb} does not match a's {ba} (one operand may have no batch axes)"
        )
    shape = ba or bb
    batch = math.prod(shape)
    if batch < 1:
        raise ValueError(
            f"{'a' if ba else 'b'}: empty batches are not supported (batch shape {shape})"
        )
    return shape, batch


def _check_input_names(epilog, spec, inputs) -> None:
    """The keys of ``epilog_inputs`` are exactly the epilog's inputs."""
    missing = [n for n in spec.inputs if n not in inputs]
    extra = [n for n in inputs if n not in spec.inputs]
    if extra:  # first: a misspelt key is also a missing one, and the misspelling is the news
        takes = f"it takes {list(spec.inputs)}" if spec.inputs else "it takes none"
        raise ValueError(
            f"epilog_inputs: unexpected {extra} for {epilog.name} ({takes}"
            + (f"; missing {missing})" if missing else ")")
        )
    if missing:
        raise ValueError(
            f"epilog_inputs: {epilog.name} requires {list(spec.inputs)}; missing {missing}"
        )


def _conjugate_orders(a: Operand, b: Operand, conj) -> list[tuple[str, str, str]]:
    """``(name, memory kind, result order it needs)`` of each conjugated operand: cuBLASLt
    conjugates only with a transpose (``CUBLAS_OP_C``), which a row-major operand gets with an
    F-ordered result and a column-major one with a C-ordered result (see ``_operand_layouts``)."""
    out = []
    for op, name, flag in ((a, "a", conj[0]), (b, "b", conj[1])):
        if flag:
            kind, _ = matrix_memory(*op.shape[-2:], *op.strides[-2:], name)
            out.append((name, kind, "F" if kind == "row" else "C"))
    return out


def _choose_order(M: int, N: int, c: Operand | None, inputs, requested, conj_orders=()) -> str:
    """The result's memory order: asked for, else as an input vector (bias) needs, else as
    ``c`` is, else as a conjugated operand needs, else as an input matrix fits, else "C"."""
    if requested is not None and requested not in ("C", "F"):
        raise ValueError(f"options.result_order: {requested!r}; allowed 'C', 'F' or None")
    handlers = [(io.input_handler(k), k, op) for k, op in inputs.items()]
    bound = [(k, op, h.order(k, op, M, N)) for h, k, op in handlers if h.binds_order]
    c_order = None
    column = c is not None and is_broadcast_column(c, M, N)
    if c is not None:
        if c.ndim < 2 or (c.shape[-2:] != (M, N) and not column):
            raise ValueError(
                f"c: shape {c.shape}; expected (..., M, N) = (..., {M}, {N}), or (..., M, 1) "
                "broadcast along N"
            )
        if column:
            # cuBLASLt broadcasts it as a column-major M x N matrix of leading dimension 0
            if M > 1 and c.strides[-2] != 1:
                raise ValueError(
                    f"c: a ({M}, 1) column broadcast along N needs its {M} elements adjacent "
                    f"(stride 1); got strides {c.strides[-2:]} (in elements): pass a copy"
                )
            c_order = "F"
        else:
            c_order = "C" if matrix_memory(M, N, *c.strides[-2:], "c")[0] == "row" else "F"
            if M == 1 or N == 1:
                c_order = None  # a vector fits either order
    hints = [h.order(k, op, M, N) for h, k, op in handlers if not h.binds_order]
    bound_order = bound[0][2] if bound else None
    conj_order = conj_orders[0][2] if conj_orders else None
    order = (requested or bound_order or c_order or conj_order
             or next((x for x in hints if x), None) or "C")
    for k, op, need in bound:
        if need != order:
            raise ValueError(
                f"epilog_inputs[{k!r}]: shape {op.shape} needs a {need}-ordered result, "
                f"but the result is {order}-ordered (options.result_order)"
            )
    if c_order and c_order != order:
        set_by = " (set by the bias shape)" if bound else " (options.result_order)"
        if column:
            raise ValueError(
                f"c: shape {c.shape} is broadcast along N, which cuBLASLt does only for an "
                f"F-ordered result (as a column-major matrix of leading dimension 0), but the "
                f"result is C-ordered{set_by}; pass c of the full shape (..., {M}, {N})"
            )
        raise ValueError(
            f"c: it is {c_order}-ordered but the result is {order}-ordered{set_by}; "
            "cuBLASLt cannot transpose c: pass c in the result's order"
        )
    for name, kind, need in conj_orders:
        if need != order:
            why = ("options.result_order" if requested else "the bias shape" if bound_order
                   else "c's order" if c_order else f"{conj_orders[0][0]}, conjugated too")
            raise ValueError(
                f"{name}: conjugated and {kind}-major, which cuBLASLt can conjugate only for a "
                f"{need}-ordered result (as a conjugate transpose), but the result is "
                f"{order}-ordered ({why}); pass {name} in the other memory order or its "
                "conjugate materialized (torch: .resolve_conj())"
            )
    return order


def _operand_layouts(a: Operand, b: Operand, swap: bool, batch: int, conj=(False, False)):
    """``(mem, (layout_a, layout_b), (trans_a, trans_b))`` of cuBLASLt's A and B.

    ``mem`` says of our ``a`` and ``b`` whether each is "row"- or "col"-major. cuBLASLt's A is
    our ``b`` when ``swap`` (a C-ordered result, handed over transposed). A conjugated operand
    (``conj`` of ``a``, ``b``) takes ``C`` where it would take ``T`` (``_choose_order`` made sure
    it does).
    """
    pairs = ((b, "b", conj[1]), (a, "a", conj[0])) if swap else ((a, "a", conj[0]), (b, "b", conj[1]))
    mem, layouts, ops = {}, [], []
    for op, name, cj in pairs:
        r, cdim = op.shape[-2:]
        kind, ld = matrix_memory(r, cdim, *op.strides[-2:], name)
        mem[name] = kind
        # the col-major matrix in memory: X ("col") or X^T ("row")
        rows, cols = (r, cdim) if kind == "col" else (cdim, r)
        # cuBLASLt needs op(Y) = X (F order) or X^T (C order)
        ops.append(lt.Operation.N if swap == (kind == "row") else lt.Operation.C if cj else lt.Operation.T)
        bs = batch_stride(op.shape[:-2], op.strides[:-2], name, _host(op)) if op.ndim > 2 else 0
        layouts.append(Layout(op.dtype, rows, cols, ld, batch, bs))
    return mem, tuple(layouts), tuple(ops)


def _result_layout(p: Problem) -> tuple[Layout, OutSpec | None]:
    """D's layout, and the result array to allocate (None in place: D is ``c``)."""
    M, N, batch_shape = p.M, p.N, p.batch_shape
    d_rows, d_cols = (N, M) if p.swap else (M, N)
    c = p.c
    if p.inplace:
        if c.shape[:-2] != batch_shape or c.shape[-2:] != (M, N):
            raise ValueError(
                f"c: in-place needs c of the result's full shape {batch_shape + (M, N)}; "
                f"got {c.shape} (broadcast c cannot be written in place)"
            )
        _, ld = matrix_memory(M, N, *c.strides[-2:], "c")
        bs = batch_stride(c.shape[:-2], c.strides[:-2], "c", _host(c)) if c.ndim > 2 else 0
        if p.batch > 1 and bs < ld * d_cols:
            raise ValueError("c: in-place needs non-overlapping batches")
        return Layout(p.d_dtype, d_rows, d_cols, ld, p.batch, bs), None
    mat = M * N
    out = dense_batch("d", p.d_dtype, batch_shape, (M, N), (N, 1) if p.swap else (1, M), mat)
    return Layout(p.d_dtype, d_rows, d_cols, d_rows, p.batch, mat), out


def _c_layout(p: Problem) -> Layout:
    """C's layout: the user's ``c`` (broadcast over the batch), else exactly D's."""
    c = p.c
    if c is None or p.inplace:
        return dataclasses.replace(p.layout_d, dtype=p.c_dtype)
    cb = c.shape[:-2]
    if cb and cb != p.batch_shape:
        raise ValueError(f"c: batch shape {cb} does not match the result's {p.batch_shape}")
    if is_broadcast_column(c, p.M, p.N):
        ld = 0  # every column of C is c's one column (the result is F-ordered: no swap)
    else:
        _, ld = matrix_memory(p.M, p.N, *c.strides[-2:], "c")
    bs = batch_stride(cb, c.strides[:-2], "c", _host(c)) if cb else 0
    d = p.layout_d
    return Layout(c.dtype, d.rows, d.cols, ld, p.batch, bs)


def is_broadcast_column(c: Operand, M: int, N: int) -> bool:
    """Whether ``c`` is an ``(..., M, 1)`` column added to each of the result's N > 1 columns
    (nvmath-python's broadcast ``c``)."""
    return N > 1 and c.ndim >= 2 and c.shape[-2:] == (M, 1)


def _c_pointer_source(p: Problem) -> str:
    """Where cuBLASLt's C pointer comes from.

    "c": the user's ``c`` (in place also D); "d": no ``c``, and C is described exactly as D:
    D's own buffer, beta = 0; "lt_a": no ``c`` and C's type differs from D's (an FP8 D).
    cuBLASLt rejects C == D unless their layouts match, so then C points at cuBLASLt's A
    operand instead: valid device memory, never read with beta = 0, as PyTorch's scaled_gemm
    does ("cublasLtMatmul requires a C pointer that is not result_ptr or nullptr").
    """
    if p.c is not None:
        return "c"
    if p.layout_c.dtype.name == p.layout_d.dtype.name:
        return "d"
    return "lt_a"


def _host(op) -> bool:
    """A NumPy operand (mirrored to the device in memory order before a plan)."""
    return op.package == "numpy"
