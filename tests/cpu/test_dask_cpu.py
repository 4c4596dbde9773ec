# SPDX-License-Identifier: Apache-2.0
"""kernels on Dask arrays without running a kernel: import laziness, the public functions'
dispatch, chunking and argument errors (each message checked), the halo arithmetic of the FIR and
STFT time blocks, and the graphs themselves with NumPy stand-ins for the plain functions (each
block's call and its arguments: chunked results equal one call on the whole array); the
``--gpus`` errors of ``python -m kernels`` and the ``dask`` extra."""

import inspect
import pickle
import subprocess
import sys

import dask
import dask.array as da
import numpy as np
import pytest

import kernels
from kernels import __main__ as cli
from kernels import _dask, convolution, gemm, noise, spectral

rng = np.random.default_rng(5)


# ---------------------------------------------------------------------------------------------
# laziness and dispatch


def test_import_kernels_imports_no_dask():
    code = ("import sys, numpy as np, kernels\n"
            "from kernels import _dask\n"
            "assert not _dask.is_dask_array(np.zeros(3))\n"
            "kernels.fft_convolve  # touched, not called\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed', 'dask_cuda'))\n"
            "assert not bad, bad\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr


def test_public_functions_keep_signature_doc_and_pickle():
    for name in sorted(set(kernels.__all__) - {"plan", "Plan"}):  # the signal functions
        f = getattr(kernels, name)
        assert f.__wrapped__.__name__ == name and f.__doc__ == f.__wrapped__.__doc__
        assert inspect.signature(f) == inspect.signature(f.__wrapped__)
        assert pickle.loads(pickle.dumps(f)) is f


def test_only_dask_arrays_take_the_dask_path(monkeypatch):
    seen = []
    monkeypatch.setitem(_dask._CHUNKED, "fft_convolve", lambda *a, **k: seen.append("dask"))
    f = _dask.dask_aware(convolution.fft_convolve)
    monkeypatch.setattr(f, "__wrapped__", None)
    with pytest.raises(TypeError, match="x must be a NumPy array or a GPU array"):
        f([1.0, 2.0], [1.0])  # the plain function's own error
    assert seen == []
    f(x=da.zeros((2, 8), chunks=(1, 8)), h=[1.0])  # by keyword too
    assert seen == ["dask"]


def test_nothing_runs_when_the_graph_is_built(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("a kernel ran while building the graph")

    for mod, name in ((convolution, "fft_convolve"), (convolution, "fir_filter"), (spectral, "matched_filter"),
                      (spectral, "stft_power"), (gemm, "batched_gemm"), (gemm, "beamform_spectra"),
                      (noise, "add_noise")):
        monkeypatch.setattr(mod, name, boom)
    x = da.zeros((4, 64), dtype=np.float32, chunks=(2, 32))
    kernels.fir_filter(x, np.ones(5))
    kernels.stft_power(x, np.ones(16), 8)
    kernels.fft_convolve(x.rechunk({1: -1}), np.ones(5))
    kernels.matched_filter(x.rechunk({1: -1}), np.ones(5))
    kernels.add_noise(x.rechunk({1: -1}), 3.0)
    a = da.zeros((4, 8, 8), dtype=np.float32, chunks=(2, 8, 8))
    kernels.batched_gemm(a, a)
    kernels.beamform_spectra(da.zeros((4, 3, 32), dtype=np.complex64, chunks=(2, 3, 32)), np.ones((2, 3)))


# ---------------------------------------------------------------------------------------------
# chunking and argument errors

X = da.zeros((6, 64), dtype=np.float32, chunks=(2, 32))
XC = da.zeros((6, 64), dtype=np.complex64, chunks=(2, 32))
A = da.zeros((4, 8, 8), dtype=np.float32, chunks=(2, 8, 8))


@pytest.mark.parametrize("call, exc, match", [
    (lambda: kernels.matched_filter(X, np.ones(4)), ValueError,
     r"x is chunked along axis 1 \(chunks \(32, 32\)\); matched_filter needs whole rows \(each row is one FFT "
     r"and its peak a search over the row\): x.rechunk\(\{1: -1\}\)"),
    (lambda: kernels.fft_convolve(X, np.ones(4)), ValueError,
     r"x is chunked along axis 1 \(chunks \(32, 32\)\); fft_convolve needs whole rows \(each row is one FFT\): "
     r"x.rechunk\(\{1: -1\}\)"),
    (lambda: kernels.add_noise(X, 3.0), ValueError,
     r"x is chunked along axis 1 \(chunks \(32, 32\)\); add_noise needs whole rows .*: x.rechunk\(\{1: -1\}\)"),
    (lambda: kernels.fft_convolve(da.zeros(64, chunks=16), np.ones(4)), ValueError,
     r"x is chunked along axis 0 \(chunks \(16, 16, 16, 16\)\); fft_convolve needs whole rows"),
    (lambda: kernels.fft_convolve(da.zeros((2, 640), chunks=(2, 10)), np.ones(4)), ValueError,
     r"axis 1 \(chunks \(10, 10, 10, 10, 10, 10, \.\.\. 58 more\)\)"),
    (lambda: kernels.beamform_spectra(da.zeros((4, 4, 32), dtype=np.complex64, chunks=(2, 2, 16)), np.ones((2, 4))),
     ValueError, r"x is chunked along axis 1 \(chunks \(2, 2\)\); along axis 2 \(chunks \(16, 16\)\); "
                 r"beamform_spectra needs whole \(channels, samples\) blocks: x.rechunk\(\{1: -1, 2: -1\}\)"),
    (lambda: kernels.batched_gemm(A, A.rechunk((2, 4, 8))), ValueError,
     r"b is chunked along axis 1 \(chunks \(4, 4\)\); batched_gemm needs whole matrices: b.rechunk\(\{1: -1\}\)"),
    (lambda: kernels.batched_gemm(A.rechunk((2, 8, 4)), A), ValueError,
     r"a is chunked along axis 2 .*a.rechunk\(\{2: -1\}\)"),
    (lambda: kernels.batched_gemm(A, np.zeros((4, 8, 8), np.float32)), TypeError,
     r"batched_gemm: b must be a Dask array when a is one .*got ndarray"),
    (lambda: kernels.batched_gemm(A, A, c=np.zeros((4, 8, 8), np.float32), beta=1.0), TypeError,
     r"c must be a Dask array when a is one"),
    (lambda: kernels.batched_gemm(A, A.astype(np.float64)), TypeError, r"b must have dtype float32, got float64"),
    (lambda: kernels.batched_gemm(A, A[:, :4]), ValueError, r"b must have shape \(batch=4, k=8, n\)"),
    (lambda: kernels.batched_gemm(A, A, beta=0.5), ValueError, "c is required when beta != 0"),
    (lambda: kernels.batched_gemm(A, A, alpha=1j), TypeError, r"alpha is complex but a is real"),
    (lambda: kernels.batched_gemm(A, A, c=A[:, :, :4], beta=1.0), ValueError, r"c must have shape \(4, 8, 8\)"),
    (lambda: kernels.fir_filter(X, np.ones(5), stream=0), TypeError,
     r"fir_filter: stream cannot be given with a Dask array: each block runs on the current CuPy stream"),
    (lambda: kernels.add_noise(X.rechunk({1: -1}), 3.0, out=np.zeros((6, 64), np.float32)), TypeError,
     r"add_noise: out cannot be given with a Dask array x"),
    (lambda: kernels.add_noise(X.rechunk({1: -1}), 3.0, seed=-1), ValueError, r"seed must be an integer"),
    (lambda: kernels.add_noise(X.rechunk({1: -1}), float("nan")), ValueError, r"snr_db must be a finite"),
    (lambda: kernels.add_noise(X.rechunk({1: -1}), 3.0, row_offset=-2), ValueError,
     r"row_offset must be an integer from 0 to 2\*\*48, got -2"),
    (lambda: kernels.add_noise(X.rechunk({1: -1}), 3.0, row_offset=2**48), ValueError,
     r"row_offset \+ rows of x - 1 must be at most 2\*\*48"),
    (lambda: kernels.fir_filter(X.astype(np.int32), np.ones(5)), TypeError,
     r"x must have dtype float32 or float64 or complex64 or complex128, got int32"),
    (lambda: kernels.stft_power(XC, np.ones(16), 8), TypeError, r"x must have dtype float32 or float64, got complex64"),
    (lambda: kernels.fir_filter(da.zeros((2, 2, 8), chunks=2), np.ones(5)), ValueError,
     r"x must have 1 or 2 dimension\(s\), got shape \(2, 2, 8\)"),
    (lambda: kernels.fir_filter(X, np.ones((2, 5))), ValueError, r"taps must be a non-empty 1-D array, got shape"),
    (lambda: kernels.fir_filter(X, [[1.0], [1.0, 2.0]]), TypeError, r"taps must be an array of numbers"),
    (lambda: kernels.fir_filter(X, np.ones(5), fft_size=100), ValueError, r"fft_size must be a power of 2"),
    (lambda: kernels.fir_filter(X, np.ones(5), method="FFT"), ValueError,
     r"method must be 'auto', 'fft' or 'direct', got 'FFT'"),
    (lambda: kernels.fir_filter(X.rechunk({1: -1}), np.ones(5), method="direct", fft_size=64), ValueError,
     r"fft_size=64 is method='fft''s segment length; method='direct' takes none"),
    (lambda: kernels.fir_filter(X, np.ones(5), method="direct"), ValueError,
     r"method='direct': x's time chunks must be multiples of 64 samples, got 32"),
    (lambda: kernels.fir_filter(X.rechunk({1: -1}).astype(np.float64), np.ones(5), method="direct"), ValueError,
     r"method='direct': x must be float32, got float64"),
    (lambda: kernels.fir_filter(X.rechunk({1: -1}), np.ones(129), method="direct"), ValueError,
     r"method='direct': taps has 129 taps; at most 128"),
    (lambda: kernels.fir_filter(X.rechunk({1: -1}), da.ones(5, chunks=5), method="direct"), ValueError,
     r"method='direct': taps must be host taps"),
    (lambda: kernels.fir_filter(X, np.ones(40), fft_size=64), ValueError,
     r"fft_size=64 must be at least 2 \* len\(taps\) = 80"),
    (lambda: kernels.stft_power(X, np.ones(16), 0), ValueError, r"hop must be an int >= 1, got 0"),
    (lambda: kernels.stft_power(X, np.ones(16), 2.0), ValueError, r"hop must be an int >= 1, got 2.0"),
    (lambda: kernels.stft_power(X, np.ones((4, 4)), 4), ValueError, r"window must be a non-empty real 1-D array"),
    (lambda: kernels.stft_power(X, np.ones(128), 4), ValueError,
     r"x has 64 samples, fewer than one frame of len\(window\) = 128"),
    (lambda: kernels.matched_filter(XC.rechunk({1: -1}), np.ones(65)), ValueError,
     r"template must be a 1-D array of 1..64 samples, got shape \(65,\)"),
    (lambda: kernels.matched_filter(XC.rechunk({1: -1}), np.ones(4), return_correlation=1), TypeError,
     r"return_correlation must be a bool"),
    (lambda: kernels.beamform_spectra(da.zeros((4, 3, 32), dtype=np.complex64, chunks=(2, 3, 32)), np.ones((2, 4))),
     ValueError, r"weights must have shape \(beams, channels=3\), got \(2, 4\)"),
    (lambda: kernels.beamform_spectra(da.zeros((4, 3, 32), dtype=np.float32, chunks=(2, 3, 32)), np.ones((2, 3))),
     TypeError, r"x must have dtype complex64 or complex128, got float32"),
    (lambda: kernels.add_noise(X.rechunk({1: -1})[X[:, 0] > 0], 3.0), ValueError,
     r"x has unknown chunk sizes along axis 0; add_noise needs them: call x.compute_chunk_sizes\(\) first"),
])
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_small_dask_arguments_are_bounded(monkeypatch):
    monkeypatch.setattr(_dask, "SMALL_MAX", 8)
    with pytest.raises(ValueError, match=r"fir_filter: taps is a Dask array of 9 elements; at most 8 are "
                                         r"accepted .*: pass a NumPy or CuPy array"):
        kernels.fir_filter(X, da.ones(9, chunks=3))
    taps = da.ones(9, chunks=3)
    with pytest.raises(ValueError, match=r"taps is a Dask array of unknown shape \(nan,\); compute its chunk "
                                         r"sizes \(taps.compute_chunk_sizes\(\)\)"):
        kernels.fir_filter(X, taps[taps > 0])


def test_chunks_other_than_numpy_or_cupy_are_refused():
    x = da.zeros((2, 8), chunks=(1, 8)).map_blocks(lambda b: b, meta=np.ma.masked_array(np.zeros((0, 0))))
    with pytest.raises(TypeError, match=r"fft_convolve: x must be a Dask array of NumPy or CuPy chunks, "
                                        r"got chunks of MaskedArray"):
        kernels.fft_convolve(x, np.ones(3))


# ---------------------------------------------------------------------------------------------
# halo arithmetic


def test_fir_tail_sources():
    assert _dask.fir_tail_sources([0, 40, 50, 60, 85, 100], 12) == [
        None, ([0], 28), ([0, 1], 38), ([1, 2], 8), ([3], 13)]  # block 3's 12 samples span blocks 1 and 2
    assert _dask.fir_tail_sources([0, 5, 9], 12) == [None, ([0], 0)]  # the signal's start: zeros before it
    assert _dask.fir_tail_sources([0, 5, 9], 0) == [None, None]
    assert _dask.fir_tail_sources([0, 0, 4, 4, 9], 2) == [None, None, ([1], 2), ([1], 2)]  # empty blocks skipped
    assert _dask.fir_tail_sources([0, 9], 4) == [None]


@pytest.mark.parametrize("seed", range(20))
def test_stft_pieces_cover_every_frame_once(seed):
    g = np.random.default_rng(seed)
    length = int(g.integers(20, 400))
    nfft = int(g.integers(1, min(length, 64) + 1))
    hop = int(g.integers(1, 2 * nfft + 2))
    cuts = sorted(set(int(c) for c in g.integers(1, length, int(g.integers(0, 6)))))
    bounds = [0, *cuts, length]
    pieces = _dask.stft_pieces(bounds, nfft, hop)
    total = 1 + (length - nfft) // hop
    assert sum(f for _, _, f in pieces) == total
    f = 0
    for start, stop, frames in pieces:
        assert start == f * hop and stop == (f + frames - 1) * hop + nfft <= length
        assert 1 + (stop - start - nfft) // hop == frames  # what stft_power computes of the piece
        block = max(k for k, b in enumerate(bounds[:-1]) if b <= start)  # every frame's start is in one block
        assert all(bounds[block] <= (f + i) * hop < bounds[block + 1] for i in range(frames))
        f += frames


# ---------------------------------------------------------------------------------------------
# the graphs, with NumPy stand-ins for the plain functions


def _lfilter(x, taps, fft_size=None, method="auto", stream=None):
    from scipy.signal import lfilter

    assert isinstance(x, np.ndarray) and x.flags.c_contiguous
    return lfilter(np.asarray(taps), 1, x, axis=-1).astype(x.dtype)


def _frames_power(x, window, hop, stream=None):
    assert x.flags.c_contiguous
    w = np.asarray(window)
    n = w.size
    nfr = 1 + (x.shape[-1] - n) // hop
    fr = np.stack([x[..., f * hop:f * hop + n] * w for f in range(nfr)], axis=-2)
    return (np.abs(np.fft.rfft(fr, axis=-1)) ** 2).astype(x.dtype)


@pytest.mark.parametrize("seed", range(6))
def test_fir_time_blocks_equal_one_call(seed, monkeypatch):
    monkeypatch.setattr(convolution, "fir_filter", _lfilter)
    g = np.random.default_rng(seed)
    length, ntaps = int(g.integers(30, 200)), int(g.integers(1, 30))
    x = g.standard_normal((3, length))
    taps = g.standard_normal(ntaps)
    cuts = sorted(set(int(c) for c in g.integers(1, length, int(g.integers(1, 8)))))
    chunks = ((2, 1), tuple(np.diff([0, *cuts, length])))
    y = kernels.fir_filter(da.from_array(x, chunks=chunks), taps)
    assert y.chunks == chunks
    np.testing.assert_allclose(y.compute(scheduler="sync"), _lfilter(x, taps), rtol=1e-10, atol=1e-12)
    y1 = kernels.fir_filter(da.from_array(x[0], chunks=chunks[1]), taps)  # one signal
    np.testing.assert_allclose(y1.compute(scheduler="sync"), _lfilter(x[0], taps), rtol=1e-10, atol=1e-12)
    y2 = kernels.fir_filter(da.from_array(x, chunks=chunks), da.from_array(taps, chunks=4))  # Dask taps
    np.testing.assert_allclose(y2.compute(scheduler="sync"), _lfilter(x, taps), rtol=1e-10, atol=1e-12)


def test_fir_time_blocks_pass_the_method(monkeypatch):
    """method="direct" reaches every whole-block call; the tails' short pieces (any length, the
    direct kernel takes multiples of 64) run with "auto"."""
    calls = []

    def recording(x, taps, fft_size=None, method="auto", stream=None):
        calls.append((x.shape[-1], method))
        return _lfilter(x, taps)

    monkeypatch.setattr(convolution, "fir_filter", recording)
    x = np.random.default_rng(6).standard_normal((2, 256)).astype(np.float32)
    taps = np.arange(1.0, 12.0)
    y = kernels.fir_filter(da.from_array(x, chunks=(2, (128, 64, 64))), taps, method="direct")
    np.testing.assert_allclose(y.compute(scheduler="sync"), _lfilter(x, taps), rtol=1e-5, atol=1e-5)
    # three blocks; the second and third add their 10-sample tail's filter, tail + 10 zeros
    assert sorted(calls) == [(20, "auto"), (20, "auto"), (64, "direct"), (64, "direct"), (128, "direct")]


def test_fir_time_blocks_filter_blocks_in_place(monkeypatch):
    """Every filter call of a time-chunked graph is a whole block or a tail + zeros (at most
    2 * (len(taps) - 1) samples): no block is copied to prepend its halo."""
    lengths = []

    def recording(x, taps, fft_size=None, method="auto", stream=None):
        lengths.append(x.shape[-1])
        return _lfilter(x, taps)

    monkeypatch.setattr(convolution, "fir_filter", recording)
    x = np.random.default_rng(5).standard_normal((2, 300))
    taps = np.arange(1.0, 12.0)
    y = kernels.fir_filter(da.from_array(x, chunks=(1, (100, 5, 95, 100))), taps)
    np.testing.assert_allclose(y.compute(scheduler="sync"), _lfilter(x, taps), rtol=1e-10, atol=1e-12)
    blocks = sorted(n for n in lengths if n not in (15, 20))  # tails: 10 samples + zeros (5 or 10)
    assert blocks == [5, 5, 95, 95, 100, 100, 100, 100], lengths
    assert sorted(n for n in lengths if n in (15, 20)) == [15, 15, 20, 20, 20, 20], lengths  # 3 tails a row


@pytest.mark.parametrize("seed", range(8))
def test_chained_fir_time_blocks_equal_chained_calls(seed, monkeypatch):
    """fir_filter of a time-chunked fir_filter result, several times (taps of different lengths,
    some as Dask arrays): the graph starts from the first input with one filter per call, and
    equals the calls chained on the whole signal, halos spanning many blocks and reaching back
    to the signal's start included."""
    monkeypatch.setattr(convolution, "fir_filter", _lfilter)
    g = np.random.default_rng(200 + seed)
    length = int(g.integers(30, 240))
    x = g.standard_normal((3, length))
    cuts = sorted(set(int(c) for c in g.integers(1, length, int(g.integers(1, 9)))))
    chunks = ((2, 1), tuple(np.diff([0, *cuts, length])))
    y = dx = da.from_array(x, chunks=chunks)
    ref = x
    for p in range(int(g.integers(2, 6))):
        taps = g.standard_normal(int(g.integers(2, 20)))
        y = kernels.fir_filter(y, da.from_array(taps, chunks=3) if p % 2 else taps)
        ref = _lfilter(ref, taps)
        assert y.chunks == chunks
        np.testing.assert_allclose(y.compute(scheduler="sync"), ref, rtol=1e-9, atol=1e-9)
    layers = dict(y.dask.layers)
    assert not [n for n in layers if n.startswith("fir_filter") and n != y.name]  # one filter layer
    tasks = [k for k in dict(y.dask) if isinstance(k, tuple) and k[0].startswith(("fir_filter", "fir_tail"))]
    assert len(tasks) <= 2 * dx.npartitions


def test_a_persisted_fir_result_starts_a_new_chain(monkeypatch):
    monkeypatch.setattr(convolution, "fir_filter", _lfilter)
    x = np.random.default_rng(9).standard_normal((2, 90))
    t1, t2 = np.arange(1.0, 6.0), np.arange(3.0, 0.0, -1.0)
    y1 = kernels.fir_filter(da.from_array(x, chunks=(2, 30)), t1).persist(scheduler="sync")
    y2 = kernels.fir_filter(y1, t2)
    assert getattr(y2, _dask._CHAIN)[0] is y1  # from the persisted blocks, not from x again
    np.testing.assert_allclose(y2.compute(scheduler="sync"), _lfilter(_lfilter(x, t1), t2), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_stft_time_blocks_equal_one_call(seed, monkeypatch):
    monkeypatch.setattr(spectral, "stft_power", _frames_power)
    g = np.random.default_rng(100 + seed)
    length = int(g.integers(40, 300))
    nfft = int(g.integers(2, 33))
    hop = int(g.integers(1, 2 * nfft))
    x = g.standard_normal((3, length))
    w = g.standard_normal(nfft)
    cuts = sorted(set(int(c) for c in g.integers(1, length, int(g.integers(1, 8)))))
    dx = da.from_array(x, chunks=((1, 2), tuple(np.diff([0, *cuts, length]))))
    p = kernels.stft_power(dx, w, hop)
    want = _frames_power(x, w, hop)
    assert p.shape == want.shape
    np.testing.assert_allclose(p.compute(scheduler="sync"), want, rtol=1e-10)
    np.testing.assert_allclose(kernels.stft_power(dx[1], da.from_array(w), hop).compute(), want[1], rtol=1e-10)


def test_add_noise_blocks_get_their_row_offsets(monkeypatch):
    calls = []

    def fake(x, snr_db, *, seed=0, signal_power=None, row_offset=0, _chunks=None, **k):
        calls.append((x.shape[0], row_offset, seed, snr_db, signal_power))
        return x + (row_offset + np.arange(x.shape[0]))[:, None] * 1000.0 + seed

    monkeypatch.setattr(noise, "add_noise", fake)
    x = np.zeros((7, 4))
    want = fake(x, 5, seed=2, row_offset=10)
    calls.clear()
    y = kernels.add_noise(da.from_array(x, chunks=((3, 3, 1), 4)), 5, seed=2, row_offset=10).compute(scheduler="sync")
    np.testing.assert_array_equal(y, want)
    assert sorted(calls) == [(1, 16, 2, 5.0, None), (3, 10, 2, 5.0, None), (3, 13, 2, 5.0, None)]


def test_matched_filter_runs_once_per_block(monkeypatch):
    calls = []

    def fake(x, template, *, return_correlation=False, stream=None):
        calls.append(x.shape)
        c = np.fft.ifft(np.fft.fft(x, axis=-1) * np.conj(np.fft.fft(template, x.shape[-1])), axis=-1)
        p = np.abs(c) ** 2
        out = (np.argmax(p, axis=-1).astype(np.int32), p.max(axis=-1))
        return out + (c,) if return_correlation else out

    monkeypatch.setattr(spectral, "matched_filter", fake)
    x = g = rng.standard_normal((5, 16)) + 1j * rng.standard_normal((5, 16))
    t = rng.standard_normal(4)
    idx, power, corr = kernels.matched_filter(da.from_array(x, chunks=(2, 16)), t, return_correlation=True)
    assert (idx.dtype, power.dtype, corr.dtype) == (np.int32, np.float64, np.complex128)
    got = dask.compute(idx, power, corr, scheduler="sync")
    assert len(calls) == 3  # one call per block for all three outputs
    for a, b in zip(got, fake(g, t, return_correlation=True)):
        np.testing.assert_allclose(a, b)
    calls.clear()
    i1, p1 = kernels.matched_filter(da.from_array(x[0], chunks=16), t)  # one row: outputs of shape (1,)
    assert i1.shape == p1.shape == (1,) and i1.compute()[0] == fake(x[:1], t)[0][0]
    i1, p1, c1 = kernels.matched_filter(da.from_array(x[0].astype(np.complex64), chunks=16), t,
                                        return_correlation=True)
    assert c1.shape == (16,) and p1.dtype == np.float32 and c1.dtype == np.complex64


def test_small_dask_arguments_reach_every_block_whole(monkeypatch):
    seen = []

    def fake(x, h, method="auto", stream=None):
        seen.append((type(h), np.asarray(h).shape, method))
        return x * np.asarray(h).sum()

    monkeypatch.setattr(convolution, "fft_convolve", fake)
    x = np.ones((5, 8))
    y = kernels.fft_convolve(da.from_array(x, chunks=(2, 8)), da.arange(6.0, chunks=4), method="fft")
    np.testing.assert_array_equal(y.compute(scheduler="sync"), x * 15)
    assert seen == [(np.ndarray, (6,), "fft")] * 3  # every block gets the whole taps and the method
    with pytest.raises(ValueError, match="method must be 'auto', 'fft' or 'direct', got 'dft'"):
        kernels.fft_convolve(da.from_array(x, chunks=(2, 8)), [1.0], method="dft")


def test_batched_gemm_and_beamform_blocks(monkeypatch):
    monkeypatch.setattr(gemm, "batched_gemm",
                        lambda a, b, c=None, alpha=1.0, beta=0.0: alpha * a @ b + (beta * c if c is not None else 0))
    monkeypatch.setattr(gemm, "beamform_spectra", lambda x, w: np.fft.fft(np.asarray(w) @ x, axis=-1))
    a, b, c = (rng.standard_normal((7, 3, 3)) for _ in range(3))
    d = kernels.batched_gemm(da.from_array(a, chunks=(3, 3, 3)), da.from_array(b, chunks=(2, 3, 3)),
                             c=da.from_array(c, chunks=(4, 3, 3)), alpha=2.0, beta=0.5)
    np.testing.assert_allclose(d.compute(scheduler="sync"), 2.0 * a @ b + 0.5 * c)
    x = rng.standard_normal((5, 3, 8)) + 0j
    w = rng.standard_normal((2, 3))
    y = kernels.beamform_spectra(da.from_array(x, chunks=(2, 3, 8)), da.from_array(w, chunks=1))
    assert y.shape == (5, 2, 8)
    np.testing.assert_allclose(y.compute(scheduler="sync"), np.fft.fft(w @ x, axis=-1))


# ---------------------------------------------------------------------------------------------
# python -m kernels --gpus, the extra


@pytest.fixture
def on_gpu_machine(monkeypatch):
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "0")
    monkeypatch.setattr(cli, "_gpu_count", lambda: 2)


def test_gpus_without_dask_names_the_install(on_gpu_machine, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "dask_cuda", None)  # import dask_cuda -> ImportError
    with pytest.raises(SystemExit) as e:
        cli.main(["--gpus", "1"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--gpus needs dask[array], distributed and dask-cuda: dask_cuda cannot be imported" in err
    assert 'pip install "numba-mathdx[dask]"' in err


@pytest.mark.parametrize("argv, env, count, msg", [
    (["--gpus", "1"], "0", 0, "--gpus needs CUDA GPUs, and none is visible here"),
    (["--gpus", "1"], "1", 2, "--gpus needs CUDA GPUs, and NUMBA_ENABLE_CUDASIM is set"),
    (["--gpus", "1", "4"], "0", 2, "--gpus 4: only 2 GPU(s) visible"),
    (["--gpus", "0"], "0", 2, "--gpus counts must be >= 1, got 0"),
    (["--gpus", "1", "--passes", "0"], "0", 2, "--passes must be >= 1, got 0"),
    (["--gpus", "1", "--chunk-rows", "0"], "0", 2, "--chunk-rows must be >= 1, got 0"),
])
def test_gpus_argument_errors(argv, env, count, msg, monkeypatch, capsys):
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", env)
    monkeypatch.setattr(cli, "_gpu_count", lambda: count)
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2 and msg in capsys.readouterr().err


def test_job_signals_and_summary():
    from kernels import _gpus

    x = _gpus.make_signals(10, 32, 4, kind="numpy")
    assert x.chunks == ((4, 4, 2), (32,)) and x.dtype == np.float32
    a = x.compute(scheduler="sync")
    np.testing.assert_array_equal(a, x.compute(scheduler="sync"))  # a seed per block: reproducible
    assert 0.3 < a.std() < 3 and not np.array_equal(a[0], a[4])
    row = dict(gpus=2, rows=10, n=32, chunk_rows=4, blocks_per_worker=[2, 1], passes=3, seconds=0.5,
               gsamples_per_s=2.0, gsamples_per_s_per_gpu=1.0, check_rel_err=1e-7, checked_rows=5, check_s=0.1,
               ok=True)
    one = dict(row, gpus=1, gsamples_per_s=1.25, ok=False, check_rel_err=1e-3)
    text = _gpus.summary([one, row], dict(rows=10, n=32, ms=0.1, gsamples_per_s=1.0))
    assert "| 2 | 10 | 3 | 0.500 | 2.0 | 1.0 | 1.60x | 1.00 | ok (1.0e-07) |" in text
    assert "| 1 | 10 | 3 | 0.500 | 1.2 | 1.0 | 1.00x | 1.25 | MISMATCH (1.0e-03) |" in text
    assert "2 GPU(s), 10 x 32 float32 in blocks of 4 rows (blocks per worker [2, 1])" in _gpus.format_row(row)


def test_the_dask_extra():
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11+")
    import pathlib

    cfg = tomllib.loads((pathlib.Path(kernels.__file__).parents[1] / "pyproject.toml").read_text())
    extras = cfg["project"]["optional-dependencies"]
    assert extras["dask"] == ["dask[array]>=2024.1", "distributed>=2024.1", "dask-cuda>=24.2"]
    assert {"dask[array]>=2024.1", "distributed>=2024.1"} <= set(extras["test"])
    assert not any("dask" in d or "distributed" in d for d in cfg["project"]["dependencies"])
