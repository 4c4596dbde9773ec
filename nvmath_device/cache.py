# SPDX-License-Identifier: Apache-2.0
"""The disk cache of generated code: ``python -m nvmath_device.cache info|clear``.

numba-mathdx compiles each FFT/GEMM descriptor once per machine with NVRTC and keeps the
LTO-IR and traits in a content-addressed disk cache (the key covers the generated source,
the compile flags, the NVRTC version, the cuFFTDx/cuBLASDx header versions and the target
architecture; not the nvJitLink version: LTO-IR links with any nvJitLink at least as new).

Environment variables
---------------------
``NUMBA_MATHDX_CACHE_DIR``
    The cache folder (default ``$XDG_CACHE_HOME/numba-mathdx``, i.e.
    ``~/.cache/numba-mathdx``). ``0``, ``off`` or an empty value disable the disk cache.
``NUMBA_MATHDX_CACHE_MAX_MB``
    Size bound in MiB (default 4096); least-recently-used entries are removed past it.
``NUMBA_MATHDX_PCH``
    NVRTC automatic precompiled headers within one process: ``auto`` (default: from the
    second cuBLASDx and the fourth cuFFTDx compile of a process on, where creating the PCH
    has paid off), ``1`` (from the first), ``0`` (never).

Several processes (or threads) that need the same code at once compile it once: the first
holds a lock file per entry (``.lock-<key>``, ``fcntl.flock``) while the others wait and then
read its entry. A cache folder that cannot be written is reported once per process with a
``RuntimeWarning``; compiling then works as usual, the results kept in memory only.

Kernels that call our device functions can use ``@cuda.jit(cache=True)``: Numba's own
cache (``NUMBA_CACHE_DIR``) then keeps the linked cubin, and a later process loads it
without running NVRTC or nvJitLink.
"""

from __future__ import annotations

import argparse
import json
import sys

from ._build import cache as _cache

__all__ = ["clear", "info", "main"]


def info() -> dict:
    """Location, entry count, total size and limit of the disk cache.

    Returns
    -------
    dict
        ``enabled`` (bool), ``location`` (str or None), ``entries`` (int),
        ``total_bytes`` (int), ``limit_bytes`` (int), ``env`` (the variables as set).
    """
    return _cache.info()


def clear() -> int:
    """Remove every entry of the disk cache (and this process's in-memory copies).

    Returns
    -------
    int
        How many entries were removed.
    """
    return _cache.clear()


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def main(argv: list[str] | None = None) -> int:
    """Command line: ``info`` (default) or ``clear``; ``--json`` prints ``info`` as JSON.

    Parameters
    ----------
    argv : list of str, optional
        Arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status.
    """
    parser = argparse.ArgumentParser(
        prog="python -m nvmath_device.cache",
        description="numba-mathdx disk cache of generated code (LTO-IR and traits).",
        epilog=f"Environment: {_cache.ENV_DIR} (folder; 0/off/empty disables), "
               f"{_cache.ENV_MAX_MB} (size bound in MiB, default {_cache.DEFAULT_MAX_MB}).",
    )
    parser.add_argument("command", nargs="?", default="info", choices=("info", "clear"))
    parser.add_argument("--json", action="store_true", help="print info as JSON")
    args = parser.parse_args(argv)
    if args.command == "clear":
        d = _cache.cache_dir()
        if d is None:
            print(f"numba-mathdx disk cache is disabled ({_cache.ENV_DIR}="
                  f"{_cache.info()['env'][_cache.ENV_DIR]!r}); nothing to clear")
            return 0
        n = clear()
        print(f"removed {n} entries from {d}")
        return 0
    i = info()
    if args.json:
        print(json.dumps(i, indent=2))
        return 0
    if not i["enabled"]:
        print(f"numba-mathdx disk cache: disabled ({_cache.ENV_DIR}={i['env'][_cache.ENV_DIR]!r})")
        print(f"limit:    {_mib(i['limit_bytes'])} ({_cache.ENV_MAX_MB})")
        return 0
    print("numba-mathdx disk cache: enabled")
    print(f"location: {i['location']}" + ("" if i["env"][_cache.ENV_DIR] else f" (set {_cache.ENV_DIR} to move)"))
    print(f"entries:  {i['entries']}")
    print(f"size:     {_mib(i['total_bytes'])} ({i['total_bytes']} bytes)")
    print(f"limit:    {_mib(i['limit_bytes'])} ({_cache.ENV_MAX_MB})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
