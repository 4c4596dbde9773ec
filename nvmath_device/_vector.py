# SPDX-License-Identifier: Apache-2.0
"""Vector value types (``float16x2`` ... ``uint32x4``, as nvmath-python 1.0 names them): their
names, NumPy dtypes and public objects, in pure Python.

Two public objects per type:

- the constructor ``float32x2(x, y)``: in a ``@cuda.jit`` kernel the numba layer
  (:mod:`nvmath_device._numba.vector`) types and lowers it to one vector register value; called
  from Python (and under the CUDA simulator) it returns a ``numpy.record`` of the host dtype,
  built by the implementation the simulator registered (:mod:`nvmath_device._sim.vector`);
- the type ``float32x2_type`` (a :class:`VectorType`): a dtype for ``cuda.local.array`` /
  ``cuda.shared.array`` and kernel signatures (``float32x2_type[::1]``); ``numpy.dtype()`` of it
  is the host dtype (a record of fields ``x, y[, z, w]``).

This module imports no numba and nothing of ``nvmath_device`` (one of the package's leaves); the
numba layer and the simulator attach themselves with :func:`register`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

FIELDS = ("x", "y", "z", "w")

# name -> (scalar dtype name, number of elements): nvmath-python 1.0's vector_types_numba list.
SPECS = {
    "float16x2": ("float16", 2),
    "float16x4": ("float16", 4),
    "float32x2": ("float32", 2),
    "float32x4": ("float32", 4),
    "float64x2": ("float64", 2),
    "float64x4": ("float64", 4),
    "uint32x4": ("uint32", 4),
}


class VectorRecord(np.record):
    """One vector value outside kernels and under the CUDA simulator: a ``numpy.record`` of the
    type's host dtype (the scalar type of every vector dtype, see :func:`host_dtype`).

    As in kernels, its elements are read-only (``v.x = 1`` is a TypeError: build a new value),
    and a two-element float vector (float16x2, float32x2, float64x2) behaves as a complex number
    ``x + 1j*y`` in arithmetic (``v / 4``, ``v * w``, ``-v``, ``abs(v)``, ``complex(v)``,
    ``cmath`` functions): the result is a NumPy complex (complex64 for float16x2 and float32x2,
    complex128 for float64x2), not a vector. Other vectors do no arithmetic (TypeError), as in
    kernels.
    """

    __slots__ = ()

    def _complex(self, op: str):
        names = self.dtype.names
        if names != ("x", "y") or self.dtype.fields["x"][0].kind != "f":
            raise TypeError(f"unsupported operand for {op}: a {_vector_name(self.dtype)} value does no "
                            "arithmetic (only the two-element float vectors act as complex numbers)")
        ctype = np.complex128 if self.dtype.fields["x"][0].itemsize == 8 else np.complex64
        return ctype(complex(float(self["x"]), float(self["y"])))

    def __complex__(self):
        return complex(self._complex("complex()"))

    def __setattr__(self, name, value):
        if self.dtype.names and name in self.dtype.names:
            raise TypeError(f"{_vector_name(self.dtype)}.{name} is read-only (as in kernels): build a new "
                            f"value, e.g. v = {_vector_name(self.dtype)}({', '.join(self.dtype.names)})")
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        raise TypeError(f"{_vector_name(self.dtype)} elements are read-only (as in kernels): build a new value")

    def __neg__(self):
        return -self._complex("unary -")

    def __pos__(self):
        return +self._complex("unary +")

    def __abs__(self):
        return abs(self._complex("abs()"))


def _as_operand(value):
    return value._complex("arithmetic") if isinstance(value, VectorRecord) else value


def _binary(op: str, name: str):
    def forward(self, other):
        return op_fn(self._complex(name), _as_operand(other))

    def reverse(self, other):
        return op_fn(_as_operand(other), self._complex(name))

    import operator

    op_fn = getattr(operator, op)
    return forward, reverse


for _op, _sym in (("add", "+"), ("sub", "-"), ("mul", "*"), ("truediv", "/"), ("pow", "**")):
    _fwd, _rev = _binary(_op, _sym)
    setattr(VectorRecord, f"__{_op}__", _fwd)
    setattr(VectorRecord, f"__r{_op}__", _rev)
del _op, _sym, _fwd, _rev


def _vector_name(dtype: np.dtype) -> str:
    for name, (scalar, count) in SPECS.items():
        if dtype.names == FIELDS[:count] and dtype.fields["x"][0] == np.dtype(scalar):
            return name
    return "vector"


def host_dtype(scalar, count: int) -> np.dtype:
    """The host dtype of a vector: a record (scalar type :class:`VectorRecord`, a
    ``numpy.record``) of ``count`` fields ``x, y[, z, w]``; equal to the plain
    ``numpy.record`` dtype of the same fields.

    Aligned as the scalar (NumPy cannot align a record to its size); on the device a vector is
    aligned to its size (8 bytes for float32x2, 16 for float32x4 ...), as CUDA's vector types.
    """
    base = np.dtype([(f, np.dtype(scalar)) for f in FIELDS[:count]], align=True)
    return np.dtype((VectorRecord, base))


def is_vector_dtype(dtype) -> bool:
    """Whether ``dtype`` is a vector type's host dtype (its scalar type is :class:`VectorRecord`)."""
    return isinstance(dtype, np.dtype) and isinstance(dtype.type, type) and issubclass(dtype.type, VectorRecord)


_hooks: dict[str, Callable] = {}


