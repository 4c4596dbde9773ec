# SPDX-License-Identifier: Apache-2.0
"""``fft_convolve(method="direct")`` under the CUDA simulator: the generated kernel against
float64 circular convolution and against ``method="fft"``, for every block shape (rows per
block, a last block with rows past the batch), odd and even tap counts, 1-D input; which
kernel ``"auto"`` runs; refusals before any kernel is built; plans."""

import re

import numpy as np
import pytest

import kernels
from kernels import _direct

rng = np.random.default_rng(23)


@pytest.fixture(autouse=True)
def _nan_shared_memory(monkeypatch):
    """The simulator's shared arrays start as NaN (its own start as np.empty, often zeros): a
    kernel that sums an element it never wrote gives NaN here, as it may on the GPU."""
    import sys
    import traceback

    from numba.cuda.simulator import kernelapi
    from numba.np import numpy_support

    def array(self, shape, dtype, alignment=None):
        if isinstance(dtype, kernelapi.types.Type):
            dtype = numpy_support.as_dtype(dtype)
        if shape == 0 or alignment is not None:
            return original(self, shape, dtype, alignment)
        caller = traceback.extract_stack(sys._getframe())[-2][0:2]  # as the simulator keys them
        res = self._allocations.get(caller)
        if res is None:  # the block's threads race here: setdefault keeps the first one's (atomic)
            res = self._allocations.setdefault(caller, np.full(shape, np.nan if dtype.kind in "fc" else 0, dtype))
        return res

    original = kernelapi.FakeCUDAShared.array
    monkeypatch.setattr(kernelapi.FakeCUDAShared, "array", array)


def _circular(x, h):
    n = x.shape[-1]
    return np.real(np.fft.ifft(np.fft.fft(x.astype(np.float64), axis=-1) * np.fft.fft(h, n), axis=-1))


def _rel(a, b):
    return float(np.linalg.norm(np.ravel(a - b)) / np.linalg.norm(np.ravel(b)))


@pytest.mark.parametrize("n,m,batch", [
    (64, 1, 3),      # one tap: a scaled copy; 64 rows of 2 threads per block, 61 past the batch
    (64, 2, 1),
    (64, 7, 65),     # a second block with one row
    (128, 64, 2),    # the most taps, two thirds of a row of halo
    (192, 33, 23),   # not an FFT size; 21 rows of 6 threads per block
    (1024, 63, 2),   # 4 rows of 32 threads per block
    (4096, 1, 1),    # one row of 128 threads per block (no row count), one tap: halo s[n] = x[0] only
    (4096, 63, 2),   # the main job's shape
])
def test_direct_equals_circular_convolution(n, m, batch):
    x = rng.standard_normal((batch, n)).astype(np.float32)
    h = rng.standard_normal(m)
    y = kernels.fft_convolve(x, h, method="direct")
    assert y.dtype == np.float32 and y.shape == x.shape
    assert _rel(y, _circular(x, h)) < 1e-6
    if n & (n - 1) == 0:  # an FFT size: both methods agree
        assert _rel(y, kernels.fft_convolve(x, h, method="fft")) < 2e-6


@pytest.mark.parametrize("lev", [0, 1, 2])
@pytest.mark.parametrize("n,m,batch", [
    (64, 16, 3),     # rows of 2 threads, D = 15 odd: the row written to shared memory as floats
    (192, 9, 4),     # 2t = 12 not a multiple of 32: every pair's padding computed
    (1024, 31, 5),   # rows of 32 threads, a last block with 3 rows past the batch
    (4096, 17, 1),   # one row per block; 17 taps padded to 18 (lev 1) or 20 (lev 2)
])
def test_every_nesting_level(monkeypatch, n, m, batch, lev):
    """The kernel with the taps split 0, 1 and 2 times (whatever levels() picks for m)."""
    monkeypatch.setattr(_direct, "levels", lambda m: lev)
    x = rng.standard_normal((batch, n)).astype(np.float32)
    h = rng.standard_normal(m)
    y = kernels.fft_convolve(x, h, method="direct")
    assert _rel(y, _circular(x, h)) < 1e-6
    assert len(_direct.taps_param(h)) == 3 ** lev * (_direct.padded_taps(m, lev) >> lev)


def test_direct_1d_input_and_a_list_of_taps():
    x = rng.standard_normal(64).astype(np.float32)
    y = kernels.fft_convolve(x, [1.0, -1.0], method="direct")
    assert y.shape == (64,)
    np.testing.assert_allclose(y, x - np.roll(x, 1), atol=1e-6)


