# SPDX-License-Identifier: Apache-2.0
"""nvmath_device.random's surface: nvmath-python 1.0's names, the Sobol host helpers (read from
libcurand, no GPU), argument checks, and the States arrays under the simulator."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nvmath_device
from nvmath_device import random
from nvmath_device._random_states import FUNCTIONS, GENERATORS

# nvmath-python 1.0 docs (device-apis/curand.rst): the names of nvmath.device.random
NVMATH_NAMES = {
    "Compile", "init", "rand", "rand4",
    "StatesMRG32k3a", "StatesPhilox4_32_10", "StatesSobol32", "StatesSobol64", "StatesScrambledSobol32",
    "StatesScrambledSobol64", "StatesXORWOW",
    "normal", "normal_double", "normal2", "normal2_double", "normal4",
    "log_normal", "log_normal_double", "log_normal2", "log_normal2_double", "log_normal4",
    "poisson", "poisson4", "uniform", "uniform_double", "uniform2_double", "uniform4",
    "skipahead", "skipahead_sequence", "skipahead_subsequence",
}
HELPERS = {"DirectionVectorSet", "get_direction_vectors32", "get_direction_vectors64",
           "get_scramble_constants32", "get_scramble_constants64"}


def test_public_names():
    assert "random" in nvmath_device.__all__ and nvmath_device.random is random
    assert NVMATH_NAMES | HELPERS | {"random_helpers"} == set(random.__all__)
    for name in random.__all__:
        assert getattr(random, name).__doc__, name
    for name in HELPERS:
        assert getattr(random.random_helpers, name) is getattr(random, name)
    assert set(FUNCTIONS) | {"init"} == {n for n in NVMATH_NAMES if n[0].islower()}


def test_states_classes():
    assert {cls.__name__ for cls in random.STATES_CLASSES.values()} == {n for n in NVMATH_NAMES if n.startswith("States")}
    assert tuple(random.STATES_CLASSES) == GENERATORS


def test_direction_vectors_are_libcurands():
    dv = random.get_direction_vectors32(random.DirectionVectorSet.DIRECTION_VECTORS_32_JOEKUO6, 5)
    assert dv.shape == (5, 32) and dv.dtype == np.uint32
    # dimension 1 of every Joe-Kuo set is the van der Corput sequence: v_k = 2**(31 - k)
    assert (dv[0] == (1 << (31 - np.arange(32, dtype=np.uint64)))).all()
    assert len({tuple(r) for r in dv}) == 5
    dv64 = random.get_direction_vectors64(random.DirectionVectorSet.DIRECTION_VECTORS_64_JOEKUO6, 3)
    assert dv64.shape == (3, 64) and dv64.dtype == np.uint64
    assert int(dv64[0, 0]) == 1 << 63 and int(dv64[0, 63]) == 1
    scr = random.get_direction_vectors32(random.DirectionVectorSet.SCRAMBLED_DIRECTION_VECTORS_32_JOEKUO6, 5)
    assert (scr != dv).any()
    c32, c64 = random.get_scramble_constants32(4), random.get_scramble_constants64(4)
    assert c32.shape == (4,) and c32.dtype == np.uint32 and c64.shape == (4,) and c64.dtype == np.uint64
    assert len(set(c64.tolist())) == 4
    # the same table, longer: a prefix
    assert (random.get_scramble_constants32(10)[:4] == c32).all()


@pytest.mark.parametrize("call, err, match", [
    (lambda: random.get_direction_vectors32(random.DirectionVectorSet.DIRECTION_VECTORS_64_JOEKUO6, 3),
     ValueError, r"set_ must be one of \['DIRECTION_VECTORS_32_JOEKUO6', 'SCRAMBLED_DIRECTION_VECTORS_32_JOEKUO6'\]"),
    (lambda: random.get_direction_vectors64(7, 3), ValueError, "set_ must be one of"),
    (lambda: random.get_direction_vectors32(101, 0), ValueError, "size must be an integer from 1 to 20000"),
    (lambda: random.get_direction_vectors32(101, 20001), ValueError, "size must be an integer from 1 to 20000"),
    (lambda: random.get_scramble_constants64(2.0), TypeError, "size must be an integer"),
    (lambda: random.get_scramble_constants32(True), TypeError, "size must be an integer"),
])
def test_helper_arguments(call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_states_under_the_simulator():
    # a simulator process: the states are a NumPy array; states[i] is a writable record view,
    # and a kernel's calls reach the registered implementations
    code = textwrap.dedent("""
        import numpy as np
        from numba import cuda
        from nvmath_device import random
        from nvmath_device._random_states import STATE_DTYPES

        s = random.StatesPhilox4_32_10(8)
        assert s.dtype == STATE_DTYPES["Philox4_32_10"] and len(s) == 8 and s.size == 8 and s.shape == (8,)
        r = s[3]
        r["STATE"] = 2
        assert s.copy_to_host()["STATE"][3] == 2 and s.data.copy_to_host()["STATE"][3] == 2
        s.data.copy_to_device(np.zeros(8, s.dtype))
        assert s.copy_to_host()["STATE"][3] == 0

        c = random.Compile(cc=None)  # nvmath-python code: link= and extensions= run unchanged

        @cuda.jit(link=c.files, extensions=c.extension)
        def k(states, out):
            i = cuda.grid(1)
            random.init(1234, i, 0, states[i])
            out[i] = random.rand(states[i])

        out = np.zeros(8, np.uint32)
        k[1, 8](s, out)
        host = s.copy_to_host()
        assert (host["key"][:, 0] == 1234).all(), host["key"]
        assert len(set(out.tolist())) == 8
        print("ok")
    """)
    import os

    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
