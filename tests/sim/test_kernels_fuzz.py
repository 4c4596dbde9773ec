# SPDX-License-Identifier: Apache-2.0
"""Bad-input fuzzing of every ``kernels`` function under the simulator with NumPy inputs.

Every call either returns what NumPy computes, or raises ValueError / TypeError /
NotImplementedError whose message names one of the call's arguments; never another exception.
Sizes that would compile new FFT or GEMM shapes are kept out of the valid space (64-point FFTs,
16^3 float32 GEMMs: the shapes tests/sim/test_kernels_sim.py compiles too)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import kernels

ALLOWED = (ValueError, TypeError, NotImplementedError)
SETTINGS = settings(max_examples=40, derandomize=True, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module", autouse=True)
def _traits():
    from kernels._fused import prefetch

    prefetch([(64, p, r) for p in (np.float32, np.float64) for r in (False, True)])


def _values(shape, dtype, seed):
    g = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "U":
        return np.full(shape, "a")
    x = g.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * g.standard_normal(shape)
    return x.astype(dtype)


@st.composite
def arrays(draw, shapes, dtypes, others=(None, "abc", 3.0, [[1.0], [2.0, 3.0]])):
    """A NumPy array (possibly non-contiguous: every other column of a wider one), or a non-array."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(others))
    shape = draw(st.sampled_from(shapes))
    dtype = draw(st.sampled_from(dtypes))
    seed = draw(st.integers(0, 3))
    if shape and draw(st.booleans()):  # a strided view with the same shape
        wide = _values(shape[:-1] + (2 * shape[-1],), dtype, seed)
        return wide[..., ::2]
    return _values(shape, dtype, seed)


STREAMS = st.sampled_from([None, None, None, 0, "s", 1.5, True, object()])
FLOATS = (np.float32, np.float64, np.complex64, np.complex128, np.int32, np.bool_, np.str_)


def _named(err, names):
    msg = str(err)
    assert any(n in msg for n in names), f"{type(err).__name__} does not name {names}: {msg}"


OUTCOMES: dict = {}  # function -> [calls that raised, calls that returned]


def _call(fn, names, *args, **kwargs):
    """fn(...) or None when it raised an allowed exception naming an argument."""
    counts = OUTCOMES.setdefault(fn.__name__, [0, 0])
    try:
        out = fn(*args, **kwargs)
    except ALLOWED as e:
        _named(e, names)
        counts[0] += 1
        return None
    counts[1] += 1
    return out


def _rel(a, b):
    a, b = np.ravel(a).astype(np.complex128), np.ravel(b).astype(np.complex128)
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


def _tol(dtype):
    return 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10


@SETTINGS
@given(x=arrays([(2, 64), (64,), (2, 97), (2, 0), (0, 64), (2, 2, 64), ()], FLOATS),
       h=arrays([(5,), (1,), (64,), (65,), (0,), (2, 3)], FLOATS), stream=STREAMS)
@example(x=_values((2, 64), np.float32, 0)[:, ::1], h=_values((5,), np.float64, 1), stream=None)
@example(x=_values((2, 128), np.complex128, 0)[:, ::2], h=_values((64,), np.complex64, 1), stream=0)
def _fuzz_fft_convolve(x, h, stream):
    y = _call(kernels.fft_convolve, ("x", "h", "stream"), x, h, stream=stream)
    if y is None:
        return
    n = x.shape[-1]
    ref = np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * np.fft.fft(h.astype(np.complex128), n), axis=-1)
    ref = ref if x.dtype.kind == "c" else ref.real
    assert y.shape == x.shape and y.dtype == x.dtype
    assert _rel(y, ref) < _tol(x.dtype)


@SETTINGS
@given(x=arrays([(2, 50), (130,), (2, 0), (2, 2, 50)], FLOATS),
       taps=arrays([(5,), (1,), (13,), (0,), (2, 3)], FLOATS),
       fft_size=st.sampled_from([None, 64, 0, -64, 48, 8192, 64.0, "64", True]), stream=STREAMS)
@example(x=_values((2, 100), np.float32, 0)[:, ::2], taps=_values((13,), np.float32, 1), fft_size=None,
         stream=None)
@example(x=_values((130,), np.complex64, 0), taps=_values((5,), np.float64, 1), fft_size=64, stream=0)
def _fuzz_fir_filter(x, taps, fft_size, stream):
    y = _call(kernels.fir_filter, ("x", "taps", "fft_size", "stream"), x, taps, fft_size=fft_size,
              stream=stream)
    if y is None:
        return
    length = x.shape[-1]
    rows = x.reshape(int(np.prod(x.shape[:-1])), length).astype(np.complex128)
    ref = np.array([np.convolve(r, taps.astype(np.complex128))[:length] if length else r for r in rows]).reshape(x.shape)
    ref = ref if x.dtype.kind == "c" else ref.real
    assert y.shape == x.shape and y.dtype == x.dtype
    assert _rel(y, ref) < _tol(x.dtype)


@SETTINGS
@given(x=arrays([(2, 64), (64,), (2, 97), (2, 0), (3, 2, 64)], FLOATS),
       template=arrays([(16,), (1,), (65,), (0,), (2, 3)], FLOATS),
       keep=st.sampled_from([False, True, 1, None]), stream=STREAMS)
@example(x=_values((2, 64), np.complex64, 0), template=_values((16,), np.complex64, 1), keep=True,
         stream=None)
