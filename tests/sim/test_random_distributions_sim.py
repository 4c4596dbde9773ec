# SPDX-License-Identifier: Apache-2.0
"""The simulator's cuRAND distributions (nvmath_device._random_math): statistics with fixed seeds
(mean, variance, Kolmogorov-Smirnov or chi-square with scipy; deterministic, they cannot flake),
Box-Muller caching as curand_kernel.h does it, and the measured accuracy of the float formulas.

Accuracy. uniform* are the device's bits (tests/sim/test_random_generators_sim.py). The device's
Box-Muller uses logf (1 ulp), sqrtf (correctly rounded), __sincosf (absolute error ~2**-21.4)
and, in double, log/sqrt/sincospi (1-2 ulps); here each step is float64 rounded to the device's
precision. The tests below measure this module against a float64 evaluation of the same formula
from the same raw bits: float Box-Muller within 2 ulps of the float32-rounded reference,
double within 4 ulps (relative to the value), log-normal float within 3 ulps. A device value
differs from the simulator's by at most those bounds plus the device's own errors (for the float
forms mostly __sincosf's absolute 2**-21.4 times the radius).
"""

import math

import numpy as np
import pytest

from nvmath_device import _random_math as rm
from nvmath_device._random_states import STATE_DTYPES

stats = pytest.importorskip("scipy.stats")  # scipy is in the project's test environment

PSEUDO = ["XORWOW", "Philox4_32_10", "MRG32k3a"]


def _state(kind, seed=2024, sub=0, offset=0):
    s = np.zeros(1, STATE_DTYPES[kind])[0]
    if kind.startswith("Sobol") or kind.startswith("ScrambledSobol"):
        bits = 64 if kind.endswith("64") else 32
        dv = rm.host_direction_vectors(bits, kind.startswith("Scrambled"))[seed % 100]
        if kind.startswith("Scrambled"):
            rm.init(dv, int(rm.host_scramble_constants(bits)[seed % 100]), offset, s)
        else:
            rm.init(dv, offset, s)
    else:
        rm.init(seed, sub, offset, s)
    return s


