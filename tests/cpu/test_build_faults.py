# SPDX-License-Identifier: Apache-2.0
"""Faults of the build path (shim -> NVRTC -> LTO-IR -> disk cache), with real NVRTC compiles
of small FFT units: a read-only cache folder, a cache bound smaller than one entry, a writer or
builder killed with SIGKILL, and NVRTC that cannot be loaded. (Damaged entries: see
test_cache_disk.py; NVRTC compile errors with their log: test_toolchain.py and test_cache_disk.py.)"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings

import pytest

from nvmath_device import CompileError, MathDxError
from nvmath_device._build import cache, fft_codegen, toolchain
from tests.build_fixtures import LTOIR_MAGIC, empty_cache, small_fft

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def cdir(tmp_path, monkeypatch):
    return empty_cache(tmp_path, monkeypatch)


def _result(out: str) -> dict:
    return json.loads([ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1][7:])


# --- a read-only cache folder -------------------------------------------------------------

def child_read_only() -> None:
    """In a cache folder that cannot be written: a hit, then two misses compiled by NVRTC."""
    fft_codegen._twiddle_job = lambda sm: (None, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hit = fft_codegen.fft_ltoir(small_fft(16))
        n = toolchain.stats["nvrtc_compiles"]
        b = fft_codegen.fft_ltoir(small_fft(32))
        c = fft_codegen.fft_ltoir(small_fft(8))
        b_again = fft_codegen.fft_ltoir(small_fft(32))  # kept in memory
    print("RESULT " + json.dumps({
        "hit": hit.hex(), "compiles": toolchain.stats["nvrtc_compiles"] - n,
        "b_magic": b[:4] == LTOIR_MAGIC, "c_magic": c[:4] == LTOIR_MAGIC, "b_same": b == b_again,
        "warnings": [str(w.message) for w in caught], "write_errors": cache.stats.get("write_errors", 0)}))


def _read_only_runner(folder: str) -> list[str] | None:
    """A command prefix under which ``folder`` is read-only (even for root), or None."""
    if os.geteuid() != 0:
        return []  # chmod does it
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    probe = subprocess.run([unshare, "-rm", "sh", "-c", f"mount --bind {folder} {folder} && "
                            f"mount -o remount,ro,bind {folder} {folder} && ! touch {folder}/probe"],
                           capture_output=True)
    if probe.returncode != 0:
        return None
    return [unshare, "-rm", "sh", "-c", f'mount --bind {folder} {folder} && '
            f'mount -o remount,ro,bind {folder} {folder} && exec "$@"', "sh"]


def test_read_only_cache_folder_compiles_and_warns_once(cdir):
    hit = fft_codegen.fft_ltoir(small_fft(16))  # one entry on disk before the folder turns read-only
    runner = _read_only_runner(str(cdir))
    if runner is None:
        pytest.skip("cannot make a folder read-only here (root without unshare/mount namespaces)")
    if runner == []:
        for d, _, _ in os.walk(cdir):
            os.chmod(d, 0o555)
    env = dict(os.environ, **{cache.ENV_DIR: str(cdir)})
    code = f"import sys; sys.path.insert(0, {HERE!r}); import test_build_faults as t; t.child_read_only()"
    try:
        p = subprocess.run(runner + [sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=300)
    finally:
        for d, _, _ in os.walk(cdir):
            os.chmod(d, 0o755)
    assert p.returncode == 0, p.stdout + p.stderr
    r = _result(p.stdout)
    assert r["hit"] == hit.hex()  # read from the read-only folder
    assert r["compiles"] == 2 and r["b_magic"] and r["c_magic"] and r["b_same"], r
    ours = [w for w in r["warnings"] if "cache folder" in w]
    assert len(ours) == 1, r["warnings"]  # one clear warning for the two failed writes
    assert str(cdir) in ours[0] and cache.ENV_DIR in ours[0]
    assert "read-only file system" in ours[0] or "permission denied" in ours[0], ours[0]
    assert r["write_errors"] == 2
    assert len(cache.entries(str(cdir))) == 1 and not list(cdir.rglob(".tmp-*"))


# --- a size bound smaller than one entry --------------------------------------------------

def test_cache_smaller_than_one_entry(cdir, monkeypatch):
    monkeypatch.setenv(cache.ENV_MAX_MB, str(1 / 2**20))  # one byte
    a = fft_codegen.fft_ltoir(small_fft(16))
    (entry_a,) = cache.entries()  # the entry just written is kept, however small the bound
    reader = open(entry_a[0], "rb")  # another user of A's entry, mid-read when it is evicted
    head = reader.read(10)
    b = fft_codegen.fft_ltoir(small_fft(32))
    assert len(cache.entries()) == 1 and not os.path.exists(entry_a[0])  # A evicted for B
    key_a = os.path.basename(entry_a[0])[:-4]
    assert cache._decode(key_a, head + reader.read()) == a  # the open reader still reads all of A
    reader.close()
    cache._memory.clear()
    n = toolchain.stats["nvrtc_compiles"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no entry is damaged: no "corrupted" warning
        assert fft_codegen.fft_ltoir(small_fft(32)) == b  # from disk
        assert toolchain.stats["nvrtc_compiles"] == n
        assert fft_codegen.fft_ltoir(small_fft(16)) == a  # evicted: compiled again, the same bytes
    assert toolchain.stats["nvrtc_compiles"] == n + 1


# --- killed writers and builders ----------------------------------------------------------

def child_killed_mid_write(key: str, size: int) -> None:
    """Write the entry ``key`` and stop half-way through the write (the parent kills us)."""
    real_fdopen = os.fdopen

    class HalfWriter:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def write(self, blob):
            self.f.write(blob[: len(blob) // 2])
            self.f.flush()
            print("HALF", flush=True)
            time.sleep(120)

    cache.os.fdopen = lambda fd, mode: HalfWriter(real_fdopen(fd, mode))
    cache.put(key, b"\x01" * size)


def child_killed_while_building(key: str) -> None:
    with cache.building(key):
        print("LOCKED", flush=True)
        time.sleep(120)


def _start_and_kill(code: str, cdir, marker: str) -> None:
    env = dict(os.environ, **{cache.ENV_DIR: str(cdir)})
    p = subprocess.Popen([sys.executable, "-c", f"import sys; sys.path.insert(0, {HERE!r}); "
                          f"import test_build_faults as t; {code}"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.strip() == marker, line + p.stderr.read()
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
    assert p.returncode == -signal.SIGKILL


@pytest.mark.parametrize("existing", [False, True])
def test_writer_killed_mid_write(cdir, existing):
    key = cache.make_key("test", "killed-writer")
    payload = b"\x01" * (1 << 20)
    if existing:
        cache.put(key, payload)
    _start_and_kill(f"t.child_killed_mid_write({key!r}, {len(payload)})", cdir, "HALF")
    (tmp,) = cdir.rglob(".tmp-*")  # the partial file, under its temporary name
    assert 0 < tmp.stat().st_size < len(cache._encode(key, payload))
    cache._memory.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # never seen as a (damaged) entry
        assert cache.get(key) == (payload if existing else None)
    assert len(cache.entries()) == int(existing) and cache.info()["entries"] == int(existing)
    cache.put(key, payload)  # a later writer succeeds
    cache._memory.clear()
    assert cache.get(key) == payload
    cache.evict()
    assert tmp.exists()  # a fresh temp file may belong to a live writer: kept ...
    os.utime(tmp, (time.time() - 2 * cache._STALE_TMP_SECONDS,) * 2)
    cache.evict()
    assert not tmp.exists()  # ... an old one is a leftover: removed


def test_builder_killed_holding_the_lock_releases_it(cdir):
    key = cache.make_key("test", "killed-builder")
    _start_and_kill(f"t.child_killed_while_building({key!r})", cdir, "LOCKED")
    assert list(cdir.rglob(".lock-*"))  # its lock file is left behind ...
    t0 = time.monotonic()
    with cache.building(key):  # ... but not its lock: the kernel dropped it with the process
        waited = time.monotonic() - t0
    assert waited < 5, waited
    assert not list(cdir.rglob(".lock-*"))  # the next holder removes the file when done
    assert cache.entries() == []


# --- NVRTC that cannot be loaded ----------------------------------------------------------

def test_nvrtc_missing_is_a_compile_error(cdir, monkeypatch):
    from cuda.bindings import nvrtc
    from cuda.pathfinder import DynamicLibNotFoundError

    def missing(*args):
        raise DynamicLibNotFoundError("Failure finding libnvrtc.so: no such file (simulated)")

    monkeypatch.setattr(nvrtc, "nvrtcVersion", missing)
    monkeypatch.setattr(nvrtc, "nvrtcCreateProgram", missing)
    toolchain.nvrtc_version.cache_clear()
    try:
        for build in (lambda: fft_codegen.fft_ltoir(small_fft(16)),
                      lambda: toolchain.compile_source('extern "C" __global__ void k(){}', 90, "ptx")):
            with pytest.raises(CompileError) as e:
                build()
            assert isinstance(e.value, MathDxError)
            msg = str(e.value)
            assert "NVRTC library could not be loaded" in msg and "libnvrtc.so" in msg, msg
            assert "nvidia-cuda-nvrtc" in msg
    finally:
        monkeypatch.undo()
        toolchain.nvrtc_version.cache_clear()
    assert toolchain.nvrtc_version()[0] >= 12
