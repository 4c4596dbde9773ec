# SPDX-License-Identifier: Apache-2.0
"""kernels._consts.to_device_const without a GPU: its keys, which stream waits on which event,
when evicted memory is freed, and thread safety, with the driver calls replaced by a recorder."""

import contextlib
import gc
import threading
import time
import weakref

import numpy as np
import pytest

from kernels import _consts
from kernels._consts import to_device_const
from mathdx_operands import Stream


class FakeDriver:
    """Records the cache's driver calls; ``finished`` holds the events whose work is done."""

    def __init__(self):
        self.calls, self.finished, self.n, self.bad_streams = [], set(), 0, set()
        self.current = {}  # handle -> the stream object CuPy/PyTorch would call current

    def record(self, stream):
        if stream in self.bad_streams:
            raise RuntimeError("cuEventRecord failed: CUDA_ERROR_INVALID_HANDLE")
        self.n += 1
        ev = f"ev{self.n}@{stream}"
        self.calls.append(("record", stream, ev))
        return ev

    def done(self, ev):
        self.calls.append(("query", ev))
        return ev in self.finished

    def wait(self, stream, ev):
        self.calls.append(("wait", stream, ev))

    def destroy(self, ev):
        self.calls.append(("destroy", ev))

    def synchronize(self):
        self.calls.append(("sync",))

    @contextlib.contextmanager
    def in_context(self, ctx):
        self.calls.append(("ctx", ctx))
        yield

    def owner(self, handle):
        return self.current.get(handle)

    def of(self, kind):
        return [c for c in self.calls if c[0] == kind]


class Dev:
    """Stands for device memory: ``freed`` once the cache drops its last reference."""

    def __init__(self, value, stream):
        self.value, self.stream = value.copy(), stream


@pytest.fixture
def fake(monkeypatch):
    drv = FakeDriver()
    uploads = []
    ctx = {"now": 101}

    def upload(value, stream):
        uploads.append((value.copy(), stream.handle, ctx["now"]))
        time.sleep(0.001)  # widen race windows in the threaded test
        return Dev(value, stream.handle)

    monkeypatch.setattr(_consts, "simulator", lambda: False)
    monkeypatch.setattr(_consts, "_drv", drv)
    monkeypatch.setattr(_consts, "_upload", upload)
    monkeypatch.setattr(_consts, "current_context", lambda: ctx["now"])
    monkeypatch.setattr(_consts, "_consts", {})
    monkeypatch.setattr(_consts, "_retired", [])
    return drv, uploads, ctx


class UserStream:
    """Stands for a CuPy/PyTorch stream object: its handle is valid while it is alive."""


S1, S2 = Stream(0x1000, owner=UserStream()), Stream(0x2000, owner=UserStream())


def test_same_content_same_context_is_one_upload(fake):
    drv, uploads, _ = fake
    taps = np.arange(5.0)
    a = to_device_const(taps, S1)
    b = to_device_const(taps.copy(), S1)
    assert a is b and len(uploads) == 1
    assert drv.of("record") == [("record", S1.handle, "ev1@4096")]  # after the upload, on its stream
    assert drv.of("wait") == [] and drv.of("query") == []  # same stream: ordered already


def test_key_includes_the_context(fake):
    """The same taps under another context (another GPU) get their own upload."""
    _, uploads, ctx = fake
    taps = np.arange(5.0)
    a = to_device_const(taps, S1)
    ctx["now"] = 202
    b = to_device_const(taps, S1)
    assert a is not b and [u[2] for u in uploads] == [101, 202]
    ctx["now"] = 101
    assert to_device_const(taps, S1) is a


def test_key_includes_dtype_shape_and_maker(fake):
    _, uploads, _ = fake
    t = np.zeros(4)
    to_device_const(t, S1)
    to_device_const(t.astype(np.float32), S1)
    to_device_const(t.reshape(2, 2), S1)
    to_device_const(t, S1, make=lambda a: a + 1)
    assert len(uploads) == 4


def test_another_stream_waits_for_an_upload_in_flight(fake):
    drv, uploads, _ = fake
    taps = np.arange(3.0)
    to_device_const(taps, S1)
    (_, _, ev), = drv.of("record")
    to_device_const(taps, S2)
    assert drv.of("wait") == [("wait", S2.handle, ev)]
    to_device_const(taps, S1)  # the uploading stream itself never waits
    assert len(drv.of("wait")) == 1 and len(uploads) == 1


def test_a_finished_upload_is_waited_for_no_more(fake):
    drv, _, _ = fake
    taps = np.arange(3.0)
    to_device_const(taps, S1)
    (_, _, ev), = drv.of("record")
    drv.finished.add(ev)
    to_device_const(taps, S2)
    assert drv.of("wait") == [] and ("destroy", ev) in drv.calls
    n = len(drv.calls)
    for _ in range(5):
        to_device_const(taps, S2)
    assert len(drv.calls) == n  # the hot path makes no more driver calls


