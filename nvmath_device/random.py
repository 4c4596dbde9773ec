# SPDX-License-Identifier: Apache-2.0
"""cuRAND's device random number generators inside ``@cuda.jit`` kernels (``nvmath.device.random``).

The names and call forms are nvmath-python 1.0's ``nvmath.device.random``, which follow cuRAND's
device API (``curand_init``, ``curand``, ``curand_uniform`` ... in ``curand_kernel.h``)::

    from numba import cuda
    from nvmath_device import random

    states = random.StatesPhilox4_32_10(n)

    @cuda.jit
    def setup(states):
        i = cuda.grid(1)
        random.init(1234, i, 0, states[i])      # seed, subsequence, offset, state

    @cuda.jit
    def noisy(x, states):
        i = cuda.grid(1)
        v = random.normal4(states[i])           # float32x4: v.x v.y v.z v.w

Inside a kernel each function is cuRAND's own device code (``curand_kernel.h`` compiled by NVRTC
to LTO-IR, cached on disk and linked into the kernel); no ``link=`` or ``extensions=`` is needed
(:class:`Compile` is kept so code written for nvmath-python runs). Under the CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``) NumPy implementations with cuRAND's exact arithmetic run instead.

A states array (``States*(n)``) holds one generator state per element; ``states[i]`` in a kernel
is one state, which the functions update in place.

This module imports neither numba nor the simulator.
"""

from __future__ import annotations

import ctypes
import enum
import functools
import glob
import operator
import os
import types as _pytypes

import numpy as np

from . import _dispatch
from ._random_states import C_STRUCTS, FUNCTIONS, INIT_PARAMS, STATE_DTYPES  # noqa: F401  (the table)
from ._types import show

__all__ = [
    "Compile",
    "StatesXORWOW", "StatesPhilox4_32_10", "StatesMRG32k3a", "StatesSobol32", "StatesSobol64",
    "StatesScrambledSobol32", "StatesScrambledSobol64",
    "init", "rand", "rand4",
    "uniform", "uniform_double", "uniform2_double", "uniform4",
    "normal", "normal_double", "normal2", "normal2_double", "normal4",
    "log_normal", "log_normal_double", "log_normal2", "log_normal2_double", "log_normal4",
    "poisson", "poisson4",
    "skipahead", "skipahead_sequence", "skipahead_subsequence",
    "random_helpers", "DirectionVectorSet",
    "get_direction_vectors32", "get_direction_vectors64",
    "get_scramble_constants32", "get_scramble_constants64",
]

def _outside(name: str) -> str:
    return (f"nvmath_device.random.{name} runs only inside @cuda.jit kernels (or under the CUDA "
            "simulator, NUMBA_ENABLE_CUDASIM=1)")


def _call(name, args):
    return _dispatch.implementation(f"random.{name}", _outside(name))(*args)


# ------------------------------------------------------------------------------ the functions
def init(*args):
    """Initialize one generator state, as cuRAND's ``curand_init``.

    The arguments depend on the generator of ``state`` (always the last argument):

    - XORWOW, Philox4_32_10, MRG32k3a: ``init(seed, subsequence, offset, state)`` (unsigned
      64-bit integers);
    - Sobol32 / Sobol64: ``init(direction_vectors, offset, state)``;
    - ScrambledSobol32 / ScrambledSobol64: ``init(direction_vectors, scramble_c, offset, state)``,

    where ``direction_vectors`` is this dimension's 32 (``uint32``) or 64 (``uint64``) direction
    vectors: a 1-D array (e.g. ``vectors[d]`` of the array :func:`get_direction_vectors32` returns,
    copied to the device) or a pointer to them.
    """
    return _call("init", args)


def rand(state):
    """32 random bits (``uint32``; 64, ``uint64``, for Sobol64 states), as ``curand``."""
    return _call("rand", (state,))


def rand4(state):
    """Four 32-bit random words (``uint32x4``) from a Philox4_32_10 state, as ``curand4``."""
    return _call("rand4", (state,))


def uniform(state):
    """A ``float32`` uniformly distributed in (0, 1], as ``curand_uniform``."""
    return _call("uniform", (state,))


def uniform_double(state):
    """A ``float64`` uniformly distributed in (0, 1], as ``curand_uniform_double``."""
    return _call("uniform_double", (state,))