@example(x=_values((64,), np.float64, 0), template=_values((1,), np.float32, 1), keep=False, stream=None)
def _fuzz_matched_filter(x, template, keep, stream):
    out = _call(kernels.matched_filter, ("x", "template", "return_correlation", "stream"), x, template,
                return_correlation=keep, stream=stream)
    if out is None:
        return
    n = x.shape[-1]
    ref = np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * np.conj(np.fft.fft(template.astype(np.complex128), n)), axis=-1)
    ref = ref.reshape(int(np.prod(x.shape[:-1])), n)
    power = np.abs(ref) ** 2
    idx, val = out[0], out[1]
    np.testing.assert_allclose(val, power.max(axis=-1), rtol=_tol(x.dtype) * 10)
    np.testing.assert_allclose(power[np.arange(len(idx)), idx], power.max(axis=-1), rtol=_tol(x.dtype) * 10)
    if keep:
        assert _rel(out[2], ref.reshape(x.shape)) < _tol(x.dtype)


@SETTINGS
@given(x=arrays([(2, 100), (100,), (2, 16), (2, 2, 100)], FLOATS),
       window=arrays([(64,), (97,), (0,), (2, 64)], FLOATS),
       hop=st.sampled_from([16, 40, 0, -1, 1.5, True, None, "4", np.int64(24)]), stream=STREAMS)
@example(x=_values((2, 100), np.float32, 0), window=np.hanning(64), hop=16, stream=None)
@example(x=_values((100,), np.float64, 0), window=_values((64,), np.float32, 1), hop=np.int64(24), stream=0)
def _fuzz_stft_power(x, window, hop, stream):
    p = _call(kernels.stft_power, ("x", "window", "hop", "stream"), x, window, hop, stream=stream)
    if p is None:
        return
    nfft, length = window.shape[0], x.shape[-1]
    rows = x.reshape(int(np.prod(x.shape[:-1])), length).astype(np.float64)
    nframes = 1 + (length - nfft) // int(hop)
    frames = np.stack([rows[:, f * hop:f * hop + nfft] for f in range(nframes)], axis=1)
    ref = np.abs(np.fft.rfft(frames * window.astype(np.float64), axis=-1)) ** 2
    assert p.shape == (ref.shape[1:] if x.ndim == 1 else ref.shape)
    assert _rel(p, ref.reshape(p.shape)) < _tol(x.dtype)


GEMM_DT = (np.float32, np.float64, np.int32, np.str_)


@SETTINGS
@given(a=arrays([(2, 16, 16), (16, 16), (0, 16, 16)], GEMM_DT),
       b=arrays([(2, 16, 16), (2, 8, 16), (3, 16, 16)], GEMM_DT),
       c=st.one_of(st.none(), arrays([(2, 16, 16), (2, 16, 8)], GEMM_DT)),
       alpha=st.sampled_from([1.0, 2, 0.5j, "1", None, True]),
       beta=st.sampled_from([0.0, 1.0, None, "0"]), stream=STREAMS)
@example(a=_values((2, 16, 16), np.float32, 0), b=_values((2, 16, 16), np.float32, 1),
         c=_values((2, 16, 16), np.float32, 2), alpha=2, beta=1.0, stream=None)
def _fuzz_batched_gemm(a, b, c, alpha, beta, stream):
    names = ("a", "b", "c", "alpha", "beta", "stream")
    d = _call(kernels.batched_gemm, names, a, b, c=c, alpha=alpha, beta=beta, stream=stream)
    if d is None:
        return
    assert a.shape[1:] == (16, 16)  # the only valid GEMM shape here (float32/float64)
    ref = alpha * (a.astype(np.float64) @ b)
    if c is not None and beta:
        ref = ref + beta * c.astype(np.float64)
    assert d.shape == ref.shape and _rel(d, ref) < _tol(a.dtype)


@SETTINGS
@given(x=arrays([(2, 4, 16), (2, 4, 48), (2, 4, 2048), (4, 32)], (np.complex64, np.float32, np.str_)),
       weights=arrays([(4, 4), (3, 4), (32, 4), (4, 5), (4,)], (np.complex64, np.float32, np.str_)),
       stream=STREAMS)
def test_fuzz_beamform_spectra_rejects(x, weights, stream):
    """Only invalid shapes here (a valid one would compile a GEMM + FFT unit): each is named."""
    with pytest.raises(ALLOWED) as info:
        kernels.beamform_spectra(x, weights, stream=stream)
    _named(info.value, ("x", "weights", "stream"))


def _both_outcomes(name, search):
    """Run one function's whole Hypothesis search, then check it met both outcomes: calls that
    raised (a named argument error) and calls that returned (checked against NumPy). In the
    same test, so that pytest-xdist cannot put the check on another worker than the search."""
    OUTCOMES.pop(name, None)
    search()
    raised, returned = OUTCOMES.get(name, [0, 0])
    assert raised > 0 and returned > 0, (name, raised, returned)


def test_fuzz_fft_convolve():
    _both_outcomes("fft_convolve", _fuzz_fft_convolve)


def test_fuzz_fir_filter():
    _both_outcomes("fir_filter", _fuzz_fir_filter)


def test_fuzz_matched_filter():
    _both_outcomes("matched_filter", _fuzz_matched_filter)


def test_fuzz_stft_power():
    _both_outcomes("stft_power", _fuzz_stft_power)


def test_fuzz_batched_gemm():
    _both_outcomes("batched_gemm", _fuzz_batched_gemm)
