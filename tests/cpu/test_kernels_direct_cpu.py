# SPDX-License-Identifier: Apache-2.0
"""``fft_convolve(method="direct")`` (kernels._direct) without a GPU: the generated kernel links
for sm_90 without local memory, the algorithm (a two-parallel fast FIR) in NumPy against direct
circular convolution, its multiply-add count, and every refusal before any compiler runs."""

import re

import numpy as np
import pytest

import kernels
from kernels import _direct

rng = np.random.default_rng(5)


def _circular(x, h):
    n = x.shape[-1]
    return np.real(np.fft.ifft(np.fft.fft(x, axis=-1) * np.fft.fft(h, n), axis=-1))


def _ffa_model(x, h):
    """The kernel's algorithm in NumPy (float64), as the module docstring states it."""
    n, m = x.size, h.size
    g = np.asarray(h, np.float64)[::-1]
    if m % 2:
        g = np.append(g, 0.0)
    J = g.size // 2
    s = np.concatenate([x[n - m + 1:] if m > 1 else x[:0], x, x[:2 * J]])  # s[i] = x[(i - m + 1) mod n]
    E, Od = s[0::2], s[1::2]  # even and odd samples
    S = Od[:E.size - 1] + E[1:]
    K = n // 2
    A = np.array([np.dot(g[0::2], E[k:k + J]) for k in range(K + 1)])
    B = np.array([np.dot(g[1::2], Od[k:k + J]) for k in range(K)])
    P = np.array([np.dot(g[0::2] + g[1::2], S[k:k + J]) for k in range(K)])
    y = np.empty(n)
    y[0::2] = A[:K] + B
    y[1::2] = P - A[1:] - B
    return y


@pytest.mark.parametrize("n,m", [(64, 1), (64, 2), (64, 7), (128, 64), (64, 63), (256, 33)])
def test_two_parallel_fast_fir_is_circular_convolution(n, m):
    x, h = rng.standard_normal(n), rng.standard_normal(m)
    np.testing.assert_allclose(_ffa_model(x, h), _circular(x, h), atol=1e-10)


@pytest.mark.parametrize("m", [1, 2, 7, 63, 64])
def test_generated_kernel_does_three_quarters_of_the_multiply_adds(m):
    """J (3K + 1) multiply-adds per thread of K output pairs (J = ceil(m / 2) taps per phase),
    against 2K m for plain direct summation; every one reads its tap from the parameter tuple."""
    src = _direct.source(4096, m)
    fmas = re.findall(r" [ABP]\d+ \+?= h(\d+) \* ", src)  # each accumulator's first one a product
    K, J = _direct.OUTPUTS // 2, (m + 1) // 2
    assert len(fmas) == J * (3 * K + 1)
    assert {int(i) for i in fmas} == set(range(3 * J))
    assert len(re.findall(r" [ABP]\d+ = h", src)) == 3 * K + 1  # no zero-initialised accumulator
    assert all(f"    h{q} = g[{q}]" in src for q in range(3 * J))
    assert len(_direct.taps_param(np.ones(m))) == 3 * J


def test_taps_param_splits_the_reversed_taps_by_phase():
    h = np.arange(1.0, 8.0)  # 7 taps: reversed 7..1, padded with a zero
    t = np.array(_direct.taps_param(h), np.float64)
    np.testing.assert_array_equal(t, [7, 5, 3, 1, 6, 4, 2, 0, 13, 9, 5, 1])
    assert type(t[0]) is np.float64 and all(type(v) is np.float32 for v in _direct.taps_param(h))
    assert _direct.taps_param(h) is _direct.taps_param(h.copy())  # cached by value


@pytest.mark.parametrize("n,m", [(4096, 63), (64, 7)])
def test_direct_kernel_links_for_sm90_without_local_memory(n, m):
    """The main job's kernel (4096 samples, 63 taps: one row of 128 threads per block) and a
    short-row one (64 rows of 2 threads per block): no spills, registers within the launch
    bounds' 4 blocks of 128 threads per SM."""
    from numba import types

    from nvmath_device.aot import compile_kernel

    J = (m + 1) // 2
    one_row = _direct.geometry(n)[1] == 1  # no row count parameter
    argtypes = ((types.complex64[::1], types.float32[::1], types.complex64[::1])
                + (() if one_row else (types.int64,)) + (types.UniTuple(types.float32, 3 * J),))
    ck = compile_kernel(_direct.kernel(n, m), argtypes, sm=90)
    assert ck.frame_bytes == 0
    assert 0 < ck.registers <= 128
    assert ck.linked == ()  # no Dx library: plain FMAs


