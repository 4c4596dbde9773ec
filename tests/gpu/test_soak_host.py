# SPDX-License-Identifier: Apache-2.0
"""Soak: 10^4 Matmul plan/execute/free cycles and 10^4 matmul() calls leak neither host nor
device memory.

Host memory is the resident set (``/proc/self/statm``), device memory the used bytes of
``cudaMemGetInfo`` after CuPy's pools are emptied; both are read after a warm-up and around
each round of cycles (the device's in one of up to three rounds, other xdist workers allocating
beside us: :func:`tests.harness.soak_rounds`). The figures are printed with the tag
``SOAK host`` (``pytest -s``).
"""

import importlib

import numpy as np
import pytest

from nvmath_host import Matmul, MatmulEpilog, matmul
from tests.harness import soak_rounds

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")
mm_mod = importlib.import_module("nvmath_host._function")  # the plan cache
E = MatmulEpilog
CYCLES = 10_000
WARMUP = 300
RSS_LIMIT = 20 << 20
DEVICE_LIMIT = 16 << 20


def operands(m=64, k=64, n=64):
    rng = np.random.default_rng(5)
    ah = rng.standard_normal((m, k)).astype(np.float32)
    bh = rng.standard_normal((k, n)).astype(np.float32)
    biash = rng.standard_normal(n).astype(np.float32)
    want = np.maximum(ah.astype(np.float64) @ bh + biash, 0)
    return cp.asarray(ah), cp.asarray(bh), cp.asarray(biash), want


def check(d, want):
    got = d.get().astype(np.float64)
    assert float(np.abs(got - want).max() / np.abs(want).max()) < 2e-5


def soak(label, step, n=CYCLES):
    """``WARMUP`` steps, then rounds of ``n - WARMUP`` (:func:`tests.harness.soak_rounds`)."""
    for _ in range(WARMUP):
        step()

    def run_round():
        for _ in range(n - WARMUP):
            step()

    soak_rounds(f"host {label}, {n - WARMUP} cycles", run_round, RSS_LIMIT, DEVICE_LIMIT)


def test_soak_matmul_plan_execute_free():
    a, b, bias, want = operands()
    stream = cp.cuda.Stream(non_blocking=True)

    def cycle():
        mm = Matmul(a, b)
        mm.plan(epilog=E.RELU_AUX_BIAS, epilog_inputs={"bias": bias})
        d, aux = mm.execute(stream=stream)  # another stream than the workspace's: free syncs
        mm.free()
        return d

    check(cycle(), want)
    soak("Matmul plan/execute/free 64x64x64 fp32 RELU_AUX_BIAS", cycle)
    check(cycle(), want)


def test_soak_matmul_function_cached_and_cleared():
    a, b, bias, want = operands()
    mm_mod.clear_plan_cache()
    count = [0]

    def call():
        d = matmul(a, b, epilog=E.RELU_BIAS, epilog_inputs={"bias": bias})
        count[0] += 1
        if count[0] % 100 == 0:  # re-plan now and then: plans made and freed through the cache
            mm_mod.clear_plan_cache()
        return d

    check(call(), want)
    soak("matmul() 64x64x64 fp32 RELU_BIAS (cache cleared every 100 calls)", call)
    check(call(), want)
    mm_mod.clear_plan_cache()


def test_soak_matmul_function_new_arrays_each_call():
    """New operand arrays at every call (pointers swapped into the cached plan)."""
    a, b, bias, want = operands()
    mm_mod.clear_plan_cache()

    def call():
        return matmul(a.copy(), b.copy(), epilog="relu_bias", epilog_inputs={"bias": bias.copy()})

    check(call(), want)
    soak("matmul() 64x64x64 fp32 RELU_BIAS new arrays per call", call)
    assert mm_mod.plan_cache_info()["size"] == 1
    mm_mod.clear_plan_cache()
