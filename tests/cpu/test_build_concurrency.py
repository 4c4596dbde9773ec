# SPDX-License-Identifier: Apache-2.0
"""Concurrent builds with real NVRTC compiles of small FFT units: threads of one process, and
processes (multiprocessing spawn) sharing one empty disk cache.

What the design allows (nvmath_device._build.cache.building): the builders of one key are
serialised across threads (a lock per key) and processes (fcntl.flock on a lock file per key),
and check the cache again once they hold the lock, so each key is compiled once however many
threads and processes ask for it at once; different keys compile at the same time (in one
process NVRTC itself runs them one after the other)."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import threading

import pytest

from nvmath_device._build import cache, fft_codegen, toolchain
from tests.build_fixtures import LTOIR_MAGIC, empty_cache, small_fft


@pytest.fixture
def cdir(tmp_path, monkeypatch):
    return empty_cache(tmp_path, monkeypatch)


def _check_disk(cdir, expected: dict) -> None:
    """Every entry on disk is whole and holds what the builders returned; no temp or lock files."""
    cache._memory.clear()
    assert len(cache.entries(str(cdir))) == len(expected)
    for key, blob in expected.items():
        assert cache.get(key) == blob
    assert not list(cdir.rglob(".tmp-*")) and not list(cdir.rglob(".lock-*"))


def _unit_key(fft) -> str:
    src = fft_codegen.render_unit_source(fft)
    return fft_codegen._key("fft-ltoir", src, fft.sm)


def test_threads_compile_different_and_same_descriptors(cdir):
    sizes = [8, 16, 32, 16]  # two threads want the same descriptor
    barrier = threading.Barrier(len(sizes))
    results, errors = {}, []

    def build(i, size):
        try:
            barrier.wait()
            results[i] = fft_codegen.fft_ltoir(small_fft(size))
        except BaseException as e:  # reported below
            errors.append(e)

    n = toolchain.stats["nvrtc_compiles"]
    threads = [threading.Thread(target=build, args=(i, s)) for i, s in enumerate(sizes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    assert toolchain.stats["nvrtc_compiles"] - n == 3  # one compile per descriptor
    assert all(b[:4] == LTOIR_MAGIC for b in results.values())
    assert results[1] == results[3] and len({results[0], results[1], results[2]}) == 3
    _check_disk(cdir, {_unit_key(small_fft(s)): results[i] for i, s in enumerate(sizes)})


def _process(sizes, barrier, queue) -> None:
    """One of the processes: build ``sizes`` in order, starting together with the others."""
    fft_codegen._twiddle_job = lambda sm: (None, None)
    barrier.wait(timeout=120)
    out = {s: hashlib.sha256(fft_codegen.fft_ltoir(small_fft(s))).hexdigest() for s in sizes}
    queue.put({"pid": os.getpid(), "hashes": out, "compiles": toolchain.stats["nvrtc_compiles"],
               "corrupt": cache.stats["corrupt"]})


def test_processes_share_one_cold_cache(cdir):
    # three processes: sizes 16 and 8 (the same keys, at the same time, in either order) and a
    # size of one process's own
    plans = [[16, 8], [8, 16], [16, 32]]
    ctx = multiprocessing.get_context("spawn")
    barrier, queue = ctx.Barrier(len(plans)), ctx.Queue()
    procs = [ctx.Process(target=_process, args=(plan, barrier, queue)) for plan in plans]
    for p in procs:
        p.start()
    try:
        results = [queue.get(timeout=300) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=60)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    for size in (16, 8):  # the same bytes in every process
        assert len({r["hashes"][size] for r in results if size in r["hashes"]}) == 1, results
    assert all(r["corrupt"] == 0 for r in results), results
    # each of the 3 keys compiled once in all (without the per-key lock: up to 16 and 8 three
    # times each, 7 compiles)
    assert sum(r["compiles"] for r in results) == 3, results
    sizes = sorted({s for plan in plans for s in plan})
    cache._memory.clear()
    expected = {}
    for s in sizes:
        blob = cache.get(_unit_key(small_fft(s)))
        assert blob is not None and blob[:4] == LTOIR_MAGIC
        assert hashlib.sha256(blob).hexdigest() == next(r["hashes"][s] for r in results if s in r["hashes"])
        expected[_unit_key(small_fft(s))] = blob
    _check_disk(cdir, expected)
