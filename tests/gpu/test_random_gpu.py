# SPDX-License-Identifier: Apache-2.0
"""nvmath_device.random on the GPU against the NumPy reference of ``nvmath_device._random_math``
(the simulator's implementation; it imports only NumPy, so this GPU process uses it without the
simulator).

Per generator: ``init`` leaves every state member the reference computes (bit for bit); each
function, called ``REPS`` times per thread, gives the reference's values, raw bits (``rand``,
``rand4``) and uniforms bit for bit, normals / log-normals within the device intrinsics' error
bounds, Poisson counts equal (but for the rare draw whose rejection test lands within those
errors); the states after the draws equal the reference's; the skipaheads move the states as the
reference does.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from nvmath_device import _random_math as M
from nvmath_device import random
from nvmath_device._random_states import FUNCTIONS, GENERATORS, INIT_PARAMS, STATE_DTYPES

pytestmark = pytest.mark.gpu

N = 96  # threads (states): one block of 64 and a partial second one
REPS = 5  # calls per thread (normals: Box-Muller's cached second value is used)
SEED = 0x1234ABCD5678
OFFSET = 3
SOBOL_OFFSET = 12345  # past the first points, which many dimensions share
PSEUDO = ("XORWOW", "Philox4_32_10", "MRG32k3a")
_EXTRA = ("boxmuller_extra", "boxmuller_extra_double")  # garbage until a Box-Muller pair is cached


# ------------------------------------------------------------------------------ kernels
def _init_kernel(generator):
    kind = INIT_PARAMS[generator]
    if kind[0][0] == "seed":
        @cuda.jit
        def k(states, seed, offset):
            i = cuda.grid(1)
            if i < states.shape[0]:
                random.init(seed, i, offset, states[i])
    elif len(kind) == 2:
        @cuda.jit
        def k(dirs, states, offset):
            i = cuda.grid(1)
            if i < states.shape[0]:
                random.init(dirs[i], offset, states[i])
    else:
        @cuda.jit
        def k(dirs, consts, states, offset):
            i = cuda.grid(1)
            if i < states.shape[0]:
                random.init(dirs[i], consts[i], offset, states[i])
    return k


def _draw_kernel(fname):
    f = getattr(random, fname)
    nargs = len(FUNCTIONS[fname].params)
    if nargs == 0:
        @cuda.jit(device=True)
        def call(s, a, b):
            return f(s)
    elif nargs == 1:
        @cuda.jit(device=True)
        def call(s, a, b):
            return f(s, a)
    else:
        @cuda.jit(device=True)
        def call(s, a, b):
            return f(s, a, b)

    width = _width(fname, "Philox4_32_10")
    if width == 1:
        @cuda.jit
        def k(states, out, a, b):
            i = cuda.grid(1)
            if i < out.shape[0]:
                for r in range(out.shape[1]):
                    out[i, r] = call(states[i], a, b)
    elif width == 2:
        @cuda.jit
        def k(states, out, a, b):
            i = cuda.grid(1)
            if i < out.shape[0]:
                for r in range(out.shape[1]):
                    v = call(states[i], a, b)
                    out[i, r, 0] = v.x
                    out[i, r, 1] = v.y
    else:
        @cuda.jit
        def k(states, out, a, b):
            i = cuda.grid(1)
            if i < out.shape[0]:
                for r in range(out.shape[1]):
                    v = call(states[i], a, b)
                    out[i, r, 0] = v.x
                    out[i, r, 1] = v.y
                    out[i, r, 2] = v.z
                    out[i, r, 3] = v.w
    return k


def _skip_kernel(fname):
    f = getattr(random, fname)

    @cuda.jit
    def k(states, ns):
        i = cuda.grid(1)
        if i < states.shape[0]:
            f(ns[i], states[i])

    return k


_KERNELS: dict = {}


def kernel(kind, name):
    key = (kind, name)
    if key not in _KERNELS:
        _KERNELS[key] = {"init": _init_kernel, "draw": _draw_kernel, "skip": _skip_kernel}[kind](name)
    return _KERNELS[key]


def launch(k, *args):
    k[(N + 63) // 64, 64](*args)
    cuda.synchronize()


# ------------------------------------------------------------------------------ result shapes
def _result(fname, generator):
    return FUNCTIONS[fname].result[generator]


def _width(fname, generator):
    name = _result(fname, generator)
    return int(name[-1]) if "x" in name else 1


def _scalar_dtype(fname, generator):
    name = _result(fname, generator)
    return np.dtype(name.split("x")[0])


# ------------------------------------------------------------------------------ the reference
def _sobol_inputs(generator):
    bits = 32 if generator.endswith("32") else 64
    scrambled = generator.startswith("Scrambled")
    dirs = M.host_direction_vectors(bits, scrambled)[:N].copy()
    consts = M.host_scramble_constants(bits)[:N].copy() if scrambled else None
    return dirs, consts


def _init_both(generator):
    """(device States, host reference array) after init, and the host inputs used."""
    dtype = STATE_DTYPES[generator]
    states = random.STATES_CLASSES[generator](N)
    states.data.copy_to_device(np.zeros(N, dtype))
    host = np.zeros(N, dtype)
    if generator in PSEUDO:
        launch(kernel("init", generator), states, SEED, OFFSET)
        for i in range(N):
            M.init(SEED, i, OFFSET, host[i])
    else:
        dirs, consts = _sobol_inputs(generator)
        if consts is None:
            launch(kernel("init", generator), cuda.to_device(dirs), states, SOBOL_OFFSET)
            for i in range(N):
                M.init(dirs[i], SOBOL_OFFSET, host[i])
        else:
            launch(kernel("init", generator), cuda.to_device(dirs), cuda.to_device(consts), states, SOBOL_OFFSET)
            for i in range(N):
                M.init(dirs[i], consts[i], SOBOL_OFFSET, host[i])
    return states, host


def assert_states_equal(got, want, what):
    """Every member bit for bit, but the Box-Muller cache values (compared only where flagged)."""
    assert got.dtype == want.dtype
    for name in want.dtype.names:
        if name in _EXTRA:
            continue
        np.testing.assert_array_equal(got[name], want[name], err_msg=f"{what}: state member {name}")
    if "boxmuller_flag" in want.dtype.names:
        on = want["boxmuller_flag"] != 0
        close_f32(got["boxmuller_extra"][on], want["boxmuller_extra"][on], f"{what}: boxmuller_extra")
        on = want["boxmuller_flag_double"] != 0
        close_f64(got["boxmuller_extra_double"][on], want["boxmuller_extra_double"][on],
                  f"{what}: boxmuller_extra_double")


def bits_equal(got, want, what):
    assert got.dtype == want.dtype, what
    uint = np.dtype(f"u{got.dtype.itemsize}")
    np.testing.assert_array_equal(got.view(uint), want.view(uint), err_msg=what)


# The device's logf/__sincosf/expf/erfcinvf are within a few float32 ulps (__sincosf absolute
# ~2**-21.4, times Box-Muller's radius <= ~6.7 for 32-bit inputs); the reference rounds exact
# float64 values. Double precision: the device's log/sincospi/exp/erfcinv are within 1-2 ulps.
def close_f32(got, want, what, rel=2e-5):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    bad = ~(np.abs(got - want) <= rel * np.maximum(1.0, np.abs(want)))
    assert not bad.any(), f"{what}: {bad.sum()} of {bad.size} differ, e.g. {got[bad][:4]} vs {want[bad][:4]}"


def close_f64(got, want, what, rel=1e-12):
    close_f32(got, want, what, rel)


# ------------------------------------------------------------------------------ tests
@pytest.mark.parametrize("generator", GENERATORS)
def test_init_sets_the_reference_state(generator):
    states, host = _init_both(generator)
    assert_states_equal(states.copy_to_host(), host, f"{generator} init")
    # different threads got different states
    assert len({r.tobytes() for r in host}) == N


_CASES = [(g, f) for g in GENERATORS for f, fn in FUNCTIONS.items()
          if g in fn.generators and fn.state_first]
_EXACT = {"rand", "rand4", "uniform", "uniform_double", "uniform2_double", "uniform4"}
_ARGS = {"log_normal": (0.5, 0.75), "log_normal_double": (0.5, 0.75), "log_normal2": (0.5, 0.75),
         "log_normal2_double": (0.5, 0.75), "log_normal4": (0.5, 0.75)}


def _reference(fname, generator, host, args):
    want = np.zeros((N, REPS, _width(fname, generator)), _scalar_dtype(fname, generator))
    f = getattr(M, fname)
    for i in range(N):
        for r in range(REPS):
            v = f(host[i], *args)
            want[i, r] = list(v) if isinstance(v, (tuple, list)) else [v]
    return want


def _draw(fname, generator, args):
    states, host = _init_both(generator)
    width = _width(fname, generator)
    shape = (N, REPS) if width == 1 else (N, REPS, width)
    out = cuda.to_device(np.zeros(shape, _scalar_dtype(fname, generator)))
    a, b = (tuple(args) + (0.0, 0.0))[:2]
    launch(kernel("draw", fname), states, out, a, b)
    got = out.copy_to_host().reshape(N, REPS, width)
    want = _reference(fname, generator, host, args)
    return got, want, states.copy_to_host(), host


@pytest.mark.parametrize("generator, fname", [c for c in _CASES if c[1] not in ("poisson", "poisson4")])
def test_function_matches_the_reference(generator, fname):
    args = _ARGS.get(fname, ())
    got, want, got_states, want_states = _draw(fname, generator, args)
    what = f"random.{fname} on {generator}"
    # the values vary (the comparison can fail); unscrambled Sobol dimensions share many points
    assert len(np.unique(want)) > (REPS if generator in ("Sobol32", "Sobol64") else N)
    if fname in _EXACT:
        bits_equal(got, want, what)
    elif want.dtype == np.float32:
        close_f32(got, want, what)
    else:
        close_f64(got, want, what)
    assert_states_equal(got_states, want_states, f"{what}: states after {REPS} calls")


@pytest.mark.parametrize("lam", [4.0, 200.0, 5000.0])  # curand: Knuth (< 64), gammainc, normal approximation
@pytest.mark.parametrize("generator, fname", [c for c in _CASES if c[1] in ("poisson", "poisson4")])
def test_poisson_matches_the_reference(generator, fname, lam):
    got, want, got_states, want_states = _draw(fname, generator, (lam,))
    what = f"random.{fname}({lam}) on {generator}"
    # a thread whose rejection test landed within the intrinsics' error draws differently from
    # there on; all others agree exactly
    rows = (got == want).all(axis=(1, 2))
    assert rows.mean() >= 0.97, f"{what}: {np.count_nonzero(~rows)} of {N} threads differ"
    assert abs(float(got.mean()) - lam) < 0.1 * lam + 1  # and the counts are Poisson(lam)-like
    same = np.flatnonzero(rows)
    assert_states_equal(got_states[same], want_states[same], f"{what}: states after {REPS} calls")


_SKIPS = [(g, f) for g in GENERATORS for f, fn in FUNCTIONS.items() if g in fn.generators and not fn.state_first]


@pytest.mark.parametrize("generator, fname", _SKIPS)
def test_skipahead_moves_the_state_as_the_reference(generator, fname):
    states, host = _init_both(generator)
    word = np.uint32 if generator in ("Sobol32", "ScrambledSobol32") else np.uint64
    if fname == "skipahead":
        ns = (np.arange(N, dtype=np.uint64) * 977 + 1) << np.uint64(7 * (0 if word == np.uint32 else 4))
    else:
        ns = np.arange(N, dtype=np.uint64) % 5 + 1
    ns = ns.astype(word)
    launch(kernel("skip", fname), states, cuda.to_device(ns))
    for i in range(N):
        getattr(M, fname)(int(ns[i]), host[i])
    assert_states_equal(states.copy_to_host(), host, f"random.{fname} on {generator}")
    # and the next raw values agree too
    out = cuda.to_device(np.zeros((N, 2), np.uint64 if generator.endswith("Sobol64") else np.uint32))
    launch(kernel("draw", "rand"), states, out, 0.0, 0.0)
    want = np.array([[M.rand(host[i]) for _ in range(2)] for i in range(N)], dtype=out.dtype)
    np.testing.assert_array_equal(out.copy_to_host(), want)


def test_the_issue_example_runs():
    n = 256
    states = random.StatesPhilox4_32_10(n)

    @cuda.jit
    def setup(states):
        i = cuda.grid(1)
        random.init(1234, i, 0, states[i])

    @cuda.jit
    def noisy(x, states):
        i = cuda.grid(1)
        v = random.normal4(states[i])
        x[i] += v.x + v.y + v.z + v.w

    x = cuda.to_device(np.zeros(n, np.float32))
    setup[n // 64, 64](states)
    noisy[n // 64, 64](x, states)
    host = np.zeros(n, STATE_DTYPES["Philox4_32_10"])
    want = np.zeros(n, np.float32)
    for i in range(n):
        M.init(1234, i, 0, host[i])
        want[i] = np.float32(sum(np.float64(v) for v in M.normal4(host[i])))
    close_f32(x.copy_to_host(), want, "the issue's example", rel=1e-4)
