# SPDX-License-Identifier: Apache-2.0
"""benchmarks/fft_convolution.py's fused kernel under the simulator, with cuFFTDx's FFT and with
our own (``own_kernel``, kernels._regfft), h prefetched or not: y = ifft(fft(x) * h) per row
against NumPy float64, including a last block with rows past the batch; the recorded kernels are
linked for sm_90 with the rest of the simulator suite."""

from __future__ import annotations

import numpy as np
import pytest

from tests.benchmark_script import load

fc = load("fft_convolution")


@pytest.mark.parametrize("prefetch", [False, True])
@pytest.mark.parametrize("build,size", [("own_kernel", 64), ("own_kernel", 512), ("ours_kernel", 64)])
def test_conv_kernel_matches_numpy(build, size, prefetch):
    kern, block, smem, fpb, cfg = getattr(fc, build)(size, "suggested", "suggested", prefetch, None, True)
    rng = np.random.default_rng(size)
    nrows = fpb + 1  # the last block holds rows past the batch
    x = (rng.standard_normal((nrows, size)) + 1j * rng.standard_normal((nrows, size))).astype(np.complex64)
    h = (rng.standard_normal((nrows, size)) + 1j * rng.standard_normal((nrows, size))).astype(np.complex64)
    y = np.full_like(x, np.nan)
    kern[-(-nrows // fpb), block, 0, smem](x.ravel(), (h / size).astype(np.complex64).ravel(), y.ravel(), nrows)
    ref = np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * h, axis=-1)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-6, cfg


def test_own_unsupported():
    assert fc.own_unsupported(4096, 16) is None
    assert "at least 16 threads" in fc.own_unsupported(64, 8)
