# SPDX-License-Identifier: Apache-2.0
"""cuBLASLt epilogs: one table drives their inputs, outputs and NumPy reference.

Conventions (all shapes as NumPy sees them; ``D`` is the result, shape ``(..., M, N)``):

* ``x = alpha * (a @ b) + beta * c`` (+ ``bias`` for the ``*_BIAS`` epilogs) is the
  *pre-activation*. ``bias`` of shape ``(N,)`` or ``(1, N)`` (or ``(..., 1, N)``) is added to
  every row, ``(M, 1)`` (or ``(..., M, 1)``) to every column, as NumPy broadcasting says.
* ``relu_aux`` (output of RELU_AUX*, input of DRELU*) is cuBLASLt's ReLU bit-mask: a ``uint8``
  array holding one bit per element of ``D``, bit set when ``x > 0``. Bits run along D's
  contiguous axis, little-endian inside a byte, each line padded to a multiple of 128 bits:
  for a C-ordered (row-major) ``D`` the mask has shape ``(..., M, ceil(N/128)*16)`` and bit
  ``n % 8`` of byte ``[m, n // 8]`` belongs to ``D[m, n]``, i.e. it equals
  ``np.packbits(x > 0, axis=-1, bitorder="little")`` padded with zero bytes. For an F-ordered
  ``D`` (chosen by a ``(M, 1)`` bias) the packing runs along ``M``: shape
  ``(..., ceil(M/128)*16, N)``, F-ordered.
* ``gelu_aux`` (output of GELU_AUX*, input of DGELU*) is ``x`` itself in D's dtype and
  layout. Its leading dimension is padded to a multiple of 8 elements (cuBLASLt's rule), so
  when ``N % 8 != 0`` the array returned is a strided view of shape ``(..., M, N)``.
* ``bgrad`` (output of DRELU_BGRAD, DGELU_BGRAD, BGRADA, BGRADB), in D's dtype:
  DRELU_BGRAD / DGELU_BGRAD: the sum of the result ``D`` over the rows, shape ``(..., N)``
  (for an F-ordered ``D``: over the columns, shape ``(..., M, 1)``) -- the gradient of a bias
  of that shape; BGRADA: ``a.sum(axis=-1)``, shape ``(..., M)``; BGRADB: ``b.sum(axis=-2)``,
  shape ``(..., N)``. (nvmath_host gives cuBLASLt ``D`` transposed when ``D`` is row-major,
  and then asks cuBLASLt for BGRADB to get our BGRADA and vice versa.)
* GELU is the tanh approximation cuBLASLt uses:
  ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``; DGELU multiplies by its derivative at
  ``gelu_aux``; DRELU multiplies by the ``relu_aux`` mask. cuBLASLt's float64 GELU/DGELU
  follow this formula only approximately, not to float64 rounding.
* Layout rules cuBLASLt imposes (enforced with a ValueError before any CUDA call): BGRADA
  needs a column-major ``a``; BGRADB a row-major ``b``. Complex operands take no epilog.

:data:`EPILOGS` says which inputs and outputs each epilog has, :data:`DATA` what each of
them is (a vector or a matrix, its dtype and packing); nvmath_host validates, lays out and
hands over each kind of them in one place.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np

from ._cublaslt import Epilogue

__all__ = ["MatmulEpilog", "EPILOGS", "EpilogSpec", "DATA", "EpilogData", "reference"]


class MatmulEpilog(enum.IntEnum):
    """The cuBLASLt epilogs, fused into the matmul (values are ``cublasLtEpilogue_t``'s).

    See the module docstring of :mod:`nvmath_host.epilogs` for what each input and output
    holds, and :data:`EPILOGS` for which ones each epilog takes and returns.
    """

    DEFAULT = Epilogue.DEFAULT
    RELU = Epilogue.RELU
    RELU_AUX = Epilogue.RELU_AUX
    BIAS = Epilogue.BIAS
    RELU_BIAS = Epilogue.RELU_BIAS
    RELU_AUX_BIAS = Epilogue.RELU_AUX_BIAS
    DRELU = Epilogue.DRELU
    DRELU_BGRAD = Epilogue.DRELU_BGRAD
    GELU = Epilogue.GELU
    GELU_AUX = Epilogue.GELU_AUX
    GELU_BIAS = Epilogue.GELU_BIAS
    GELU_AUX_BIAS = Epilogue.GELU_AUX_BIAS
    DGELU = Epilogue.DGELU
    DGELU_BGRAD = Epilogue.DGELU_BGRAD
    BGRADA = Epilogue.BGRADA
    BGRADB = Epilogue.BGRADB


_EPILOG_NAMES = {e.name: e for e in MatmulEpilog}


def _as_epilog(value, what: str = "epilog") -> MatmulEpilog:
    """``value`` as a :class:`MatmulEpilog`: a member, its integer value, or its name.

    Names are case-insensitive (``"gelu_bias"`` is ``MatmulEpilog.GELU_BIAS``); ``None`` is
    ``MatmulEpilog.DEFAULT``. Anything else raises ``TypeError`` (wrong type) or ``ValueError``
    (unknown name or value) naming ``what`` and listing the allowed names.
    """
    if value is None:
        return MatmulEpilog.DEFAULT
    if isinstance(value, MatmulEpilog):
        return value
    allowed = list(_EPILOG_NAMES)
    if isinstance(value, str):
        e = _EPILOG_NAMES.get(value.upper())
        if e is None:
            raise ValueError(
                f"{what}: unknown epilog name {value!r}; allowed (case-insensitive): {allowed}"
            )
        return e
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        try:
            return MatmulEpilog(int(value))
        except ValueError:
            raise ValueError(
                f"{what}: unknown value {value!r}; allowed: MatmulEpilog members, their names "
                f"{allowed} or their values"
            ) from None
    raise TypeError(
        f"{what}: expected a MatmulEpilog, its name (a str) or None; got "
        f"{type(value).__qualname__}; allowed names: {allowed}"
    )


@dataclass(frozen=True)
class EpilogSpec:
    """What one epilog reads and writes.

    Attributes
    ----------
    bias : bool
        Takes the input ``"bias"``, added to the pre-activation.
    activation : str or None
        ``"relu"`` or ``"gelu"``, applied after the bias.
    aux_output : str or None
        ``"relu_aux"`` or ``"gelu_aux"``: the pre-activation saved for the backward pass.
    gradient : str or None
        ``"drelu"`` or ``"dgelu"``: multiply the matmul by the activation's derivative, read
        from the input ``"relu_aux"`` / ``"gelu_aux"``.
    bgrad : str or None
        ``"d"`` (sum of the result), ``"a"`` or ``"b"`` (sum of that operand over K): the
        output ``"bgrad"``.
    """

    bias: bool = False
    activation: str | None = None
    aux_output: str | None = None
    gradient: str | None = None
    bgrad: str | None = None

    @property
    def inputs(self) -> tuple[str, ...]:
        """Names of the required ``epilog_inputs``."""
        names = ("bias",) if self.bias else ()
        if self.gradient:
            names += ({"drelu": "relu_aux", "dgelu": "gelu_aux"}[self.gradient],)
        return names

    @property
    def outputs(self) -> tuple[str, ...]:
        """Names of the auxiliary outputs ``execute`` returns."""
        names = (self.aux_output,) if self.aux_output else ()
        return names + (("bgrad",) if self.bgrad else ())


#: One row per epilog; everything else (validation, cuBLASLt attributes, outputs, reference)
#: is derived from it.
EPILOGS: dict[MatmulEpilog, EpilogSpec] = {
    MatmulEpilog.DEFAULT: EpilogSpec(),
    MatmulEpilog.RELU: EpilogSpec(activation="relu"),
    MatmulEpilog.RELU_AUX: EpilogSpec(activation="relu", aux_output="relu_aux"),
    MatmulEpilog.BIAS: EpilogSpec(bias=True),
    MatmulEpilog.RELU_BIAS: EpilogSpec(bias=True, activation="relu"),
    MatmulEpilog.RELU_AUX_BIAS: EpilogSpec(bias=True, activation="relu", aux_output="relu_aux"),
    MatmulEpilog.DRELU: EpilogSpec(gradient="drelu"),
    MatmulEpilog.DRELU_BGRAD: EpilogSpec(gradient="drelu", bgrad="d"),
    MatmulEpilog.GELU: EpilogSpec(activation="gelu"),
    MatmulEpilog.GELU_AUX: EpilogSpec(activation="gelu", aux_output="gelu_aux"),
    MatmulEpilog.GELU_BIAS: EpilogSpec(bias=True, activation="gelu"),
    MatmulEpilog.GELU_AUX_BIAS: EpilogSpec(bias=True, activation="gelu", aux_output="gelu_aux"),
    MatmulEpilog.DGELU: EpilogSpec(gradient="dgelu"),
    MatmulEpilog.DGELU_BGRAD: EpilogSpec(gradient="dgelu", bgrad="d"),
    MatmulEpilog.BGRADA: EpilogSpec(bgrad="a"),
    MatmulEpilog.BGRADB: EpilogSpec(bgrad="b"),
}


@dataclass(frozen=True)
class EpilogData:
    """One epilog input or output: what kind of array it is and how it is stored.

    Attributes
    ----------
    kind : {"vector", "matrix"}
        ``"vector"``: one value per row or column of the result (``bias``, ``bgrad``);
        ``"matrix"``: one value per element of the result (``relu_aux``, ``gelu_aux``).
    dtype : str or None
        Its dtype name; ``None``: the result's dtype.
    bits : int
        Elements of the result per stored element along the contiguous axis (8: a bit-mask).
    align : int
        A stored matrix's leading dimension and batch stride are multiples of this many
        stored elements.
    note : str
        How error messages describe it.
    """

    kind: str
    dtype: str | None = None
    bits: int = 1
    align: int = 1
    note: str = ""

    def stored(self, extent: int) -> int:
        """Stored elements for ``extent`` elements of the result, padded to ``align``."""
        stored = -(-extent // self.bits)
        return -(-stored // self.align) * self.align

    def matrix_shape(self, m: int, n: int, order: str) -> tuple[int, int]:
        """Shape of one stored matrix for a ``(m, n)`` result of ``order``.

        A bit-mask's shape includes its padding; a matrix of the result's dtype has the
        result's shape (its padding is in the leading dimension).
        """
        if self.bits == 1:
            return m, n
        return (m, self.stored(n)) if order == "C" else (self.stored(m), n)


#: What each input and output named in :data:`EPILOGS` is.
DATA: dict[str, EpilogData] = {
    "bias": EpilogData("vector"),
    "bgrad": EpilogData("vector"),
    "relu_aux": EpilogData("matrix", "uint8", bits=8, align=16, note="a bit-mask"),
    "gelu_aux": EpilogData("matrix", align=8),
}

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU, tanh approximation (as cuBLASLt)."""
    return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x**3)))


