# SPDX-License-Identifier: Apache-2.0
"""The memory layout of cuRAND's device generator states, as NumPy structured dtypes.

A leaf: imports only NumPy. One dtype per generator of ``curand_kernel.h`` (cuRAND 10.4, CUDA 13),
whose field names are the C struct members, in the same order, at the same offsets, with the
same ``itemsize`` (a CPU test compiles ``static_assert(sizeof/offsetof/alignof ...)`` with NVRTC
against the installed header). Nested C arrays are subarray fields (``v[5]`` -> ``("v", u4, (5,))``);
the CUDA vector members of the Philox state (``uint4 ctr``, ``uint2 key``) are subarrays of 4 and
2 ``uint32`` (``.x .y .z .w`` = ``[0] [1] [2] [3]``).

Alignment: NumPy cannot express an alignment above 8, so ``STATE_DTYPES["Philox4_32_10"].alignment``
is 8 while ``alignof(curandStatePhilox4_32_10_t)`` is 16. Its ``itemsize`` (64) is a multiple of 16,
and device allocations are at least 256-byte aligned, so every element of a states array is where
the C struct would be. :data:`C_ALIGNMENT` holds the C alignments.

A states array is a device array of one of these dtypes; in a kernel, ``states[i]`` is one state
(a record in numba, a writable NumPy record view in the simulator) that the generator functions
update in place.
"""

from __future__ import annotations

import numpy as np

__all__ = ["STATE_DTYPES", "C_STRUCTS", "C_ALIGNMENT", "GENERATORS", "FUNCTIONS", "INIT_PARAMS", "Function",
           "skipahead_type"]

_U4 = np.uint32
_I4 = np.int32
_U8 = np.uint64

# The Box-Muller caching members shared by XORWOW, MRG32k3a and Philox4_32_10.
_BOXMULLER = [
    ("boxmuller_flag", _I4),
    ("boxmuller_flag_double", _I4),
    ("boxmuller_extra", np.float32),
    ("boxmuller_extra_double", np.float64),
]


def _struct(fields) -> np.dtype:
    return np.dtype(fields, align=True)


_SOBOL32 = _struct([("i", _U4), ("x", _U4), ("c", _U4), ("direction_vectors", _U4, (32,))])
_SOBOL64 = _struct([("i", _U8), ("x", _U8), ("c", _U8), ("direction_vectors", _U8, (64,))])

STATE_DTYPES: dict[str, np.dtype] = {
    # struct curandStateXORWOW { unsigned int d, v[5]; <boxmuller> };
    "XORWOW": _struct([("d", _U4), ("v", _U4, (5,)), *_BOXMULLER]),
    # struct curandStatePhilox4_32_10 { uint4 ctr; uint4 output; uint2 key; unsigned int STATE; <boxmuller> };
    "Philox4_32_10": _struct([("ctr", _U4, (4,)), ("output", _U4, (4,)), ("key", _U4, (2,)),
                              ("STATE", _U4), *_BOXMULLER]),
    # struct curandStateMRG32k3a { unsigned int s1[3]; unsigned int s2[3]; <boxmuller> };
    "MRG32k3a": _struct([("s1", _U4, (3,)), ("s2", _U4, (3,)), *_BOXMULLER]),
    # struct curandStateSobol32 { unsigned int i, x, c; unsigned int direction_vectors[32]; };
    "Sobol32": _SOBOL32,
    # struct curandStateSobol64 { unsigned long long i, x, c; unsigned long long direction_vectors[64]; };
    "Sobol64": _SOBOL64,
    # the scrambled Sobol states have the same members as the plain ones
    "ScrambledSobol32": _SOBOL32,
    "ScrambledSobol64": _SOBOL64,
}

GENERATORS = tuple(STATE_DTYPES)

# The C type of each state (curand_kernel.h / curand_philox4x32_x.h typedefs).
C_STRUCTS: dict[str, str] = {
    "XORWOW": "curandStateXORWOW_t",
    "Philox4_32_10": "curandStatePhilox4_32_10_t",
    "MRG32k3a": "curandStateMRG32k3a_t",
    "Sobol32": "curandStateSobol32_t",
    "Sobol64": "curandStateSobol64_t",
    "ScrambledSobol32": "curandStateScrambledSobol32_t",
    "ScrambledSobol64": "curandStateScrambledSobol64_t",
}

# alignof() of each C struct (Philox holds uint4 members, aligned to 16).
C_ALIGNMENT: dict[str, int] = {name: max(dt.alignment, 16 if name == "Philox4_32_10" else 1)
                               for name, dt in STATE_DTYPES.items()}


