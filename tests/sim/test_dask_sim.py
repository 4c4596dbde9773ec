# SPDX-License-Identifier: Apache-2.0
"""kernels on Dask arrays of NumPy blocks, run under the CUDA simulator: every function's chunked
result equals the one call on the whole array (several blocks, an uneven last one), FIR and STFT
with time blocks (halos spanning more than one block), add_noise's noise per row, Dask-array
taps, and a distributed Client (in-process) computing a FIR."""

import dask
import dask.array as da
import numpy as np
import pytest

import kernels

rng = np.random.default_rng(23)


@pytest.fixture(scope="module", autouse=True)
def _traits():
    """Every FFT pair these tests use, in one NVRTC run."""
    from kernels._fused import prefetch

    prefetch([(64, np.float32, r) for r in (False, True)])


@pytest.fixture(autouse=True)
def _threads():
    """Dask's threaded scheduler (the default for arrays): blocks computed from several threads."""
    with dask.config.set(scheduler="threads", num_workers=2):
        yield


def _sig(shape, dtype=np.float32):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _same(y, ref, tol=1e-6):
    y = np.asarray(y)
    assert y.shape == ref.shape and y.dtype == ref.dtype
    assert np.linalg.norm(np.ravel(y - ref)) <= tol * np.linalg.norm(np.ravel(ref))


def test_fft_convolve_row_blocks():
    x = _sig((5, 64))
    h = rng.standard_normal(9)
    y = kernels.fft_convolve(da.from_array(x, chunks=(2, 64)), h)
    assert isinstance(y, da.Array) and y.chunks == ((2, 2, 1), (64,))
    _same(y.compute(), kernels.fft_convolve(x, h))


def test_fft_convolve_one_row_and_dask_taps():
    x = _sig((64,), np.complex64)
    h = rng.standard_normal(9)
    y = kernels.fft_convolve(da.from_array(x, chunks=64), da.from_array(h, chunks=4))
    _same(y.compute(), kernels.fft_convolve(x, h))


def test_fir_filter_rows_and_time_blocks():
    """Time blocks of 40, 10, 10, 25, 15 samples and 13 taps: the 12-sample halo of the fourth
    block spans the two 10-sample blocks before it."""
    from scipy.signal import lfilter

    x = _sig((3, 100))
    taps = rng.standard_normal(13)
    dx = da.from_array(x, chunks=((2, 1), (40, 10, 10, 25, 15)))
    y = kernels.fir_filter(dx, taps, fft_size=64)
    assert y.chunks == dx.chunks
    ref = kernels.fir_filter(x, taps, fft_size=64)
    _same(y.compute(), ref)
    _same(y.compute(), lfilter(taps, 1, x.astype(np.float64)).astype(np.float32), 1e-5)


def test_fir_filter_one_long_signal_in_time_blocks():
    x = _sig((150,), np.complex64)
    taps = rng.standard_normal(7)
    y = kernels.fir_filter(da.from_array(x, chunks=50), taps)
    _same(y.compute(), kernels.fir_filter(x, taps))


def test_chained_fir_filters_in_time_blocks():
    """Three chained calls on time blocks (the chain's 36-sample halo spans three blocks) run
    as one filter layer and equal the three calls on the whole signal."""
    x = _sig((2, 120))
    taps = [rng.standard_normal(13) for _ in range(3)]
    y = da.from_array(x, chunks=(2, (40, 10, 10, 25, 35)))
    ref = x
    for t in taps:
        y = kernels.fir_filter(y, t, fft_size=64)
        ref = kernels.fir_filter(ref, t, fft_size=64)
    assert sum(n.startswith("fir_filter") for n in dict(y.dask.layers)) == 1
    _same(y.compute(), ref, 1e-5)


def test_fir_filter_direct_in_time_blocks():
    """method="direct" on time blocks of multiples of 64 samples (the tails' pieces: "auto")."""
    x = _sig((2, 256))
    taps = rng.standard_normal(13)
    y = kernels.fir_filter(da.from_array(x, chunks=(1, (128, 64, 64))), taps, method="direct")
    _same(y.compute(), kernels.fir_filter(x, taps, method="direct"), 1e-6)


def test_stft_power_time_blocks():
    """hop 20 divides no block boundary but 40; frames straddle blocks (64 samples)."""
    x = _sig((3, 300))
    w = np.hanning(64)
    dx = da.from_array(x, chunks=((2, 1), (70, 70, 100, 60)))
    p = kernels.stft_power(dx, w, 20)
    ref = kernels.stft_power(x, w, 20)
    assert p.shape == ref.shape and sum(p.chunks[1]) == ref.shape[1]
    _same(p.compute(), ref)


def test_matched_filter_outputs_computed_together():
    n = 64
    t = _sig(16, np.complex64)
    x = 0.3 * _sig((5, n), np.complex64)
    for b, s in enumerate([3, 17, 40, 47, 5]):
        x[b, s:s + 16] += t
    idx, power, corr = kernels.matched_filter(da.from_array(x, chunks=(2, n)), t, return_correlation=True)
    assert idx.chunks == ((2, 2, 1),) and corr.chunks == ((2, 2, 1), (n,))
    got = dask.compute(idx, power, corr)
    want = kernels.matched_filter(x, t, return_correlation=True)
    np.testing.assert_array_equal(got[0], want[0])
    assert list(got[0]) == [3, 17, 40, 47, 5]
    _same(got[1], want[1])
    _same(got[2], want[2])


