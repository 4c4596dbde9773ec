# SPDX-License-Identifier: Apache-2.0
"""cuRAND's device generators (``curand_kernel.h``, cuRAND 10.4 / CUDA 13) in NumPy and Python
integers: the simulator's implementation of :mod:`nvmath_device.random` and the reference values
of its GPU tests.

A leaf: imports only NumPy and the standard library, never numba or the simulator, so a GPU test
process can import it. Every function takes one generator state, a NumPy record (a structured
scalar or an element of a structured array, writable in place) whose fields are the C struct
members of ``curand_kernel.h`` (see :mod:`nvmath_device._random_states`), and updates it as the
C code updates the struct.

Exactness, per function (see :data:`BIT_EXACT` and :data:`DEVICE_TOLERANCE`):

* raw generators (``rand``, ``rand4``), ``init``, the skipaheads, ``uniform*``: the device's bits.
  They use integer arithmetic and float operations rounded as on the device: NVRTC's default
  ``--fmad=true`` fuses ``x * c + d`` into one ``fma.rn`` (tests/sim/test_random_device_code_sim.py
  reads this off the PTX of curand_kernel.h), modelled by :func:`fmaf`/:func:`fma64`.
* Box-Muller (``normal*``, ``log_normal*``), the Sobol inverse-CDF normals and Poisson: the same
  generator draws, caching flags and branches as the device, so the state advances identically;
  the transcendental steps differ. The device's float Box-Muller takes ``sin.approx.f32`` /
  ``cos.approx.f32`` (``__sincosf``: absolute error about 2**-21.4 on [-pi, pi], more beyond; its
  angle lies in (0, 2pi]), its ``expf``/``erfcinvf`` and Poisson's gammainc method use
  ``ex2/lg2/rsqrt/rcp.approx``: hardware approximations NumPy cannot reproduce. Here each such
  step is float64 rounded once to the device's precision (measured against a float64 / long
  double evaluation of the same formula from the same raw bits: float Box-Muller <= 2.01 ulps,
  double <= 2.7 ulps). A Poisson value can differ when a comparison (Knuth's ``p > 1``, the
  gammainc rejection test, a ``+ 0.5`` truncation) lands within those errors; from then on that
  state's draws differ too.

Ground truth without a GPU: libcurand's host generators (NVIDIA's implementation on the CPU)
produce, in their documented orderings, the streams of this module's ``init``/``rand`` bit for bit
and its normals to a few ulps (tests/sim/test_random_host_library_sim.py).

Precomputed tables (XORWOW skipahead matrices of ``curand_precalc.h``, MRG32k3a's of
``curand_mrg32k3a.h``) are read once per process from the installed ``nvidia-curand`` headers.
"""

from __future__ import annotations

import ctypes
import fractions
import functools
import glob
import importlib.util
import math
import os
import re

import numpy as np

__all__ = [
    "generator_of", "init", "rand", "rand4", "skipahead", "skipahead_sequence", "skipahead_subsequence",
    "uniform", "uniform_double", "uniform2_double", "uniform4",
    "normal", "normal_double", "normal2", "normal2_double", "normal4",
    "log_normal", "log_normal_double", "log_normal2", "log_normal2_double", "log_normal4",
    "poisson", "poisson4", "philox4x32_10", "curand_include_dir",
    "host_direction_vectors", "host_scramble_constants", "fmaf", "fma64", "BIT_EXACT", "DEVICE_TOLERANCE",
]

M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF

# curand_globals.h (each of these float/double literals is the power of two named; a test checks)
CURAND_2POW32_INV = np.float32(2.3283064e-10)
CURAND_2POW32_INV_DOUBLE = 2.3283064365386963e-10
CURAND_2POW53_INV_DOUBLE = 1.1102230246251565e-16
CURAND_2PI = np.float32(6.2831855)
CURAND_2POW32_INV_2PI = np.float32(np.float32(2.3283064e-10) * np.float32(6.2831855))
CURAND_SQRT2 = np.float32(-1.4142135)
CURAND_SQRT2_DOUBLE = -1.4142135623730951
# curand_kernel.h
EXTRA_FLAG_NORMAL = 1
EXTRA_FLAG_LOG_NORMAL = 2
MRG32K3A_MOD1 = 4294967087
MRG32K3A_MOD2 = 4294944443
MRG32K3A_A12, MRG32K3A_A13N, MRG32K3A_A21, MRG32K3A_A23N = 1403580, 810728, 527612, 1370589
MRG32K3A_NORM = 2.3283065498378288e-10
MRG32K3A_BITS_NORM = 1.000000048662
# curand_philox4x32_x.h
PHILOX_W32_0, PHILOX_W32_1 = 0x9E3779B9, 0xBB67AE85
PHILOX_M4x32_0, PHILOX_M4x32_1 = 0xD2511F53, 0xCD9E8D57

_F32 = np.float32

#: The functions whose results (and state updates) are the device's bits, for every generator.
BIT_EXACT = frozenset({"init", "rand", "rand4", "skipahead", "skipahead_sequence", "skipahead_subsequence",
                       "uniform", "uniform_double", "uniform2_double", "uniform4"})

#: (rtol, atol) within which a device value is expected to match this module's, per function,
#: derived from the error bounds above (not measured on a GPU): the float Box-Muller radius is at
#: most sqrt(-2 ln 2**-33) < 6.8, so __sincosf's 2**-21.4 (taken as 2**-19 beyond [-pi, pi])
#: gives an absolute 1.3e-5; log-normal multiplies it by stddev * value. The double forms use
#: libdevice's log/sincospi/exp/erfcinv (a few ulps). Poisson: equal except near a decision.
DEVICE_TOLERANCE = {
    "normal": (1e-5, 2e-5), "normal2": (1e-5, 2e-5), "normal4": (1e-5, 2e-5),
    "log_normal": (2e-5, 0.0), "log_normal2": (2e-5, 0.0), "log_normal4": (2e-5, 0.0),  # times stddev
    "normal_double": (1e-14, 1e-14), "normal2_double": (1e-14, 1e-14),
    "log_normal_double": (1e-14, 0.0), "log_normal2_double": (1e-14, 0.0),
}


# ---------------------------------------------------------------------------------------------
# the installed headers' tables

