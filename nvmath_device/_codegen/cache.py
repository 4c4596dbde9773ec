# SPDX-License-Identifier: Apache-2.0
"""Content-addressed disk cache for generated code (LTO-IR, traits).

Location: ``$NUMBA_MATHDX_CACHE_DIR`` if set (set it to ``0``/``off``/empty to disable the
disk cache), else ``$XDG_CACHE_HOME/numba-mathdx`` (``~/.cache/numba-mathdx``).
Entries are written atomically (temp file + ``os.replace``) and carry a SHA-256 of their
payload: a truncated or corrupted entry is reported with a warning and rebuilt, never used.
Least-recently-used entries are evicted past ``$NUMBA_MATHDX_CACHE_MAX_MB`` (default 4096).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import warnings

log = logging.getLogger("nvmath_device")

ENV_DIR = "NUMBA_MATHDX_CACHE_DIR"
ENV_MAX_MB = "NUMBA_MATHDX_CACHE_MAX_MB"
_MAGIC = b"NMDX1\n"
_memory: dict[str, bytes] = {}
stats = {"hits": 0, "misses": 0, "corrupt": 0, "writes": 0}


def cache_dir() -> str | None:
    """The cache folder, or None when the disk cache is disabled."""
    env = os.environ.get(ENV_DIR)
    if env is not None:
        if env.strip().lower() in ("", "0", "off", "false", "no", "none"):
            return None
        return os.path.abspath(os.path.expanduser(env))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "numba-mathdx")


def make_key(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        b = p if isinstance(p, bytes) else str(p).encode()
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def _path(root: str, key: str) -> str:
    return os.path.join(root, key[:2], key + ".bin")


def get(key: str) -> bytes | None:
    """Payload for ``key`` from memory or disk, or None."""
    if key in _memory:
        stats["hits"] += 1
        return _memory[key]
    root = cache_dir()
    if root is None:
        stats["misses"] += 1
        return None
    path = _path(root, key)
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError:
        stats["misses"] += 1
        return None
    payload = _verify(blob)
    if payload is None:
        stats["corrupt"] += 1
        stats["misses"] += 1
        warnings.warn(f"numba-mathdx cache entry {path} is corrupted; it will be rebuilt", RuntimeWarning, stacklevel=2)
        try:
            os.unlink(path)
        except OSError:
            pass
        return None
    try:
        os.utime(path)  # LRU: reading counts as use
    except OSError:
        pass
    stats["hits"] += 1
    _memory[key] = payload
    return payload


def _verify(blob: bytes) -> bytes | None:
    head = len(_MAGIC) + 32 + 8
    if len(blob) < head or not blob.startswith(_MAGIC):
        return None
    digest = blob[len(_MAGIC) : len(_MAGIC) + 32]
    size = int.from_bytes(blob[len(_MAGIC) + 32 : head], "little")
    payload = blob[head:]
    if len(payload) != size or hashlib.sha256(payload).digest() != digest:
        return None
    return payload


def put(key: str, payload: bytes) -> None:
    """Store ``payload`` under ``key`` (memory always; disk when enabled). Never raises on disk errors."""
    _memory[key] = payload
    root = cache_dir()
    if root is None:
        return
    path = _path(root, key)
    blob = _MAGIC + hashlib.sha256(payload).digest() + len(payload).to_bytes(8, "little") + payload
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
        stats["writes"] += 1
    except OSError as e:
        log.warning("numba-mathdx: could not write cache entry %s: %s", path, e)
        return
    _evict(root)


def entries(root: str | None = None):
    """(path, size, mtime) of every entry, oldest first."""
    root = root or cache_dir()
    out = []
    if root is None or not os.path.isdir(root):
        return out
    for sub in os.listdir(root):
        d = os.path.join(root, sub)
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            if name.endswith(".bin"):
                p = os.path.join(d, name)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                out.append((p, st.st_size, st.st_mtime))
    out.sort(key=lambda e: e[2])
    return out


def _evict(root: str) -> None:
    limit = int(float(os.environ.get(ENV_MAX_MB, "4096")) * 2**20)
    ents = entries(root)
    total = sum(e[1] for e in ents)
    for p, size, _ in ents:
        if total <= limit:
            break
        try:
            os.unlink(p)
            total -= size
        except OSError:
            pass


def clear(memory_too: bool = True) -> int:
    """Remove every entry; returns how many files were removed."""
    if memory_too:
        _memory.clear()
    n = 0
    for p, _, _ in entries():
        try:
            os.unlink(p)
            n += 1
        except OSError:
            pass
    return n
