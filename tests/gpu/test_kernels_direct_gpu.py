# SPDX-License-Identifier: Apache-2.0
"""``fft_convolve(method="direct")`` on the GPU: every array kind at the main job's row length
and tap count, rows that are no FFT size, misaligned input, the fast launch against numba-cuda's
launch bit for bit, a plan's replay, CuPy streams."""

import numpy as np
import pytest

import kernels
from tests.array_kinds import as_kind as _as
from tests.array_kinds import to_host as _host

pytestmark = pytest.mark.gpu
rng = np.random.default_rng(31)


def _rel(a, b):
    return float(np.linalg.norm(np.ravel(a - b)) / np.linalg.norm(np.ravel(b)))


def _circular(x, h):
    n = x.shape[-1]
    return np.fft.irfft(np.fft.rfft(x.astype(np.float64), axis=-1) * np.fft.rfft(h, n), n=n, axis=-1)


@pytest.mark.parametrize("kind", ["numpy", "cupy", "torch", "numba"])
def test_direct_4096_63_taps(kind):
    x = rng.standard_normal((300, 4096)).astype(np.float32)
    h = rng.standard_normal(63)
    y = kernels.fft_convolve(_as(kind, x), h, method="direct")
    assert type(y).__module__.split(".")[0] == type(_as(kind, x)).__module__.split(".")[0]
    y = _host(y)
    assert _rel(y, _circular(x, h)) < 1e-6
    assert _rel(y, _host(kernels.fft_convolve(_as(kind, x), h, method="fft"))) < 2e-6
    np.testing.assert_array_equal(_host(kernels.fft_convolve(_as(kind, x), h)), y)  # auto: direct


@pytest.mark.parametrize("n,m,batch", [(64, 1, 129), (64, 64, 3), (192, 33, 1000), (8192, 64, 17), (2048, 2, 5)])
def test_direct_shapes(n, m, batch):
    import cupy

    x = rng.standard_normal((batch, n)).astype(np.float32)
    h = rng.standard_normal(m)
    y = kernels.fft_convolve(cupy.asarray(x), h, method="direct").get()
    assert _rel(y, _circular(x, h)) < 1e-6


@pytest.mark.parametrize("lev", [0, 1, 2])
@pytest.mark.parametrize("n,m", [(4096, 63), (4096, 64), (1024, 17), (192, 9)])
def test_every_nesting_level(monkeypatch, n, m, lev):
    """The taps split 0, 1 and 2 times, whatever levels() picks (sm_90 code of each)."""
    import cupy

    from kernels import _direct

    monkeypatch.setattr(_direct, "levels", lambda m: lev)
    x = rng.standard_normal((70, n)).astype(np.float32)
    h = rng.standard_normal(m)
    y = kernels.fft_convolve(cupy.asarray(x), h, method="direct").get()
    assert _rel(y, _circular(x, h)) < 1e-6


@pytest.mark.parametrize("batch,length,m", [(4, 2**20, 127), (3, 6144, 64), (65, 192, 33), (2, 64, 128)])
def test_fir_direct_equals_lfilter(batch, length, m):
    import cupy

    x = rng.standard_normal((batch, length)).astype(np.float32)
    h = rng.standard_normal(m)
    y = kernels.fir_filter(cupy.asarray(x), h, method="direct").get()
    ref = np.array([np.convolve(r.astype(np.float64), h)[:length] for r in x])
    assert _rel(y, ref) < 1e-6


@pytest.mark.parametrize("fn,batch,length,m", [("conv", 1000, 4096, 63), ("conv", 300, 4096, 64), ("conv", 1, 4096, 9),
                                                ("fir", 40, 2**16, 127), ("fir", 3, 4096, 30)])
def test_pipelined_kernel(monkeypatch, fn, batch, length, m):
    """The persistent kernel (cp.async into two row buffers, as many blocks as fit the GPU, each
    looping over rows) gives the one-block-per-row kernel's bits."""
    import cupy

    from kernels import _direct

    x = cupy.asarray(rng.standard_normal((batch, length)).astype(np.float32))
    h = rng.standard_normal(m)
    f = kernels.fft_convolve if fn == "conv" else kernels.fir_filter
    want = f(x, h, method="direct").get()
    monkeypatch.setattr(_direct, "PIPELINE", True)
    np.testing.assert_array_equal(f(x, h, method="direct").get(), want)


def test_direct_at_an_odd_float_offset():
    """Rows starting 4 bytes into an allocation cannot be read as 8-byte sample pairs: the
    kernel reads an aligned copy and gives the same bits."""
    import cupy

    x = rng.standard_normal((33, 256)).astype(np.float32)
    h = rng.standard_normal(17)
    raw = cupy.zeros(x.size + 1, dtype=cupy.float32)
    raw[1:] = cupy.asarray(x.ravel())
    xu = raw[1:].reshape(x.shape)
    assert xu.data.ptr % 8 == 4
    np.testing.assert_array_equal(kernels.fft_convolve(xu, h, method="direct").get(),
                                  kernels.fft_convolve(cupy.asarray(x), h, method="direct").get())


def test_direct_fast_launch_equals_numba_launch(monkeypatch):
    import cupy

    from kernels import _launch

    x = cupy.asarray(rng.standard_normal((40, 1024)).astype(np.float32))
    h = rng.standard_normal(31)
    before = _launch.stats["fast_launches"]
    fast = kernels.fft_convolve(x, h, method="direct").get()
    assert _launch.stats["fast_launches"] == before + 1
    monkeypatch.setattr(_launch, "FAST", False)
    np.testing.assert_array_equal(kernels.fft_convolve(x, h, method="direct").get(), fast)


def test_direct_plan_replays_on_new_arrays_and_a_stream():
    import cupy

    h = rng.standard_normal(63)
    s = cupy.cuda.Stream(non_blocking=True)
    x = cupy.asarray(rng.standard_normal((64, 4096)).astype(np.float32))
    with s:
        p = kernels.plan(kernels.fft_convolve, x, h)
        for _ in range(3):
            x2 = cupy.asarray(rng.standard_normal((64, 4096)).astype(np.float32))
            got = p(x2)
            want = kernels.fft_convolve(x2, h, method="direct")
            s.synchronize()
            np.testing.assert_array_equal(got.get(), want.get())
    assert _rel(got.get(), _circular(x2.get(), h)) < 1e-6