def register(**hooks: Callable) -> None:
    """Attach the layer picked at import: ``make(vector_type, args)`` (a host value, the
    simulator) and ``numba_type(vector_type)`` (the numba type, the numba layer)."""
    _hooks.update(hooks)


def _outside_kernel(name: str) -> str:
    return (f"{name}(...) runs inside @cuda.jit kernels, or under the CUDA simulator "
            "(NUMBA_ENABLE_CUDASIM=1); here no implementation is registered")


class VectorType:
    """A vector value type: its host dtype, and, inside kernels, its numba type.

    The public ``float16x2_type`` ... ``uint32x4_type`` objects are instances. Inside a
    ``@cuda.jit`` kernel one is a dtype (``cuda.local.array(n, dtype=float32x2_type)``) and a
    constructor (``float32x2_type(x, y)``, as ``float32x2(x, y)``). ``numpy.dtype(t)`` (also
    ``t.dtype``) is the host dtype, ``t[::1]`` the numba array type of a kernel signature
    (numba layer only).

    Parameters
    ----------
    *args : numbers
        Calling the object calls its constructor (``float32x2(x, y)``), see there.

    Attributes
    ----------
    name : str
        e.g. ``"float32x2"``.
    scalar : numpy.dtype
        The element type (float16, float32, float64 or uint32).
    count : int
        Number of elements (2 or 4), read as ``.x .y`` or ``.x .y .z .w``.
    dtype : numpy.dtype
        The host dtype (see :func:`host_dtype`).
    itemsize : int
        Bytes of one value; also its alignment on the device.
    """

    def __init__(self, name: str, scalar: str, count: int):
        self.name = name
        self.scalar = np.dtype(scalar)
        self.count = count
        self.dtype = host_dtype(scalar, count)
        self.itemsize = self.scalar.itemsize * count

    @property
    def fields(self) -> tuple:
        """Names of the elements: ``("x", "y")`` or ``("x", "y", "z", "w")``."""
        return FIELDS[: self.count]

    @property
    def make(self):
        """The constructor (``float32x2`` for ``float32x2_type``)."""
        return CONSTRUCTORS[self.name]

    @property
    def numba_type(self):
        """The numba type of a value (numba layer only; TypeError under the simulator)."""
        hook = _hooks.get("numba_type")
        if hook is None:
            raise TypeError(f"{self.name}_type has no numba type here: the numba layer is not loaded "
                            "(under the CUDA simulator use numpy.dtype(t) instead)")
        return hook(self)

    def __call__(self, *args):
        return self.make(*args)

    def __getitem__(self, key):
        return self.numba_type[key]

    def __repr__(self) -> str:
        return f"nvmath_device.{self.name}_type"

    def __reduce__(self):
        return (vector_type, (self.name,))


def vector_type(name: str) -> VectorType:
    """The :class:`VectorType` named ``name`` (``"float32x2"``...); KeyError for other names."""
    return TYPES[name]


def _make_constructor(name: str, scalar: str, count: int):
    fields = FIELDS[:count]
    kind = "unsigned integer" if scalar.startswith("uint") else "floating-point"
    extra = (" A single complex number ``c`` gives ``(c.real, c.imag)``."
             if count == 2 and scalar.startswith("float") else "")

    def constructor(*args):
        make = _hooks.get("make")
        if make is None:
            raise RuntimeError(_outside_kernel(name))
        return make(TYPES[name], args)

    constructor.__name__ = constructor.__qualname__ = name
    constructor.__module__ = "nvmath_device"
    params = "\n".join(f"    {f} : number\n        Element ``.{f}``, converted to {scalar}."
                       for f in fields)
    constructor.__doc__ = (
        f"{name}({', '.join(fields)})\n\n"
        f"A vector of {count} {scalar} values ({kind}), elements read as "
        f"{', '.join('``.' + f + '``' for f in fields)}.{extra}\n\n"
        f"In a kernel the value is one {count * np.dtype(scalar).itemsize}-byte register vector; "
        f"arrays of ``{name}_type`` load and store it as one vector access. From Python and under "
        "the CUDA simulator it is a ``numpy.record`` of ``numpy.dtype(" + name + "_type)``.\n\n"
        f"Parameters\n----------\n{params}\n\n"
        f"Returns\n-------\n{name}\n    The vector (elements read-only inside kernels).\n"
    )
    return constructor


TYPES: dict[str, VectorType] = {n: VectorType(n, s, c) for n, (s, c) in SPECS.items()}
CONSTRUCTORS = {n: _make_constructor(n, s, c) for n, (s, c) in SPECS.items()}

float16x2 = CONSTRUCTORS["float16x2"]
float16x4 = CONSTRUCTORS["float16x4"]
float32x2 = CONSTRUCTORS["float32x2"]
float32x4 = CONSTRUCTORS["float32x4"]
float64x2 = CONSTRUCTORS["float64x2"]
float64x4 = CONSTRUCTORS["float64x4"]
uint32x4 = CONSTRUCTORS["uint32x4"]
float16x2_type = TYPES["float16x2"]
float16x4_type = TYPES["float16x4"]
float32x2_type = TYPES["float32x2"]
float32x4_type = TYPES["float32x4"]
float64x2_type = TYPES["float64x2"]
float64x4_type = TYPES["float64x4"]
uint32x4_type = TYPES["uint32x4"]

__all__ = [*SPECS, *(f"{n}_type" for n in SPECS)]