def uniform2_double(state):
    """Two ``float64`` in (0, 1] (``float64x2``) from a Philox4_32_10 state, as ``curand_uniform2_double``."""
    return _call("uniform2_double", (state,))


def uniform4(state):
    """Four ``float32`` in (0, 1] (``float32x4``) from a Philox4_32_10 state, as ``curand_uniform4``."""
    return _call("uniform4", (state,))


def normal(state):
    """A standard normal ``float32``, as ``curand_normal`` (Box-Muller, the second value cached in the state)."""
    return _call("normal", (state,))


def normal_double(state):
    """A standard normal ``float64``, as ``curand_normal_double``."""
    return _call("normal_double", (state,))


def normal2(state):
    """Two standard normal ``float32`` (``float32x2``), as ``curand_normal2`` (XORWOW, Philox4_32_10, MRG32k3a)."""
    return _call("normal2", (state,))


def normal2_double(state):
    """Two standard normal ``float64`` (``float64x2``), as ``curand_normal2_double`` (XORWOW, Philox4_32_10, MRG32k3a)."""
    return _call("normal2_double", (state,))


def normal4(state):
    """Four standard normal ``float32`` (``float32x4``) from a Philox4_32_10 state, as ``curand_normal4``."""
    return _call("normal4", (state,))


def log_normal(state, mean, stddev):
    """A log-normal ``float32`` (``exp`` of a normal with ``mean`` and ``stddev``), as ``curand_log_normal``."""
    return _call("log_normal", (state, mean, stddev))


def log_normal_double(state, mean, stddev):
    """A log-normal ``float64``, as ``curand_log_normal_double``."""
    return _call("log_normal_double", (state, mean, stddev))


def log_normal2(state, mean, stddev):
    """Two log-normal ``float32`` (``float32x2``), as ``curand_log_normal2`` (XORWOW, Philox4_32_10, MRG32k3a)."""
    return _call("log_normal2", (state, mean, stddev))


def log_normal2_double(state, mean, stddev):
    """Two log-normal ``float64`` (``float64x2``), as ``curand_log_normal2_double`` (XORWOW, Philox4_32_10, MRG32k3a)."""
    return _call("log_normal2_double", (state, mean, stddev))


def log_normal4(state, mean, stddev):
    """Four log-normal ``float32`` (``float32x4``) from a Philox4_32_10 state, as ``curand_log_normal4``."""
    return _call("log_normal4", (state, mean, stddev))


def poisson(state, lambda_):
    """A Poisson-distributed ``uint32`` with mean ``lambda_`` (a float64), as ``curand_poisson``."""
    return _call("poisson", (state, lambda_))


def poisson4(state, lambda_):
    """Four Poisson-distributed ``uint32`` (``uint32x4``) from a Philox4_32_10 state, as ``curand_poisson4``."""
    return _call("poisson4", (state, lambda_))


def skipahead(n, state):
    """Advance ``state`` by ``n`` values, as cuRAND's ``skipahead``."""
    return _call("skipahead", (n, state))


def skipahead_sequence(n, state):
    """Advance ``state`` by ``n`` subsequences (2**67 values each), as ``skipahead_sequence``
    (XORWOW, Philox4_32_10, MRG32k3a)."""
    return _call("skipahead_sequence", (n, state))


def skipahead_subsequence(n, state):
    """Advance an MRG32k3a ``state`` by ``n`` subsequences (2**76 values each), as ``skipahead_subsequence``."""
    return _call("skipahead_subsequence", (n, state))


# ------------------------------------------------------------------------------ the states arrays
class _HostStates(np.ndarray):
    """The simulator's states array: a NumPy array with a device array's ``copy_to_host``."""

    def copy_to_host(self):
        """A copy as a plain NumPy array."""
        return np.array(self).view(np.ndarray)

    def copy_to_device(self, ary):
        """Overwrite the states with ``ary`` (same shape and dtype)."""
        self[...] = ary


