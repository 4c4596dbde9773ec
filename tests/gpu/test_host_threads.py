# SPDX-License-Identifier: Apache-2.0
"""matmul() and Matmul from many threads at once, each on its own CuPy stream, while other
threads clear the plan cache; every result is checked against NumPy in float64.

Before the plan cache checked plans out exclusively, threads with the same shapes shared one
cached plan (pointers swapped under a running call, results computed from another thread's
operands) and clear_plan_cache() could free a plan during a call.
"""

import importlib
import threading
import time

import numpy as np
import pytest

from nvmath_host import Matmul, MatmulEpilog, matmul
from nvmath_host import _cublaslt as lt

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")
mm_mod = importlib.import_module("nvmath_host._function")  # the plan cache
E = MatmulEpilog
N_THREADS = 8
ITERATIONS = 150
M, K, N = 96, 64, 80


def rel_err(got, want):
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert not np.isnan(got).any(), "NaN in the result"
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def test_threads_share_no_plan_and_survive_cache_clears():
    mm_mod.clear_plan_cache()
    start = threading.Barrier(N_THREADS + 1)
    done = threading.Event()
    failures: list = []
    checked = [0] * N_THREADS

    def worker(i):
        try:
            rng = np.random.default_rng(1000 + i)
            stream = cp.cuda.Stream(non_blocking=True)
            with stream:  # CuPy's current stream is per thread
                # one stateful Matmul per thread, same shapes as everyone's matmul() calls
                a0 = cp.asarray(rng.standard_normal((M, K)).astype(np.float32))
                b0 = cp.asarray(rng.standard_normal((K, N)).astype(np.float32))
                bias0 = cp.asarray(rng.standard_normal(N).astype(np.float32))
                mm = Matmul(a0, b0)
                mm.plan(epilog=E.RELU_BIAS, epilog_inputs={"bias": bias0})
                start.wait()
                for it in range(ITERATIONS):
                    ah = rng.standard_normal((M, K)).astype(np.float32)
                    bh = rng.standard_normal((K, N)).astype(np.float32)
                    biash = rng.standard_normal(N).astype(np.float32)
                    a, b, bias = cp.asarray(ah), cp.asarray(bh), cp.asarray(biash)
                    want = np.maximum(ah.astype(np.float64) @ bh + biash, 0)
                    # the function form: explicit stream or the thread's current one, the
                    # epilog by member or by name
                    if it % 2:
                        d = matmul(
                            a, b, epilog=E.RELU_BIAS, epilog_inputs={"bias": bias}, stream=stream
                        )
                    else:
                        d = matmul(a, b, epilog="relu_bias", epilog_inputs={"bias": bias})
                    # the plain matmul (another key), and the stateful Matmul
                    d2 = matmul(a, b, alpha=2.0, stream=stream)
                    mm.reset_operands(a=a, b=b, epilog_inputs={"bias": bias})
                    d3 = mm.execute(stream=stream)
                    for name, got, ref in (
                        ("matmul RELU_BIAS", d, want),
                        ("matmul alpha=2", d2, 2.0 * (ah.astype(np.float64) @ bh)),
                        ("Matmul.execute", d3, want),
                    ):
                        err = rel_err(got.get(), ref)  # .get() waits for this thread's stream
                        if err > 2e-5:
                            failures.append((i, it, name, err))
                    checked[i] += 3
                mm.free()
        except BaseException as e:  # reported by the main thread
            failures.append((i, "exception", repr(e)))
            start.abort()

    def clearer():
        start.wait()
        while not done.is_set():
            mm_mod.clear_plan_cache()
            time.sleep(0.002)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(N_THREADS)]
    c = threading.Thread(target=clearer)
    for t in threads + [c]:
        t.start()
    for t in threads:
        t.join()
    done.set()
    c.join()
    mm_mod.clear_plan_cache()
    cp.cuda.Device().synchronize()
    assert failures == [], failures[:10]
    assert checked == [3 * ITERATIONS] * N_THREADS
    assert mm_mod.plan_cache_info()["size"] == 0


def test_threads_reuse_cached_plans_without_replanning(monkeypatch):
    """Without clears, N threads on N streams settle on N plans: no re-planning per call."""
    mm_mod.clear_plan_cache()
    calls = []
    real = lt.heuristic
    monkeypatch.setattr(lt, "heuristic", lambda *a: calls.append(1) or real(*a))
    start = threading.Barrier(N_THREADS)
    failures: list = []

    def worker(i):
        try:
            rng = np.random.default_rng(i)
            stream = cp.cuda.Stream(non_blocking=True)
            with stream:
                start.wait()
                for it in range(40):
                    ah = rng.standard_normal((M, K)).astype(np.float32)
                    bh = rng.standard_normal((K, N)).astype(np.float32)
                    d = matmul(cp.asarray(ah), cp.asarray(bh))
                    err = rel_err(d.get(), ah.astype(np.float64) @ bh)
                    if err > 2e-5:
                        failures.append((i, it, err))
        except BaseException as e:
            failures.append((i, "exception", repr(e)))
            start.abort()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(N_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == [], failures[:10]
    # one plan per stream (a thread's calls never overlap each other)
    assert len(calls) == N_THREADS
    assert mm_mod.plan_cache_info()["size"] == N_THREADS
    mm_mod.clear_plan_cache()
