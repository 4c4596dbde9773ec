# SPDX-License-Identifier: Apache-2.0
"""What the build-layer tests (faults, concurrency) share: a small FFT descriptor and an empty
disk cache that compiles units only (no background twiddle-table compile), byte-comparable."""

from __future__ import annotations

import numpy as np

from nvmath_device import FFT
from nvmath_device._build import cache, fft_codegen, toolchain

LTOIR_MAGIC = bytes.fromhex("ed434e7f")


def small_fft(size):
    """A c2c forward float32 FFT of ``size`` for sm_90 (compiles in a few seconds)."""
    return FFT(size=size, precision=np.float32, fft_type="c2c", direction="forward", sm=90)


def empty_cache(tmp_path, monkeypatch):
    """An empty cache folder and in-memory layer. Unit compiles start no twiddle-table compile,
    and PCH is off: NVRTC's output is deterministic, but with -pch it differs from without (both
    valid), so a recompile can be compared byte for byte."""
    for job in list(fft_codegen._twiddle_jobs.values()):  # an earlier test's background compile
        try:
            job.result(timeout=900)
        except BaseException:  # noqa: S110 - that test's failure to report
            pass
    d = tmp_path / "cache"
    monkeypatch.setenv(cache.ENV_DIR, str(d))
    monkeypatch.delenv(cache.ENV_MAX_MB, raising=False)
    monkeypatch.setenv(toolchain.ENV_PCH, "0")
    monkeypatch.setattr(cache, "_memory", {})
    monkeypatch.setattr(fft_codegen, "_twiddle_job", lambda sm: (None, None))
    return d
