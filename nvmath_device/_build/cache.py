# SPDX-License-Identifier: Apache-2.0
"""Content-addressed disk cache for generated code (LTO-IR, traits).

Environment variables
---------------------
``NUMBA_MATHDX_CACHE_DIR``
    Cache folder. Unset: ``$XDG_CACHE_HOME/numba-mathdx`` (``~/.cache/numba-mathdx``).
    ``0``, ``off``, ``false``, ``no``, ``none`` or an empty value disable the disk cache
    (generated code is then kept in memory for the life of the process only).
``NUMBA_MATHDX_CACHE_MAX_MB``
    Size bound in MiB (default 4096). Past it, least-recently-used entries are removed.

Entry format: ``NMDX2\\n`` + SHA-256(key) + SHA-256(payload) + payload length (8 bytes) +
payload. Entries of another format version (``NMDX1``...) are quiet misses, rebuilt.
Entries are written to a temporary file in the same folder and renamed into place
(``os.replace``), so a reader sees either nothing or a whole file, and two processes writing
the same entry both succeed (the later rename wins; both wrote the same bytes). A truncated,
corrupted or misplaced entry fails the checks: it is reported with a warning, removed and
rebuilt, never used. Reading an entry refreshes its modification time (the LRU clock).

Eviction (past ``NUMBA_MATHDX_CACHE_MAX_MB``, after every write) removes least-recently-used
entries but never the entry just written, so a bound smaller than one entry still caches the
newest one. Removing an entry another process is reading is harmless (POSIX: the reader keeps
the file it opened).

Building an entry: :func:`building` serialises the builders of one key, across threads (a lock
per key) and across processes (``fcntl.flock`` on ``<folder>/<xx>/.lock-<key>``, removed by its
holder when done). Callers check the cache again once they hold it, so N processes starting
with an empty cache compile each key once; the others wait and read the entry. A holder killed
mid-compile releases its lock (the kernel drops flocks of dead processes); a holder that hangs
past ``_LOCK_TIMEOUT`` seconds is given up on, and the waiter compiles too (a duplicate compile,
never a damaged entry: writes stay atomic). Without a writable folder (or without ``fcntl``)
only the threads of one process are serialised.

A folder that cannot be written (read-only, full disk, no permission) is reported once per
process with a ``RuntimeWarning``; compiles then work as usual and their results are kept in
memory for the life of the process.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import tempfile
import threading
import time
import warnings

log = logging.getLogger("nvmath_device")

ENV_DIR = "NUMBA_MATHDX_CACHE_DIR"
ENV_MAX_MB = "NUMBA_MATHDX_CACHE_MAX_MB"
DEFAULT_MAX_MB = 4096
_DISABLED = ("", "0", "off", "false", "no", "none")
_MAGIC = b"NMDX2\n"
_MAGIC_FAMILY = b"NMDX"  # entries of another format version are silent misses, not corruption
_HEAD = len(_MAGIC) + 32 + 32 + 8
_SUFFIX = ".bin"
_TMP_PREFIX = ".tmp-"
_STALE_TMP_SECONDS = 3600.0  # temp files older than this are leftovers of killed writers
_LOCK_PREFIX = ".lock-"
_LOCK_TIMEOUT = 900.0  # seconds a builder waits for another one's lock before compiling itself
_LOCK_POLL = 0.05

_memory: dict[str, bytes] = {}
_lock = threading.Lock()
stats = {"hits": 0, "misses": 0, "corrupt": 0, "writes": 0, "write_errors": 0, "lock_waits": 0}
_key_locks: dict[str, threading.Lock] = {}
_unwritable_warned: set = set()


def cache_dir() -> str | None:
    """The cache folder, or None when the disk cache is disabled (see the module docstring)."""
    env = os.environ.get(ENV_DIR)
    if env is not None:
        if env.strip().lower() in _DISABLED:
            return None
        return os.path.abspath(os.path.expanduser(env.strip()))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "numba-mathdx")


def max_bytes() -> int:
    """The size bound from ``NUMBA_MATHDX_CACHE_MAX_MB`` (a bad value warns and uses the default)."""
    raw = os.environ.get(ENV_MAX_MB)
    if raw is None or not raw.strip():
        return DEFAULT_MAX_MB * 2**20
    try:
        mb = float(raw)
        if mb != mb or mb < 0:  # NaN or negative
            raise ValueError
    except ValueError:
        warnings.warn(f"{ENV_MAX_MB}={raw!r} is not a non-negative number of MiB; using {DEFAULT_MAX_MB}",
                      RuntimeWarning, stacklevel=2)
        return DEFAULT_MAX_MB * 2**20
    return int(mb * 2**20)


def make_key(*parts) -> str:
    """SHA-256 hex digest of ``parts`` (length-prefixed, so part boundaries matter)."""
    h = hashlib.sha256()
    for p in parts:
        b = p if isinstance(p, bytes) else str(p).encode()
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def _path(root: str, key: str) -> str:
    return os.path.join(root, key[:2], key + _SUFFIX)


def _encode(key: str, payload: bytes) -> bytes:
    return (_MAGIC + hashlib.sha256(key.encode()).digest() + hashlib.sha256(payload).digest()
            + len(payload).to_bytes(8, "little") + payload)


def _decode(key: str, blob: bytes) -> bytes | None:
    """The payload if ``blob`` is a whole, intact entry for ``key``; else None."""
    if len(blob) < _HEAD or not blob.startswith(_MAGIC):
        return None
    o = len(_MAGIC)
    if blob[o : o + 32] != hashlib.sha256(key.encode()).digest():
        return None
    digest = blob[o + 32 : o + 64]
    size = int.from_bytes(blob[o + 64 : _HEAD], "little")
    payload = blob[_HEAD:]
    if len(payload) != size or hashlib.sha256(payload).digest() != digest:
        return None
    return payload


def get(key: str) -> bytes | None:
    """Payload for ``key`` from memory or disk, or None (a miss).

    A damaged disk entry is a miss: it is counted in ``stats["corrupt"]``, reported with a
    ``RuntimeWarning`` and removed (unless another process has replaced it meanwhile).
    """
    payload = _memory.get(key)
    if payload is not None:
        stats["hits"] += 1
        return payload
    root = cache_dir()
    if root is None:
        stats["misses"] += 1
        return None
    path = _path(root, key)
    try:
        with open(path, "rb") as f:
            ident = _ident(os.fstat(f.fileno()))
            blob = f.read()
    except OSError:
        stats["misses"] += 1
        return None
    payload = _decode(key, blob)
    if payload is None:
        stats["misses"] += 1
        if blob.startswith(_MAGIC_FAMILY) and not blob.startswith(_MAGIC):
            return None  # written by another format version: rebuilt and overwritten quietly
        stats["corrupt"] += 1
        warnings.warn(f"numba-mathdx cache entry {path} is truncated or corrupted "
                      f"({len(blob)} bytes); it will be rebuilt", RuntimeWarning, stacklevel=2)
        try:  # remove it only if it is still the file we read (a writer may have replaced it)
            if _ident(os.stat(path)) == ident:
                os.unlink(path)
        except OSError:
            pass
        return None
    try:
        os.utime(path)  # LRU: reading counts as use
    except OSError:
        pass
    stats["hits"] += 1
    with _lock:
        _memory[key] = payload
    return payload


def _ident(st: os.stat_result):
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def put(key: str, payload: bytes) -> bool:
    """Store ``payload`` under ``key`` (memory always; disk when enabled).

    Never raises on disk errors: the first one for a folder is reported with a
    ``RuntimeWarning`` (see :func:`_write_failed`), later ones are logged at DEBUG. Returns True
    when the entry was written to disk.
    """
    payload = bytes(payload)
    with _lock:
        _memory[key] = payload
    root = cache_dir()
    if root is None:
        return False
    path = _path(root, key)
    blob = _encode(key, payload)
    for attempt in (0, 1):  # a concurrent clear() may remove the folder between makedirs and mkstemp
        tmp = None
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=_TMP_PREFIX)
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)
            tmp = None
            stats["writes"] += 1
            break
        except FileNotFoundError as e:
            if attempt:
                _write_failed(root, path, e)
                return False
        except OSError as e:
            _write_failed(root, path, e)
            return False
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
    evict(root, keep=path)
    return True


def _write_failed(root: str, path: str, e: OSError) -> None:
    """Report a failed write: once per folder and process as a RuntimeWarning, then at DEBUG."""
    stats["write_errors"] += 1
    if root in _unwritable_warned:
        log.debug("numba-mathdx: could not write cache entry %s: %s", path, e)
        return
    _unwritable_warned.add(root)
    why = {errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
           errno.EPERM: "permission denied", errno.ENOSPC: "no space left on device",
           errno.EDQUOT: "disk quota exceeded"}.get(e.errno, str(e))
    warnings.warn(f"numba-mathdx: cannot write to the cache folder {root} ({why}: {e}); generated "
                  f"code is compiled as usual but kept in memory for this process only. Set "
                  f"{ENV_DIR} to a writable folder (or to 'off' to silence this)",
                  RuntimeWarning, stacklevel=3)


def get_or_build(key: str, build) -> bytes:
    """The entry under ``key``: from the cache, else ``build()``'s bytes, stored. One builder per
    key across threads and processes (:func:`building`); a caller that waited for another reads
    that one's entry instead of building again."""
    blob = get(key)
    if blob is None:
        with building(key):
            blob = get(key)  # built by another while this one waited
            if blob is None:
                blob = build()
                put(key, blob)
    return blob


