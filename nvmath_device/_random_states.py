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

__all__ = ["STATE_DTYPES", "C_STRUCTS", "C_ALIGNMENT", "GENERATORS"]

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
