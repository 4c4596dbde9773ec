# SPDX-License-Identifier: Apache-2.0
"""benchmarks/ceilings.py's FFT-throughput kernel under the simulator: its forward + inverse chain
really runs the FFTs (after rescaling, each step returns its input, so every thread's sum is the
known one; a chain that skipped or broke an FFT would not), for the fused kernels' own c2c and
folded real descriptor pairs; the forward-only chain stays finite."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from kernels._fused import can_fold, fft_pair
from tests.benchmark_script import load


def _ceilings():
    return load("ceilings")


@pytest.mark.parametrize("n, real, reps", [(64, False, 2), (64, True, 2), (128, True, 1)])
def test_fft_chain_pair_returns_its_input(n, real, reps):
    c = _ceilings()
    fwd, inv = fft_pair(n, np.float32, real, folded=real and can_fold(n))
    kern = c.fft_chain_kernel(fwd, inv)
    blocks = 2
    out = cuda.to_device(np.full(blocks * fwd.ffts_per_block_value * fwd.block_dim[0], np.nan, np.float32))
    kern[blocks, fwd.block_dim, 0, fwd.shared_memory_size](out, reps)
    want = c.fft_chain_sums(fwd, blocks)
    np.testing.assert_allclose(out.copy_to_host(), want, atol=2e-5)
    assert np.abs(want).max() > 0.05  # a test that zeros would not pass


@pytest.mark.parametrize("n, real", [(64, False), (128, True), (512, False)])
def test_fft_chain_of_our_own_fft_returns_its_input(n, real):
    """The same meter on kernels._regfft's pairs (what fused_kernels.py measures by default)."""
    from kernels import _regfft

    c = _ceilings()
    fwd, inv = _regfft.pair(n, real=real)
    kern = c.fft_chain_kernel(fwd, inv)
    out = cuda.to_device(np.full(2 * fwd.ffts_per_block_value * fwd.block_dim[0], np.nan, np.float32))
    kern[2, fwd.block_dim, 0, fwd.shared_memory_size](out, 2)
    want = c.fft_chain_sums(fwd, 2)
    np.testing.assert_allclose(out.copy_to_host(), want, atol=2e-5)
    assert np.abs(want).max() > 0.05


def test_fft_chain_forward_only_stays_finite():
    c = _ceilings()
    fwd, _ = fft_pair(64, np.float32, False)
    kern = c.fft_chain_kernel(fwd)
    out = cuda.to_device(np.full(fwd.ffts_per_block_value * fwd.block_dim[0], np.nan, np.float32))
    kern[1, fwd.block_dim, 0, fwd.shared_memory_size](out, 4)
    got = out.copy_to_host()
    assert np.isfinite(got).all() and np.abs(got).max() < 10
