# SPDX-License-Identifier: Apache-2.0
"""The disk cache of generated code: hits and misses, damaged entries, concurrent writers,
the environment variables, what the keys cover, and ``python -m nvmath_device.cache``."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

from nvmath_device import FFT
from nvmath_device._build import cache, fft_codegen, toolchain

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = 'extern "C" __device__ int nmdx_tiny_{i}() {{ return {i}; }}\n'


def _settle_twiddle_jobs():
    """Wait for twiddle-table compiles an earlier test started in the background (a unit compile
    starts one and need not wait for it): their threads count NVRTC runs in toolchain.stats, and
    one finishing in the middle of a test made that test's counts off by one."""
    for job in list(fft_codegen._twiddle_jobs.values()):
        try:
            job.result(timeout=900)
        except BaseException:  # noqa: S110 - an earlier test's failure is that test's to report
            pass


@pytest.fixture
def cdir(tmp_path, monkeypatch):
    """A fresh, empty cache folder for this test (and an empty in-memory layer), once no
    background compile of an earlier test is still running."""
    _settle_twiddle_jobs()
    d = tmp_path / "cache"
    monkeypatch.setenv(cache.ENV_DIR, str(d))
    monkeypatch.delenv(cache.ENV_MAX_MB, raising=False)
    monkeypatch.setattr(cache, "_memory", {})
    return d


@pytest.fixture
def no_twiddle_job(monkeypatch):
    """For tests faking the unit compile: a unit miss starts no (real) twiddle-table compile."""
    monkeypatch.setattr(fft_codegen, "_twiddle_job", lambda sm: (None, None))


def _delta(before):
    return {k: cache.stats[k] - before[k] for k in before}


def _fresh_process():
    cache._memory.clear()


# --- hits, misses, damaged entries ------------------------------------------------------------

def test_hit_and_miss(cdir):
    key = cache.make_key("test", "hit-miss")
    before = dict(cache.stats)
    assert cache.get(key) is None
    assert cache.put(key, b"payload") is True
    assert cache.get(key) == b"payload"  # memory
    _fresh_process()
    assert cache.get(key) == b"payload"  # disk
    assert _delta(before) == {"hits": 2, "misses": 1, "corrupt": 0, "writes": 1, "write_errors": 0,
                              "lock_waits": 0}
    (entry,) = cache.entries()
    assert entry[0] == os.path.join(str(cdir), key[:2], key + ".bin")


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "garbage", "wrong-key"])
def test_damaged_entry_is_a_miss_with_a_warning_and_is_removed(cdir, damage):
    key = cache.make_key("test", "damaged")
    payload = os.urandom(5000)
    cache.put(key, payload)
    path = cache.entries()[0][0]
    blob = open(path, "rb").read()
    if damage == "truncate":
        blob = blob[:-100]
    elif damage == "flip":
        blob = blob[:-1] + bytes([blob[-1] ^ 1])
    elif damage == "empty":
        blob = b""
    elif damage == "garbage":
        blob = os.urandom(len(blob))
    if damage == "wrong-key":  # a whole, valid entry of another key, renamed into this one's place
        other = cache.make_key("test", "other")
        cache.put(other, b"another payload")
        os.replace(cache._path(str(cdir), other), path)
    else:
        open(path, "wb").write(blob)
    _fresh_process()
    before = dict(cache.stats)
    with pytest.warns(RuntimeWarning, match="truncated or corrupted"):
        assert cache.get(key) is None
    assert _delta(before)["corrupt"] == 1
    assert not os.path.exists(path)
    cache.put(key, payload)  # rebuilt
    _fresh_process()
    assert cache.get(key) == payload


