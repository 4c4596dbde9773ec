# SPDX-License-Identifier: Apache-2.0
"""The states' NumPy dtypes are curand_kernel.h's C structs: NVRTC checks every sizeof, offsetof
and alignof against the installed header."""

import numpy as np
import pytest

from nvmath_device import CompileError
from nvmath_device._build import toolchain
from nvmath_device._random_states import C_ALIGNMENT, C_STRUCTS, GENERATORS, STATE_DTYPES


def _asserts(dtypes, alignments) -> str:
    lines = ["#include <curand_kernel.h>"]
    for name, dt in dtypes.items():
        c = C_STRUCTS[name]
        lines.append(f'static_assert(sizeof({c}) == {dt.itemsize}, "{name} sizeof");')
        lines.append(f'static_assert(alignof({c}) == {alignments[name]}, "{name} alignof");')
        for field in dt.names:
            sub, off = dt.fields[field][:2]
            lines.append(f'static_assert(__builtin_offsetof({c}, {field}) == {off}, "{name}.{field} offsetof");')
            lines.append(f'static_assert(sizeof((({c}*)0)->{field}) == {sub.itemsize}, "{name}.{field} sizeof");')
    lines.append('extern "C" __global__ void nvmathdx_random_layout_check() {}')
    return "\n".join(lines)


def test_generators_and_names():
    assert GENERATORS == ("XORWOW", "Philox4_32_10", "MRG32k3a", "Sobol32", "Sobol64",
                          "ScrambledSobol32", "ScrambledSobol64")
    assert set(C_STRUCTS) == set(STATE_DTYPES) == set(C_ALIGNMENT)
    assert STATE_DTYPES["XORWOW"].names == ("d", "v", "boxmuller_flag", "boxmuller_flag_double",
                                            "boxmuller_extra", "boxmuller_extra_double")
    assert STATE_DTYPES["Philox4_32_10"]["ctr"].shape == (4,)
    # Philox is the one struct whose C alignment NumPy cannot express; its size keeps elements aligned
    for name, dt in STATE_DTYPES.items():
        assert dt.itemsize % C_ALIGNMENT[name] == 0, name
        assert dt.isalignedstruct


def test_dtypes_match_the_c_structs():
    ptx = toolchain.compile_source(_asserts(STATE_DTYPES, C_ALIGNMENT), 90, "ptx")
    assert b"nvmathdx_random_layout_check" in ptx


def test_layout_check_can_fail():
    # the same check on a wrong layout (XORWOW without its padding before the double) fails to compile
    bad = np.dtype({"names": ["d", "v", "boxmuller_flag", "boxmuller_flag_double", "boxmuller_extra",
                              "boxmuller_extra_double"],
                    "formats": [np.uint32, (np.uint32, (5,)), np.int32, np.int32, np.float32, np.float64],
                    "offsets": [0, 4, 24, 28, 32, 36], "itemsize": 44})
    with pytest.raises(CompileError, match="XORWOW"):
        toolchain.compile_source(_asserts({"XORWOW": bad}, {"XORWOW": 8}), 90, "ptx")
