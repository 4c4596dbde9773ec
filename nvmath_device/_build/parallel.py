# SPDX-License-Identifier: Apache-2.0
"""Build the LTO-IR of many FFT and GEMM descriptors at once, in parallel child processes.

NVRTC runs the compiles of one process one after the other; child processes compile in
parallel. Results go to the disk cache, where the parent (and every later process) reads them.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import pickle
import subprocess
import sys

from . import cache, fft_codegen, gemm_codegen, pipeline_codegen, tensor_codegen

__all__ = ["build_ltoir", "build_tensor_ops"]


def _build_one(item) -> bool:
    kind, desc = item
    if kind == "tensor":
        desc.ltoir()  # a unit with its own ltoir(): TensorOp (_tensor_code) or PipelineOp (_pipeline)
    else:
        (fft_codegen.fft_ltoir if kind == "fft" else gemm_codegen.gemm_ltoir)(desc)
    return True


def _run(todo, workers) -> None:
    workers = workers or min(len(todo), os.cpu_count() or 1)
    if workers <= 1 or len(todo) <= 1 or cache.cache_dir() is None:
        for item in todo:
            _build_one(item)
    else:
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as ex:
            list(ex.map(_build_one, todo))


_CHILD = ("import pickle, sys; from nvmath_device._build.parallel import _build_one; "
          "_build_one(pickle.loads(sys.stdin.buffer.read()))")


def build_tensor_ops(ops, workers: int | None = None) -> None:
    """Compile the units of many tensor operations (``TensorOp``) not cached yet, in parallel
    (a kernel of the tensor API links several: copies, execute, fragments), into the disk cache.

    Called implicitly while a kernel links, so it must not re-run the user's script: the workers
    are fresh interpreters (``python -c``, not multiprocessing, whose spawn imports ``__main__``).
    A worker that fails leaves its unit uncompiled; the caller then compiles it in-process, where
    the compiler's log reaches the user intact."""
    ops = list(dict.fromkeys(ops))
    gemm_codegen.prefetch_traits([op.mm for op in ops if op.mm._key[5] == "suggested"])
    todo = [("tensor", op) for op in ops
            if cache.get(tensor_codegen.tensor_key(op.mm, op.kind, op.tensors, op.alignment)) is None]
    cores = os.cpu_count() or 1
    # a child costs an interpreter start and an import of nvmath_device (~3 s): worth it with cores
    # to spare, not on a 2-core machine already running pytest-xdist workers
    workers = workers or (min(len(todo), cores - 1) if cores >= 4 else 1)
    if workers <= 1 or len(todo) <= 1 or cache.cache_dir() is None:
        return  # nothing to gain: the caller compiles them one by one
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    running = []
    for item in todo:
        while len(running) >= workers:
            running.pop(0).wait()
        p = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env)
        p.stdin.write(pickle.dumps(item))
        p.stdin.close()
        running.append(p)
    for p in running:
        p.wait()


def build_ltoir(ffts, mms, workers: int | None = None, pipelines=()) -> None:
    """Compile the LTO-IR of ``ffts`` (with their archs' twiddle tables), ``mms`` and
    ``pipelines`` (PipelineOp: a tile pipeline's K loop) not cached yet, ``workers`` child
    processes at a time (default: one per core), then the FFT traits."""
    ffts = list(dict.fromkeys(ffts))
    mms = list(dict.fromkeys(mms))
    pipelines = list(dict.fromkeys(pipelines))
    # a 'suggested' GEMM block shape is part of the shim text: one NVRTC run for their traits
    gemm_codegen.prefetch_traits([mm for mm in mms if mm._key[5] == "suggested"])
    twiddle_sms = sorted({fft.sm for fft in ffts})
    for sm in twiddle_sms:  # started now, compiled in a child process alongside the units
        fft_codegen._twiddle_job(sm)
    todo = [("fft", f) for f in ffts if cache.get(fft_codegen.ltoir_key(f)) is None]
    todo += [("gemm", m) for m in mms if cache.get(gemm_codegen._ltoir_key(m)) is None]
    todo += [("tensor", op) for op in pipelines if cache.get(pipeline_codegen.pipeline_key(op.mm, op.spec)) is None]
    _run(todo, workers)
    for sm in twiddle_sms:
        fft_codegen.twiddle_ltoir(sm)
    for fft in ffts:  # read back from the cached units (no compile)
        fft_codegen.fft_traits(fft, from_unit=True)