def test_other_format_versions(cdir):
    """Entries of another format version (the first one, an unknown future one) are quiet misses."""
    import hashlib

    key = cache.make_key("test", "formats")
    payload = b"v1 payload"
    path = cache._path(str(cdir), key)
    os.makedirs(os.path.dirname(path))
    v1 = b"NMDX1\n" + hashlib.sha256(payload).digest() + len(payload).to_bytes(8, "little") + payload
    open(path, "wb").write(v1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.get(key) is None
    _fresh_process()
    open(path, "wb").write(b"NMDX9\n" + os.urandom(100))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.get(key) is None


def test_corrupted_ltoir_is_rebuilt_never_used(cdir, no_twiddle_job, monkeypatch, caplog):
    """Through the FFT codegen: a damaged LTO-IR entry is recompiled, not handed to a link."""
    calls = []

    def fake_compile(src, sm, output, name=None, extra_include_dirs=(), extra_options=()):
        calls.append(name)
        return b"LTOIR:" + name.encode()

    monkeypatch.setattr(fft_codegen, "compile_source", fake_compile)
    fft = FFT(size=32, precision=np.float32, fft_type="c2c", direction="forward", sm=90)
    good = fft_codegen.fft_ltoir(fft)
    assert len(calls) == 1
    (path,) = [p for p, _, _ in cache.entries()]
    open(path, "r+b").truncate(os.path.getsize(path) - 3)
    _fresh_process()
    with pytest.warns(RuntimeWarning, match="corrupted"):
        again = fft_codegen.fft_ltoir(fft)
    assert again == good and len(calls) == 2
    _fresh_process()
    assert fft_codegen.fft_ltoir(fft) == good and len(calls) == 2  # the rebuilt entry is used


def test_compile_logs_one_info_line_before_a_miss_only(cdir, no_twiddle_job, monkeypatch, caplog):
    monkeypatch.setattr(fft_codegen, "compile_source", lambda *a, **k: b"x")
    fft = FFT(size=16, precision=np.float32, fft_type="c2c", direction="forward", sm=90)
    with caplog.at_level(logging.INFO, logger="nvmath_device"):
        fft_codegen.fft_ltoir(fft)
        fft_codegen.fft_ltoir(fft)
    infos = [r for r in caplog.records if r.levelno == logging.INFO]
    assert len(infos) == 1
    assert "compiling" in infos[0].getMessage() and "cached afterwards" in infos[0].getMessage()


# --- what the key covers ----------------------------------------------------------------------

def test_key_changes_with_nvrtc_version_and_arch(cdir, no_twiddle_job, monkeypatch):
    calls = []
    monkeypatch.setattr(fft_codegen, "compile_source", lambda src, sm, *a, **k: calls.append(sm) or b"x%d" % len(calls))
    kw = dict(size=64, precision=np.float32, fft_type="c2c", direction="forward", elements_per_thread=8)
    f90, f80 = FFT(sm=90, **kw), FFT(sm=80, **kw)
    fft_codegen.fft_ltoir(f90)
    fft_codegen.fft_ltoir(f90)
    assert calls == [90]  # hit
    fft_codegen.fft_ltoir(f80)
    assert calls == [90, 80]  # another arch: another entry
    real = toolchain.nvrtc_version()
    monkeypatch.setattr(toolchain, "nvrtc_version", lambda: (real[0] + 1, 0))
    assert f"nvrtc{real[0] + 1}.0" in toolchain.toolchain_id()
    fft_codegen.fft_ltoir(f90)
    assert calls == [90, 80, 90]  # a new NVRTC: recompiled
    monkeypatch.setattr(toolchain, "nvjitlink_version", lambda: (99, 1))
    fft_codegen.fft_ltoir(f90)
    assert calls == [90, 80, 90]  # another linker: LTO-IR does not depend on it, a hit
    monkeypatch.setattr(toolchain, "mathdx_version", lambda: "cufftdx99-cublasdx99")
    fft_codegen.fft_ltoir(f90)
    assert calls == [90, 80, 90, 90]  # other headers: recompiled
    assert len(cache.entries()) == 4


def test_real_nvrtc_output_is_cached_under_a_toolchain_key(cdir):
    src = TINY.format(i=1)
    key = cache.make_key("test-tiny", src, toolchain.toolchain_id(), 90)
    n = toolchain.stats["nvrtc_compiles"]
    blob = cache.get(key) or toolchain.compile_source(src, 90, "ltoir")
    cache.put(key, blob)
    _fresh_process()
    assert cache.get(key) == blob and toolchain.stats["nvrtc_compiles"] == n + 1
    assert cache.make_key("test-tiny", src, toolchain.toolchain_id(), 80) != key


# --- the twiddle tables compile alongside the first unit ------------------------------------

def child_unit_then_twiddles() -> None:
    """In a fresh process with an empty cache: one FFT unit, then the twiddle tables twice."""
    import logging

    messages = []

    class Keep(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    logger = logging.getLogger("nvmath_device")
    logger.addHandler(Keep())
    logger.setLevel(logging.INFO)
    fft = FFT(size=16, precision=np.float32, fft_type="c2c", direction="forward", sm=90)
    fft_codegen.fft_ltoir(fft)
    after_unit = dict(toolchain.stats)
    first = fft_codegen.twiddle_ltoir(90)
    again = fft_codegen.TwiddleTables(90).ltoir()
    print("RESULT " + json.dumps({"after_unit": after_unit, "end": toolchain.stats, "same": first == again,
                                  "cached": cache.get(fft_codegen._twiddle_key(90)) == first,
                                  "jobs_left": len(fft_codegen._twiddle_jobs), "messages": messages}))


def test_twiddles_compile_alongside_the_first_unit_once(cdir):
    env = dict(os.environ, **{cache.ENV_DIR: str(cdir)})
    code = f"import sys; sys.path.insert(0, {HERE!r}); import test_cache_disk as t; t.child_unit_then_twiddles()"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])
    after_unit, end = r["after_unit"], r["end"]
    # the unit's compile started the twiddle job, which compiled in a child process while the
    # unit compiled here: two compiles were in flight at once
    assert after_unit["nvrtc_max_in_flight"] == 2, after_unit
    assert end["nvrtc_child_compiles"] == 1 and end["nvrtc_max_in_flight"] == 2, end
    # exactly two compiles in all: the unit and the tables (waited on, then from the cache)
    assert end["nvrtc_compiles"] == 2 and end["nvrtc_in_flight"] == 0, end
    assert r["same"] and r["cached"] and r["jobs_left"] == 0, r
    infos = [m for m in r["messages"] if "compiling" in m]
    assert len(infos) == 2, infos  # the INFO lines as before: one for the unit, one for the tables
    assert sum("twiddle tables for sm_90" in m for m in infos) == 1, infos