def test_direct_empty_batch():
    x = np.zeros((0, 64), np.float32)
    y = kernels.fft_convolve(x, [1.0, 2.0], method="direct")
    assert y.shape == (0, 64) and y.dtype == np.float32


@pytest.mark.parametrize("x,h,want", [
    (rng.standard_normal((2, 1024)).astype(np.float32), rng.standard_normal(63), "direct"),
    (rng.standard_normal((2, 512)).astype(np.float32), rng.standard_normal(31), "direct"),
    (rng.standard_normal((2, 512)).astype(np.float32), rng.standard_normal(63), "fft"),
    (rng.standard_normal((2, 1024)).astype(np.float32), rng.standard_normal(65), "fft"),
    (rng.standard_normal((2, 1024)).astype(np.float64), rng.standard_normal(63), "fft"),
    (rng.standard_normal((2, 100)).astype(np.float32), rng.standard_normal(7), "fft"),
])
def test_auto_runs_the_kernel_convolve_method_names(monkeypatch, x, h, want):
    import kernels.convolution as conv

    ran = []
    for name in ("_run", "_run_direct"):
        real = getattr(conv, name)
        monkeypatch.setattr(conv, name, lambda *a, _real=real, _name=name, **k: ran.append(_name) or _real(*a, **k))
    y = kernels.fft_convolve(x, h)
    assert ran == ["_run_direct" if want == "direct" else "_run"]
    assert _rel(y, _circular(x, h)) < (1e-6 if x.dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("x,h,match", [
    (np.zeros((2, 64), np.float64), [1.0], "method='direct': x must be float32, got float64"),
    (np.zeros((2, 64), np.complex64), [1.0], "method='direct': x must be float32, got complex64"),
    (np.zeros((2, 96), np.float32), [1.0], "method='direct': x's rows must have a multiple of 64 samples up to 8192, got 96"),
    (np.zeros((2, 256), np.float32), np.ones(129), "method='direct': h has 129 taps; at most 128"),
    (np.zeros((2, 64), np.float32), np.ones(65), "h has 65 taps; at most 64 fit this FFT length"),  # the general rule first
])
def test_direct_refusals_come_before_any_kernel(monkeypatch, x, h, match):
    def no_kernel(*a, **k):
        raise AssertionError("a kernel was built for a refused call")

    monkeypatch.setattr(_direct, "kernel", no_kernel)
    with pytest.raises(ValueError, match=re.escape(match)):
        kernels.fft_convolve(x, h, method="direct")


def test_direct_refuses_device_taps():
    from numba import cuda

    x = np.zeros((2, 64), np.float32)
    with pytest.raises(ValueError, match=re.escape("method='direct': h must be host taps")):
        kernels.fft_convolve(x, cuda.to_device(np.ones(3, np.float32)), method="direct")
    # auto: device taps run the FFT kernel
    h = rng.standard_normal(5).astype(np.float32)
    xs = rng.standard_normal((2, 64)).astype(np.float32)
    assert _rel(kernels.fft_convolve(xs, cuda.to_device(h)), _circular(xs, h)) < 1e-6


@pytest.mark.parametrize("fn,shape,m", [("fft_convolve", (5, 128), 9), ("fir_filter", (3, 192), 17)])
def test_a_plan_of_the_direct_method_equals_the_call(fn, shape, m):
    from numba import cuda

    f = getattr(kernels, fn)
    x = cuda.to_device(rng.standard_normal(shape).astype(np.float32))
    h = rng.standard_normal(m)
    p = kernels.plan(f, x, h, method="direct")
    x2 = cuda.to_device(rng.standard_normal(shape).astype(np.float32))
    want = np.asarray(f(x2, h, method="direct"))
    np.testing.assert_array_equal(np.asarray(p(x2)), want)
    ref = _circular if fn == "fft_convolve" else _lfilter
    assert _rel(want, ref(np.asarray(x2), h)) < 1e-6


def _lfilter(x, h):
    """Causal FIR filtering of each row in float64 (scipy.signal.lfilter(h, 1, x))."""
    x2 = np.atleast_2d(x).astype(np.float64)
    return np.array([np.convolve(r, h)[:r.size] for r in x2]).reshape(x.shape)


@pytest.mark.parametrize("batch,length,m", [
    (3, 64, 7),       # one 64-sample segment per row, 64 segments per block: zeros before each row
    (2, 192, 33),     # three segments per row: the halo from the segment before, or zeros
    (1, 8192, 127),   # two 4096-sample segments, the FIR benchmark's taps (split twice)
    (2, 4160, 5),     # 65 segments of 64 per row
    (1, 6144, 64),    # three 2048-sample segments, 64 taps: the row stored as floats (D odd)
    (2, 64, 128),     # more taps than samples
    (1, 128, 1),      # one tap: a scaled copy
    (2, 4096, 63),    # one 4096-sample segment per row: zeros before it, and one zero tap after
    (2, 0, 9),        # empty rows
])
def test_fir_direct_equals_lfilter(batch, length, m):
    x = rng.standard_normal((batch, length)).astype(np.float32)
    h = rng.standard_normal(m)
    y = kernels.fir_filter(x, h, method="direct")
    assert y.dtype == np.float32 and y.shape == x.shape
    if length:
        assert _rel(y, _lfilter(x, h)) < 1e-6
        if m <= 64:  # fft_size >= 2 m: both methods agree
            assert _rel(y, kernels.fir_filter(x, h, method="fft")) < 2e-6


def test_fir_direct_1d_and_auto_is_fft(monkeypatch):
    import kernels.convolution as conv

    x = rng.standard_normal(256).astype(np.float32)
    y = kernels.fir_filter(x, [0.5, 0.5], method="direct")
    np.testing.assert_allclose(y, 0.5 * (x + np.concatenate([[0], x[:-1]])), atol=1e-6)
    ran = []
    monkeypatch.setattr(conv, "_run_direct", lambda *a, **k: ran.append("direct"))
    kernels.fir_filter(x, [0.5, 0.5])
    assert ran == []  # auto: the FFT kernel (direct not yet measured against it)


@pytest.mark.parametrize("x,kw,match", [
    (np.zeros((2, 64), np.float64), {}, "method='direct': x must be float32, got float64"),
    (np.zeros((2, 96), np.float32), {}, "method='direct': x's rows must have a multiple of 64 samples, got 96"),
    (np.zeros((2, 64), np.float32), {"taps": np.ones(129)}, "method='direct': taps has 129 taps; at most 128"),
    (np.zeros((2, 64), np.float32), {"fft_size": 64}, "fft_size=64 is method='fft''s segment length; method='direct' takes none"),
])
def test_fir_direct_refusals_come_before_any_kernel(monkeypatch, x, kw, match):
    def no_kernel(*a, **k):
        raise AssertionError("a kernel was built for a refused call")

    monkeypatch.setattr(_direct, "kernel", no_kernel)
    taps = kw.pop("taps", np.ones(5))
    with pytest.raises(ValueError, match=re.escape(match)):
        kernels.fir_filter(x, taps, method="direct", **kw)


def test_fir_direct_refuses_device_taps():
    from numba import cuda

    with pytest.raises(ValueError, match=re.escape("method='direct': taps must be host taps")):
        kernels.fir_filter(np.zeros((2, 64), np.float32), cuda.to_device(np.ones(3, np.float32)), method="direct")


@pytest.mark.parametrize("fn,batch,length,m", [
    ("conv", 7, 4096, 63),    # 7 rows over 3 blocks (kernels._direct.SIM_GRID): each block loops
    ("conv", 4, 4096, 64),    # D = 63 odd: the row copied as floats
    ("conv", 2, 4096, 1),     # no halo
    ("conv", 1, 4096, 17),    # one row: a block with no next row to copy
    ("fir", 3, 8192, 127),    # segments: the halo copied from the segment before, or zeros
    ("fir", 2, 12288, 30),
    ("fir", 1, 4096, 64),     # one segment per row: zeros before it
])
def test_pipelined_kernel(monkeypatch, fn, batch, length, m):
    """The persistent kernel (two row buffers, the next row's copies in flight while the current
    one is summed) gives the one-block-per-row kernel's results."""
    x = rng.standard_normal((batch, length)).astype(np.float32)
    h = rng.standard_normal(m)
    f = kernels.fft_convolve if fn == "conv" else kernels.fir_filter
    want = f(x, h, method="direct")
    ran = []
    real = _direct.kernel
    monkeypatch.setattr(_direct, "kernel", lambda *a: ran.append(a[4:]) or real(*a))
    monkeypatch.setattr(_direct, "PIPELINE", True)
    y = f(x, h, method="direct")
    assert ran == [(True,)]
    np.testing.assert_allclose(y, want, rtol=0, atol=2e-5 * float(np.abs(want).max()))
    ref = _circular(x, h) if fn == "conv" else _lfilter(x, h)
    assert _rel(y, ref) < 1e-6