def dgelu(x: np.ndarray) -> np.ndarray:
    """Derivative of :func:`gelu`."""
    t = np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x**3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _SQRT_2_OVER_PI * (
        1.0 + 3 * 0.044715 * x * x
    )


def relu_aux_shape(m: int, n: int, order: str) -> tuple[int, int]:
    """Shape of one matrix of the ReLU bit-mask for a ``(m, n)`` result of ``order``."""
    return DATA["relu_aux"].matrix_shape(m, n, order)


def pack_relu_mask(mask: np.ndarray, order: str) -> np.ndarray:
    """Pack a boolean ``(..., M, N)`` mask into the ``relu_aux`` format (see module doc)."""
    m, n = mask.shape[-2:]
    axis = -1 if order == "C" else -2
    packed = np.packbits(mask, axis=axis, bitorder="little")
    rows, cols = relu_aux_shape(m, n, order)
    pad = [(0, 0)] * packed.ndim
    pad[axis] = (0, (cols if order == "C" else rows) - packed.shape[axis])
    packed = np.pad(packed, pad)
    return packed if order == "C" else _f_matrices(packed)


def unpack_relu_mask(aux: np.ndarray, m: int, n: int, order: str) -> np.ndarray:
    """Inverse of :func:`pack_relu_mask`: a boolean ``(..., m, n)`` mask."""
    aux = np.asarray(aux, dtype=np.uint8)
    if order == "C":
        return np.unpackbits(aux, axis=-1, count=n, bitorder="little").astype(bool)
    return np.unpackbits(aux, axis=-2, count=m, bitorder="little").astype(bool)


