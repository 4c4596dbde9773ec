# SPDX-License-Identifier: Apache-2.0
"""matmul()'s plan cache: plans are checked out exclusively and never freed while in use.

The cache itself (``_function.PlanCache``) is tested with stand-in plans; ``matmul()`` with a stand-in
``Matmul`` class (no GPU here) whose methods record whether two threads ever use one plan at
once or a plan is freed while a thread uses it.
"""

import importlib
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from nvmath_host import CPUExecutionWarning, _gpu, matmul

fn_mod = importlib.import_module("nvmath_host._function")


class Plan:
    """A stand-in plan: counts its frees."""

    def __init__(self, name=""):
        self.name = name
        self.freed = 0

    def free(self):
        self.freed += 1


def test_checkout_is_exclusive_and_checkin_returns():
    cache = fn_mod.PlanCache(4)
    plan, ticket = cache.checkout("k")
    assert plan is None  # empty: the caller builds one
    p = Plan()
    cache.checkin("k", p, ticket)
    got, t2 = cache.checkout("k")
    assert got is p
    # while p is out, nobody else gets it: a second caller builds its own
    other, t3 = cache.checkout("k")
    assert other is None
    q = Plan()
    cache.checkin("k", q, t3)
    cache.checkin("k", got, t2)
    assert cache.info()["size"] == 2 and cache.info()["keys"] == ["k", "k"]
    # two callers at once now both get a plan, each its own
    x, tx = cache.checkout("k")
    y, ty = cache.checkout("k")
    assert {x, y} == {p, q}
    assert cache.checkout("k")[0] is None
    cache.checkin("k", x, tx)
    cache.checkin("k", y, ty)
    assert p.freed == q.freed == 0


def test_clear_defers_the_free_of_a_checked_out_plan():
    cache = fn_mod.PlanCache(4)
    idle, busy = Plan("idle"), Plan("busy")
    _, t = cache.checkout("a")
    cache.checkin("a", idle, t)
    cache.checkin("b", busy, cache.checkout("b")[1])
    out, t_out = cache.checkout("b")
    assert out is busy
    cache.clear()
    assert idle.freed == 1
    assert busy.freed == 0  # in use: not freed under its user
    assert cache.info()["size"] == 0
    cache.checkin("b", busy, t_out)  # comes back after the clear: freed, not cached
    assert busy.freed == 1
    assert cache.info()["size"] == 0
    # a plan built after a checkout that preceded the clear is freed on return too
    none, t_old = cache.checkout("c")
    assert none is None
    cache.clear()
    fresh = Plan("fresh")
    cache.checkin("c", fresh, t_old)
    assert fresh.freed == 1 and cache.info()["size"] == 0
    # after the clear, checkouts are cached again
    p, t = cache.checkout("c")
    cache.checkin("c", Plan(), t)
    assert cache.info()["size"] == 1


def test_eviction_frees_idle_plans_oldest_first_never_a_checked_out_one():
    cache = fn_mod.PlanCache(2)
    plans = {k: Plan(k) for k in "abcd"}
    for k in "ab":
        cache.checkin(k, plans[k], cache.checkout(k)[1])
    out, t = cache.checkout("a")  # "a" is in use now
    assert out is plans["a"]
    cache.checkin("c", plans["c"], cache.checkout("c")[1])
    cache.checkin("d", plans["d"], cache.checkout("d")[1])  # over capacity: "b" goes
    assert plans["b"].freed == 1 and plans["a"].freed == 0
    assert cache.info()["keys"] == ["c", "d"]
    cache.checkin("a", out, t)  # back as the most recent: "c" goes
    assert plans["c"].freed == 1 and plans["a"].freed == 0
    assert cache.info()["keys"] == ["d", "a"]
    # a key used again moves to the end
    p, t = cache.checkout("d")
    cache.checkin("d", p, t)
    cache.checkin("e", Plan("e"), cache.checkout("e")[1])
    assert plans["a"].freed == 1 and plans["d"].freed == 0


