# SPDX-License-Identifier: Apache-2.0
"""The simulator's cuRAND generators (nvmath_device._random_math) against values derived
independently of it: published known-answer vectors (Philox), second implementations written
here from each algorithm's definition (XORWOW, MRG32k3a, Sobol), jump matrices computed here by
exact matrix powers (which check the curand_precalc.h / curand_mrg32k3a.h tables the module reads),
and properties (skipahead(n) == n draws, init offsets and subsequences)."""

import os
import re

import numpy as np
import pytest

from nvmath_device import _random_math as rm
from nvmath_device._random_states import STATE_DTYPES

M32 = 0xFFFFFFFF


def _state(kind):
    return np.zeros(1, STATE_DTYPES[kind])[0]


# ------------------------------------------------------------------ Philox4x32-10

# Random123 1.09, examples/kat_vectors, lines "philox4x32 10 <ctr x4> <key x2> <expected x4>"
# (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC11).
PHILOX_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((M32,) * 4, (M32, M32), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("ctr,key,want", PHILOX_KAT)
def test_philox_known_answers(ctr, key, want):
    assert tuple(rm.philox4x32_10(ctr, key)) == want


def _philox_block(counter: int, key: int):
    """Block `counter` (128-bit) of Philox under `key` (64-bit): independent of rm (numpy uint64)."""
    c = [np.uint64((counter >> (32 * i)) & M32) for i in range(4)]
    k = [np.uint64(key & M32), np.uint64(key >> 32)]
    mask = np.uint64(M32)
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k[0], p1 & mask, (p0 >> np.uint64(32)) ^ c[3] ^ k[1], p0 & mask]
        k = [(k[0] + np.uint64(0x9E3779B9)) & mask, (k[1] + np.uint64(0xBB67AE85)) & mask]
    return [int(x) for x in c]


