# SPDX-License-Identifier: Apache-2.0
"""A stateful Matmul run on several streams never has its workspace in use on two at once:
each change of stream makes the new stream wait (a CUDA event, no host sync) for the previous
one, and free() orders the allocating stream after the last one instead of synchronising."""

from types import SimpleNamespace

import numpy as np
import pytest

from nvmath_host import Matmul, _execute, _gpu, _mirror
from tests.cpu.test_host_mirror import _numbered, _PlanStandIn, fake_gpu  # noqa: F401  (fixture)


class _FakeRuntime:
    """``cuda.bindings.runtime`` stand-in recording the event calls."""

    cudaEventDisableTiming = 2

    def __init__(self):
        self.calls, self.events = [], 0

    def cudaEventCreateWithFlags(self, flags):
        self.events += 1
        self.calls.append(("create", flags))
        return (0, f"ev{self.events}")

    def cudaEventRecord(self, ev, stream):
        self.calls.append(("record", ev, stream))
        return (0,)

    def cudaStreamWaitEvent(self, stream, ev, flags):
        self.calls.append(("wait", stream, ev))
        return (0,)

    def cudaEventDestroy(self, ev):
        self.calls.append(("destroy", ev))
        return (0,)

    def cudaDeviceSynchronize(self):
        self.calls.append(("device sync",))
        return (0,)


@pytest.fixture
def fake_rt(monkeypatch):
    r = _FakeRuntime()
    monkeypatch.setattr(_gpu, "rt", lambda: r)
    return r


def test_stream_order_waits_on_a_change_of_stream_only(fake_rt):
    order = _gpu.StreamOrder(5)
    assert order.switch_to(5) is False and fake_rt.calls == []
    assert order.switch_to(7) is True
    assert order.switch_to(7) is False
    assert order.switch_to(5) is True
    order.destroy()
    order.destroy()  # once
    assert fake_rt.calls == [
        ("create", 2), ("record", "ev1", 5), ("wait", 7, "ev1"),
        ("record", "ev1", 7), ("wait", 5, "ev1"), ("destroy", "ev1"),
    ]


def test_stream_order_names_the_failing_call(monkeypatch):
    r = _FakeRuntime()
    r.cudaStreamWaitEvent = lambda stream, ev, flags: (700,)
    monkeypatch.setattr(_gpu, "rt", lambda: r)
    with pytest.raises(RuntimeError, match="cudaStreamWaitEvent failed: 700"):
        _gpu.StreamOrder(1).switch_to(2)


@pytest.mark.parametrize("workspace", [None, "held"])
def test_matmul_orders_its_streams_and_frees_without_a_device_sync(
    fake_gpu, fake_rt, monkeypatch, workspace  # noqa: F811
):
    runs = []

    class _Exec:
        def __init__(self, args, desc, pkg, p, device):
            self.args = args

        def run(self, s, current):
            runs.append(s)
            return "d", {}

    monkeypatch.setattr(_execute, "Executor", _Exec)
    monkeypatch.setattr(_mirror, "to_host", lambda p, d, outs, s, c: d)
    a, b = _numbered((4, 3), np.float32), _numbered((3, 5), np.float32)
    mm = Matmul(a, b, options={"device_id": 0})
    mm.plan()
    _PlanStandIn.last.workspace = workspace  # 0 is the stream the workspace was allocated on
    for s in (0, 11, 11, 12, 0):
        mm.execute(stream=SimpleNamespace(ptr=s))
    assert runs == [0, 11, 11, 12, 0]
    waits = [c for c in fake_rt.calls if c[0] in ("record", "wait")]
    assert waits == [
        ("record", "ev1", 0), ("wait", 11, "ev1"),
        ("record", "ev1", 11), ("wait", 12, "ev1"),
        ("record", "ev1", 12), ("wait", 0, "ev1"),
    ]
    mm.execute(stream=SimpleNamespace(ptr=13))
    fake_rt.calls.clear()
    mm.free()
    expected_free = [("record", "ev1", 13), ("wait", 0, "ev1")] if workspace else []
    assert fake_rt.calls == expected_free + [("destroy", "ev1")]