def curand_include_dir() -> str:
    """The ``include`` folder of the installed ``nvidia-curand`` wheel (RuntimeError if none)."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations) if spec and spec.submodule_search_locations else []
    for root in roots:
        for sub in ("cu13", "curand", "cu12"):
            folder = os.path.join(root, sub, "include")
            if os.path.isfile(os.path.join(folder, "curand_precalc.h")):
                return folder
    raise RuntimeError("nvmath_device.random needs cuRAND's headers (curand_precalc.h, curand_mrg32k3a.h) "
                       "from the nvidia-curand wheel: pip install nvidia-curand")


_NUMBER = re.compile(r"\b(\d+)[uUlL]*\b")


def _parse_table(text: str, name: str, shape: tuple[int, ...]) -> np.ndarray:
    m = re.search(r"\b" + re.escape(name) + r"\s*(?:\[[^\]]*\]\s*)+=\s*\{", text)
    if m is None:
        raise RuntimeError(f"cuRAND header: table {name} not found")
    count = int(np.prod(shape))
    out = np.empty(count, dtype=np.uint32)
    it = _NUMBER.finditer(text, m.end())
    for i in range(count):
        out[i] = int(next(it).group(1))
    return out.reshape(shape)


@functools.cache
def _xorwow_tables() -> tuple[np.ndarray, np.ndarray]:
    """(precalc_xorwow_matrix, precalc_xorwow_offset_matrix), each (32, 160, 5): matrix i, row
    ``32 * word + bit`` is what that bit of ``v`` contributes to the new ``v`` (XORed)."""
    with open(os.path.join(curand_include_dir(), "curand_precalc.h")) as f:
        text = f.read()
    seq = _parse_table(text, "precalc_xorwow_matrix", (32, 800)).reshape(32, 160, 5)
    off = _parse_table(text, "precalc_xorwow_offset_matrix", (32, 800)).reshape(32, 160, 5)
    return seq, off


@functools.cache
def _mrg_tables() -> dict[str, list]:
    """mrg32k3aM1/M2 (skipahead), ...SubSeq, ...Seq of curand_mrg32k3a.h as nested int lists."""
    with open(os.path.join(curand_include_dir(), "curand_mrg32k3a.h")) as f:
        text = f.read()
    out = {}
    for name, count in (("mrg32k3aM1", 64), ("mrg32k3aM2", 64), ("mrg32k3aM1SubSeq", 56),
                        ("mrg32k3aM2SubSeq", 56), ("mrg32k3aM1Seq", 64), ("mrg32k3aM2Seq", 64)):
        out[name] = _parse_table(text, name, (count, 3, 3)).tolist()
    return out


@functools.cache
def _libcurand() -> ctypes.CDLL:
    folder = os.path.join(os.path.dirname(curand_include_dir()), "lib")
    candidates = sorted(glob.glob(os.path.join(folder, "libcurand.so*")))
    if not candidates:
        raise RuntimeError(f"libcurand.so not found in {folder} (the nvidia-curand wheel)")
    return ctypes.CDLL(candidates[0])


SOBOL_DIMENSIONS = 20000  # curand.h: the JOEKUO6 sets hold 20,000 dimensions


@functools.cache
def _host_direction_vectors(bits: int, scrambled: bool) -> np.ndarray:
    lib = _libcurand()
    word = ctypes.c_uint32 if bits == 32 else ctypes.c_uint64
    ptr = ctypes.POINTER(word)()
    fn = lib.curandGetDirectionVectors32 if bits == 32 else lib.curandGetDirectionVectors64
    # curandDirectionVectorSet_t: CURAND_(SCRAMBLED_)DIRECTION_VECTORS_{32,64}_JOEKUO6 = 101..104
    status = fn(ctypes.byref(ptr), (101 if bits == 32 else 103) + int(scrambled))
    if status != 0:
        raise RuntimeError(f"curandGetDirectionVectors{bits} failed (curandStatus {status})")
    out = np.ctypeslib.as_array(ptr, shape=(SOBOL_DIMENSIONS * bits,)).reshape(SOBOL_DIMENSIONS, bits).copy()
    out.setflags(write=False)
    return out


def host_direction_vectors(bits: int, scrambled: bool = False) -> np.ndarray:
    """The Sobol direction vectors of libcurand (curandGetDirectionVectors32/64, Joe-Kuo 6
    polynomials): a read-only (20000, bits) array of uint32 (bits=32) or uint64 (bits=64); row d
    is the direction_vectors argument of ``init`` for dimension d. No GPU needed."""
    if bits not in (32, 64):
        raise ValueError(f"bits must be 32 or 64, got {bits!r}")
    return _host_direction_vectors(bits, bool(scrambled))


@functools.cache
def _host_scramble_constants(bits: int) -> np.ndarray:
    lib = _libcurand()
    word = ctypes.c_uint32 if bits == 32 else ctypes.c_uint64
    ptr = ctypes.POINTER(word)()
    fn = lib.curandGetScrambleConstants32 if bits == 32 else lib.curandGetScrambleConstants64
    status = fn(ctypes.byref(ptr))
    if status != 0:
        raise RuntimeError(f"curandGetScrambleConstants{bits} failed (curandStatus {status})")
    out = np.ctypeslib.as_array(ptr, shape=(SOBOL_DIMENSIONS,)).copy()
    out.setflags(write=False)
    return out


def host_scramble_constants(bits: int) -> np.ndarray:
    """libcurand's scramble constants (curandGetScrambleConstants32/64): a read-only (20000,)
    array, one scramble_c per dimension for the scrambled Sobol ``init``."""
    if bits not in (32, 64):
        raise ValueError(f"bits must be 32 or 64, got {bits!r}")
    return _host_scramble_constants(bits)


# ---------------------------------------------------------------------------------------------
# which generator a state is

def generator_of(state) -> str:
    """"XORWOW", "Philox4_32_10", "MRG32k3a", "Sobol32" or "Sobol64" (the scrambled Sobol states
    have the plain ones' members and behave the same after ``init``); TypeError otherwise."""
    dtype = getattr(state, "dtype", None)
    names = getattr(dtype, "names", None) or ()
    tagged = (getattr(dtype, "metadata", None) or {}).get("generator")
    if names and tagged in ("XORWOW", "Philox4_32_10", "MRG32k3a", "Sobol32", "Sobol64"):
        return tagged
    if names and tagged in ("ScrambledSobol32", "ScrambledSobol64"):
        return tagged[len("Scrambled"):]
    if "ctr" in names:
        return "Philox4_32_10"
    if "s1" in names:
        return "MRG32k3a"
    if "v" in names and "d" in names:
        return "XORWOW"
    if "direction_vectors" in names:
        return "Sobol64" if state.dtype["direction_vectors"].base.itemsize == 8 else "Sobol32"
    raise TypeError("state must be one element of a cuRAND states array (states[i] of a "
                    "nvmath_device.random States* array), got " + type(state).__name__)


def _clear_boxmuller(state) -> None:
    state["boxmuller_flag"] = 0
    state["boxmuller_flag_double"] = 0
    state["boxmuller_extra"] = 0.0
    state["boxmuller_extra_double"] = 0.0


# ---------------------------------------------------------------------------------------------
# XORWOW

def _xorwow_next(state) -> int:
    v = [int(a) for a in state["v"]]
    t = v[0] ^ (v[0] >> 2)
    new = ((v[4] ^ (v[4] << 4)) ^ (t ^ (t << 1))) & M32
    state["v"][:] = [v[1], v[2], v[3], v[4], new]
    d = (int(state["d"]) + 362437) & M32
    state["d"] = d
    return (new + d) & M32


def _xorwow_matvec(v: list[int], matrix: np.ndarray) -> list[int]:
    bits = np.array([(v[i // 32] >> (i % 32)) & 1 for i in range(160)], dtype=bool)
    if not bits.any():
        return [0] * 5
    return [int(a) for a in np.bitwise_xor.reduce(matrix[bits], axis=0)]


def _xorwow_jump(n: int, state, tables: np.ndarray) -> None:
    v = [int(a) for a in state["v"]]
    num = 0
    while n:
        for _ in range(n & 3):
            v = _xorwow_matvec(v, tables[num])
        n >>= 2
        num += 1
    state["v"][:] = v


def _xorwow_skipahead(n: int, state) -> None:
    _xorwow_jump(n, state, _xorwow_tables()[1])
    state["d"] = (int(state["d"]) + 362437 * (n & M32)) & M32


def _xorwow_skipahead_sequence(n: int, state) -> None:
    _xorwow_jump(n, state, _xorwow_tables()[0])


def _xorwow_init(seed: int, subsequence: int, offset: int, state) -> None:
    s0 = (seed & M32) ^ 0xAAD26B49
    s1 = ((seed >> 32) & M32) ^ 0xF7DCEFDD
    t0 = (1099087573 * s0) & M32
    t1 = (2591861531 * s1) & M32
    state["d"] = (6615241 + t1 + t0) & M32
    state["v"][:] = [(123456789 + t0) & M32, 362436069 ^ t0, (521288629 + t1) & M32, 88675123 ^ t1,
                     (5783321 + t0) & M32]
    _xorwow_skipahead_sequence(subsequence, state)
    _xorwow_skipahead(offset, state)
    _clear_boxmuller(state)


# ---------------------------------------------------------------------------------------------
# Philox4_32_10

def philox4x32_10(ctr, key) -> list[int]:
    """The Philox-4x32 bijection, 10 rounds (curand_Philox4x32_10): 4 counter words, 2 key words."""
    c0, c1, c2, c3 = (int(a) & M32 for a in ctr)
    k0, k1 = (int(a) & M32 for a in key)
    for r in range(10):
        p0 = PHILOX_M4x32_0 * c0
        p1 = PHILOX_M4x32_1 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0, p1 & M32, (p0 >> 32) ^ c3 ^ k1, p0 & M32)
        if r < 9:
            k0 = (k0 + PHILOX_W32_0) & M32
            k1 = (k1 + PHILOX_W32_1) & M32
    return [c0, c1, c2, c3]


def _philox_incr(state, n: int | None = None) -> None:
    c = [int(a) for a in state["ctr"]]
    if n is None:
        for i in range(4):
            c[i] = (c[i] + 1) & M32
            if c[i]:
                break
    else:
        nlo, nhi = n & M32, (n >> 32) & M32
        c[0] = (c[0] + nlo) & M32
        if c[0] < nlo:
            nhi = (nhi + 1) & M32
        c[1] = (c[1] + nhi) & M32
        if not nhi <= c[1]:
            c[2] = (c[2] + 1) & M32
            if not c[2]:
                c[3] = (c[3] + 1) & M32
    state["ctr"][:] = c


def _philox_incr_hi(state, n: int) -> None:
    c = [int(a) for a in state["ctr"]]
    nlo, nhi = n & M32, (n >> 32) & M32
    c[2] = (c[2] + nlo) & M32
    if c[2] < nlo:
        nhi = (nhi + 1) & M32
    c[3] = (c[3] + nhi) & M32
    state["ctr"][:] = c


def _philox_refresh(state) -> None:
    state["output"][:] = philox4x32_10(state["ctr"], state["key"])


def _philox_next(state) -> int:
    k = int(state["STATE"])
    ret = int(state["output"][k if k in (1, 2, 3) else 0])
    k = (k + 1) & M32
    if k == 4:
        _philox_incr(state)
        _philox_refresh(state)
        k = 0
    state["STATE"] = k
    return ret


def _philox_next4(state) -> list[int]:
    tmp = [int(a) for a in state["output"]]
    _philox_incr(state)
    _philox_refresh(state)
    out = [int(a) for a in state["output"]]
    k = int(state["STATE"])
    if k in (1, 2, 3):
        return (tmp[k:] + out)[:4]
    return tmp


def _philox_skipahead(n: int, state) -> None:
    k = int(state["STATE"]) + (n & 3)
    n //= 4
    if k > 3:
        n += 1
        k -= 4
    state["STATE"] = k
    _philox_incr(state, n)
    _philox_refresh(state)


def _philox_skipahead_sequence(n: int, state) -> None:
    _philox_incr_hi(state, n)
    _philox_refresh(state)


def _philox_init(seed: int, subsequence: int, offset: int, state) -> None:
    state["ctr"][:] = 0
    state["key"][:] = [seed & M32, (seed >> 32) & M32]
    state["STATE"] = 0
    _clear_boxmuller(state)
    _philox_skipahead_sequence(subsequence, state)
    _philox_skipahead(offset, state)


# ---------------------------------------------------------------------------------------------
# MRG32k3a (exact modular arithmetic: the device's integer path, sm_61 and later, and the
# double-precision curand_MRGmodMul of the skipaheads are exact reductions)

def _mrg_matvec(mat, v: list[int], m: int) -> list[int]:
    return [(mat[k][0] * v[0] + mat[k][1] * v[1] + mat[k][2] * v[2]) % m for k in range(3)]


def _mrg_matmul(a, b, m: int):
    return [[(a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j]) % m for j in range(3)]
            for i in range(3)]


def _mrg_matpow(table, m: int, n: int):
    """curand_MRGmatPow3x3: the product of table[i] over the set bits i of n (table[i] is the
    step matrix to the power 2**i, times the table's stride). Bits past the table (the SubSeq
    tables have 56 entries; the device would read past them) continue by squaring."""
    o = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    i = 0
    extra = None
    while n:
        if i < len(table):
            mat = table[i]
        else:
            extra = _mrg_matmul(extra or table[-1], extra or table[-1], m)
            mat = extra
        if n & 1:
            o = _mrg_matmul(mat, o, m)
        i += 1
        n >>= 1
    return o


def _mrg_jump(n: int, state, which: str) -> None:
    t = _mrg_tables()
    s1 = [int(a) for a in state["s1"]]
    s2 = [int(a) for a in state["s2"]]
    state["s1"][:] = _mrg_matvec(_mrg_matpow(t["mrg32k3aM1" + which], MRG32K3A_MOD1, n), s1, MRG32K3A_MOD1)
    state["s2"][:] = _mrg_matvec(_mrg_matpow(t["mrg32k3aM2" + which], MRG32K3A_MOD2, n), s2, MRG32K3A_MOD2)


def _mrg_init(seed: int, subsequence: int, offset: int, state) -> None:
    s1 = [12345] * 3
    s2 = [12345] * 3
    if seed:
        x1 = (seed & M32) ^ 0x55555555
        x2 = ((seed >> 32) ^ 0xAAAAAAAA) & M32
        s1 = [(x1 * 12345) % MRG32K3A_MOD1, (x2 * 12345) % MRG32K3A_MOD1, (x1 * 12345) % MRG32K3A_MOD1]
        s2 = [(x2 * 12345) % MRG32K3A_MOD2, (x1 * 12345) % MRG32K3A_MOD2, (x2 * 12345) % MRG32K3A_MOD2]
    state["s1"][:] = s1
    state["s2"][:] = s2
    _mrg_jump(subsequence, state, "SubSeq")
    _mrg_jump(offset, state, "")
    _clear_boxmuller(state)


def _mrg_step(state) -> int:
    """curand_MRG32k3a: the next value, an integer in (0, m1] (the device returns it as a double)."""
    s1 = [int(a) for a in state["s1"]]
    s2 = [int(a) for a in state["s2"]]
    p1 = (MRG32K3A_A12 * s1[1] - MRG32K3A_A13N * s1[0]) % MRG32K3A_MOD1
    p2 = (MRG32K3A_A21 * s2[2] - MRG32K3A_A23N * s2[0]) % MRG32K3A_MOD2
    state["s1"][:] = [s1[1], s1[2], p1]
    state["s2"][:] = [s2[1], s2[2], p2]
    return p1 - p2 + (MRG32K3A_MOD1 if p1 <= p2 else 0)


def _mrg_next(state) -> int:
    return int(float(_mrg_step(state)) * MRG32K3A_BITS_NORM)


# ---------------------------------------------------------------------------------------------
# Sobol (32 and 64 bits; scrambled or not, the same steps)

def _sobol_bits(state) -> int:
    return 64 if state.dtype["direction_vectors"].base.itemsize == 8 else 32


def _sobol_skipahead(n: int, state) -> None:
    bits = _sobol_bits(state)
    mask = M64 if bits == 64 else M32
    i = (int(state["i"]) + (n & mask)) & mask
    state["i"] = i
    gray = i ^ (i >> 1)
    x = int(state["c"])
    dv = state["direction_vectors"]
    for k in range(bits):
        if gray >> k & 1:
            x ^= int(dv[k])
    state["x"] = x


def _sobol_init(direction_vectors, scramble_c: int, offset: int, state) -> None:
    bits = _sobol_bits(state)
    want = np.uint32 if bits == 32 else np.uint64
    dv = np.asarray(direction_vectors)
    if dv.dtype != want or dv.ndim < 1:
        raise TypeError(f"direction_vectors must be an array of {np.dtype(want).name} (this dimension's "
                        f"{bits} Sobol direction vectors), got {dv.dtype} with {dv.ndim} dimension(s)")
    # as the C pointer: the first `bits` numbers in memory order (a row, or the rows from this one)
    dv = dv.reshape(-1)
    if dv.size < bits:
        raise ValueError(f"direction_vectors must hold {bits} direction numbers (one dimension of "
                         f"the Sobol{bits} direction vectors), got {dv.size}")
    dv = dv[:bits]
    state["i"] = 0
    state["c"] = scramble_c
    state["direction_vectors"][:] = dv
    state["x"] = scramble_c
    _sobol_skipahead(offset, state)


def _sobol_next(state) -> int:
    bits = _sobol_bits(state)
    mask = M64 if bits == 64 else M32
    res = int(state["x"])
    i = int(state["i"])
    inv = ~i & mask
    tz = (inv & -inv).bit_length() - 1 if inv else bits - 1  # __ffs(~i) - 1, or bits - 1
    state["x"] = res ^ int(state["direction_vectors"][tz])
    state["i"] = (i + 1) & mask
    return res


# ---------------------------------------------------------------------------------------------
# dispatch of the raw generators

_NEXT = {"XORWOW": _xorwow_next, "Philox4_32_10": _philox_next, "MRG32k3a": _mrg_next,
         "Sobol32": _sobol_next, "Sobol64": _sobol_next}


def _u64(value, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer (unsigned long long), got {type(value).__name__}")
    return int(value) & M64


def init(*args) -> None:
    """curand_init: ``init(seed, subsequence, offset, state)`` for XORWOW, Philox4_32_10 and
    MRG32k3a; ``init(direction_vectors, offset, state)`` for Sobol32/64;
    ``init(direction_vectors, scramble_c, offset, state)`` for the scrambled Sobol states."""
    if not args:
        raise TypeError("init() needs its arguments and the state last")
    state = args[-1]
    kind = generator_of(state)
    if kind.startswith("Sobol"):
        tagged = (getattr(state.dtype, "metadata", None) or {}).get("generator", "")
        if len(args) == 3 and tagged.startswith("Scrambled"):
            raise TypeError(f"init() of a {tagged} state takes (direction_vectors, scramble_c, offset, state); "
                            "got 3 arguments")
        if len(args) == 4 and tagged.startswith("Sobol"):
            raise TypeError(f"init() of a {tagged} state takes (direction_vectors, offset, state); got 4 arguments")
        if len(args) == 3:
            dv, c, offset = args[0], 0, args[1]
        elif len(args) == 4:
            dv, c, offset = args[0], _u64(args[1], "scramble_c"), args[2]
        else:
            raise TypeError(f"init() of a {kind} state takes (direction_vectors, offset, state) or, "
                            f"scrambled, (direction_vectors, scramble_c, offset, state); got {len(args)} arguments")
        mask = M32 if kind == "Sobol32" else M64
        _sobol_init(dv, c & mask, _u64(offset, "offset") & mask, state)
        return
    if len(args) != 4:
        raise TypeError(f"init() of a {kind} state takes (seed, subsequence, offset, state); got {len(args)} arguments")
    seed, sub, off = (_u64(a, n) for a, n in zip(args[:3], ("seed", "subsequence", "offset")))
    {"XORWOW": _xorwow_init, "Philox4_32_10": _philox_init, "MRG32k3a": _mrg_init}[kind](seed, sub, off, state)


def rand(state) -> int:
    """curand: the next 32-bit value (64-bit for the Sobol64 states)."""
    return _NEXT[generator_of(state)](state)


def _need(state, kinds: tuple[str, ...], what: str) -> str:
    kind = generator_of(state)
    if kind not in kinds:
        raise TypeError(f"{what} takes a state of {' or '.join(kinds)}, got a {kind} state "
                        "(cuRAND defines it for those generators only)")
    return kind


def rand4(state) -> list[int]:
    """curand4 (Philox4_32_10 only): four 32-bit values."""
    _need(state, ("Philox4_32_10",), "rand4")
    return _philox_next4(state)


def skipahead(n, state) -> None:
    """skipahead: advance the state by n values (as n calls of :func:`rand`)."""
    n = _u64(n, "n")
    kind = generator_of(state)
    if kind == "XORWOW":
        _xorwow_skipahead(n, state)
    elif kind == "Philox4_32_10":
        _philox_skipahead(n, state)
    elif kind == "MRG32k3a":
        _mrg_jump(n, state, "")
    else:
        _sobol_skipahead(n & (M32 if kind == "Sobol32" else M64), state)


def skipahead_sequence(n, state) -> None:
    """skipahead_sequence: XORWOW by n * 2**67 values, Philox4_32_10 by n * 2**66 (the high half
    of the counter), MRG32k3a by n * 2**127."""
    n = _u64(n, "n")
    kind = _need(state, ("XORWOW", "Philox4_32_10", "MRG32k3a"), "skipahead_sequence")
    if kind == "XORWOW":
        _xorwow_skipahead_sequence(n, state)
    elif kind == "Philox4_32_10":
        _philox_skipahead_sequence(n, state)
    else:
        _mrg_jump(n, state, "Seq")


def skipahead_subsequence(n, state) -> None:
    """skipahead_subsequence (MRG32k3a): by n * 2**76 values."""
    n = _u64(n, "n")
    _need(state, ("MRG32k3a",), "skipahead_subsequence")
    _mrg_jump(n, state, "SubSeq")


# ---------------------------------------------------------------------------------------------
# uniform

def _u01(x: int) -> np.float32:
    """_curand_uniform(unsigned int): x * 2**-32 + 2**-33 in float (exact product, one rounding)."""
    return _F32(_F32(x) * CURAND_2POW32_INV + CURAND_2POW32_INV / _F32(2))


def _u01_double(x: int) -> float:
    return float(x) * CURAND_2POW32_INV_DOUBLE + CURAND_2POW32_INV_DOUBLE


def _u01_double64(x: int) -> float:
    return float(x >> 11) * CURAND_2POW53_INV_DOUBLE + CURAND_2POW53_INV_DOUBLE / 2.0


def _u01_double_hq(x: int, y: int) -> float:
    z = x ^ (y << 21)
    return float(z) * CURAND_2POW53_INV_DOUBLE + CURAND_2POW53_INV_DOUBLE / 2.0


def uniform(state) -> np.float32:
    """curand_uniform: a float in (0, 1]."""
    kind = generator_of(state)
    if kind == "MRG32k3a":
        return _F32(float(_mrg_step(state)) * MRG32K3A_NORM)
    x = _NEXT[kind](state)
    if kind == "Sobol64":
        x >>= 32
    return _u01(x)


def uniform_double(state) -> float:
    """curand_uniform_double: a double in (0, 1]."""
    kind = generator_of(state)
    if kind == "XORWOW":
        x = _xorwow_next(state)
        y = _xorwow_next(state)
        return _u01_double_hq(x, y)
    if kind == "MRG32k3a":
        return float(_mrg_step(state)) * MRG32K3A_NORM
    if kind == "Sobol64":
        return _u01_double64(_sobol_next(state))
    return _u01_double(_NEXT[kind](state))


def uniform2_double(state) -> tuple[float, float]:
    """curand_uniform2_double (Philox4_32_10): two doubles from one curand4."""
    _need(state, ("Philox4_32_10",), "uniform2_double")
    x = _philox_next4(state)
    return _u01_double_hq(x[0], x[1]), _u01_double_hq(x[2], x[3])


def uniform4(state) -> list[np.float32]:
    """curand_uniform4 (Philox4_32_10): four floats from one curand4."""
    _need(state, ("Philox4_32_10",), "uniform4")
    return [_u01(x) for x in _philox_next4(state)]


# ---------------------------------------------------------------------------------------------
# fused multiply-adds: NVRTC's default --fmad=true contracts a * b + c into fma.rn (the PTX of
# curand's Box-Muller, log-normal and Poisson shows where); these round once, as the device does

def fma64(a: float, b: float, c: float) -> float:
    """fma(a, b, c) in double, rounded once (exact rational arithmetic)."""
    a, b, c = float(a), float(b), float(c)
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b + c
    exact = fractions.Fraction(a) * fractions.Fraction(b) + fractions.Fraction(c)
    try:
        return float(exact)  # int / int: correctly rounded
    except OverflowError:
        return math.copysign(math.inf, exact)


def fmaf(a, b, c) -> np.float32:
    """fmaf(a, b, c) of three floats, rounded once to float32. a * b is exact in double; the sum
    is a double s plus its exact error e (TwoSum), which decides a float32 tie at s."""
    a, b, c = float(_F32(a)), float(_F32(b)), float(_F32(c))
    p = a * b
    s = p + c
    if not math.isfinite(s):
        return _F32(s)
    bb = s - p
    e = (p - (s - bb)) + (c - bb)
    with np.errstate(over="ignore"):
        r = _F32(s)
    if e != 0.0 and float(r) != s and math.isfinite(float(r)):
        other = np.nextafter(r, _F32(math.copysign(np.inf, s - float(r))))
        if abs(s - float(r)) == abs(float(other) - s):  # s is a float32 midpoint: e decides
            hi, lo = (r, other) if float(r) > float(other) else (other, r)
            r = hi if e > 0 else lo
    return r


# ---------------------------------------------------------------------------------------------
# transcendental steps (float64, rounded to the device's precision; see the module docstring)

def _logf(x) -> np.float32:
    return _F32(math.log(float(x)))


def _sqrtf(x) -> np.float32:
    return _F32(math.sqrt(float(x)))


def _expf(x) -> np.float32:
    with np.errstate(over="ignore"):
        return _F32(math.exp(float(x))) if float(x) < 710 else _F32(np.inf)


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _sincospi(v: float) -> tuple[float, float]:
    """(sin(pi v), cos(pi v)) in float64 with an exact argument reduction (v in [0, 2])."""
    k = round(v * 2.0)  # nearest multiple of 1/2
    r = v - k * 0.5  # exact, |r| <= 1/4
    s, c = math.sin(math.pi * r), math.cos(math.pi * r)
    return [(s, c), (c, -s), (-s, -c), (-c, s)][k % 4]


def _box_muller(x: int, y: int) -> tuple[np.float32, np.float32]:
    """_curand_box_muller: u = x 2**-32 + 2**-33, v = y 2**-32 2pi + 2**-33 2pi (float),
    s = sqrtf(-2 logf(u)), (sin v, cos v) * s."""
    u = _u01(x)
    v = fmaf(_F32(y), CURAND_2POW32_INV_2PI, CURAND_2POW32_INV_2PI / _F32(2))
    return _box_muller_uv(u, v)


def _box_muller_uv(u, v) -> tuple[np.float32, np.float32]:
    s = _sqrtf(_F32(-2.0) * _logf(u))
    return _F32(_F32(math.sin(float(v))) * s), _F32(_F32(math.cos(float(v))) * s)


def _box_muller_double(x0: int, x1: int, y0: int, y1: int) -> tuple[float, float]:
    u = _u01_double_hq(x0, x1)
    zy = y0 ^ (y1 << 21)
    v = float(zy) * (CURAND_2POW53_INV_DOUBLE * 2.0) + CURAND_2POW53_INV_DOUBLE
    return _box_muller_double_uv(u, v)


def _box_muller_double_uv(u: float, v: float) -> tuple[float, float]:
    s = math.sqrt(-2.0 * math.log(u))
    sn, cs = _sincospi(v)
    return sn * s, cs * s


def _box_muller_mrg(state) -> tuple[np.float32, np.float32]:
    x = uniform(state)
    y = _F32(uniform(state) * CURAND_2PI)
    return _box_muller_uv(x, y)


def _box_muller_mrg_double(state) -> tuple[float, float]:
    x = uniform_double(state)
    y = uniform_double(state) * 2.0
    return _box_muller_double_uv(x, y)


def _erfcinv(y: float) -> float:
    """erfcinv(y) for y in (0, 2), in float64 (a Newton iteration on erf/erfc)."""
    if y == 1.0:
        return 0.0
    if y > 1.0:
        return -_erfcinv(2.0 - y)
    # y in (0, 1): x > 0. Start from the tail asymptotic / small-x series, refine.
    if y > 0.5:
        x = (1.0 - y) * math.sqrt(math.pi) / 2.0
    else:
        t = math.sqrt(-math.log(y))
        x = t - (math.log(t) + 0.5 * math.log(math.pi)) / (2.0 * t) if t > 1.2 else 0.6
    for _ in range(60):
        # f(x) = erfc(x) - y; near 0 use erf(x) - (1 - y) (1 - y exact there) to keep relative accuracy
        if x < 0.5:
            f = math.erf(x) - (1.0 - y)
            step = f / (2.0 / math.sqrt(math.pi) * math.exp(-x * x))
        else:
            f = math.erfc(x) - y
            step = -f / (2.0 / math.sqrt(math.pi) * math.exp(-x * x))
        # Halley correction: f'' / f' = -2x
        step = step / (1.0 + x * step)
        x -= step
        if abs(step) <= 1e-17 * abs(x):
            break
    return x


def _normal_icdf(x: int) -> np.float32:
    s = CURAND_SQRT2
    if x > 0x80000000:
        x = M32 - x
        s = -s
    p = _u01(x)
    return _F32(s * _F32(_erfcinv(float(_F32(_F32(2.0) * p)))))


def _normal_icdf_double(x: int) -> float:
    s = CURAND_SQRT2_DOUBLE
    if x > 0x80000000:
        x = M32 - x
        s = -s
    p = float(x) * CURAND_2POW32_INV_DOUBLE + CURAND_2POW32_INV_DOUBLE / 2.0
    return s * _erfcinv(2.0 * p)


def _normal_icdf_double64(x: int) -> float:
    s = CURAND_SQRT2_DOUBLE
    x >>= 11
    if x > 0x10000000000000:
        x = 0x1FFFFFFFFFFFFF - x
        s = -s
    p = float(x) * CURAND_2POW53_INV_DOUBLE + CURAND_2POW53_INV_DOUBLE / 2.0
    return s * _erfcinv(2.0 * p)


# ---------------------------------------------------------------------------------------------
# normal (Box-Muller with cuRAND's caching flags; inverse CDF for Sobol)

def _cached_pair(state, flag_field: str, extra_field: str, flag: int, make_pair, transform=None):
    if int(state[flag_field]) != flag:
        a, b = make_pair()
        if transform is not None:
            a, b = transform(a), transform(b)
        state[extra_field] = b
        state[flag_field] = flag
        return a
    state[flag_field] = 0
    return state[extra_field][()] if hasattr(state[extra_field], "shape") else state[extra_field]


def _normal_pair(state, kind: str):
    if kind == "MRG32k3a":
        return _box_muller_mrg(state)
    x = _NEXT[kind](state)
    y = _NEXT[kind](state)
    return _box_muller(x, y)


def _normal_double_pair(state, kind: str):
    if kind == "MRG32k3a":
        return _box_muller_mrg_double(state)
    if kind == "Philox4_32_10":
        return _box_muller_double(*_philox_next4(state))
    return _box_muller_double(*(_xorwow_next(state) for _ in range(4)))


def _normal_common(state, transform=None, flag=EXTRA_FLAG_NORMAL):
    kind = generator_of(state)
    if kind.startswith("Sobol"):
        x = _sobol_next(state)
        z = _normal_icdf(x >> 32 if kind == "Sobol64" else x)
        return transform(z) if transform else z
    return _F32(_cached_pair(state, "boxmuller_flag", "boxmuller_extra", flag,
                             lambda: _normal_pair(state, kind), transform))


def _normal_double_common(state, transform=None, flag=EXTRA_FLAG_NORMAL):
    kind = generator_of(state)
    if kind == "Sobol64":
        z = _normal_icdf_double64(_sobol_next(state))
        return transform(z) if transform else z
    if kind == "Sobol32":
        z = _normal_icdf_double(_sobol_next(state))
        return transform(z) if transform else z
    return float(_cached_pair(state, "boxmuller_flag_double", "boxmuller_extra_double", flag,
                              lambda: _normal_double_pair(state, kind), transform))


def normal(state) -> np.float32:
    """curand_normal: a standard normal float (Box-Muller, the second value cached in the state;
    the Sobol states: the inverse normal CDF of one value)."""
    return _normal_common(state)


def normal_double(state) -> float:
    """curand_normal_double."""
    return _normal_double_common(state)


def normal2(state) -> tuple[np.float32, np.float32]:
    """curand_normal2 (XORWOW, Philox4_32_10, MRG32k3a): both Box-Muller values, no caching."""
    kind = _need(state, ("XORWOW", "Philox4_32_10", "MRG32k3a"), "normal2")
    return _normal_pair(state, kind)


def normal2_double(state) -> tuple[float, float]:
    """curand_normal2_double (XORWOW, Philox4_32_10, MRG32k3a)."""
    kind = _need(state, ("XORWOW", "Philox4_32_10", "MRG32k3a"), "normal2_double")
    return _normal_double_pair(state, kind)


def normal4(state) -> list[np.float32]:
    """curand_normal4 (Philox4_32_10): Box-Muller on the two pairs of one curand4."""
    _need(state, ("Philox4_32_10",), "normal4")
    x = _philox_next4(state)
    return [*_box_muller(x[0], x[1]), *_box_muller(x[2], x[3])]


# ---------------------------------------------------------------------------------------------
# log-normal: expf(mean + stddev * z) (the device contracts it into an FMA: one rounding)

def _real(value, name: str, ctype: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number ({ctype}), got {type(value).__name__}")
    return float(value)


def _lognormal_f(mean, stddev):
    mean, stddev = _F32(_real(mean, "mean", "float")), _F32(_real(stddev, "stddev", "float"))
    return lambda z: _expf(fmaf(stddev, z, mean))


def _lognormal_d(mean, stddev):
    mean, stddev = _real(mean, "mean", "double"), _real(stddev, "stddev", "double")
    return lambda z: _exp(fma64(stddev, z, mean))


def log_normal(state, mean, stddev) -> np.float32:
    """curand_log_normal: exp of a normal of the given mean and standard deviation (float)."""
    return _F32(_normal_common(state, _lognormal_f(mean, stddev), EXTRA_FLAG_LOG_NORMAL))


def log_normal_double(state, mean, stddev) -> float:
    """curand_log_normal_double."""
    return _normal_double_common(state, _lognormal_d(mean, stddev), EXTRA_FLAG_LOG_NORMAL)


def log_normal2(state, mean, stddev) -> tuple[np.float32, np.float32]:
    """curand_log_normal2 (XORWOW, Philox4_32_10, MRG32k3a)."""
    f = _lognormal_f(mean, stddev)
    a, b = normal2(state)
    return f(a), f(b)


def log_normal2_double(state, mean, stddev) -> tuple[float, float]:
    """curand_log_normal2_double (XORWOW, Philox4_32_10, MRG32k3a)."""
    f = _lognormal_d(mean, stddev)
    a, b = normal2_double(state)
    return f(a), f(b)


def log_normal4(state, mean, stddev) -> list[np.float32]:
    """curand_log_normal4 (Philox4_32_10)."""
    f = _lognormal_f(mean, stddev)
    return [f(z) for z in normal4(state)]


# ---------------------------------------------------------------------------------------------
# Poisson (curand_poisson.h)

def _poisson_knuth(state, lam: np.float32) -> int:
    k = 0
    p = _expf(lam)
    while True:
        k += 1
        p = _F32(p * uniform(state))
        if not float(p) > 1.0:
            return k - 1


# the device's PTX approximations (ex2/lg2/rsqrt/rcp.approx), here correctly rounded in float
def _cr_rsqrt(a) -> np.float32:
    return _F32(1.0 / math.sqrt(float(a))) if float(a) > 0 else _F32(np.inf if float(a) == 0 else np.nan)


def _cr_exp(a) -> np.float32:
    t = _F32(float(a) * 1.4426950408889634074)  # float * double literal, stored into a float
    return _F32(2.0 ** float(t)) if float(t) < 128 else _F32(np.inf)


def _cr_log(a) -> np.float32:
    t = _F32(math.log2(float(a)))
    return _F32(float(t) * 0.69314718055994530942)


def _cr_rcp(a) -> np.float32:
    return _F32(1.0 / float(a)) if float(a) != 0 else _F32(np.inf)


_MA1, _MA2, _MA3 = _F32(1.43248035075540910), _F32(0.12400979329415655), _F32(0.00025361074907033)
_MB1, _MB2, _MB3 = _F32(0.21096734870196546), _F32(1.97381164089999420), _F32(0.94201734077887530)


def _pgammainc_ab(a):
    alpha = fmaf(_MA1, _cr_rsqrt(_F32(a - _MA2)), _MA3)
    beta = fmaf(_MB1, _cr_rsqrt(_F32(a - _MB2)), _MB3)
    return alpha, beta


def _cr_pgammainc(a, x) -> np.float32:
    alpha, beta = _pgammainc_ab(a)
    t = _F32(a - x)
    t = fmaf(alpha, t, -beta)  # mul.f32 + sub.f32 in the PTX, which ptxas contracts (no .rn)
    t = _F32(_F32(1.0) + _cr_exp(t))
    t = _F32(t * t)
    return _cr_rcp(t)


def _cr_pgammaincinv(a, y) -> np.float32:
    alpha, beta = _pgammainc_ab(a)
    t = _F32(_cr_rsqrt(y) - _F32(1.0))
    t = _cr_log(t)
    t = _F32(beta + t)
    return fmaf(-t, _cr_rcp(alpha), a)


_LGAMMA_TABLE = (0.0, 0.0, 6.931471805599453094e-1, 1.791759469228055001e0, 3.178053830347945620e0,
                 4.787491742782045994e0, 6.579251212010100995e0, 8.525161361065414300e0,
                 1.060460290274525023e1)


def _cr_lgamma_integer(a: int) -> float:
    fa = abs(float(_F32(a)))
    if a > 8:
        s = 1.0 / fa
        t = s * s
        acc = -0.1633436431e-2
        for c in (0.83645878922e-3, -0.5951896861197e-3, 0.793650576493454e-3, -0.277777777735865004e-2,
                  0.833333333333331018375e-1):
            acc = fma64(acc, t, c)
        acc = fma64(acc, s, 0.918938533204672)
        s = 0.5 * math.log(fa)
        t = fa - 0.5
        s = s * t
        t = s - fa
        s = s + acc
        return t + s
    return _LGAMMA_TABLE[int(fa) - 1]


def _poisson_gammainc(state, lam: np.float32) -> int:
    logl = _cr_log(lam)
    while True:
        y = uniform(state)
        x = _F32(math.floor(float(_cr_pgammaincinv(lam, y))))
        z = uniform(state)
        v = _F32(_F32(_cr_pgammainc(lam, _F32(x + _F32(1.0))) - _cr_pgammainc(lam, x)) * _F32(1.3))
        z = _F32(z * v)
        lg = _F32(_cr_lgamma_integer(int(_F32(1.0) + x)))
        t = _cr_exp(_F32(fmaf(x, logl, -lam) - lg))
        if float(z) < float(t) and float(v) >= 1e-20:
            return int(x)


def _poisson_itr_double(u: float, lam: float) -> int:
    p = q = 1.0
    k = 0
    pw = 0
    while True:
        L = math.exp(-500.0) if lam > pw + 500.0 else math.exp(float(pw) - lam)
        p *= L
        q *= L
        pw += 500
        while u > q:
            k += 1
            p *= lam / k
            q += p
        if not pw < lam:
            return k


def _poisson_sobol(x: int, lam: float, bits: int) -> int:
    if lam < 1000:
        u = (float(x) * CURAND_2POW32_INV_DOUBLE + CURAND_2POW32_INV_DOUBLE / 2.0) if bits == 32 else \
            (float(x >> 11) * CURAND_2POW53_INV_DOUBLE + CURAND_2POW53_INV_DOUBLE / 4.0)
        return _poisson_itr_double(u, lam)
    z = _normal_icdf_double(x) if bits == 32 else _normal_icdf_double64(x)
    return _to_uint(fma64(math.sqrt(lam), z, lam) + 0.5)


def _to_uint(value: float) -> int:
    """(unsigned int) of a double, as the device converts (cvt.rzi.u32.f64: saturating)."""
    if value != value:
        return 0
    return int(min(max(math.trunc(value), 0), M32))


def _check_lambda(lam) -> float:
    if isinstance(lam, (bool, np.bool_)) or not isinstance(lam, (int, float, np.integer, np.floating)):
        raise TypeError(f"lambda_ must be a real number (double), got {type(lam).__name__}")
    lam = float(lam)
    if not lam > 0:
        raise ValueError(f"lambda_ must be positive, got {lam}")
    return lam


def poisson(state, lambda_) -> int:
    """curand_poisson: Knuth's method below 64, a normal approximation above 4000, the gammainc
    rejection method between (XORWOW, Philox4_32_10, MRG32k3a); for the Sobol states, one value
    through the inverse CDF below 1000, the normal approximation above."""
    lam = _check_lambda(lambda_)
    kind = generator_of(state)
    if kind.startswith("Sobol"):
        return _poisson_sobol(_sobol_next(state), lam, 64 if kind == "Sobol64" else 32)
    if lam < 64:
        return _poisson_knuth(state, _F32(lam))
    if lam > 4000:
        return _to_uint(fma64(math.sqrt(lam), normal_double(state), lam) + 0.5)
    return _poisson_gammainc(state, _F32(lam))


def poisson4(state, lambda_) -> list[int]:
    """curand_poisson4 (Philox4_32_10)."""
    lam = _check_lambda(lambda_)
    _need(state, ("Philox4_32_10",), "poisson4")
    if lam < 64:
        return [_poisson_knuth(state, _F32(lam)) for _ in range(4)]
    if lam > 4000:
        x = _philox_next4(state)
        y = _philox_next4(state)
        z = [*_box_muller_double(*x), *_box_muller_double(*y)]
        return [_to_uint(fma64(math.sqrt(lam), v, lam) + 0.5) for v in z]
    return [_poisson_gammainc(state, _F32(lam)) for _ in range(4)]
