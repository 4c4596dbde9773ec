# SPDX-License-Identifier: Apache-2.0
"""Ground truth from NVIDIA's own implementation, without a GPU: libcurand's *host* generators
(curandCreateGeneratorHost, in the nvidia-curand wheel) run cuRAND's algorithms on the CPU. Their
documented orderings are made of device-API streams, so the simulator's streams
(nvmath_device._random_math: curand_init(seed, i, 0) then curand) must reproduce them:

* XORWOW and MRG32k3a, CURAND_ORDERING_PSEUDO_LEGACY: value k is value k // 4096 of the stream
  of subsequence k % 4096;
* Philox4_32_10, CURAND_ORDERING_PSEUDO_LEGACY: value k is value k % 4 of subsequence k // 4
  (found by matching; it is Philox's counter mode with the subsequence in the counter's high half);
* Sobol32/64 and their scrambled forms (CURAND_ORDERING_QUASI_DEFAULT, D dimensions, n points):
  value d * n + j is point j of dimension d, from libcurand's direction vectors (and scramble
  constants) for d;
* curandGenerateUniform applies the same (0, 1] mapping as curand_uniform.
"""

import ctypes

import numpy as np
import pytest

from nvmath_device import _random_math as rm
from nvmath_device._random_states import STATE_DTYPES

RNG = {"XORWOW": 101, "MRG32k3a": 121, "Philox4_32_10": 161,
       "Sobol32": 201, "ScrambledSobol32": 202, "Sobol64": 203, "ScrambledSobol64": 204}
ORDERING_PSEUDO_LEGACY = 103
THREADS = 4096


class HostGenerator:
    def __init__(self, kind):
        self.lib = rm._libcurand()
        self.handle = ctypes.c_void_p()
        self._check(self.lib.curandCreateGeneratorHost(ctypes.byref(self.handle), RNG[kind]), "create")

    def _check(self, status, what):
        assert status == 0, f"libcurand {what}: curandStatus {status}"

    def pseudo(self, seed, ordering=ORDERING_PSEUDO_LEGACY):
        self._check(self.lib.curandSetGeneratorOrdering(self.handle, ordering), "ordering")
        self._check(self.lib.curandSetPseudoRandomGeneratorSeed(self.handle, ctypes.c_ulonglong(seed)), "seed")
        return self

    def dimensions(self, d):
        self._check(self.lib.curandSetQuasiRandomGeneratorDimensions(self.handle, ctypes.c_uint(d)), "dims")
        return self

    def generate(self, n, dtype=np.uint32):
        out = np.zeros(n, dtype)
        fn = {np.dtype(np.uint32): self.lib.curandGenerate, np.dtype(np.uint64): self.lib.curandGenerateLongLong,
              np.dtype(np.float32): self.lib.curandGenerateUniform}[np.dtype(dtype)]
        self._check(fn(self.handle, out.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(n)), "generate")
        return out

    def close(self):
        self.lib.curandDestroyGenerator(self.handle)


def _stream_value(kind, seed, sub, index):
    s = np.zeros(1, STATE_DTYPES[kind])[0]
    rm.init(seed, sub, 0, s)
    rm.skipahead(index, s)
    return rm.rand(s)


SAMPLE = [*range(0, 40), *range(THREADS - 5, THREADS + 40), *range(3 * THREADS - 3, 3 * THREADS + 3), 5 * THREADS + 777]


