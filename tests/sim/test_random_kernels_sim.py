# SPDX-License-Identifier: Apache-2.0
"""nvmath_device.random in kernels written as a user writes them (nvmath-python's curand examples:
a setup kernel calling random.init on states[i], then kernels drawing values), run under the
simulator and checked value by value against the NumPy model (nvmath_device._random_math) driven
on the host, and against the generators' defining properties.

The kernels live at module level so the recorder (NMDX_RECORD_SIM_KERNELS) can replay them for
sm_90 (python -m tests.sim_kernels_compile)."""

import cffi
import numpy as np
import pytest
from numba import cuda

from nvmath_device import _random_math as rm
from nvmath_device import random
from nvmath_device._random_states import STATE_DTYPES

BLOCKS, THREADS = 2, 16
N = BLOCKS * THREADS
ffi = cffi.FFI()


# ------------------------------------------------------------------ kernels

@cuda.jit
def setup_pseudo(states, seed):
    i = cuda.grid(1)
    if i < states.size:
        random.init(seed, i, 0, states[i])


@cuda.jit
def setup_sobol(vectors, states):
    i = cuda.grid(1)
    if i < states.size:
        random.init(vectors[i], 100, states[i])


@cuda.jit
def setup_scrambled_sobol(vectors, constants, states):
    i = cuda.grid(1)
    if i < states.size:
        random.init(vectors[i:], constants[i], 100, states[i])


@cuda.jit
def setup_scrambled_sobol_from_buffer(vectors, constants, states, ndim):
    """nvmath-python's curand_scrambled_sobol64 example's way: the direction vectors of
    dimension d as a pointer, ``ffi.from_buffer(flat_vectors[64 * d:])`` (cffi)."""
    i = cuda.grid(1)
    if i < states.size:
        random.init(ffi.from_buffer(vectors[ndim * i:]), constants[i], 100, states[i])


@cuda.jit
def draw_scalars(states, u32, f32, f64, pois, reps):
    i = cuda.grid(1)
    if i < states.size:
        for r in range(reps):
            u32[i, r] = random.rand(states[i])
            f32[i, 0, r] = random.uniform(states[i])
            f32[i, 1, r] = random.normal(states[i])
            f32[i, 2, r] = random.log_normal(states[i], 0.5, 0.25)
            f64[i, 0, r] = random.uniform_double(states[i])
            f64[i, 1, r] = random.normal_double(states[i])
            f64[i, 2, r] = random.log_normal_double(states[i], -1.0, 0.5)
            pois[i, 0, r] = random.poisson(states[i], 3.5)
            pois[i, 1, r] = random.poisson(states[i], 250.0)


@cuda.jit
def draw_pairs(states, f32, f64):
    i = cuda.grid(1)
    if i < states.size:
        a = random.normal2(states[i])
        f32[i, 0] = a.x
        f32[i, 1] = a.y
        b = random.log_normal2(states[i], 0.0, 1.0)
        f32[i, 2] = b.x
        f32[i, 3] = b.y
        c = random.normal2_double(states[i])
        f64[i, 0] = c.x
        f64[i, 1] = c.y
        d = random.log_normal2_double(states[i], 0.0, 1.0)
        f64[i, 2] = d.x
        f64[i, 3] = d.y


@cuda.jit
def draw_philox_vectors(states, u32, f32, f64, pois):
    i = cuda.grid(1)
    if i < states.size:
        r = random.rand4(states[i])
        u32[i, 0] = r.x
        u32[i, 1] = r.y
        u32[i, 2] = r.z
        u32[i, 3] = r.w
        v = random.uniform4(states[i])
        w = random.normal4(states[i])
        z = random.log_normal4(states[i], 0.0, 0.5)
        for k, vec in enumerate((v, w, z)):
            f32[i, k, 0] = vec.x
            f32[i, k, 1] = vec.y
            f32[i, k, 2] = vec.z
            f32[i, k, 3] = vec.w
        d = random.uniform2_double(states[i])
        f64[i, 0] = d.x
        f64[i, 1] = d.y
        p = random.poisson4(states[i], 7.0)
        pois[i, 0] = p.x
        pois[i, 1] = p.y
        pois[i, 2] = p.z
        pois[i, 3] = p.w


