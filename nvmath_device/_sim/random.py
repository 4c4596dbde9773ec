# SPDX-License-Identifier: Apache-2.0
""":mod:`nvmath_device.random` under the CUDA simulator: thin wrappers over
:mod:`nvmath_device._random_math` (cuRAND's device code in NumPy), registered with
:mod:`nvmath_device._dispatch` as ``"random.<function>"``.

The state argument is one element of a states array (``states[i]`` in a simulated kernel): it is
unwrapped to the NumPy record behind it and updated in place, as curand_kernel.h updates the C
struct. Scalars come back as NumPy scalars of the device's types (``uint32``/``uint64``,
``float32``, ``float64``), vectors as the simulator's vector values (``uint32x4``, ``float32x2``,
``float32x4``, ``float64x2``).
"""

from __future__ import annotations

import numpy as np

from .. import _random_math as _rm
from .._vector import float32x2, float32x4, float64x2, uint32x4
from ._compat import unwrap


def _state(state):
    return unwrap(state)


def init(*args) -> None:
    args = tuple(unwrap(a) for a in args)
    _rm.init(*args)


def rand(state):
    s = _state(state)
    value = _rm.rand(s)
    return np.uint64(value) if _rm.generator_of(s) == "Sobol64" else np.uint32(value)


def rand4(state):
    return uint32x4(*_rm.rand4(_state(state)))


def uniform(state):
    return np.float32(_rm.uniform(_state(state)))


def uniform_double(state):
    return np.float64(_rm.uniform_double(_state(state)))


def uniform2_double(state):
    return float64x2(*_rm.uniform2_double(_state(state)))


def uniform4(state):
    return float32x4(*_rm.uniform4(_state(state)))


def normal(state):
    return np.float32(_rm.normal(_state(state)))


def normal_double(state):
    return np.float64(_rm.normal_double(_state(state)))


def normal2(state):
    return float32x2(*_rm.normal2(_state(state)))


def normal2_double(state):
    return float64x2(*_rm.normal2_double(_state(state)))


def normal4(state):
    return float32x4(*_rm.normal4(_state(state)))


def log_normal(state, mean, stddev):
    return np.float32(_rm.log_normal(_state(state), mean, stddev))


def log_normal_double(state, mean, stddev):
    return np.float64(_rm.log_normal_double(_state(state), mean, stddev))


def log_normal2(state, mean, stddev):
    return float32x2(*_rm.log_normal2(_state(state), mean, stddev))


def log_normal2_double(state, mean, stddev):
    return float64x2(*_rm.log_normal2_double(_state(state), mean, stddev))


def log_normal4(state, mean, stddev):
    return float32x4(*_rm.log_normal4(_state(state), mean, stddev))


def poisson(state, lambda_):
    return np.uint32(_rm.poisson(_state(state), lambda_))


def poisson4(state, lambda_):
    return uint32x4(*_rm.poisson4(_state(state), lambda_))


def skipahead(n, state) -> None:
    _rm.skipahead(n, _state(state))


def skipahead_sequence(n, state) -> None:
    _rm.skipahead_sequence(n, _state(state))


def skipahead_subsequence(n, state) -> None:
    _rm.skipahead_subsequence(n, _state(state))


IMPLEMENTATIONS = {f"random.{f.__name__}": f for f in (
    init, rand, rand4, uniform, uniform_double, uniform2_double, uniform4,
    normal, normal_double, normal2, normal2_double, normal4,
    log_normal, log_normal_double, log_normal2, log_normal2_double, log_normal4,
    poisson, poisson4, skipahead, skipahead_sequence, skipahead_subsequence)}
