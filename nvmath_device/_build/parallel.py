# SPDX-License-Identifier: Apache-2.0
"""Build the LTO-IR of many FFT and GEMM descriptors at once, in parallel child processes.

NVRTC runs the compiles of one process one after the other; child processes compile in
parallel. Results go to the disk cache, where the parent (and every later process) reads them.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os

from . import cache, fft_codegen, gemm_codegen

__all__ = ["build_ltoir"]


def _build_one(item) -> bool:
    kind, desc = item
    (fft_codegen.fft_ltoir if kind == "fft" else gemm_codegen.gemm_ltoir)(desc)
    return True


def build_ltoir(ffts, mms, workers: int | None = None) -> None:
    """Compile the LTO-IR of ``ffts`` (with their archs' twiddle tables) and ``mms`` not cached
    yet, ``workers`` child processes at a time (default: one per core), then the FFT traits."""
    ffts = list(dict.fromkeys(ffts))
    mms = list(dict.fromkeys(mms))
    # a 'suggested' GEMM block shape is part of the shim text: one NVRTC run for their traits
    gemm_codegen.prefetch_traits([mm for mm in mms if mm._key[5] == "suggested"])
    twiddle_sms = sorted({fft.sm for fft in ffts})
    for sm in twiddle_sms:  # started now, compiled in a child process alongside the units
        fft_codegen._twiddle_job(sm)
    todo = [("fft", f) for f in ffts if cache.get(fft_codegen.ltoir_key(f)) is None]
    todo += [("gemm", m) for m in mms if cache.get(gemm_codegen._ltoir_key(m)) is None]
    workers = workers or min(len(todo), os.cpu_count() or 1)
    if workers <= 1 or len(todo) <= 1 or cache.cache_dir() is None:
        for item in todo:
            _build_one(item)
    else:
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as ex:
            list(ex.map(_build_one, todo))
    for sm in twiddle_sms:
        fft_codegen.twiddle_ltoir(sm)
    for fft in ffts:  # read back from the cached units (no compile)
        fft_codegen.fft_traits(fft, from_unit=True)