@pytest.mark.parametrize("seed,sub,offset", [(0, 0, 0), (1234, 0, 0), (2**40 + 7, 3, 5), (99, 2**33 + 1, 2**34 + 3)])
def test_philox_stream_is_counter_mode(seed, sub, offset):
    """curand's Philox: value n of subsequence s is word n % 4 of the block at counter
    (n // 4) + s * 2**64 under key = seed."""
    s = _state("Philox4_32_10")
    rm.init(seed, sub, offset, s)
    got = [rm.rand(s) for _ in range(11)]
    want = [_philox_block((n // 4) + (sub << 64), seed)[n % 4] for n in range(offset, offset + 11)]
    assert got == want


def test_philox_rand4_continues_the_stream_from_any_position():
    ref = _state("Philox4_32_10")
    rm.init(7, 1, 0, ref)
    stream = [rm.rand(ref) for _ in range(40)]
    for start in range(4):
        s = _state("Philox4_32_10")
        rm.init(7, 1, start, s)
        assert rm.rand4(s) == stream[start:start + 4]
        assert rm.rand(s) == stream[start + 4]


# ------------------------------------------------------------------ XORWOW

def _xorwow_seeded(seed):
    """curand_init's seed scrambling (curand_kernel.h), then Marsaglia's xorwow (J. Stat. Softw.
    8(14), 2003, section 3.1): a separate implementation over a list."""
    s0 = (seed & M32) ^ 0xAAD26B49
    s1 = (seed >> 32) ^ 0xF7DCEFDD
    t0 = (1099087573 * s0) & M32
    t1 = (2591861531 * s1) & M32
    d = (6615241 + t1 + t0) & M32
    v = [(123456789 + t0) & M32, 362436069 ^ t0, (521288629 + t1) & M32, 88675123 ^ t1, (5783321 + t0) & M32]
    return d, v


def _xorwow_step(v):
    x, y, z, w, u = v
    t = x ^ (x >> 2)
    return [y, z, w, u, (u ^ ((u << 4) & M32)) ^ (t ^ ((t << 1) & M32))]


def _xorwow_outputs(seed, n):
    d, v = _xorwow_seeded(seed)
    out = []
    for _ in range(n):
        v = _xorwow_step(v)
        d = (d + 362437) & M32
        out.append((v[4] + d) & M32)
    return out


@pytest.mark.parametrize("seed", [0, 1, 1234, 2**63 + 12345])
def test_xorwow_first_outputs(seed):
    s = _state("XORWOW")
    rm.init(seed, 0, 0, s)
    assert [rm.rand(s) for _ in range(200)] == _xorwow_outputs(seed, 200)


def _gf2_step_matrix():
    """160 x 160 matrix over GF(2) of one xorwow step (column j = image of state bit j)."""
    m = np.zeros((160, 160), dtype=np.uint8)
    for j in range(160):
        v = [0] * 5
        v[j // 32] = 1 << (j % 32)
        w = _xorwow_step(v)
        for i in range(160):
            m[i, j] = (w[i // 32] >> (i % 32)) & 1
    return m


def _gf2_pow2(m, k):
    for _ in range(k):
        m = (m.astype(np.int64) @ m.astype(np.int64) % 2).astype(np.uint8)
    return m


def _gf2_apply(m, v):
    bits = np.array([(v[i // 32] >> (i % 32)) & 1 for i in range(160)], dtype=np.int64)
    out = m.astype(np.int64) @ bits % 2
    return [sum(int(out[32 * w + b]) << b for b in range(32)) for w in range(5)]


def test_xorwow_skipahead_sequence_is_2_pow_67_steps():
    """The subsequence jump matrices of curand_precalc.h equal the step matrix to the power
    2**67 (computed here by 67 squarings)."""
    jump = _gf2_pow2(_gf2_step_matrix(), 67)
    for seed, sub in [(1234, 1), (5, 3), (2**40, 6)]:
        s = _state("XORWOW")
        rm.init(seed, sub, 0, s)
        d, v = _xorwow_seeded(seed)
        for _ in range(sub):
            v = _gf2_apply(jump, v)
        assert [int(a) for a in s["v"]] == v and int(s["d"]) == d  # the sequence jump leaves d alone


@pytest.mark.parametrize("kind", ["XORWOW", "Philox4_32_10", "MRG32k3a"])
@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 17, 1000, 4099])
def test_skipahead_equals_n_draws(kind, n):
    a, b = _state(kind), _state(kind)
    rm.init(42, 2, 3, a)
    rm.init(42, 2, 3, b)
    rm.rand(a)  # from a state mid-block too (Philox)
    rm.rand(b)
    for _ in range(n):
        rm.rand(a)
    rm.skipahead(n, b)
    assert a.tobytes() == b.tobytes()
    assert [rm.rand(a) for _ in range(6)] == [rm.rand(b) for _ in range(6)]


@pytest.mark.parametrize("kind", ["XORWOW", "Philox4_32_10", "MRG32k3a"])
def test_init_offset_equals_draws(kind):
    a, b = _state(kind), _state(kind)
    rm.init(77, 1, 0, a)
    rm.init(77, 1, 1234, b)
    for _ in range(1234):
        rm.rand(a)
    assert [rm.rand(a) for _ in range(5)] == [rm.rand(b) for _ in range(5)]


@pytest.mark.parametrize("kind", ["XORWOW", "Philox4_32_10", "MRG32k3a"])
def test_large_skipaheads_compose(kind):
    """skipahead(a) then skipahead(b) == skipahead(a + b) with 64-bit n (the high matrices)."""
    a, b = _state(kind), _state(kind)
    rm.init(3, 0, 0, a)
    rm.init(3, 0, 0, b)
    x, y = 0x1234_5678_9ABC, 0xF00D_0000_0001_0001
    rm.skipahead(x, a)
    rm.skipahead(y, a)
    rm.skipahead(x + y, b)
    assert [int(v) for v in rm.rand4(a)] == [int(v) for v in rm.rand4(b)] if kind == "Philox4_32_10" else \
        [rm.rand(a) for _ in range(4)] == [rm.rand(b) for _ in range(4)]


def test_xorwow_skipahead_sequence_composes():
    a, b = _state("XORWOW"), _state("XORWOW")
    rm.init(9, 0, 0, a)
    rm.init(9, 2**40 + 5, 0, b)
    rm.skipahead_sequence(2**40, a)
    rm.skipahead_sequence(5, a)
    assert a.tobytes() == b.tobytes()


# ------------------------------------------------------------------ MRG32k3a

M1, M2 = 4294967087, 4294944443
A1 = [[0, 1, 0], [0, 0, 1], [M1 - 810728, 1403580, 0]]  # L'Ecuyer 1999, Oper. Res. 47(1), MRG32k3a
A2 = [[0, 1, 0], [0, 0, 1], [M2 - 1370589, 0, 527612]]


def _matmul(a, b, m):
    return [[sum(a[i][k] * b[k][j] for k in range(3)) % m for j in range(3)] for i in range(3)]


def _matpow(a, e, m):
    r = [[int(i == j) for j in range(3)] for i in range(3)]
    while e:
        if e & 1:
            r = _matmul(a, r, m)
        a = _matmul(a, a, m)
        e >>= 1
    return r


def _mrg_seeded(seed):
    if seed == 0:
        return [12345] * 3, [12345] * 3
    x1 = (seed & M32) ^ 0x55555555
    x2 = (seed >> 32) ^ 0xAAAAAAAA
    return ([x1 * 12345 % M1, x2 * 12345 % M1, x1 * 12345 % M1],
            [x2 * 12345 % M2, x1 * 12345 % M2, x2 * 12345 % M2])


def _mrg_outputs(s1, s2, n):
    out = []
    for _ in range(n):
        p1 = (1403580 * s1[1] - 810728 * s1[0]) % M1
        p2 = (527612 * s2[2] - 1370589 * s2[0]) % M2
        s1, s2 = [s1[1], s1[2], p1], [s2[1], s2[2], p2]
        r = p1 - p2 if p1 > p2 else p1 - p2 + M1
        out.append(int(r * 1.000000048662))  # curand: (unsigned int)(r * MRG32K3A_BITS_NORM)
    return out


def _apply(mat, v, m):
    return [sum(mat[i][k] * v[k] for k in range(3)) % m for i in range(3)]


@pytest.mark.parametrize("seed,sub,offset", [(0, 0, 0), (1234, 0, 0), (2**35 + 1, 1, 0), (5, 3, 77), (6, 2**20, 2**50)])
def test_mrg32k3a_outputs_and_jumps(seed, sub, offset):
    """Subsequences are 2**76 steps apart (A**(2**76) computed here), offsets are A**offset."""
    s1, s2 = _mrg_seeded(seed)
    e = (sub << 76) + offset
    s1, s2 = _apply(_matpow(A1, e, M1), s1, M1), _apply(_matpow(A2, e, M2), s2, M2)
    s = _state("MRG32k3a")
    rm.init(seed, sub, offset, s)
    assert [rm.rand(s) for _ in range(50)] == _mrg_outputs(s1, s2, 50)


def test_mrg32k3a_skipahead_sequence_is_2_pow_127_steps():
    s = _state("MRG32k3a")
    rm.init(11, 0, 0, s)
    rm.skipahead_sequence(3, s)
    s1, s2 = _mrg_seeded(11)
    e = 3 << 127
    s1, s2 = _apply(_matpow(A1, e, M1), s1, M1), _apply(_matpow(A2, e, M2), s2, M2)
    assert [int(a) for a in s["s1"]] == s1 and [int(a) for a in s["s2"]] == s2


def test_mrg32k3a_float_outputs():
    s = _state("MRG32k3a")
    rm.init(0, 0, 0, s)
    s1, s2 = [12345] * 3, [12345] * 3
    p1 = (1403580 * s1[1] - 810728 * s1[0]) % M1
    p2 = (527612 * s2[2] - 1370589 * s2[0]) % M2
    r = p1 - p2 if p1 > p2 else p1 - p2 + M1
    assert rm.uniform_double(s) == r * 2.3283065498378288e-10
    t = _state("MRG32k3a")
    rm.init(0, 0, 0, t)
    assert rm.uniform(t) == np.float32(r * 2.3283065498378288e-10)


# ------------------------------------------------------------------ Sobol

@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("scrambled", [False, True])
@pytest.mark.parametrize("dim", [0, 1, 7, 19999])
def test_sobol_is_the_gray_code_sequence(bits, scrambled, dim):
    """Value n = c XOR (XOR of direction_vectors[k] over the set bits k of gray(n))."""
    dv = rm.host_direction_vectors(bits, scrambled)[dim]
    c = int(rm.host_scramble_constants(bits)[dim]) if scrambled else 0
    kind = "Sobol32" if bits == 32 else "Sobol64"
    for offset in (0, 5, 1000):
        s = _state(kind)
        if scrambled:
            rm.init(dv, c, offset, s)
        else:
            rm.init(dv, offset, s)
        got = [rm.rand(s) for _ in range(40)]
        want = []
        for n in range(offset, offset + 40):
            g, x = n ^ (n >> 1), c
            for k in range(bits):
                if g >> k & 1:
                    x ^= int(dv[k])
            want.append(x)
        assert got == want


def test_sobol_first_dimension_is_van_der_corput():
    dv = rm.host_direction_vectors(32)[0]
    assert [int(x) for x in dv] == [1 << (31 - k) for k in range(32)]
    s = _state("Sobol32")
    rm.init(dv, 0, s)
    assert [rm.uniform(s) for _ in range(4)] == [np.float32(x + 2.0**-33) for x in (0.0, 0.5, 0.75, 0.25)]


@pytest.mark.parametrize("kind", ["Sobol32", "Sobol64"])
@pytest.mark.parametrize("n", [0, 1, 2, 31, 1000])
def test_sobol_skipahead_equals_draws(kind, n):
    dv = rm.host_direction_vectors(32 if kind == "Sobol32" else 64)[3]
    a, b = _state(kind), _state(kind)
    rm.init(dv, 9, a)
    rm.init(dv, 9, b)
    for _ in range(n):
        rm.rand(a)
    rm.skipahead(n, b)
    assert [rm.rand(a) for _ in range(5)] == [rm.rand(b) for _ in range(5)]


# ------------------------------------------------------------------ tables, constants, errors

def test_header_constants_are_the_powers_of_two_used():
    text = open(os.path.join(rm.curand_include_dir(), "curand_globals.h")).read()

    def literal(name):
        return re.search(r"#define " + name + r" \(([^)]*)\)", text).group(1)

    assert np.float32(literal("CURAND_2POW32_INV").rstrip("f")) == rm.CURAND_2POW32_INV == np.float32(2.0**-32)
    assert float(literal("CURAND_2POW32_INV_DOUBLE")) == rm.CURAND_2POW32_INV_DOUBLE == 2.0**-32
    assert float(literal("CURAND_2POW53_INV_DOUBLE")) == rm.CURAND_2POW53_INV_DOUBLE == 2.0**-53
    assert np.float32(literal("CURAND_2PI").rstrip("f")) == rm.CURAND_2PI


def test_uniform_forms_from_raw_bits():
    s = _state("Philox4_32_10")
    rm.init(5, 0, 0, s)
    block = _philox_block(0, 5)
    t = _state("Philox4_32_10")
    rm.init(5, 0, 0, t)
    assert rm.uniform4(t) == [np.float32(x * 2.0**-32 + 2.0**-33) for x in block]
    t = _state("Philox4_32_10")
    rm.init(5, 0, 0, t)
    a, b = rm.uniform2_double(t)
    assert (a, b) == ((block[0] ^ (block[1] << 21)) * 2.0**-53 + 2.0**-54,
                      (block[2] ^ (block[3] << 21)) * 2.0**-53 + 2.0**-54)
    assert rm.uniform_double(s) == block[0] * 2.0**-32 + 2.0**-32
    x = _state("XORWOW")
    rm.init(5, 0, 0, x)
    o = _xorwow_outputs(5, 2)
    assert rm.uniform_double(x) == (o[0] ^ (o[1] << 21)) * 2.0**-53 + 2.0**-54


def test_bad_arguments():
    s = _state("XORWOW")
    with pytest.raises(TypeError, match="seed must be an integer"):
        rm.init(1.5, 0, 0, s)
    with pytest.raises(TypeError, match=r"init\(\) of a XORWOW state takes \(seed, subsequence, offset, state\)"):
        rm.init(1, 0, s)
    with pytest.raises(TypeError, match="rand4 takes a state of Philox4_32_10"):
        rm.rand4(s)
    with pytest.raises(TypeError, match="skipahead_subsequence takes a state of MRG32k3a"):
        rm.skipahead_subsequence(1, s)
    with pytest.raises(TypeError, match="state must be one element of a cuRAND states array"):
        rm.rand(np.zeros(3))
    with pytest.raises(ValueError, match="lambda_ must be positive"):
        rm.poisson(s, 0.0)
    with pytest.raises(TypeError, match="lambda_ must be a real number"):
        rm.poisson(s, "3")
    q = _state("Sobol32")
    with pytest.raises(ValueError, match="direction_vectors must hold 32 direction numbers"):
        rm.init(np.zeros(31, np.uint32), 0, q)
    with pytest.raises(TypeError, match="direction_vectors must be an array of uint32"):
        rm.init(np.zeros(32, np.uint64), 0, q)
    with pytest.raises(ValueError, match="bits must be 32 or 64"):
        rm.host_direction_vectors(16)
    with pytest.raises(TypeError, match=r"mean must be a real number \(float\)"):
        rm.log_normal(s, "0", 1.0)
    with pytest.raises(TypeError, match=r"stddev must be a real number \(double\)"):
        rm.log_normal_double(s, 0.0, None)
    with pytest.raises(TypeError, match="n must be an integer"):
        rm.skipahead(2.0, s)


def test_sobol_direction_vectors_as_a_pointer():
    """Like the C pointer (and nvmath-python's ffi.from_buffer(vectors[d:])): the first 32/64
    numbers in memory order; vectors[d:] of the 2-D table is dimension d."""
    table = rm.host_direction_vectors(64, True)[:10]
    a, b = _state("Sobol64"), _state("Sobol64")
    rm.init(table[4:], 77, 5, a)
    rm.init(np.ascontiguousarray(table[4]), 77, 5, b)
    assert a.tobytes() == b.tobytes()


def test_generator_tag_in_dtype_metadata():
    """A states dtype may name its generator (metadata={"generator": ...}): then the scrambled
    Sobol states, whose members are the plain ones', are told apart and init's form is checked."""
    base = STATE_DTYPES["Sobol32"]
    tagged = np.dtype(base, metadata={"generator": "ScrambledSobol32"})
    s = np.zeros(1, tagged)[0]
    assert rm.generator_of(s) == "Sobol32"
    dv = rm.host_direction_vectors(32, True)[2]
    with pytest.raises(TypeError, match=r"init\(\) of a ScrambledSobol32 state takes \(direction_vectors, scramble_c"):
        rm.init(dv, 0, s)
    rm.init(dv, 5, 0, s)
    assert rm.rand(s) == 5
    plain = np.zeros(1, np.dtype(base, metadata={"generator": "Sobol32"}))[0]
    with pytest.raises(TypeError, match=r"init\(\) of a Sobol32 state takes \(direction_vectors, offset, state\)"):
        rm.init(dv, 5, 0, plain)
