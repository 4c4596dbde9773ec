# SPDX-License-Identifier: Apache-2.0
"""FFT.execute inside user kernels on a real GPU, against numpy.fft in float64."""

import itertools

import numpy as np
import pytest

from nvmath_device import FFT
from tests.fft_kernels import random_input, reference, run_fft

pytestmark = pytest.mark.gpu

TOL = {np.float32: 1e-5, np.float64: 1e-12}
SIZES = [2, 3, 5, 8, 16, 17, 32, 64, 100, 128, 243, 256, 512, 1000, 1024, 2048, 4096]
KINDS = [("c2c", "forward"), ("c2c", "inverse"), ("r2c", None), ("c2r", None)]


def _rel_err(y, ref):
    return np.linalg.norm((y - ref).ravel()) / np.linalg.norm(ref.ravel())


def _check(fft, batch=None, seed=0):
    rng = np.random.default_rng(seed)
    if batch is None:
        batch = fft.ffts_per_block_value * 3 if fft.execution == "Block" else 70
    x = random_input(fft, batch, rng)
    y = run_fft(fft, x)
    assert not np.isnan(y).any(), f"{fft}: output not fully written"
    err = _rel_err(y, reference(fft, x))
    assert err < TOL[fft.precision], f"{fft}: relative error {err:.2e}"


def _block_cases():
    for size, (ft, d), prec in itertools.product(SIZES, KINDS, [np.float32, np.float64]):
        epts = FFT.valid_elements_per_thread(size, prec, sm=90)
        if not epts:
            continue
        extra = {epts[0], epts[-1]} if (ft, d) == ("c2c", "forward") else set()
        for ept in sorted({"suggested"} | extra, key=str):
            yield pytest.param(
                size, ft, d, prec, ept, id=f"{size}-{ft}-{d}-{np.dtype(prec).name}-ept{ept}"
            )


@pytest.mark.parametrize("size,fft_type,direction,precision,ept", list(_block_cases()))
def test_block_fft_matches_numpy(size, fft_type, direction, precision, ept):
    fft = FFT(
        size=size,
        precision=precision,
        fft_type=fft_type,
        direction=direction,
        elements_per_thread=ept,
        execution="Block",
    )
    _check(fft)


@pytest.mark.parametrize("fpb", [1, 2, 4, "suggested"])
def test_block_fft_ffts_per_block(fpb):
    fft = FFT(
        size=256,
        precision=np.float32,
        direction="forward",
        elements_per_thread=8,
        ffts_per_block=fpb,
    )
    _check(fft)


def _thread_cases():
    for size, kind, prec in itertools.product([2, 4, 7, 8, 16, 32, 40, 64], KINDS, [np.float32, np.float64]):
        if prec is np.float64 and size > 40:  # cuFFTDx's Thread limit in fp64 (the CPU tests check the error)
            continue
        yield pytest.param(size, kind, prec, id=f"{size}-{kind[0]}-{kind[1]}-{np.dtype(prec).name}")


@pytest.mark.parametrize("size,kind,precision", list(_thread_cases()))
def test_thread_fft_matches_numpy(size, kind, precision):
    fft = FFT(size=size, precision=precision, fft_type=kind[0], direction=kind[1], execution="Thread")
    _check(fft)


@pytest.mark.parametrize("layout", ["natural", "packed", "full"])
@pytest.mark.parametrize("fft_type", ["r2c", "c2r"])
def test_real_fft_layouts(layout, fft_type):
    fft = FFT(
        size=128,
        precision=np.float32,
        fft_type=fft_type,
        elements_per_thread=8,
        real_fft_options={"complex_layout": layout, "real_mode": "normal"},
    )
    rng = np.random.default_rng(1)
    batch = fft.ffts_per_block_value * 2
    sig = rng.standard_normal((batch, 128))
    spec = np.fft.rfft(sig, axis=-1)
    if layout == "natural":
        packed = spec
    elif layout == "packed":
        packed = spec[:, :64].copy()
        packed[:, 0] = spec[:, 0].real + 1j * spec[:, 64].real
    else:
        packed = np.fft.fft(sig, axis=-1)
    if fft_type == "r2c":
        assert fft.output_length == packed.shape[1]
        y = run_fft(fft, sig.astype(np.float32))
        np.testing.assert_allclose(y, packed, rtol=0, atol=1e-3 * np.abs(packed).max())
    else:
        assert fft.input_length == packed.shape[1]
        y = run_fft(fft, packed.astype(np.complex64))
        np.testing.assert_allclose(y, sig * 128, rtol=0, atol=1e-3 * np.abs(sig * 128).max())


def test_forward_and_inverse_in_one_kernel():
    from numba import cuda

    fwd = FFT(
        size=512, precision=np.float32, direction="forward", elements_per_thread=8, ffts_per_block=2
    )
    inv = FFT(
        size=512, precision=np.float32, direction="inverse", elements_per_thread=8, ffts_per_block=2
    )

    @cuda.jit
    def roundtrip(x):
        td = cuda.local.array(fwd.storage_size, dtype=fwd.value_type)
        smem = cuda.shared.array(0, dtype=fwd.value_type)
        b = cuda.blockIdx.x * fwd.ffts_per_block + cuda.threadIdx.y
        for i in range(fwd.elements_per_thread):
            td[i] = x[b, cuda.threadIdx.x + i * fwd.stride]
        fwd.execute(td, smem)
        for i in range(fwd.elements_per_thread):
            td[i] = td[i] * 2.0
        cuda.syncthreads()
        inv.execute(td, smem)
        for i in range(fwd.elements_per_thread):
            x[b, cuda.threadIdx.x + i * fwd.stride] = td[i]

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((8, 512)) + 1j * rng.standard_normal((8, 512))).astype(np.complex64)
    d = cuda.to_device(x)
    roundtrip[4, fwd.block_dim, 0, fwd.shared_memory_size](d)
    np.testing.assert_allclose(d.copy_to_host(), x * 2 * 512, rtol=1e-4, atol=1e-3)