def test_evicted_entries_are_freed_only_after_every_reader_stream(fake):
    drv, _, _ = fake
    first = np.arange(7.0)
    dev = to_device_const(first, S1)
    to_device_const(first, S2)  # read on S2 as well
    for i in range(_consts._CONST_MAX):  # push it out
        to_device_const(np.full(3, float(i)), S1)
    assert all(k[0] != first.tobytes() for k in _consts._consts)
    (held, events, _), = _consts._retired
    assert held is dev
    assert sorted(e.split("@")[1] for e in events) == sorted([str(S1.handle), str(S2.handle)])
    to_device_const(np.full(3, -1.0), S1)  # a miss polls the retired entry: not done yet
    assert _consts._retired and _consts._retired[0][0] is dev
    drv.finished.update(events)
    to_device_const(np.full(3, -2.0), S1)
    assert _consts._retired == [] or all(d is not dev for d, _, _ in _consts._retired)
    assert all(("destroy", e) in drv.calls for e in events)


def test_a_failing_event_record_falls_back_to_a_context_sync(fake):
    drv, _, _ = fake
    to_device_const(np.arange(7.0), S2)
    drv.bad_streams.add(S2.handle)
    for i in range(_consts._CONST_MAX):
        to_device_const(np.full(3, float(i)), S1)
    assert drv.of("sync") == [("sync",)]


def test_reader_streams_are_kept_alive_until_the_entry_is_retired(fake):
    """The cache records events on its readers' streams at eviction, which is only safe while
    the stream exists: it holds the stream object (found on the GPU: a thread's CuPy stream was
    destroyed when the thread ended and the later eviction's cuEventRecord on its dangling
    handle crashed the process)."""
    drv, _, _ = fake
    user = UserStream()
    alive = weakref.ref(user)
    to_device_const(np.arange(7.0), Stream(0x3000, owner=user))
    del user
    gc.collect()
    assert alive() is not None  # held by the cache entry
    for i in range(_consts._CONST_MAX):  # evict it
        to_device_const(np.full(3, float(i)), S1)
    assert any(c[:2] == ("record", 0x3000) for c in drv.calls)
    gc.collect()
    assert alive() is None  # released once the eviction's events are recorded


def test_current_stream_objects_are_found_for_handles_given_without_one(fake):
    drv, _, _ = fake
    cur = UserStream()
    drv.current[0x4000] = cur
    to_device_const(np.arange(7.0), Stream(0x4000))  # e.g. CuPy's current stream, as a handle
    (c,) = _consts._consts.values()
    assert c.streams == {0x4000: cur}


def test_a_raw_handle_reader_makes_the_eviction_synchronise_instead(fake):
    """Nothing keeps a raw handle's stream alive: no event is ever recorded on it."""
    drv, _, _ = fake
    taps = np.arange(7.0)
    to_device_const(taps, S1)
    to_device_const(taps, Stream(0x5000))  # a raw handle, not a current stream
    for i in range(_consts._CONST_MAX):
        to_device_const(np.full(3, float(i)), S1)
    assert drv.of("sync") == [("sync",)]
    assert not any(c[:2] == ("record", 0x5000) for c in drv.calls)
    assert _consts._retired == []  # synchronised: nothing left to wait for


def test_lasting_handles_need_no_owner(fake):
    drv, _, _ = fake
    to_device_const(np.arange(7.0), Stream(0))
    to_device_const(np.arange(7.0), Stream(2))  # cudaStreamPerThread
    for i in range(_consts._CONST_MAX):
        to_device_const(np.full(3, float(i)), S1)
    assert drv.of("sync") == []
    assert {c[1] for c in drv.of("record")} >= {0, 2}


def test_an_entry_read_by_too_many_streams_is_retired_and_uploaded_again(fake):
    drv, uploads, _ = fake
    taps = np.arange(7.0)
    streams = [Stream(0x10000 + i, owner=UserStream()) for i in range(_consts._READERS_MAX + 1)]
    for st in streams[:-1]:
        to_device_const(taps, st)
    assert len(uploads) == 1
    to_device_const(taps, streams[-1])
    assert len(uploads) == 2 and len(_consts._retired) == 1
    (_, events, _), = _consts._retired
    assert len(events) == _consts._READERS_MAX


def test_eviction_runs_in_the_evicted_entrys_context(fake):
    drv, _, ctx = fake
    to_device_const(np.arange(7.0), S1)  # context 101
    ctx["now"] = 202
    for i in range(_consts._CONST_MAX):
        to_device_const(np.full(3, float(i)), S1)
    i = drv.calls.index(("ctx", 101))
    assert drv.calls[i + 1][0] == "destroy" and drv.calls[i + 2][:2] == ("record", S1.handle)


def test_the_cache_is_thread_safe(fake):
    """Threads on their own streams share entries: one upload per key, every result the value
    of its own key, the size bound kept, no exception."""
    _, uploads, _ = fake
    keys = [np.full(4, float(i)) for i in range(40)]  # more than the cache holds: evictions
    errors = []

    def work(tid):
        s = Stream(0x10000 * (tid + 1), owner=UserStream())
        try:
            for r in range(3):
                for i in (range(40) if (tid + r) % 2 else reversed(range(40))):
                    d = to_device_const(keys[i], s)
                    assert np.array_equal(d.value, keys[i])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(_consts._consts) <= _consts._CONST_MAX


def test_simulator_entries_are_host_arrays_without_events(fake, monkeypatch):
    drv, uploads, _ = fake
    monkeypatch.setattr(_consts, "simulator", lambda: True)
    d = to_device_const(np.arange(3.0), S1, make=lambda a: a * 2)
    np.testing.assert_array_equal(d, [0.0, 2.0, 4.0])
    assert uploads == [] and drv.calls == []