# ------------------------------------------------------------------------------ the functions
# Which generators each nvmath_device.random function takes, its extra arguments and its result
# (curand_kernel.h's overloads): read by the build (one wrapper per entry) and the numba layer.
_PSEUDO = ("XORWOW", "Philox4_32_10", "MRG32k3a")
_PHILOX = ("Philox4_32_10",)
_SOBOL = ("Sobol32", "Sobol64", "ScrambledSobol32", "ScrambledSobol64")


class Function:
    """One public function: which generators' states it takes, its extra arguments and result.

    ``params``: the names of the arguments besides the state, each with its C type
    (``"u32"``, ``"u64"``, ``"f32"``, ``"f64"``); ``state_first``: the state is the first argument
    (else the last, as in ``skipahead(n, state)``); ``result``: per generator, the result's type
    name (``"uint32"``, ``"uint64"``, ``"float32"``, ``"float64"``, a vector type name such as
    ``"float32x4"``, or ``None``); ``c_name``: the cuRAND function.
    """

    def __init__(self, name, c_name, generators, result, params=(), state_first=True):
        self.name = name
        self.c_name = c_name
        self.generators = tuple(generators)
        self.result = result if isinstance(result, dict) else {g: result for g in self.generators}
        self.params = tuple(params)
        self.state_first = state_first

    def __repr__(self):
        return f"random.Function({self.name!r})"


_RAND_RESULT = {g: ("uint64" if g.endswith("64") else "uint32") for g in GENERATORS}

FUNCTIONS: dict[str, Function] = {f.name: f for f in [
    Function("rand", "curand", GENERATORS, _RAND_RESULT),
    Function("rand4", "curand4", _PHILOX, "uint32x4"),
    Function("uniform", "curand_uniform", GENERATORS, "float32"),
    Function("uniform_double", "curand_uniform_double", GENERATORS, "float64"),
    Function("uniform2_double", "curand_uniform2_double", _PHILOX, "float64x2"),
    Function("uniform4", "curand_uniform4", _PHILOX, "float32x4"),
    Function("normal", "curand_normal", GENERATORS, "float32"),
    Function("normal_double", "curand_normal_double", GENERATORS, "float64"),
    Function("normal2", "curand_normal2", _PSEUDO, "float32x2"),
    Function("normal2_double", "curand_normal2_double", _PSEUDO, "float64x2"),
    Function("normal4", "curand_normal4", _PHILOX, "float32x4"),
    Function("log_normal", "curand_log_normal", GENERATORS, "float32", (("mean", "f32"), ("stddev", "f32"))),
    Function("log_normal_double", "curand_log_normal_double", GENERATORS, "float64",
             (("mean", "f64"), ("stddev", "f64"))),
    Function("log_normal2", "curand_log_normal2", _PSEUDO, "float32x2", (("mean", "f32"), ("stddev", "f32"))),
    Function("log_normal2_double", "curand_log_normal2_double", _PSEUDO, "float64x2",
             (("mean", "f64"), ("stddev", "f64"))),
    Function("log_normal4", "curand_log_normal4", _PHILOX, "float32x4", (("mean", "f32"), ("stddev", "f32"))),
    Function("poisson", "curand_poisson", GENERATORS, "uint32", (("lambda_", "f64"),)),
    Function("poisson4", "curand_poisson4", _PHILOX, "uint32x4", (("lambda_", "f64"),)),
    # Sobol32's skipahead takes an unsigned int, the others an unsigned long long
    Function("skipahead", "skipahead", GENERATORS, None, (("n", "u64"),), state_first=False),
    Function("skipahead_sequence", "skipahead_sequence", _PSEUDO, None, (("n", "u64"),), state_first=False),
    Function("skipahead_subsequence", "skipahead_subsequence", ("MRG32k3a",), None, (("n", "u64"),),
             state_first=False),
]}


def skipahead_type(generator: str) -> str:
    """C type of ``n`` in ``skipahead(n, state)`` for ``generator``."""
    return "u32" if generator in ("Sobol32", "ScrambledSobol32") else "u64"


# curand_init's arguments before the state, per generator: (name, C type)
INIT_PARAMS: dict[str, tuple[tuple[str, str], ...]] = {
    "XORWOW": (("seed", "u64"), ("subsequence", "u64"), ("offset", "u64")),
    "Philox4_32_10": (("seed", "u64"), ("subsequence", "u64"), ("offset", "u64")),
    "MRG32k3a": (("seed", "u64"), ("subsequence", "u64"), ("offset", "u64")),
    "Sobol32": (("direction_vectors", "dv32"), ("offset", "u32")),
    "Sobol64": (("direction_vectors", "dv64"), ("offset", "u64")),
    "ScrambledSobol32": (("direction_vectors", "dv32"), ("scramble_c", "u32"), ("offset", "u32")),
    "ScrambledSobol64": (("direction_vectors", "dv64"), ("scramble_c", "u64"), ("offset", "u64")),
}
