# SPDX-License-Identifier: Apache-2.0
"""kernels on Dask arrays of CuPy blocks, on a dask_cuda.LocalCUDACluster of one worker (one GPU):
fir_filter (row and time blocks), the main job's fft_convolve (kernels._gpus, as ``python -m
kernels --gpus 1`` runs it) and add_noise against the plain call on the whole CuPy array; each
worker builds its descriptors and kernels once (later graphs reuse them: no code generation per
task). Skipped with the reason when dask-cuda is not installed (pip install "numba-mathdx[dask]")."""

import numpy as np
import pytest

import kernels

pytestmark = pytest.mark.gpu

dask_cuda = pytest.importorskip("dask_cuda", reason='needs dask-cuda: pip install "numba-mathdx[dask]"')
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")


def _rel(a, b):
    return float(np.linalg.norm(np.ravel(a - b)) / np.linalg.norm(np.ravel(b)))


@pytest.fixture(scope="module")
def client():
    cluster = dask_cuda.LocalCUDACluster(n_workers=1, dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def test_fir_filter_row_and_time_blocks_on_a_worker(client):
    import cupy as cp

    rng = cp.random.default_rng(1)
    x = rng.standard_normal((64, 1 << 16), dtype=cp.float32)
    taps = np.random.default_rng(1).standard_normal(127)
    want = _host(kernels.fir_filter(x, taps))
    # time blocks of 20000 samples (the last 5536): every block after the first takes a 126-sample halo
    dx = da.from_array(x, chunks=(16, 20000), asarray=False)
    y = kernels.fir_filter(dx, taps)
    assert isinstance(y, da.Array) and type(y._meta).__module__.split(".")[0] == "cupy"
    got = client.compute(y).result()
    assert type(got).__module__.split(".")[0] == "cupy"
    assert _rel(_host(got), want) < 1e-6
    whole_rows = client.compute(kernels.fir_filter(dx.rechunk({1: -1}), taps)).result()
    assert _rel(_host(whole_rows), want) < 1e-7


def test_chained_fir_filters_on_time_blocks_on_a_worker(client):
    """Four chained calls on time blocks of 3000 samples (the chain's halo, 4 x 126, spans one
    block): one filter layer, the chained plain calls' result."""
    import cupy as cp

    x = cp.random.default_rng(2).standard_normal((8, 20000), dtype=cp.float32)
    g = np.random.default_rng(2)
    y, want = da.from_array(x, chunks=(4, 3000), asarray=False), x
    for _ in range(4):
        taps = g.standard_normal(127) / 8
        y, want = kernels.fir_filter(y, taps), kernels.fir_filter(want, taps)
    assert sum(name.startswith("fir_filter") for name in dict(y.dask.layers)) == 1
    assert _rel(_host(client.compute(y).result()), _host(want)) < 1e-5


def test_main_job_on_one_gpu(client):
    """kernels._gpus.run_on: signals made on the worker (CuPy), fft_convolve per block, the NumPy
    check of sampled rows, two chained passes timed."""
    from kernels import _gpus
    from kernels.__main__ import lowpass_taps

    row = _gpus.run_on(client, 1, 4096, 4096, lowpass_taps(63, 0.06), passes=2, chunk_rows=1500)
    assert row["ok"] and row["check_rel_err"] < 1e-5 and row["blocks_per_worker"] == [3]
    assert row["seconds"] > 0
    from kernels.__main__ import median_ms

    plain = _gpus.plain_one_gpu(2048, 4096, lowpass_taps(63, 0.06), median_ms)
    assert plain["ms"] > 0 and plain["gsamples_per_s"] > 0


def test_main_job_blocks_equal_the_plain_call(client):
    import cupy as cp

    from kernels import _gpus
    from kernels.__main__ import lowpass_taps

    taps = lowpass_taps(63, 0.06)
    x = _gpus.make_signals(3000, 4096, 1024)
    y = client.compute(kernels.fft_convolve(x, taps)).result()
    xs = client.compute(x).result()
    assert isinstance(xs, cp.ndarray) and isinstance(y, cp.ndarray)
    assert _rel(y.get(), kernels.fft_convolve(xs, taps).get()) < 1e-7


def test_add_noise_blocks_equal_one_call_bit_for_bit(client):
    import cupy as cp

    x = cp.random.default_rng(2).standard_normal((1000, 4096), dtype=cp.float32)
    want = kernels.add_noise(x, 6.0, seed=77).get()
    got = client.compute(kernels.add_noise(da.from_array(x, chunks=(300, 4096), asarray=False), 6.0,
                                           seed=77)).result()
    np.testing.assert_array_equal(got.get(), want)


def test_a_worker_prepares_each_shape_once(client):
    """A second graph of the same shapes makes no new descriptor or kernel on the worker."""
    import cupy as cp

    def misses():
        from kernels import _fused

        return _fused._fft_pair.cache_info().misses + _fused.filter_kernel.cache_info().misses

    x = da.from_array(cp.random.default_rng(3).standard_normal((512, 1024), dtype=cp.float32),
                      chunks=(128, 1024), asarray=False)
    taps = np.hanning(31)
    client.compute(kernels.fft_convolve(x, taps)).result()
    before = client.run(misses)
    client.compute(kernels.fft_convolve(x * 2, taps)).result()
    assert client.run(misses) == before