def test_a_plan_comes_back_after_its_empty_entry_was_evicted():
    cache = fn_mod.PlanCache(1)
    pa, pb, pc = Plan("a"), Plan("b"), Plan("c")
    cache.checkin("a", pa, cache.checkout("a")[1])
    out, t = cache.checkout("a")  # "a"'s entry stays, empty, while pa is out
    assert out is pa and cache.info()["keys"] == []
    cache.checkin("b", pb, cache.checkout("b")[1])
    cache.checkin("c", pc, cache.checkout("c")[1])  # over capacity: "a"'s empty entry and pb go
    assert pb.freed == 1 and cache.info()["keys"] == ["c"]
    cache.checkin("a", out, t)  # its entry is gone: a new one, pa cached (not lost, not freed)
    assert pa.freed == 0 and pc.freed == 1 and cache.info()["keys"] == ["a"]
    assert cache.checkout("a")[0] is pa


def test_forget_drops_an_empty_entry_only():
    cache = fn_mod.PlanCache(4)
    p, q = Plan("p"), Plan("q")
    cache.checkin("k", p, cache.checkout("k")[1])
    out, t = cache.checkout("k")
    cache.forget(t)  # out will not come back
    assert len(cache._idle) == 0 and cache.info()["size"] == 0
    # with another plan of the key idle, the entry stays
    cache.checkin("k", p, cache.checkout("k")[1])
    _, t1 = cache.checkout("k")
    cache.checkin("k", q, cache.checkout("k")[1])
    cache.forget(t1)
    assert cache.info()["keys"] == ["k"] and cache.checkout("k")[0] is q
    assert p.freed == q.freed == 0


def test_free_errors_do_not_stop_the_other_frees():
    class Bad(Plan):
        def free(self):
            super().free()
            raise RuntimeError("boom")

    cache = fn_mod.PlanCache(4)
    bad, good = Bad(), Plan()
    cache.checkin("a", bad, cache.checkout("a")[1])
    cache.checkin("b", good, cache.checkout("b")[1])
    with pytest.raises(RuntimeError, match="boom"):
        cache.clear()
    assert bad.freed == good.freed == 1 and cache.info()["size"] == 0


class Checked:
    """A plan that fails the test if two threads use it at once or it is used/freed wrongly."""

    errors: list = []

    def __init__(self):
        self.user = None
        self.freed = 0

    def use(self):
        me = threading.get_ident()
        if self.freed:
            Checked.errors.append("used after free")
        if self.user is not None:
            Checked.errors.append("used by two threads at once")
        self.user = me
        time.sleep(0.0002)  # widen the window in which a second user would show
        if self.user != me:
            Checked.errors.append("another thread took it while in use")
        if self.freed:
            Checked.errors.append("freed while in use")
        self.user = None

    def free(self):
        if self.user is not None:
            Checked.errors.append("freed while in use")
        self.freed += 1


def _race(worker, clear, pause, nthreads=8):
    """``worker(i)`` in ``nthreads`` threads while another thread calls ``clear()`` every
    ``pause`` seconds until they are done."""
    stop = threading.Event()

    def clearer():
        while not stop.is_set():
            clear()
            time.sleep(pause)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(nthreads)]
    c = threading.Thread(target=clearer)
    c.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    c.join()


def test_threads_never_share_a_plan_and_clear_never_frees_one_in_use():
    Checked.errors = []
    cache = fn_mod.PlanCache(3)
    made = []
    made_lock = threading.Lock()

    def worker(i):
        for it in range(150):
            key = (i + it) % 4  # more keys than capacity: eviction runs too
            plan, ticket = cache.checkout(key)
            if plan is None:
                plan = Checked()
                with made_lock:
                    made.append(plan)
            plan.use()
            cache.checkin(key, plan, ticket)

    _race(worker, cache.clear, 0.0005)
    cache.clear()
    assert Checked.errors == []
    assert all(p.freed == 1 for p in made), sorted({p.freed for p in made})


# ----------------------------------------------------------------------------- through matmul()


class FakeCupy:
    """Looks like a cupy.ndarray to nvmath_host (module name + CAI + .device.id)."""

    __module__ = "cupy._core.fake"

    def __init__(self, shape, ptr):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": "<f4",
            "data": (ptr, False),
            "strides": None,
            "version": 3,
        }
        self.device = SimpleNamespace(id=0)