@cuda.jit
def skip_kernel(states, n, out):
    i = cuda.grid(1)
    if i < states.size:
        random.skipahead(n, states[i])
        out[i] = random.rand(states[i])


@cuda.jit
def skip_sequence_kernel(states, n, out):
    i = cuda.grid(1)
    if i < states.size:
        random.skipahead_sequence(n, states[i])
        out[i] = random.rand(states[i])


@cuda.jit
def skip_subsequence_kernel(states, n, out):
    i = cuda.grid(1)
    if i < states.size:
        random.skipahead_subsequence(n, states[i])
        out[i] = random.rand(states[i])


@cuda.jit
def sobol_draws(states, u, d, z):
    i = cuda.grid(1)
    if i < states.size:
        for r in range(u.shape[1]):
            u[i, r] = random.rand(states[i])
        d[i] = random.uniform_double(states[i])
        z[i] = random.normal(states[i])


@cuda.jit
def count_upper_half(states, n, result):
    """nvmath-python's curand_philox_uniform4 example, smaller."""
    i = cuda.grid(1)
    count = 0
    for _ in range(n // 4):
        v = random.uniform4(states[i])
        a = v.x, v.y, v.z, v.w
        for j in range(4):
            if a[j] > 0.5:
                count += 1
    result[i] += count


# ------------------------------------------------------------------ host references

def _host_states(generator, seed):
    st = np.zeros(N, STATE_DTYPES[generator])
    for i in range(N):
        rm.init(seed, i, 0, st[i])
    return st


def _same_states(a, b) -> bool:
    """Field by field (padding bytes aside)."""
    return a.dtype == b.dtype and all(np.array_equal(a[f], b[f]) for f in a.dtype.names)


def _states(cls, seed):
    states = cls(N)
    setup_pseudo[BLOCKS, THREADS](states, seed)
    return states


PSEUDO = {"XORWOW": random.StatesXORWOW, "Philox4_32_10": random.StatesPhilox4_32_10,
          "MRG32k3a": random.StatesMRG32k3a}


@pytest.mark.parametrize("generator", list(PSEUDO))
def test_setup_kernel_matches_curand_init(generator):
    states = _states(PSEUDO[generator], 1234)
    host = states.copy_to_host()
    assert host.dtype == STATE_DTYPES[generator]
    assert _same_states(host, _host_states(generator, 1234))


@pytest.mark.parametrize("generator", list(PSEUDO))
def test_scalar_draws_in_kernels(generator):
    reps = 3
    states = _states(PSEUDO[generator], 99)
    u32 = cuda.device_array((N, reps), np.uint32)
    f32 = cuda.device_array((N, 3, reps), np.float32)
    f64 = cuda.device_array((N, 3, reps), np.float64)
    pois = cuda.device_array((N, 2, reps), np.uint32)
    draw_scalars[BLOCKS, THREADS](states, u32, f32, f64, pois, reps)
    ref = _host_states(generator, 99)
    want_u = np.zeros((N, reps), np.uint32)
    want_f = np.zeros((N, 3, reps), np.float32)
    want_d = np.zeros((N, 3, reps), np.float64)
    want_p = np.zeros((N, 2, reps), np.uint32)
    for i in range(N):
        s = ref[i]
        for r in range(reps):
            want_u[i, r] = rm.rand(s)
            want_f[i, :, r] = rm.uniform(s), rm.normal(s), rm.log_normal(s, 0.5, 0.25)
            want_d[i, :, r] = rm.uniform_double(s), rm.normal_double(s), rm.log_normal_double(s, -1.0, 0.5)
            want_p[i, :, r] = rm.poisson(s, 3.5), rm.poisson(s, 250.0)
    np.testing.assert_array_equal(u32.copy_to_host(), want_u)
    np.testing.assert_array_equal(f32.copy_to_host(), want_f)
    np.testing.assert_array_equal(f64.copy_to_host(), want_d)
    np.testing.assert_array_equal(pois.copy_to_host(), want_p)
    assert _same_states(states.copy_to_host(), ref)  # the states advanced in place
    # and the values are what they claim to be
    f = f32.copy_to_host()
    assert np.all((f[:, 0] > 0) & (f[:, 0] <= 1)) and np.all(f[:, 2] > 0)


@pytest.mark.parametrize("generator", list(PSEUDO))
def test_pair_draws_in_kernels(generator):
    states = _states(PSEUDO[generator], 5)
    f32 = cuda.device_array((N, 4), np.float32)
    f64 = cuda.device_array((N, 4), np.float64)
    draw_pairs[BLOCKS, THREADS](states, f32, f64)
    ref = _host_states(generator, 5)
    want_f = np.zeros((N, 4), np.float32)
    want_d = np.zeros((N, 4), np.float64)
    for i in range(N):
        s = ref[i]
        want_f[i] = [*rm.normal2(s), *rm.log_normal2(s, 0.0, 1.0)]
        want_d[i] = [*rm.normal2_double(s), *rm.log_normal2_double(s, 0.0, 1.0)]
    np.testing.assert_array_equal(f32.copy_to_host(), want_f)
    np.testing.assert_array_equal(f64.copy_to_host(), want_d)


def test_philox_vector_draws_in_kernels():
    states = _states(random.StatesPhilox4_32_10, 2024)
    u32 = cuda.device_array((N, 4), np.uint32)
    f32 = cuda.device_array((N, 3, 4), np.float32)
    f64 = cuda.device_array((N, 2), np.float64)
    pois = cuda.device_array((N, 4), np.uint32)
    draw_philox_vectors[BLOCKS, THREADS](states, u32, f32, f64, pois)
    ref = _host_states("Philox4_32_10", 2024)
    for i in range(N):
        s = ref[i]
        assert list(u32.copy_to_host()[i]) == rm.rand4(s)
        np.testing.assert_array_equal(f32.copy_to_host()[i], np.array(
            [rm.uniform4(s), rm.normal4(s), rm.log_normal4(s, 0.0, 0.5)], np.float32))
        assert tuple(f64.copy_to_host()[i]) == rm.uniform2_double(s)
        assert list(pois.copy_to_host()[i]) == rm.poisson4(s, 7.0)
    # rand4 of thread i is block 0 of subsequence i (Philox counter mode, key = seed)
    assert list(u32.copy_to_host()[3]) == rm.philox4x32_10([0, 0, 3, 0], [2024, 0])


@pytest.mark.parametrize("generator", list(PSEUDO))
def test_skipahead_in_kernels(generator):
    a = _states(PSEUDO[generator], 7)
    out = cuda.device_array(N, np.uint32)
    skip_kernel[BLOCKS, THREADS](a, 1000, out)
    ref = _host_states(generator, 7)
    for i in range(N):
        for _ in range(1000):
            rm.rand(ref[i])
    assert list(out.copy_to_host()) == [rm.rand(ref[i]) for i in range(N)]


@pytest.mark.parametrize("generator", list(PSEUDO))
def test_skipahead_sequence_in_kernels(generator):
    """Thread i starts at subsequence i; skipahead_sequence(1) moves XORWOW/Philox to subsequence
    i + 1 (the sequence of XORWOW and Philox *is* its subsequence), MRG32k3a 2**127 ahead."""
    a = _states(PSEUDO[generator], 8)
    out = cuda.device_array(N, np.uint32)
    skip_sequence_kernel[BLOCKS, THREADS](a, 1, out)
    got = out.copy_to_host()
    if generator != "MRG32k3a":
        ref = _states(PSEUDO[generator], 8).copy_to_host()
        assert list(got[:-1]) == [rm.rand(ref[i]) for i in range(1, N)]
    else:
        ref = _host_states(generator, 8)
        for i in range(N):
            rm.skipahead_sequence(1, ref[i])
        assert list(got) == [rm.rand(ref[i]) for i in range(N)]


def test_skipahead_subsequence_in_kernels():
    a = _states(random.StatesMRG32k3a, 9)
    out = cuda.device_array(N, np.uint32)
    skip_subsequence_kernel[BLOCKS, THREADS](a, 1, out)
    ref = _states(random.StatesMRG32k3a, 9).copy_to_host()
    assert list(out.copy_to_host()[:-1]) == [rm.rand(ref[i]) for i in range(1, N)]


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("scrambled", [False, True])
def test_sobol_in_kernels(bits, scrambled):
    """Gray-code Sobol from libcurand's direction vectors (nvmath-python's random_helpers)."""
    vset = random.DirectionVectorSet[f"{'SCRAMBLED_' if scrambled else ''}DIRECTION_VECTORS_{bits}_JOEKUO6"]
    get = random.get_direction_vectors32 if bits == 32 else random.get_direction_vectors64
    host_vectors = get(vset, N)
    vectors = cuda.to_device(host_vectors)
    name = f"{'Scrambled' if scrambled else ''}Sobol{bits}"
    states = getattr(random, f"States{name}")(N)
    if scrambled:
        consts = (random.get_scramble_constants32 if bits == 32 else random.get_scramble_constants64)(N)
        setup_scrambled_sobol[BLOCKS, THREADS](vectors, cuda.to_device(consts), states)
    else:
        consts = np.zeros(N, np.uint32 if bits == 32 else np.uint64)
        setup_sobol[BLOCKS, THREADS](vectors, states)
    reps = 6
    u = cuda.device_array((N, reps), np.uint32 if bits == 32 else np.uint64)
    d = cuda.device_array(N, np.float64)
    z = cuda.device_array(N, np.float32)
    sobol_draws[BLOCKS, THREADS](states, u, d, z)
    got = u.copy_to_host()
    for i in range(N):
        dv, c = host_vectors[i], int(consts[i])
        want = []
        for n in range(100, 100 + reps):
            g, x = n ^ (n >> 1), c
            for k in range(bits):
                if g >> k & 1:
                    x ^= int(dv[k])
            want.append(x)
        assert [int(v) for v in got[i]] == want
        ref = np.zeros(1, STATE_DTYPES[name])[0]
        if scrambled:
            rm.init(host_vectors[i], c, 100 + reps, ref)
        else:
            rm.init(host_vectors[i], 100 + reps, ref)
        assert d.copy_to_host()[i] == rm.uniform_double(ref)
        assert z.copy_to_host()[i] == rm.normal(ref)


@pytest.mark.parametrize("bits", [32, 64])
def test_sobol_init_through_ffi_from_buffer(bits):
    """A pointer from cffi's ffi.from_buffer(array[k:]) is accepted where the direction-vector
    array is (the simulator patches cffi for its arrays): the same states as vectors[i]."""
    vset = random.DirectionVectorSet[f"SCRAMBLED_DIRECTION_VECTORS_{bits}_JOEKUO6"]
    get = random.get_direction_vectors32 if bits == 32 else random.get_direction_vectors64
    host_vectors = get(vset, N)
    consts = (random.get_scramble_constants32 if bits == 32 else random.get_scramble_constants64)(N)
    name = f"ScrambledSobol{bits}"
    by_row, by_ptr = (getattr(random, f"States{name}")(N) for _ in range(2))
    setup_scrambled_sobol[BLOCKS, THREADS](cuda.to_device(host_vectors), cuda.to_device(consts), by_row)
    setup_scrambled_sobol_from_buffer[BLOCKS, THREADS](cuda.to_device(host_vectors.ravel()), cuda.to_device(consts),
                                                       by_ptr, bits)
    a, b = by_row.copy_to_host(), by_ptr.copy_to_host()
    for field in a.dtype.names:
        np.testing.assert_array_equal(a[field], b[field], err_msg=field)
    assert len({bytes(r) for r in b}) == N  # each thread its own dimension


def test_nvmath_philox_uniform4_example():
    states = random.StatesPhilox4_32_10(N)
    setup_pseudo[BLOCKS, THREADS](states, 1234)
    results = cuda.to_device(np.zeros(N, dtype=np.int32))
    for _ in range(2):
        count_upper_half[BLOCKS, THREADS](states, 64, results)
    fraction = results.copy_to_host().sum() / (64 * N * 2)
    assert abs(fraction - 0.5) < 0.03
    want = 0
    ref = _host_states("Philox4_32_10", 1234)
    for i in range(N):
        for _ in range(2 * 16):
            want += sum(float(v) > 0.5 for v in rm.uniform4(ref[i]))
    assert results.copy_to_host().sum() == want


def test_wrong_generator_in_a_kernel_is_a_type_error():
    states = _states(random.StatesXORWOW, 1)
    u32 = cuda.device_array((N, 4), np.uint32)
    f32 = cuda.device_array((N, 3, 4), np.float32)
    f64 = cuda.device_array((N, 2), np.float64)
    pois = cuda.device_array((N, 4), np.uint32)
    with pytest.raises(TypeError, match="rand4 takes a state of Philox4_32_10, got a XORWOW state"):
        draw_philox_vectors[1, 1](states, u32, f32, f64, pois)


# ------------------------------------------------------------------ the same kernels for sm_90

def link_all_for_sm90() -> list[str]:
    """Link every kernel above, with the argument types its tests launch it with, to an sm_90
    cubin (nvmath_device.aot.compile_kernel; run without the simulator, no GPU needed).

    The simulator suite's recorder (NMDX_RECORD_SIM_KERNELS) cannot type a States* argument in
    the simulator's process, so it records none of these kernels; this links them directly."""
    from numba import types

    from nvmath_device import aot
    from nvmath_device._numba.random_numba import STATE_TYPES

    def arr(dtype, ndim):
        return types.Array(dtype, ndim, "C")

    def states(generator):  # what numba's typeof gives a States* array in a compiled kernel's launch
        return arr(STATE_TYPES[generator], 1)

    u32, u64, f32, f64, i64 = types.uint32, types.uint64, types.float32, types.float64, types.int64
    jobs = []
    for g in PSEUDO:
        jobs += [(setup_pseudo, (states(g), i64)),
                 (draw_scalars, (states(g), arr(u32, 2), arr(f32, 3), arr(f64, 3), arr(u32, 3), i64)),
                 (draw_pairs, (states(g), arr(f32, 2), arr(f64, 2))),
                 (skip_kernel, (states(g), i64, arr(u32, 1))),
                 (skip_sequence_kernel, (states(g), i64, arr(u32, 1)))]
    jobs += [(draw_philox_vectors, (states("Philox4_32_10"), arr(u32, 2), arr(f32, 3), arr(f64, 2), arr(u32, 2))),
             (skip_subsequence_kernel, (states("MRG32k3a"), i64, arr(u32, 1))),
             (count_upper_half, (states("Philox4_32_10"), i64, arr(types.int32, 1)))]
    for bits, word in ((32, u32), (64, u64)):
        for g in (f"Sobol{bits}", f"ScrambledSobol{bits}"):
            if g.startswith("Scrambled"):
                jobs.append((setup_scrambled_sobol, (arr(word, 2), arr(word, 1), states(g))))
                jobs.append((setup_scrambled_sobol_from_buffer, (arr(word, 1), arr(word, 1), states(g), i64)))
            else:
                jobs.append((setup_sobol, (arr(word, 2), states(g))))
            jobs.append((sobol_draws, (states(g), arr(word, 2), arr(f64, 1), arr(f32, 1))))
    done = []
    for kernel, argtypes in jobs:
        compiled = aot.compile_kernel(kernel, argtypes, sm=90)
        assert compiled.cubin, kernel
        done.append(f"{kernel.py_func.__name__}{argtypes}")
    return done


def test_these_kernels_link_for_sm90():
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "NMDX_RECORD_SIM_KERNELS")}
    code = ("import tests.sim.test_random_kernels_sim as k; done = k.link_all_for_sm90(); "
            "print('sm_90 linked:', len(done))")
    run = subprocess.run([sys.executable, "-c", code], cwd=repo, env=env, capture_output=True, text=True,
                         timeout=1200)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    assert "sm_90 linked: 28" in run.stdout, run.stdout