class _States:
    """An array of ``n`` generator states in device memory (one per thread, usually)."""

    generator: str = ""

    def __init__(self, n):
        count = _count(n, "n")
        dtype = STATE_DTYPES[self.generator]
        allocate = _dispatch.hook("random.device_array")  # the numba layer's cuda.device_array
        if allocate is not None:
            self._array = allocate(count, dtype)
        elif not _dispatch.links_device_code():
            # the simulator: kernels run on the host, where the states are a NumPy array
            self._array = np.zeros(count, dtype=dtype).view(_HostStates)
        else:  # pragma: no cover - nvmath_device/__init__.py always imports one of the two layers
            raise RuntimeError("nvmath_device.random: no layer registered a device allocator")

    @property
    def data(self):
        """The array of the states (its dtype is ``dtype``): a numba device array, or a NumPy
        array under the simulator."""
        return self._array

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of one state (curand_kernel.h's struct)."""
        return STATE_DTYPES[self.generator]

    @property
    def size(self) -> int:
        """How many states the array holds."""
        return int(self._array.shape[0])

    @property
    def shape(self) -> tuple[int]:
        """``(size,)``, as the array's shape in kernels (``states.shape[0]``)."""
        return (self.size,)

    def __len__(self) -> int:
        return self.size

    @property
    def __cuda_array_interface__(self):
        """The device array's interface (so a kernel receives the states' memory)."""
        if isinstance(self._array, np.ndarray):
            raise AttributeError("__cuda_array_interface__ (the simulator's states are a NumPy array)")
        return self._array.__cuda_array_interface__

    def copy_to_host(self):
        """The states as a NumPy structured array of ``dtype`` (a copy)."""
        return self._array.copy_to_host()

    def __getitem__(self, index):
        # In a compiled kernel numba types states[i]; a call from Python is the simulator's
        # kernel running on the host: the state is a writable NumPy record view of the array.
        if not isinstance(self._array, np.ndarray):
            raise TypeError(f"{type(self).__name__}[i]: the states live in device memory; index them inside "
                            "kernels, or copy them with copy_to_host()")
        return self._array[index]

    def __repr__(self):
        return f"{type(self).__name__}({self.size})"


def _count(n, name) -> int:
    if isinstance(n, (bool, np.bool_)):
        raise TypeError(f"{name} must be a positive integer (the number of states), got {show(n)}")
    try:
        count = operator.index(n)
    except TypeError:
        raise TypeError(f"{name} must be a positive integer (the number of states), got {show(n)}") from None
    if count < 1:
        raise ValueError(f"{name} must be a positive integer (the number of states), got {count}")
    return count


def _states_class(generator: str):
    doc = (f"An array of ``n`` {generator} generator states (``{C_STRUCTS[generator]}``) in device memory.\n\n"
           "Pass it to a kernel; ``states[i]`` there is one state for the ``random`` functions.\n\n"
           "Parameters\n----------\nn : int\n    The number of states (positive).\n")
    return type(f"States{generator}", (_States,), {"generator": generator, "__doc__": doc,
                                                   "__module__": __name__})


StatesXORWOW = _states_class("XORWOW")
StatesPhilox4_32_10 = _states_class("Philox4_32_10")
StatesMRG32k3a = _states_class("MRG32k3a")
StatesSobol32 = _states_class("Sobol32")
StatesSobol64 = _states_class("Sobol64")
StatesScrambledSobol32 = _states_class("ScrambledSobol32")
StatesScrambledSobol64 = _states_class("ScrambledSobol64")

STATES_CLASSES = {cls.generator: cls for cls in (
    StatesXORWOW, StatesPhilox4_32_10, StatesMRG32k3a, StatesSobol32, StatesSobol64,
    StatesScrambledSobol32, StatesScrambledSobol64)}


class Compile:
    """nvmath-python's ``random.Compile``: kept so ``@cuda.jit(link=c.files, extensions=c.extension)``
    code runs. Here kernels link cuRAND's code themselves and type ``States*`` arguments without
    an argument extension: ``files`` and ``extension`` are empty lists; ``cc`` is accepted and
    ignored."""

    def __init__(self, cc=None):
        self.cc = cc
        self.files: list = []
        self.extension: list = []


# ------------------------------------------------------------------------------ Sobol host helpers
class DirectionVectorSet(enum.IntEnum):
    """cuRAND's ``curandDirectionVectorSet_t``: which Sobol direction vectors to read."""

    DIRECTION_VECTORS_32_JOEKUO6 = 101
    SCRAMBLED_DIRECTION_VECTORS_32_JOEKUO6 = 102
    DIRECTION_VECTORS_64_JOEKUO6 = 103
    SCRAMBLED_DIRECTION_VECTORS_64_JOEKUO6 = 104


_MAX_DIMENSIONS = 20000


@functools.lru_cache(maxsize=1)
def _libcurand():
    """The host cuRAND library of the nvidia-curand wheel (no GPU or driver needed for the tables)."""
    candidates = []
    try:
        import nvidia

        for p in nvidia.__path__:
            candidates += sorted(glob.glob(os.path.join(p, "cu13", "lib", "libcurand.so*")), reverse=True)
    except ImportError:  # pragma: no cover - nvidia-curand is a dependency
        pass
    candidates.append("libcurand.so.10")
    errors = []
    for c in candidates:
        try:
            return ctypes.CDLL(c)
        except OSError as e:
            errors.append(f"{c}: {e}")
    raise ImportError("cuRAND's host library is not found (pip install nvidia-curand): " + "; ".join(errors))


def _dimensions(size) -> int:
    if isinstance(size, (bool, np.bool_)):
        raise TypeError(f"size must be an integer from 1 to {_MAX_DIMENSIONS} (dimensions), got {show(size)}")
    try:
        count = operator.index(size)
    except TypeError:
        raise TypeError(f"size must be an integer from 1 to {_MAX_DIMENSIONS} (dimensions), got {show(size)}") \
            from None
    if not 1 <= count <= _MAX_DIMENSIONS:
        raise ValueError(f"size must be an integer from 1 to {_MAX_DIMENSIONS} (dimensions), got {count}")
    return count


def _table(getter: str, width: int, dtype, size, set_=None, allowed=()):
    count = _dimensions(size)
    args = []
    if set_ is not None:
        try:
            chosen = DirectionVectorSet(set_)
        except ValueError:
            raise ValueError(f"set_ must be one of {[s.name for s in allowed]}, got {show(set_)}") from None
        if chosen not in allowed:
            raise ValueError(f"set_ must be one of {[s.name for s in allowed]}, got {chosen.name}")
        args.append(ctypes.c_int(int(chosen)))
    ptr = ctypes.c_void_p()
    fn = getattr(_libcurand(), getter)
    status = fn(ctypes.byref(ptr), *args)
    if status != 0:
        raise RuntimeError(f"{getter} failed with curandStatus {status}")
    n = count * width
    buf = (ctypes.c_char * (n * np.dtype(dtype).itemsize)).from_address(ptr.value)
    out = np.frombuffer(buf, dtype=dtype, count=n).copy()
    return out.reshape(count, width) if width > 1 else out


def get_direction_vectors32(set_, size):
    """Sobol direction vectors for 32-bit generators: a ``(size, 32)`` ``uint32`` array, one row per
    dimension (cuRAND's ``curandGetDirectionVectors32``; ``set_``: a 32-bit :class:`DirectionVectorSet`)."""
    allowed = (DirectionVectorSet.DIRECTION_VECTORS_32_JOEKUO6, DirectionVectorSet.SCRAMBLED_DIRECTION_VECTORS_32_JOEKUO6)
    return _table("curandGetDirectionVectors32", 32, np.uint32, size, set_, allowed)


def get_direction_vectors64(set_, size):
    """Sobol direction vectors for 64-bit generators: a ``(size, 64)`` ``uint64`` array
    (``curandGetDirectionVectors64``; ``set_``: a 64-bit :class:`DirectionVectorSet`)."""
    allowed = (DirectionVectorSet.DIRECTION_VECTORS_64_JOEKUO6, DirectionVectorSet.SCRAMBLED_DIRECTION_VECTORS_64_JOEKUO6)
    return _table("curandGetDirectionVectors64", 64, np.uint64, size, set_, allowed)


def get_scramble_constants32(size):
    """Scramble constants for ScrambledSobol32: a ``(size,)`` ``uint32`` array (``curandGetScrambleConstants32``)."""
    return _table("curandGetScrambleConstants32", 1, np.uint32, size)


def get_scramble_constants64(size):
    """Scramble constants for ScrambledSobol64: a ``(size,)`` ``uint64`` array (``curandGetScrambleConstants64``)."""
    return _table("curandGetScrambleConstants64", 1, np.uint64, size)


random_helpers = _pytypes.SimpleNamespace(
    DirectionVectorSet=DirectionVectorSet,
    get_direction_vectors32=get_direction_vectors32, get_direction_vectors64=get_direction_vectors64,
    get_scramble_constants32=get_scramble_constants32, get_scramble_constants64=get_scramble_constants64,
)
random_helpers.__doc__ = "nvmath-python's ``nvmath.device.random_helpers`` (Sobol direction vectors and scramble constants)."
