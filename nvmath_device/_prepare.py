# SPDX-License-Identifier: Apache-2.0
"""``nvmath_device.prepare``: build the code of many descriptors now, in parallel."""

from __future__ import annotations

from . import _dispatch
from ._pipeline import DevicePipeline, PipelineOp
from .fft import FFT
from .gemm import Matmul

__all__ = ["prepare"]


def prepare(*descriptors) -> None:
    """Compile, or fetch from the disk cache, what these descriptors need, now and together.

    With numba's CUDA target: each descriptor's LTO-IR (and cuFFTDx's twiddle tables for the
    FFTs' architectures) and traits, compiled in parallel child processes (one NVRTC compile at
    a time runs in a process). Under ``NUMBA_ENABLE_CUDASIM=1``: what the simulator reads, the
    traits (one NVRTC run per kind and architecture) and the GEMMs' register-fragment tables.
    Everything goes to the disk cache, so that later kernel compiles, trait reads and processes
    do not wait for NVRTC. Without it, each descriptor is compiled on first use, one at a time.

    A ``DevicePipeline`` (``MM.suggest_device_pipeline(...)``) stands for its tile pipeline's K
    loop, as a kernel built on ``MM.suggest_accumulator()`` links it (the unit's text depends on
    the accumulator's layout; another accumulator's unit is compiled when a kernel needs it).

    Parameters
    ----------
    *descriptors : FFT, Matmul or DevicePipeline
        The descriptors, in any number and order (repeats are built once).

    Raises
    ------
    TypeError
        An argument is not an ``FFT``, a ``Matmul`` or a ``DevicePipeline``.
    CompileError
        NVRTC failed (its log is in the message).
    """
    ffts, mms, pipes = [], [], []
    for i, d in enumerate(descriptors):
        if isinstance(d, FFT):
            ffts.append(d)
        elif isinstance(d, Matmul):
            mms.append(d)
        elif isinstance(d, DevicePipeline):
            pipes.append(d)
        else:
            raise TypeError(f"prepare takes FFT and Matmul descriptors and DevicePipelines; argument {i} is a "
                            f"{type(d).__name__}")
    if _dispatch.links_device_code():
        from ._build.parallel import build_ltoir

        build_ltoir(ffts, mms, pipelines=[PipelineOp(p.mm, p._spec) for p in pipes])
        return
    mms += [p.mm for p in pipes]  # the simulator's pipelines run on the GEMM's traits and tables
    from ._build import fft_codegen, gemm_codegen

    fft_codegen.prefetch_traits(ffts)
    gemm_codegen.prefetch_traits(mms)
    more = _dispatch.hook("prepare")
    if more is not None:
        more(mms)