def test_geometry_and_shared_rows():
    assert _direct.geometry(4096) == (128, 1)
    assert _direct.geometry(64) == (2, 64)
    assert _direct.geometry(8192) == (256, 1)
    for n, m in [(64, 7), (4096, 63), (192, 64), (8192, 64)]:
        t, rows = _direct.geometry(n)
        sh = _direct._row_floats(n, m)
        last = n + m + m % 2 - 2
        assert sh >= last + last // _direct.OUTPUTS + 1  # every index a thread reads fits
        assert sh % 32 == t % 32  # rows of one warp on distinct banks
        assert rows * sh * 4 < 48 * 1024  # static shared memory


def test_unsupported_names_the_argument():
    f32 = np.float32
    assert _direct.unsupported(4096, 63, f32, False) is None
    assert _direct.unsupported(8192, 64, f32, False) is None
    assert "float32" in _direct.unsupported(4096, 63, np.float64, False)
    assert "float32" in _direct.unsupported(4096, 63, np.complex64, False)
    assert "host taps" in _direct.unsupported(4096, 63, f32, True)
    assert "at most 64" in _direct.unsupported(4096, 65, f32, False)
    assert "multiple of 64" in _direct.unsupported(4000, 7, f32, False)
    assert "up to 8192" in _direct.unsupported(8256, 7, f32, False)


@pytest.mark.parametrize("method", ["dft", None, "FFT"])
def test_a_bad_method_is_refused_before_the_signal_is_read(method):
    """(The other refusals of method="direct" need the signal on a device: tests/sim.)"""
    with pytest.raises(ValueError, match=re.escape(f"method must be 'auto', 'fft' or 'direct', got {method!r}")):
        kernels.fft_convolve(object(), [1.0], method=method)


@pytest.mark.parametrize("method,x,h,want", [
    ("auto", np.zeros((2, 4096), np.float32), np.ones(63), "direct"),
    ("auto", np.zeros((2, 1024), np.float32), np.ones(64), "direct"),
    ("auto", np.zeros((2, 512), np.float32), np.ones(32), "direct"),
    ("auto", np.zeros((2, 512), np.float32), np.ones(33), "fft"),  # measured slower there
    ("auto", np.zeros((2, 256), np.float32), np.ones(7), "fft"),  # not measured
    ("auto", np.zeros((2, 4096), np.float32), np.ones(65), "fft"),  # too many taps
    ("auto", np.zeros((2, 4096), np.float64), np.ones(63), "fft"),
    ("auto", np.zeros((2, 1000), np.float32), np.ones(7), "fft"),  # not a multiple of 64
    ("fft", np.zeros((2, 4096), np.float32), np.ones(63), "fft"),
    ("direct", np.zeros((2, 192), np.float32), np.ones(1), "direct"),  # not an FFT size
    ("direct", np.zeros((2, 512), np.float32), np.ones(63), "direct"),
])
def test_convolve_method(method, x, h, want):
    from kernels.convolution import convolve_method

    assert convolve_method(method, x.shape[-1], h, x.dtype) == want


def test_fast_launch_packs_a_scalar_tuple_like_numba():
    """A ScalarTuple argument (the direct kernel's taps) is typed once as a UniTuple and packed
    as one parameter per element, as numba-cuda's own launch packs the plain tuple."""
    from types import SimpleNamespace

    from numba import typeof
    from numba.cuda.dispatcher import _Kernel

    from kernels._launch import ScalarTuple, _argtype, param_formats, param_values, pointer_slots

    vals = [np.float32(v) for v in (1.5, -2.0, 3.25)]
    st = ScalarTuple(vals)
    assert _argtype(st) == typeof(tuple(vals))
    want = []
    ns = SimpleNamespace(extensions=[])
    ns._prepare_args = lambda *a: _Kernel._prepare_args(ns, *a)  # numba recurses into tuples
    ns._prepare_args(typeof(tuple(vals)), tuple(vals), 0, [], want)
    argtypes = (_argtype(st), _argtype(7))
    assert param_formats(argtypes) == ["f", "f", "f", "q"]
    assert param_values(argtypes, (st, 7))[:3] == [w.value for w in want] == [1.5, -2.0, 3.25]
    assert pointer_slots(argtypes) == {}
    with pytest.raises(TypeError, match="one type"):
        ScalarTuple([np.float32(1), np.float64(2)])
    with pytest.raises(TypeError, match="one type"):
        ScalarTuple([])