def test_a_failed_twiddle_compile_reaches_the_caller_with_the_nvrtc_log(cdir, monkeypatch):
    from nvmath_device import CompileError

    bad = "#include <cufftdx.hpp>\nnmdx_not_a_type nmdx_broken_tables;\n"
    # the child never uses -pch; nor must the compile here (its options are in the message), which
    # "auto" would turn on after an earlier test's third cuFFTDx compile in this process
    monkeypatch.setenv(toolchain.ENV_PCH, "0")
    monkeypatch.setattr(fft_codegen, "_TWIDDLE_SOURCE", bad)
    monkeypatch.setattr(fft_codegen, "compile_source", lambda *a, **k: b"unit")  # the unit compiles
    n = toolchain.stats["nvrtc_child_compiles"]
    fft = FFT(size=8, precision=np.float32, fft_type="c2c", direction="forward", sm=90)
    assert fft_codegen.fft_ltoir(fft) == b"unit"  # started the twiddle job; its failure is not the unit's
    with pytest.raises(CompileError) as failed:
        fft_codegen.TwiddleTables(90).ltoir()
    assert toolchain.stats["nvrtc_child_compiles"] == n + 1  # one compile, its error handed over
    # the usual error: the same message as the compile in this process raises, NVRTC log and all
    with pytest.raises(CompileError) as here:
        toolchain.compile_source(bad, 90, "ltoir", name="nvmathdx_fft_twiddles_sm90.cu",
                                 extra_options=fft_codegen.FFT_OPTIONS)
    assert str(failed.value) == str(here.value)
    assert "--- NVRTC log ---" in str(failed.value) and "nmdx_not_a_type" in str(failed.value)
    assert fft_codegen._twiddle_jobs == {}  # reported once; the next call compiles again
    with pytest.raises(CompileError, match="nmdx_not_a_type"):
        fft_codegen.twiddle_ltoir(90)
    assert toolchain.stats["nvrtc_child_compiles"] == n + 2
    assert cache.get(fft_codegen._twiddle_key(90)) is None