def _draw(kind, fn, n, *args, per=1):
    s = _state(kind)
    out = []
    for _ in range(n // per):
        v = fn(s, *args)
        out.extend(v if per > 1 else [v])
    return np.array(out, dtype=np.float64)


N = 4000
P_MIN = 1e-3  # fixed seeds: the p-values below are deterministic; this only names the bar


# ------------------------------------------------------------------ uniform

@pytest.mark.parametrize("kind", PSEUDO + ["Sobol32", "Sobol64", "ScrambledSobol32", "ScrambledSobol64"])
@pytest.mark.parametrize("fn", [rm.uniform, rm.uniform_double])
def test_uniform_is_uniform_on_0_1(kind, fn):
    x = _draw(kind, fn, N)
    assert x.min() > 0 and x.max() <= 1
    assert stats.kstest(x, "uniform").pvalue > P_MIN
    assert abs(x.mean() - 0.5) < 0.02 and abs(x.var() - 1 / 12) < 0.01


@pytest.mark.parametrize("fn,per", [(rm.uniform4, 4), (rm.uniform2_double, 2)])
def test_philox_vector_uniforms(fn, per):
    x = _draw("Philox4_32_10", fn, N, per=per)
    assert stats.kstest(x, "uniform").pvalue > P_MIN


# ------------------------------------------------------------------ normal

NORMAL_FORMS = [(k, rm.normal, 1) for k in PSEUDO] + [(k, rm.normal_double, 1) for k in PSEUDO] + \
    [(k, rm.normal2, 2) for k in PSEUDO] + [(k, rm.normal2_double, 2) for k in PSEUDO] + \
    [("Philox4_32_10", rm.normal4, 4)] + \
    [(k, f, 1) for k in ("Sobol32", "Sobol64", "ScrambledSobol32", "ScrambledSobol64")
     for f in (rm.normal, rm.normal_double)]


@pytest.mark.parametrize("kind,fn,per", NORMAL_FORMS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_normal_is_standard_normal(kind, fn, per):
    z = _draw(kind, fn, N, per=per)
    assert stats.kstest(z, "norm").pvalue > P_MIN
    assert abs(z.mean()) < 0.06 and abs(z.std() - 1) < 0.05


@pytest.mark.parametrize("kind,fn,per", [(k, f, p) for k, f, p in NORMAL_FORMS],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_log_normal_matches_its_normal(kind, fn, per):
    """log_normal*(state, m, s) == exp(m + s * normal*) drawn from the same state (the caching
    flag differs, the draws are the same)."""
    name = fn.__name__
    lfn = getattr(rm, "log_" + name)
    a, b = _state(kind), _state(kind)
    m, sd = 0.5, 0.25
    for _ in range(50):
        z = fn(a)
        y = lfn(b, m, sd)
        z = list(z) if per > 1 else [z]
        y = list(y) if per > 1 else [y]
        ref = [math.exp(m + sd * float(v)) for v in z]
        tol = 4e-7 if "double" not in name else 1e-15
        assert np.allclose(y, ref, rtol=tol, atol=0), (name, y, ref)


@pytest.mark.parametrize("kind", PSEUDO + ["Sobol32"])
def test_log_normal_distribution(kind):
    y = _draw(kind, rm.log_normal, N, 0.5, 0.25)
    assert stats.kstest(y, "lognorm", args=(0.25, 0, math.exp(0.5))).pvalue > P_MIN


@pytest.mark.parametrize("kind", PSEUDO)
def test_box_muller_caching_as_curand(kind):
    """normal() computes a pair, returns the first and caches the second (boxmuller_flag = 1);
    the next call returns the cached one and clears the flag. The same holds for the double
    forms (boxmuller_flag_double) and log-normal (flag 2)."""
    s = _state(kind)
    pair = _state(kind)
    a, b = rm.normal2(pair)
    assert rm.normal(s) == a and s["boxmuller_flag"] == 1 and s["boxmuller_extra"] == b
    before = s.tobytes()
    assert rm.normal(s) == b and s["boxmuller_flag"] == 0
    assert s.tobytes() != before and s["v" if kind == "XORWOW" else ("ctr" if kind != "MRG32k3a" else "s1")].tobytes() == \
        np.frombuffer(before, STATE_DTYPES[kind])[0]["v" if kind == "XORWOW" else ("ctr" if kind != "MRG32k3a" else "s1")].tobytes()
    # the generator's position is that of the pair's
    assert rm.rand(s) == rm.rand(pair)
    # the double cache is separate
    d = _state(kind)
    d2 = _state(kind)
    x, y = rm.normal2_double(d2)
    assert rm.normal_double(d) == x and d["boxmuller_flag_double"] == 1 and d["boxmuller_flag"] == 0
    assert rm.normal_double(d) == y and d["boxmuller_flag_double"] == 0
    # a normal() cache is not a log_normal() one: flag 1 != 2, so log_normal draws a new pair
    e = _state(kind)
    rm.normal(e)
    rm.log_normal(e, 0.0, 1.0)
    assert e["boxmuller_flag"] == 2


def test_philox_normal_double_uses_one_rand4():
    s = _state("Philox4_32_10")
    t = _state("Philox4_32_10")
    rm.normal_double(s)
    rm.rand4(t)
    assert s["ctr"].tobytes() == t["ctr"].tobytes() and s["STATE"] == t["STATE"]


# ------------------------------------------------------------------ accuracy against float64

def _ulps32(got, ref):
    ref32 = np.float32(ref)
    ulp = np.spacing(np.abs(ref32)).astype(np.float64)
    return abs(float(got) - ref) / max(ulp, np.spacing(np.float32(1e-30)))


def test_float_box_muller_within_2_ulps_of_float64():
    worst = 0.0
    rng = np.random.default_rng(0)
    xs = rng.integers(0, 2**32, size=(20000, 2), dtype=np.uint64)
    for x, y in xs.tolist():
        u = np.float32(np.float32(x) * rm.CURAND_2POW32_INV + rm.CURAND_2POW32_INV / np.float32(2))
        v = rm.fmaf(np.float32(y), rm.CURAND_2POW32_INV_2PI, rm.CURAND_2POW32_INV_2PI / np.float32(2))
        r = math.sqrt(-2.0 * math.log(float(u)))
        a, b = rm._box_muller(x, y)
        worst = max(worst, _ulps32(a, r * math.sin(float(v))), _ulps32(b, r * math.cos(float(v))))
    assert worst <= 2.5, worst  # measured: 2.005


def test_double_box_muller_within_4_ulps_of_float64():
    """Reference in x87 long double (64-bit significand), so that its own pi * v is exact enough."""
    pi = np.longdouble("3.14159265358979323846264338327950288")
    worst = 0.0
    rng = np.random.default_rng(1)
    xs = rng.integers(0, 2**32, size=(20000, 4), dtype=np.uint64)
    for x0, x1, y0, y1 in xs.tolist():
        u = (x0 ^ (x1 << 21)) * 2.0**-53 + 2.0**-54
        v = (y0 ^ (y1 << 21)) * 2.0**-52 + 2.0**-53
        r = np.sqrt(np.longdouble(-2.0) * np.log(np.longdouble(u)))
        a, b = rm._box_muller_double(x0, x1, y0, y1)
        for got, ref in ((a, r * np.sin(pi * np.longdouble(v))), (b, r * np.cos(pi * np.longdouble(v)))):
            if abs(ref) > 1e-2:  # the reference's own pi * v rounding matters near the zeros
                worst = max(worst, float(abs(np.longdouble(got) - ref)) / np.spacing(abs(float(ref))))
    assert worst <= 4.0, worst


def test_sobol_inverse_cdf_matches_scipy():
    """curand's Sobol normal: -sqrt(2) erfcinv(2p) (symmetrized) == the normal quantile of p."""
    for x in [0, 1, 12345, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 2, 2**32 - 1, 3_000_000_000]:
        z = rm._normal_icdf_double(x)
        xx, sign = (x, 1.0) if x <= 2**31 else (2**32 - 1 - x, -1.0)
        p = xx * 2.0**-32 + 2.0**-33
        assert z == pytest.approx(sign * stats.norm.ppf(p), rel=1e-13, abs=1e-300)
        # float: p is rounded to float32 first, as on the device (2**31 - 1 gives p = 0.5, z = 0)
        p32 = float(np.float32(np.float32(xx) * np.float32(2.0**-32) + np.float32(2.0**-33)))
        ref = sign * stats.norm.ppf(p32)
        assert abs(float(rm._normal_icdf(x)) - ref) <= 1.5 * np.spacing(np.float32(abs(ref)))


def test_fma_helpers_round_once():
    """fmaf/fma64 (the device's contracted a * b + c) against exact rational arithmetic, with
    random operands and with float32 ties constructed so that a double sum would round wrong."""
    from fractions import Fraction

    def exact32(a, b, c):
        q = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
        r = np.float32(float(q))
        best = min((r, np.nextafter(r, np.float32(np.inf)), np.nextafter(r, np.float32(-np.inf))),
                   key=lambda x: (abs(Fraction(float(x)) - q), int(np.float32(x).view(np.uint32)) & 1))
        return best

    rng = np.random.default_rng(3)
    trip = (rng.standard_normal((3000, 3)) * 10.0 ** rng.integers(-3, 4, (3000, 3))).astype(np.float32)
    cases = [tuple(t) for t in trip]
    # float32 ties a double sum lands on: a * b = 64 -/+ 2**-40, c = 2**30 + 128 / 2**30 + 384; the
    # exact sums lie just below / above the midpoint, whose even neighbour is the wrong answer
    up, dn = np.float32(8 * (1 + 2.0**-23)), np.float32(8 * (1 - 2.0**-23))
    ties = [(up, dn, np.float32(2.0**30 + 128)), (-up, dn, np.float32(2.0**30 + 384))]
    for a, b, c in ties:
        assert np.float32(float(a) * float(b) + float(c)) != exact32(a, b, c)  # double rounding errs
    cases += ties
    for a, b, c in cases:
        assert rm.fmaf(a, b, c) == exact32(a, b, c), (a, b, c)
    d = rng.standard_normal((2000, 3)) * 10.0 ** rng.integers(-5, 6, (2000, 3))
    for a, b, c in d.tolist():
        assert rm.fma64(a, b, c) == float(Fraction(a) * Fraction(b) + Fraction(c))
    assert rm.fma64(1 + 2.0**-30, 1 - 2.0**-30, -1.0) == -(2.0**-60)  # a * b + c would give 0


# ------------------------------------------------------------------ Poisson

@pytest.mark.parametrize("kind", PSEUDO)
@pytest.mark.parametrize("lam", [0.5, 3.5, 40.0, 100.0, 1500.0, 5000.0])
def test_poisson_moments(kind, lam):
    """Knuth below 64, the gammainc rejection method from 64 to 4000, a normal approximation
    above: mean and variance lambda."""
    n = 1500
    k = _draw(kind, rm.poisson, n, lam)
    assert np.all(k == np.floor(k)) and k.min() >= 0
    se = math.sqrt(lam / n)
    assert abs(k.mean() - lam) < 4.5 * se, (k.mean(), lam)
    assert abs(k.var() / lam - 1) < 0.15, (k.var(), lam)


def test_poisson_small_lambda_chi_square():
    lam = 3.5
    k = _draw("Philox4_32_10", rm.poisson4, 8000, lam, per=4).astype(int)
    counts = np.bincount(k, minlength=12)[:12]
    probs = stats.poisson.pmf(np.arange(12), lam)
    counts = np.append(counts, len(k) - counts.sum())
    probs = np.append(probs, 1 - probs.sum())
    assert stats.chisquare(counts, probs * len(k)).pvalue > P_MIN


@pytest.mark.parametrize("lam", [3.5, 300.0, 6000.0])
def test_philox_poisson4(lam):
    k = _draw("Philox4_32_10", rm.poisson4, 2000, lam, per=4)
    assert abs(k.mean() - lam) < 4.5 * math.sqrt(lam / len(k))


@pytest.mark.parametrize("kind", ["Sobol32", "Sobol64", "ScrambledSobol32"])
@pytest.mark.parametrize("lam", [2.0, 30.0, 2000.0])
def test_sobol_poisson(kind, lam):
    """Sobol states: inverse CDF (one draw per value) below 1000, the normal approximation above;
    a quasi-random sequence gives the mean with far less than Monte Carlo error."""
    k = _draw(kind, rm.poisson, 2048, lam)
    assert abs(k.mean() - lam) < 0.02 * lam + 0.05
    assert abs(k.var() / lam - 1) < 0.1


def test_poisson_knuth_uses_the_uniform_draws_of_curand():
    """curand_poisson_knuth: p = expf(lambda), multiplied by uniforms while p > 1; k draws + 1."""
    s = _state("XORWOW")
    t = _state("XORWOW")
    k = rm.poisson(s, 2.0)
    p = np.float32(math.exp(2.0))
    used = 0
    while True:
        used += 1
        p = np.float32(p * rm.uniform(t))
        if not p > 1.0:
            break
    assert k == used - 1 and s.tobytes() == t.tobytes()