def _f_matrices(x: np.ndarray) -> np.ndarray:
    """Same values, each matrix (last two axes) F-ordered."""
    return np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)


def _compute_dtype(*dtypes) -> np.dtype:
    if any(np.dtype(d).kind == "c" for d in dtypes):
        return np.dtype(
            np.complex128 if any(np.dtype(d) == np.complex128 for d in dtypes) else np.complex64
        )
    if any(np.dtype(d) == np.float64 for d in dtypes):
        return np.dtype(np.float64)
    return np.dtype(np.float32)


def reference(
    a: np.ndarray,
    b: np.ndarray,
    *,
    c: np.ndarray | None = None,
    alpha: float | complex = 1.0,
    beta: float | complex = 0.0,
    epilog: MatmulEpilog | None = None,
    epilog_inputs: dict | None = None,
    result_dtype=None,
    order: str = "C",
    compute_dtype=None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Compute a matmul with an epilog on the CPU, with NumPy, from the :data:`EPILOGS` table.

    This is nvmath_host's CPU execution path and the tests' reference.

    Parameters
    ----------
    a, b : numpy.ndarray
        Operands of shapes ``(..., M, K)`` and ``(..., K, N)``.
    c : numpy.ndarray, optional
        Added as ``beta * c``; broadcastable to ``(..., M, N)``.
    alpha, beta : scalar
        Scales of ``a @ b`` and ``c``.
    epilog : MatmulEpilog or str, optional
        The epilog, or its name (case-insensitive); default: none.
    epilog_inputs : dict, optional
        ``"bias"``, ``"relu_aux"`` or ``"gelu_aux"``, as the epilog requires.
    result_dtype : dtype, optional
        The result's dtype (default: ``a``'s).
    order : {"C", "F"}
        The result's layout; decides the ``relu_aux`` packing and DRELU/DGELU_BGRAD's axis.
    compute_dtype : dtype, optional
        Accumulation dtype (default: float32, float64 or complex as the operands need).

    Returns
    -------
    d : numpy.ndarray
        The result.
    outputs : dict
        The epilog's auxiliary outputs, by name.
    """
    spec = EPILOGS[_as_epilog(epilog)]
    inputs = dict(epilog_inputs or {})
    result_dtype = np.dtype(result_dtype if result_dtype is not None else a.dtype)
    if compute_dtype is None:
        compute_dtype = _compute_dtype(*[x.dtype for x in (a, b) + ((c,) if c is not None else ())])
        if result_dtype.kind == "c":
            compute_dtype = _compute_dtype(compute_dtype, result_dtype)
    af = a.astype(compute_dtype)
    bf = b.astype(compute_dtype)
    x = np.matmul(af, bf)
    if alpha != 1:
        x = x * np.asarray(alpha).astype(compute_dtype)
    if c is not None and beta != 0:
        x = x + np.asarray(beta).astype(compute_dtype) * np.asarray(c).astype(compute_dtype)
    m, n = x.shape[-2:]
    outputs: dict[str, np.ndarray] = {}
    if spec.bias:
        x = x + np.asarray(inputs["bias"]).astype(compute_dtype)
    if spec.aux_output == "relu_aux":
        outputs["relu_aux"] = pack_relu_mask(x > 0, order)
    elif spec.aux_output == "gelu_aux":
        aux = x.astype(result_dtype)
        outputs["gelu_aux"] = aux if order == "C" else _f_matrices(aux)
    if spec.activation == "relu":
        x = np.maximum(x, 0)
    elif spec.activation == "gelu":
        x = gelu(x)
    if spec.gradient == "drelu":
        x = x * unpack_relu_mask(inputs["relu_aux"], m, n, order)
    elif spec.gradient == "dgelu":
        x = x * dgelu(np.asarray(inputs["gelu_aux"]).astype(compute_dtype))
    if spec.bgrad == "d":
        g = x.sum(axis=-2) if order == "C" else x.sum(axis=-1, keepdims=True)
        outputs["bgrad"] = g.astype(result_dtype)
    elif spec.bgrad == "a":
        full = np.broadcast_to(af, x.shape[:-2] + af.shape[-2:])
        outputs["bgrad"] = full.sum(axis=-1).astype(result_dtype)
    elif spec.bgrad == "b":
        full = np.broadcast_to(bf, x.shape[:-2] + bf.shape[-2:])
        outputs["bgrad"] = full.sum(axis=-2).astype(result_dtype)
    d = x.astype(result_dtype)
    return (d if order == "C" else _f_matrices(d)), outputs