# --- environment ------------------------------------------------------------------------------

def test_env_relocates(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "_memory", {})
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "elsewhere"))
    assert cache.cache_dir() == str(tmp_path / "elsewhere")
    cache.put(cache.make_key("reloc"), b"x")
    assert len(list((tmp_path / "elsewhere").rglob("*.bin"))) == 1
    monkeypatch.delenv(cache.ENV_DIR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == str(tmp_path / "xdg" / "numba-mathdx")


@pytest.mark.parametrize("value", ["0", "off", "", "OFF", "none"])
def test_env_disables(tmp_path, monkeypatch, value):
    monkeypatch.setattr(cache, "_memory", {})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(cache.ENV_DIR, value)
    assert cache.cache_dir() is None
    key = cache.make_key("disabled")
    assert cache.put(key, b"x") is False
    assert cache.get(key) == b"x"  # still kept in memory for this process
    _fresh_process()
    assert cache.get(key) is None
    assert list(tmp_path.rglob("*.bin")) == []
    assert cache.info()["enabled"] is False


def test_lru_eviction_past_the_size_bound(cdir, monkeypatch):
    keys = [cache.make_key("lru", i) for i in range(4)]
    for i, k in enumerate(keys):
        cache.put(k, os.urandom(1000))
        os.utime(cache._path(str(cdir), k), (1000 + i, 1000 + i))  # k0 oldest
    _fresh_process()
    assert cache.get(keys[0]) is not None  # reading makes k0 the most recently used
    monkeypatch.setenv(cache.ENV_MAX_MB, str(2500 / 2**20))  # room for two entries
    cache.put(keys[3], os.urandom(1000))  # a write triggers eviction; k3 is refreshed too
    left = {os.path.basename(p)[:-4] for p, _, _ in cache.entries()}
    assert left == {keys[0], keys[3]}


def test_bad_size_bound_warns_and_uses_the_default(monkeypatch):
    monkeypatch.setenv(cache.ENV_MAX_MB, "lots")
    with pytest.warns(RuntimeWarning, match="NUMBA_MATHDX_CACHE_MAX_MB"):
        assert cache.max_bytes() == cache.DEFAULT_MAX_MB * 2**20


def test_stale_temp_files_are_cleaned_fresh_ones_kept(cdir):
    cache.put(cache.make_key("tmp"), b"x")
    sub = os.path.dirname(cache.entries()[0][0])
    old, new = os.path.join(sub, ".tmp-old"), os.path.join(sub, ".tmp-new")
    for p in (old, new):
        open(p, "wb").write(b"partial")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    cache.evict()
    assert not os.path.exists(old) and os.path.exists(new)
    assert len(cache.entries()) == 1  # temp files are never entries


# --- concurrent writers -----------------------------------------------------------------------

def writer(n: int, tag: str) -> None:
    """Run by two processes at once: the same big entry and the same real NVRTC output, each
    written ``n`` times, read back after every write."""
    import hashlib

    big = hashlib.sha256(b"seed").digest() * (4 << 20 >> 5)  # 4 MiB, same bytes in both processes
    key = cache.make_key("concurrent", "big")
    src = TINY.format(i=2)
    tkey = cache.make_key("concurrent", src, toolchain.toolchain_id(), 90)
    bad = 0
    for _ in range(n):
        cache._memory.clear()
        got = cache.get(key)
        bad += got is not None and got != big
        cache.put(key, big)
        blob = cache.get(tkey)
        if blob is None:
            blob = toolchain.compile_source(src, 90, "ltoir")
            cache.put(tkey, blob)
    cache._memory.clear()
    print("RESULT " + json.dumps({"tag": tag, "bad": bad, "corrupt": cache.stats["corrupt"],
                                  "final_ok": cache.get(key) == big, "tiny": len(cache.get(tkey) or b"")}))


def test_two_concurrent_writer_processes_both_succeed(cdir):
    env = dict(os.environ, **{cache.ENV_DIR: str(cdir)})
    code = "import sys; sys.path.insert(0, {!r}); import test_cache_disk as t; t.writer(25, {!r})"
    procs = [subprocess.Popen([sys.executable, "-c", code.format(HERE, tag)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for tag in "ab"]
    outs = [p.communicate(timeout=120) for p in procs]
    results = []
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out + err
        assert "Warning" not in err, err
        results.append(json.loads([ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1][7:]))
    for r in results:
        assert r["bad"] == 0 and r["corrupt"] == 0 and r["final_ok"] and r["tiny"] > 0, r
    assert len(cache.entries(str(cdir))) == 2
    assert not [p for p in cdir.rglob(".tmp-*")]


# --- python -m nvmath_device.cache ------------------------------------------------------------

def test_cli_info_and_clear(cdir, capsys):
    from nvmath_device import cache as cli

    for i in range(3):
        cache.put(cache.make_key("cli", i), b"y" * 1000)
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"location: {cdir}" in out and "entries:  3" in out and "enabled" in out
    assert "limit:    4096.0 MiB" in out
    assert cli.main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["entries"] == 3 and info["total_bytes"] == sum(e[1] for e in cache.entries())
    assert cli.main(["clear"]) == 0
    assert "removed 3 entries" in capsys.readouterr().out
    assert cache.entries() == [] and cache._memory == {}


def test_cli_as_a_module(cdir, tmp_path):
    cache.put(cache.make_key("cli-m"), b"z")
    env = dict(os.environ, **{cache.ENV_DIR: str(cdir)})
    p = subprocess.run([sys.executable, "-m", "nvmath_device.cache", "clear"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "removed 1 entries" in p.stdout, p.stdout + p.stderr
    assert cache.entries() == []
    env[cache.ENV_DIR] = "off"
    p = subprocess.run([sys.executable, "-m", "nvmath_device.cache"], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "disk cache: disabled" in p.stdout, p.stdout + p.stderr


def test_cli_rejects_unknown_commands(capsys):
    from nvmath_device import cache as cli

    with pytest.raises(SystemExit) as e:
        cli.main(["bogus"])
    assert e.value.code != 0


# --- NVRTC precompiled headers policy (the compiles themselves are measured in the benchmark) --

@pytest.mark.parametrize("value,mode", [(None, "auto"), ("auto", "auto"), ("1", "on"), ("on", "on"),
                                        ("0", "off"), ("off", "off"), ("weird", "auto")])
def test_pch_mode_from_env(monkeypatch, value, mode):
    if value is None:
        monkeypatch.delenv(toolchain.ENV_PCH, raising=False)
    else:
        monkeypatch.setenv(toolchain.ENV_PCH, value)
    assert toolchain.pch_mode() == mode


def test_pch_policy(monkeypatch):
    fft, gemm, tiny = "#include <cufftdx.hpp>\n", "#include <cublasdx.hpp>\n", TINY.format(i=3)
    monkeypatch.setitem(toolchain._pch, "heavy_compiles", {"cublasdx": 0, "cufftdx": 0})
    monkeypatch.setenv(toolchain.ENV_PCH, "auto")
    assert not toolchain._pch_wanted(fft) and not toolchain._pch_wanted(gemm)
    assert not toolchain._pch_wanted(tiny)
    toolchain._pch["heavy_compiles"]["cublasdx"] = 1  # GEMM: from the second compile on
    assert toolchain._pch_wanted(gemm) and not toolchain._pch_wanted(fft)
    toolchain._pch["heavy_compiles"]["cufftdx"] = 2
    assert not toolchain._pch_wanted(fft)
    toolchain._pch["heavy_compiles"]["cufftdx"] = 3  # FFT: from the fourth compile on
    assert toolchain._pch_wanted(fft)
    assert not toolchain._pch_wanted(tiny)  # never for sources without the mathdx headers
    monkeypatch.setenv(toolchain.ENV_PCH, "0")
    assert not toolchain._pch_wanted(fft) and not toolchain._pch_wanted(gemm)
    monkeypatch.setenv(toolchain.ENV_PCH, "1")
    toolchain._pch["heavy_compiles"] = {"cublasdx": 0, "cufftdx": 0}
    assert toolchain._pch_wanted(fft) and toolchain._pch_wanted(gemm)
