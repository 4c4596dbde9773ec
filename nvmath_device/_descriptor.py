# SPDX-License-Identifier: Apache-2.0
"""What the descriptors (``FFT``, ``Matmul``) share: immutability and argument-check helpers.

A descriptor is validated once, in its constructor, and then never changes: the generated code,
the simulator's plans, the numba types and every ``functools.cache`` keyed on a descriptor rely
on it. :class:`Frozen` refuses attribute assignment and deletion; :func:`freeze` turns the
values a descriptor keeps into read-only ones (dicts into :class:`FrozenDict`, lists into
tuples, numpy arrays into read-only copies), so that no attribute can be changed in place
either. Equality and hash go through the descriptor's ``_key``: exactly what determines the
generated code.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Set

import numpy as np

from . import _dispatch, _types, common_cuda
from ._types import show

__all__ = ["Frozen", "FrozenDict", "SIMULATOR_DEFAULT_SM", "choice", "freeze", "parse_sm", "show"]

# The architecture a descriptor without ``sm=`` targets under the simulator on a machine without a
# GPU (nothing is linked there; the traits are cuFFTDx's / cuBLASDx's for this architecture).
SIMULATOR_DEFAULT_SM = 90
_logger = logging.getLogger("nvmath_device")
_said_default_sm = False


def choice(value, allowed: tuple, name: str, extra: str = "") -> str:
    """``value`` if it is one of the strings ``allowed`` (as the canonical str), else TypeError
    (not a str) or ValueError naming ``name`` and the allowed values."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {allowed}{extra}, got {show(value)}")
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}{extra}, got {show(value)}")
    return allowed[allowed.index(value)]


def parse_sm(sm, argname: str = "sm") -> int:
    """The target architecture as an int like 90 (see :func:`_types.parse_sm`); None means
    the current GPU, asked through :mod:`common_cuda`.

    Under the simulator (kernels link no device code) on a machine without a GPU, None means
    :data:`SIMULATOR_DEFAULT_SM` (90), said once per process at INFO level on the
    ``"nvmath_device"`` logger; with a GPU, the current GPU as everywhere else.
    """
    return _types.parse_sm(sm, argname, current_cc=_default_cc)


def _default_cc():
    global _said_default_sm
    cc = common_cuda.current_device_cc()
    if cc is None and not _dispatch.links_device_code():
        cc = divmod(SIMULATOR_DEFAULT_SM, 10)
        if not _said_default_sm:
            _said_default_sm = True
            _logger.info("nvmath_device: no GPU found; under the simulator, descriptors without sm= "
                         "target sm_%d", SIMULATOR_DEFAULT_SM)
    return cc


class FrozenDict(dict):
    """A read-only dict: reads, iterates, compares and prints like the dict it was made from,
    is hashable and picklable, and refuses every change with ``TypeError``."""

    __slots__ = ()

    def _refuse(self, *args, **kwargs):
        raise TypeError(
            "this mapping is read-only (it belongs to an immutable descriptor); build a new dict, "
            "e.g. dict(mapping, key=value), and a new descriptor from it"
        )

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __hash__(self):
        return hash(frozenset(self.items()))

    def __reduce__(self):
        return (FrozenDict, (dict(self),))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __repr__(self):
        return dict.__repr__(self)


def freeze(value):
    """A read-only equivalent of ``value`` (recursively): Mapping -> FrozenDict, list/tuple ->
    tuple, set -> frozenset, numpy array -> read-only copy; other values unchanged."""
    if isinstance(value, FrozenDict):
        return value
    if isinstance(value, Mapping):
        return FrozenDict((k, freeze(v)) for k, v in value.items())
    if type(value) in (list, tuple):
        return tuple(freeze(v) for v in value)
    if isinstance(value, Set) and not isinstance(value, frozenset):
        return frozenset(value)
    if isinstance(value, np.ndarray):
        if value.flags.writeable or value.base is not None:
            value = value.copy()
            value.flags.writeable = False
        return value
    return value


class Frozen:
    """Base of the immutable descriptors.

    Subclasses set their attributes in ``__init__`` through :meth:`_set` (which freezes each
    value) and define ``_key``, the tuple that determines the generated code; instances are equal
    when their types and keys are, and hash accordingly. :meth:`_memo` keeps a value computed
    later (traits read from compiled code) on the instance, frozen as well.
    """

    __slots__ = ()

    def _set(self, **attrs) -> None:
        for name, value in attrs.items():
            object.__setattr__(self, name, freeze(value))

    def _memo(self, name: str, compute):
        value = self.__dict__.get(name)
        if value is None:
            value = freeze(compute())
            object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name, value):
        raise AttributeError(
            f"{type(self).__name__} is immutable: cannot set attribute {name!r}; create a new "
            f"{type(self).__name__}(...) with the changed argument instead"
        )

    def __delattr__(self, name):
        raise AttributeError(f"{type(self).__name__} is immutable: cannot delete attribute {name!r}")

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return other._key == self._key

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return hash((type(self).__name__, self._key))