@pytest.mark.parametrize("kind", ["XORWOW", "MRG32k3a"])
@pytest.mark.parametrize("seed", [0, 1234, 2**40 + 99])
def test_legacy_ordering_is_4096_device_streams(kind, seed):
    g = HostGenerator(kind).pseudo(seed)
    raw = g.generate(6 * THREADS)
    g.close()
    g = HostGenerator(kind).pseudo(seed)
    uni = g.generate(6 * THREADS, np.float32)
    g.close()
    for k in SAMPLE:
        assert raw[k] == _stream_value(kind, seed, k % THREADS, k // THREADS), k
    # curand_uniform's mapping (MRG32k3a: from the double before the 32-bit conversion)
    for k in SAMPLE[:20]:
        s = np.zeros(1, STATE_DTYPES[kind])[0]
        rm.init(seed, k % THREADS, 0, s)
        rm.skipahead(k // THREADS, s)
        assert uni[k] == rm.uniform(s), k


@pytest.mark.parametrize("seed", [0, 1234, 2**40 + 99])
def test_philox_legacy_ordering_is_blocks_of_subsequences(seed):
    g = HostGenerator("Philox4_32_10").pseudo(seed)
    raw = g.generate(4 * (THREADS + 50))
    g.close()
    for k in [*range(0, 64), *range(4 * THREADS - 8, 4 * THREADS + 200)]:
        assert raw[k] == _stream_value("Philox4_32_10", seed, k // 4, k % 4), k
        assert raw[k] == rm.philox4x32_10([0, 0, k // 4, 0], [seed & 0xFFFFFFFF, seed >> 32])[k % 4]


@pytest.mark.parametrize("kind", ["Sobol32", "ScrambledSobol32", "Sobol64", "ScrambledSobol64"])
def test_sobol_dimensions_are_device_streams(kind):
    bits = 64 if kind.endswith("64") else 32
    scrambled = kind.startswith("Scrambled")
    dims, points = 5, 300
    g = HostGenerator(kind).dimensions(dims)
    raw = g.generate(dims * points, np.uint64 if bits == 64 else np.uint32)
    g.close()
    vectors = rm.host_direction_vectors(bits, scrambled)
    consts = rm.host_scramble_constants(bits)
    for d in range(dims):
        s = np.zeros(1, STATE_DTYPES[kind])[0]
        if scrambled:
            rm.init(vectors[d], int(consts[d]), 0, s)
        else:
            rm.init(vectors[d], 0, s)
        got = [rm.rand(s) for _ in range(points)]
        np.testing.assert_array_equal(np.array(got, raw.dtype), raw[d * points:(d + 1) * points], err_msg=f"dim {d}")


# ------------------------------------------------------------------ normals of the host API

def _host_normals(kind, seed, n, double, log=False):
    g = HostGenerator(kind).pseudo(seed)
    out = np.zeros(n, np.float64 if double else np.float32)
    name = f"curandGenerate{'LogNormal' if log else 'Normal'}{'Double' if double else ''}"
    arg = ctypes.c_double if double else ctypes.c_float
    mean, sd = (0.25, 0.5) if log else (0.0, 1.0)
    g._check(getattr(g.lib, name)(g.handle, out.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(n),
                                  arg(mean), arg(sd)), name)
    g.close()
    return out


def _ulps(got, want):
    """Largest difference in ulps of max(|want|, 1) (the host's sin(v * pi) is inexact near the
    zeros, in absolute terms only)."""
    want = np.asarray(want)
    scale = np.maximum(np.abs(want), 1).astype(want.dtype)
    return float(np.max(np.abs(np.asarray(got, np.float64) - want) / np.spacing(scale)))


@pytest.mark.parametrize("kind", ["XORWOW", "MRG32k3a", "Philox4_32_10"])
@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("log", [False, True])
def test_host_api_normals_consume_the_streams_as_the_device_forms(kind, double, log):
    """libcurand's host normals are Box-Muller pairs of the same streams (XORWOW/MRG32k3a: pair p
    from subsequence p % 4096, its (p // 4096)-th normal2; Philox: 4 values per subsequence,
    normal4 or two normal2_double). The host computes with the CPU's libm, the simulator with
    float64 rounded to the device's precision: the values agree within a few ulps (float) and
    to rounding (double), which checks which raw values feed which normal."""
    seed = 31337
    n = 4 * THREADS + 64
    host = _host_normals(kind, seed, n, double, log)
    mean, sd = 0.25, 0.5
    per = 4 if kind == "Philox4_32_10" else 2
    picks = [*range(0, 24), *range(THREADS - 4, THREADS + 12), n // per - 1]
    worst = 0.0
    for p in picks:
        if kind == "Philox4_32_10":
            sub, calls = p, 0
        else:
            sub, calls = p % THREADS, p // THREADS
        s = np.zeros(1, STATE_DTYPES[kind])[0]
        rm.init(seed, sub, 0, s)
        for _ in range(calls + 1):
            if kind == "Philox4_32_10":
                if double:
                    v = [*rm.normal2_double(s), *rm.normal2_double(s)]
                else:
                    v = rm.normal4(s)
            else:
                v = rm.normal2_double(s) if double else rm.normal2(s)
        v = np.array(v, np.float64)
        if log:
            v = np.exp(mean + sd * v)
        want = v.astype(host.dtype)
        worst = max(worst, _ulps(host[per * p:per * p + per], want))
    # measured: float <= 1, double <= 5.4 (the host's sin(v * pi) rounds v * pi first)
    assert worst <= (8 if double else 2), worst


@pytest.mark.parametrize("kind", ["Sobol32", "ScrambledSobol32", "Sobol64", "ScrambledSobol64"])
@pytest.mark.parametrize("double", [False, True])
def test_host_api_sobol_normals_are_the_inverse_cdf_of_the_streams(kind, double):
    bits = 64 if kind.endswith("64") else 32
    scrambled = kind.startswith("Scrambled")
    dims, points = 3, 200
    g = HostGenerator(kind).dimensions(dims)
    out = np.zeros(dims * points, np.float64 if double else np.float32)
    name = "curandGenerateNormalDouble" if double else "curandGenerateNormal"
    arg = ctypes.c_double if double else ctypes.c_float
    g._check(getattr(g.lib, name)(g.handle, out.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(out.size),
                                  arg(0.0), arg(1.0)), name)
    g.close()
    vectors, consts = rm.host_direction_vectors(bits, scrambled), rm.host_scramble_constants(bits)
    worst = 0.0
    for d in range(dims):
        s = np.zeros(1, STATE_DTYPES[kind])[0]
        if scrambled:
            rm.init(vectors[d], int(consts[d]), 0, s)
        else:
            rm.init(vectors[d], 0, s)
        want = np.array([rm.normal_double(s) if double else rm.normal(s) for _ in range(points)], out.dtype)
        worst = max(worst, _ulps(out[d * points:(d + 1) * points], want))
    assert worst <= (8 if double else 4), worst