def test_add_noise_blocks_draw_their_rows_noise():
    """Each block draws the noise of its rows' places in x (rows 2.. of a block starting at row 0
    would repeat rows 0..'s noise): equal to one call, value for value."""
    x = _sig((5, 64))
    y = kernels.add_noise(da.from_array(x, chunks=(2, 64)), 10.0, seed=5).compute()
    want = kernels.add_noise(x, 10.0, seed=5)
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(kernels.add_noise(x[2:4], 10.0, seed=5, row_offset=2), want[2:4])
    assert not np.array_equal(kernels.add_noise(x[2:4], 10.0, seed=5), want[2:4])


def test_add_noise_complex_with_signal_power():
    x = _sig((3, 32), np.complex64)
    y = kernels.add_noise(da.from_array(x, chunks=(1, 32)), 3.0, seed=9, signal_power=2.0, row_offset=4)
    np.testing.assert_array_equal(y.compute(), kernels.add_noise(x, 3.0, seed=9, signal_power=2.0, row_offset=4))


def test_batched_gemm_batch_blocks():
    from kernels.gemm import _batched_descriptor
    from nvmath_device._build.gemm_sim_tables import prefetch_fragment_tables

    prefetch_fragment_tables([_batched_descriptor(16, 16, 16, np.float32)])
    a, b, c = _sig((5, 16, 16)), _sig((5, 16, 16)), _sig((5, 16, 16))
    da_, db, dc = (da.from_array(v, chunks=(2, 16, 16)) for v in (a, b, c))
    d = kernels.batched_gemm(da_, db.rechunk((3, 16, 16)), c=dc, alpha=1.5, beta=-0.5)
    assert d.chunks[1:] == ((16,), (16,))
    _same(d.compute(), kernels.batched_gemm(a, b, c=c, alpha=1.5, beta=-0.5))


def test_beamform_spectra_batch_blocks():
    x = _sig((3, 4, 32), np.complex64)
    w = _sig((4, 4), np.complex64)
    y = kernels.beamform_spectra(da.from_array(x, chunks=(2, 4, 32)), w)
    assert y.chunks == ((2, 1), (4,), (32,))
    _same(y.compute(), kernels.beamform_spectra(x, w))


def test_distributed_client_in_process():
    """A distributed Client (one in-process worker thread) computes a chunked FIR."""
    from distributed import Client, LocalCluster

    x = _sig((3, 120))
    taps = rng.standard_normal(5)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as c, \
            Client(c) as client:
        y = client.compute(kernels.fir_filter(da.from_array(x, chunks=(2, 50)), taps)).result()
    _same(y, kernels.fir_filter(x, taps))


def test_two_workers_share_a_chained_time_block_fir():
    """Two in-process workers (distributed moves the tail of the first half between them as it
    would between GPUs): two chained FIR calls on time blocks, the signal's first half on one
    worker and its second on the other, equal the chained calls on the whole signal."""
    from distributed import Client, LocalCluster, wait

    x = _sig((2, 160))
    t1, t2 = rng.standard_normal(9), rng.standard_normal(6)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as c, \
            Client(c) as client:
        w0, w1 = sorted(client.scheduler_info()["workers"])
        first = client.persist(da.from_array(x[:, :80], chunks=(2, 40)), workers=[w0])
        second = client.persist(da.from_array(x[:, 80:], chunks=(2, 40)), workers=[w1])
        wait([first, second])
        holders = {w for part in (first, second) for ws in client.who_has(part).values() for w in ws}
        dx = da.concatenate([first, second], axis=1)
        y = client.compute(kernels.fir_filter(kernels.fir_filter(dx, t1), t2)).result()
    assert len(holders) == 2
    _same(y, kernels.fir_filter(kernels.fir_filter(x, t1), t2), 1e-5)


def test_the_gpus_job_on_an_in_process_cluster():
    """kernels._gpus (``python -m kernels --gpus``) with NumPy blocks: signals made on the worker,
    the NumPy check of sampled rows, chained passes timed, one row per worker count."""
    from distributed import LocalCluster

    from kernels import _gpus
    from kernels.__main__ import lowpass_taps

    logged = []
    rows = _gpus.scaling([1], 5, 64, lowpass_taps(7, 0.06), 2, 2, kind="numpy", log=logged.append,
                         cluster=lambda g: LocalCluster(n_workers=g, threads_per_worker=1, processes=False,
                                                        dashboard_address=None))
    (row,) = rows
    assert row["ok"] and row["check_rel_err"] < 1e-5 and row["checked_rows"] == 5
    assert row["blocks_per_worker"] == [3] and row["rows"] == 5 and row["seconds"] > 0
    assert "check of 5 rows against NumPy" in logged[-1]