@contextlib.contextmanager
def building(key: str):
    """Hold the build lock of ``key`` (see the module docstring); callers check :func:`get`
    again inside it before compiling. Never raises on disk errors (then only threads of this
    process are serialised)."""
    with _lock:
        tlock = _key_locks.setdefault(key, threading.Lock())
    if not tlock.acquire(blocking=False):
        stats["lock_waits"] += 1
        tlock.acquire()
    try:
        held = _flock(key)
        try:
            yield
        finally:
            if held is not None:
                _funlock(*held)
    finally:
        tlock.release()


def _flock(key: str):
    """``(fd, path)`` of the held lock file of ``key``, or None (no folder, no fcntl, an OS
    error, or another holder past ``_LOCK_TIMEOUT``)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return None
    root = cache_dir()
    if root is None:
        return None
    path = os.path.join(root, key[:2], _LOCK_PREFIX + key)
    deadline = time.monotonic() + _LOCK_TIMEOUT
    waited = False
    while True:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            log.debug("numba-mathdx: no lock file %s (%s); builders in other processes may duplicate "
                      "this compile", path, e)
            return None
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if not waited:
                        waited = True
                        stats["lock_waits"] += 1
                    if time.monotonic() > deadline:
                        log.warning("numba-mathdx: another process has held %s for over %.0f s; "
                                    "compiling here too", path, _LOCK_TIMEOUT)
                        os.close(fd)
                        return None
                    time.sleep(_LOCK_POLL)
            # the holder before us removes the file when done: our lock is only good if the
            # file we locked is still the one at ``path`` (else lock the new one)
            st = os.fstat(fd)
            try:
                cur = os.stat(path)
            except FileNotFoundError:
                cur = None
            if cur is not None and (cur.st_dev, cur.st_ino) == (st.st_dev, st.st_ino):
                return fd, path
        except OSError as e:
            log.debug("numba-mathdx: could not lock %s: %s", path, e)
            os.close(fd)
            return None
        os.close(fd)


def _funlock(fd: int, path: str) -> None:
    try:
        st = os.fstat(fd)
        cur = os.stat(path)
        if (cur.st_dev, cur.st_ino) == (st.st_dev, st.st_ino):
            os.unlink(path)  # still ours: remove it before unlocking (waiters then re-open)
    except OSError:
        pass
    finally:
        os.close(fd)


def _walk(root: str):
    """Yield (path, is_temp) for every entry and temp file under ``root``; tolerant of races."""
    try:
        subs = os.listdir(root)
    except OSError:
        return
    for sub in subs:
        d = os.path.join(root, sub)
        if len(sub) != 2 or not os.path.isdir(d):
            continue
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            if name.endswith(_SUFFIX) and not name.startswith("."):
                yield os.path.join(d, name), False
            elif name.startswith(_TMP_PREFIX):
                yield os.path.join(d, name), True


def entries(root: str | None = None) -> list[tuple[str, int, float]]:
    """``(path, size, mtime)`` of every entry, least recently used first."""
    root = root or cache_dir()
    out = []
    if root is None:
        return out
    for p, is_tmp in _walk(root):
        if is_tmp:
            continue
        try:
            st = os.stat(p)
        except OSError:
            continue
        out.append((p, st.st_size, st.st_mtime))
    out.sort(key=lambda e: e[2])
    return out


def evict(root: str | None = None, limit: int | None = None, keep: str | None = None) -> int:
    """Remove least-recently-used entries until the total is within ``limit`` bytes
    (default: :func:`max_bytes`), and temp files left by killed writers. The entry at path
    ``keep`` (the one just written) is never removed. Returns how many entries were removed."""
    root = root or cache_dir()
    if root is None:
        return 0
    limit = max_bytes() if limit is None else limit
    now = time.time()
    for p, is_tmp in _walk(root):
        if is_tmp:
            try:
                if now - os.stat(p).st_mtime > _STALE_TMP_SECONDS:
                    os.unlink(p)
            except OSError:
                pass
    ents = entries(root)
    total = sum(e[1] for e in ents)
    n = 0
    for p, size, _ in ents:
        if total <= limit:
            break
        if p == keep:
            continue
        try:
            os.unlink(p)
            n += 1
        except OSError:
            pass
        total -= size  # gone either way (another process may have removed it first)
    return n



def info() -> dict:
    """Where the cache is and what it holds: ``enabled``, ``location``, ``entries``,
    ``total_bytes``, ``limit_bytes``, ``env`` (the environment variables and their values)."""
    root = cache_dir()
    ents = entries(root) if root else []
    return {
        "enabled": root is not None,
        "location": root,
        "entries": len(ents),
        "total_bytes": sum(e[1] for e in ents),
        "limit_bytes": max_bytes(),
        "env": {ENV_DIR: os.environ.get(ENV_DIR), ENV_MAX_MB: os.environ.get(ENV_MAX_MB)},
    }


def clear(memory_too: bool = True) -> int:
    """Remove every entry (and temp file); returns how many entries were removed."""
    if memory_too:
        with _lock:
            _memory.clear()
    root = cache_dir()
    if root is None:
        return 0
    n = 0
    for p, is_tmp in list(_walk(root)):
        try:
            os.unlink(p)
            n += not is_tmp
        except OSError:
            pass
    try:
        for sub in os.listdir(root):
            d = os.path.join(root, sub)
            if len(sub) == 2 and os.path.isdir(d):
                try:
                    os.rmdir(d)  # only if empty; a concurrent writer recreates it
                except OSError:
                    pass
    except OSError:
        pass
    return n