class FakeMatmul(Checked):
    """Stands in for Matmul in matmul(): its execute is a Checked use; returns a's pointer."""

    def __init__(self, a, b, c=None, **kw):
        super().__init__()
        self.ptr = a.__cuda_array_interface__["data"][0]

    def plan(self, *args, **kw):
        return []

    def _swap_pointers(self, oa, ob, oc, inputs, alpha, beta):
        if self.user is not None:
            Checked.errors.append("pointers swapped while another thread runs the plan")
        self.ptr = oa.ptr

    def _launch_and_report(self):
        ptr = self.ptr
        self.use()
        if self.ptr != ptr:
            Checked.errors.append("operand pointers changed during the launch")
        return ptr

    def execute(self, stream=None):  # the call of earlier versions
        return self._launch_and_report()

    def _run(self, stream, current):
        return self._launch_and_report()


def test_matmul_threads_each_get_their_own_plan(monkeypatch):
    """Threads calling matmul() with one shape and clear_plan_cache() at once: no plan is
    shared by two calls at a time or freed during one, and each call computes on its own
    operands (FAILS on the cache that only locked the dict lookup)."""
    monkeypatch.setattr(_gpu, "PRETEND", True)
    monkeypatch.setattr(fn_mod, "Matmul", FakeMatmul)
    fn_mod.clear_plan_cache()
    Checked.errors = []
    wrong = []

    def worker(i):
        for it in range(60):
            ptr = 0x7F0000000000 + ((i * 1000 + it) << 8)
            got = matmul(FakeCupy((8, 4), ptr), FakeCupy((4, 8), 0x7E0000000000), stream=7)
            if got != ptr:
                wrong.append((i, it))

    _race(worker, fn_mod.clear_plan_cache, 0.001)
    fn_mod.clear_plan_cache()
    assert Checked.errors == []
    assert wrong == []


def test_a_failed_call_frees_its_plan_and_caches_nothing(monkeypatch):
    class Failing(FakeMatmul):
        def _launch_and_report(self):
            raise RuntimeError("launch failed")

    monkeypatch.setattr(_gpu, "PRETEND", True)
    monkeypatch.setattr(fn_mod, "Matmul", Failing)
    fn_mod.clear_plan_cache()
    made = []
    monkeypatch.setattr(Failing, "plan", lambda self, *a, **k: made.append(self) or [])
    with pytest.raises(RuntimeError, match="launch failed"):
        matmul(FakeCupy((8, 4), 0x7F0000000000), FakeCupy((4, 8), 0x7E0000000000), stream=7)
    assert len(made) == 1 and made[0].freed == 1
    assert fn_mod.plan_cache_info()["size"] == 0


def test_plans_are_keyed_by_stream(monkeypatch):
    """A plan is reused only on the stream it ran on (its workspace is used in that order)."""
    monkeypatch.setattr(_gpu, "PRETEND", True)
    monkeypatch.setattr(fn_mod, "Matmul", FakeMatmul)
    fn_mod.clear_plan_cache()
    a, b = FakeCupy((8, 4), 0x7F0000000000), FakeCupy((4, 8), 0x7E0000000000)
    s1, s2 = 0x7001, 0x7002  # (no shape, stride or alignment of this key is either)
    for s in (s1, s2, s1, s2):
        matmul(a, b, stream=s)
    info = fn_mod.plan_cache_info()
    assert info["size"] == 2
    assert sorted([s for k in info["keys"] for s in (s1, s2) if s in k]) == [s1, s2]
    fn_mod.clear_plan_cache()


def test_numpy_operands_still_use_no_cache(monkeypatch):
    monkeypatch.setattr(_gpu, "PRETEND", False)
    fn_mod.clear_plan_cache()
    a = np.ones((4, 3), np.float32)
    with pytest.warns(CPUExecutionWarning):
        d = matmul(a, a.T.copy())
    np.testing.assert_array_equal(d, np.full((4, 4), 3, np.float32))
    assert fn_mod.plan_cache_info()["size"] == 0
