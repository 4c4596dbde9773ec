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
    """The two-parallel fast FIR in NumPy (float64), as the module docstring states it."""
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


def _run_sums(s, h, lev):
    """The thread's generated arithmetic (kernels._direct._sums), run as Python in float64 on a
    window ``s`` with the taps of ``h`` split ``lev`` times."""
    M = _direct.padded_taps(h.size, lev)
    body, outs, counts = _direct._sums(M, lev)
    g = np.concatenate([h[::-1], np.zeros(M - h.size)])
    env = {f"h{q}": v for q, v in enumerate(np.concatenate(_direct._leaf_taps(g, lev)))}
    env["s"] = s
    exec("\n".join(body), {}, env)  # noqa: S102 - the module's generated statements
    return np.array([env[y] for y in outs]), counts


@pytest.mark.parametrize("lev", [0, 1, 2, 3])
@pytest.mark.parametrize("m", [1, 2, 7, 16, 17, 33, 63, 64])
def test_generated_sums_are_the_correlation(m, lev):
    """Each nesting of the fast FIR, as generated, gives the window's OUTPUTS correlations
    ``y[k] = sum_j g[j] s[k + j]`` (g the reversed taps), each input read once and in order."""
    R = _direct.OUTPUTS
    h = rng.standard_normal(m)
    M = _direct.padded_taps(m, lev)
    s = rng.standard_normal(R + M)  # the last one read only as the last pair's unused half
    y, counts = _run_sums(s, h, lev)
    want = np.array([np.dot(h[::-1], s[k:k + m]) for k in range(R)])
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    body = _direct._sums(M, lev)[0]
    reads = [int(b[b.index("[") + 1:-1]) for b in body if b.startswith("u")]
    assert reads == list(range(R + M - 1))
    assert counts["mul"] + counts["fma"] == sum(b.count(" * ") for b in body)
    assert counts["add"] == sum(b.count(" + ") + b.count(" - ") for b in body)


@pytest.mark.parametrize("m,lev,macs", [
    (63, 0, 32 * 63),    # plain: one per tap and output
    (63, 1, 32 * 49),    # two-parallel: 3 correlations of 32 taps, 17 + 16 + 16 outputs
    (63, 2, 16 * 76),    # four-parallel: 9 of 16 taps, (9 + 9 + 8) + (9 + 8 + 8) + (9 + 8 + 8) outputs
])
def test_multiply_adds_per_thread(m, lev, macs):
    c = _direct._sums(_direct.padded_taps(m, lev), lev)[2]
    assert c["mul"] + c["fma"] == macs
    src = _direct.source(4096, m, lev)
    fmas = re.findall(r" a\d+_\d+ \+?= h(\d+) \* ", src)
    ntaps = len(_direct.taps_param(np.ones(m), lev))
    assert len(fmas) == macs
    assert {int(i) for i in fmas} == set(range(ntaps))
    assert all(f"    h{q} = g[{q}]" in src for q in range(ntaps))


def test_levels_picks_the_fewest_instructions():
    assert _direct.levels(63) == _direct.levels(64) == 1  # nested has fewer (1453 vs 1663): measured slower
    assert _direct.levels(127) == 2
    assert _direct.levels(16) == 1
    assert _direct.levels(7) == 0
    for m in range(1, _direct.MAX_TAPS + 1):
        ops = [_direct._ops(m, lev) for lev in range(3 if m >= _direct.NESTED_FROM else 2)]
        assert ops[_direct.levels(m)] == min(ops)
    assert _direct.flops(4096, 63) == 128 * (2 * 1519 + 49 + 95)  # multiply-adds, products, adds (split once)
    assert _direct.flops(4096, 63, 2) == 128 * (2 * 1140 + 76 + 237)  # split twice


def test_taps_param_splits_the_reversed_taps_by_phase():
    h = np.arange(1.0, 8.0)  # 7 taps: reversed 7..1, padded with a zero
    t = np.array(_direct.taps_param(h, 1), np.float64)
    np.testing.assert_array_equal(t, [7, 5, 3, 1, 6, 4, 2, 0, 13, 9, 5, 1])
    np.testing.assert_array_equal(np.array(_direct.taps_param(h, 0), np.float64), h[::-1])
    # twice: g = 7..1, 0 -> (7 3 | 5 1 | 12 4), (6 2 | 4 0 | 10 2), (13 5 | 9 1 | 22 6)
    np.testing.assert_array_equal(np.array(_direct.taps_param(h, 2), np.float64),
                                  [7, 3, 5, 1, 12, 4, 6, 2, 4, 0, 10, 2, 13, 5, 9, 1, 22, 6])
    assert type(t[0]) is np.float64 and all(type(v) is np.float32 for v in _direct.taps_param(h))
    assert _direct.taps_param(h) is _direct.taps_param(h.copy())  # cached by value
    assert _direct.taps_param(h, 1) is not _direct.taps_param(h, 2)


@pytest.mark.parametrize("n,m,lev,nseg,pipe", [(4096, 63, 2, 0, False), (4096, 63, 1, 0, False), (64, 7, 0, 0, False),
                                                (1024, 16, 1, 0, False), (4096, 127, 2, 256, False),
                                                (64, 128, 2, 3, False), (4096, 63, 2, 0, True), (4096, 127, 2, 256, True)])
def test_direct_kernel_links_for_sm90_without_local_memory(n, m, lev, nseg, pipe):
    """The main job's kernel (4096 samples, 63 taps: one row of 128 threads per block) with the
    taps split twice (what levels() picks) and once, short-row ones (64 rows of 2 threads, 4
    rows of 32 per block; 16 taps: the row stored to shared memory as floats), and fir_filter's
    for the FIR benchmark (rows of 2**20 samples as 4096-sample segments, 127 taps) and for 128
    taps on 64-sample segments (fewer rows per block: their shared memory within 48 KiB), and the
    pipelined (persistent, cp.async) form of the first and the FIR one: no spills, registers
    within the launch bounds' 4 blocks of 128 threads per SM."""
    from numba import types

    from nvmath_device.aot import compile_kernel

    one_row = _direct.geometry(n, m, lev)[1] == 1 and not pipe  # no row count parameter
    ntaps = len(_direct.taps_param(np.ones(m), lev))
    argtypes = ((types.complex64[::1], types.float32[::1], types.complex64[::1])
                + (() if one_row else (types.int64,)) + (types.UniTuple(types.float32, ntaps),))
    ck = compile_kernel(_direct.kernel(n, m, lev, nseg, pipe), argtypes, sm=90)
    assert ck.frame_bytes == 0
    assert 0 < ck.registers <= 128
    assert ck.linked == ()  # no Dx library: plain FMAs


def test_geometry_and_shared_rows():
    assert _direct.geometry(4096, 63, 2) == (128, 1)
    assert _direct.geometry(64, 7, 0) == (2, 64)
    assert _direct.geometry(8192, 64, 2) == (256, 1)
    assert _direct.geometry(64, 128, 2) == (2, 53)  # 128 taps on 64-sample segments: 53 rows fit 48 KiB
    for n, m, lev in [(64, 7, 0), (4096, 63, 2), (192, 64, 1), (8192, 64, 2), (8192, 63, 0), (8192, 128, 2),
                      (64, 128, 2), (128, 127, 1)]:
        t, rows = _direct.geometry(n, m, lev)
        sh = _direct._row_floats(n, m, lev)
        end = n + _direct.padded_taps(m, lev)  # s[0 : end] read, in pairs
        assert sh >= _direct._slot(end - 1) + 1  # every index a thread reads fits
        assert sh % 2 == 0 and sh % 32 == 2 * t % 32  # pairs; a half-warp's pairs on distinct banks
        assert rows * sh * 4 <= 48 * 1024  # static shared memory


def test_unsupported_names_the_argument():
    f32 = np.float32
    assert _direct.unsupported(4096, 63, f32, False) is None
    assert _direct.unsupported(8192, 64, f32, False) is None
    assert "float32" in _direct.unsupported(4096, 63, np.float64, False)
    assert "float32" in _direct.unsupported(4096, 63, np.complex64, False)
    assert "host taps" in _direct.unsupported(4096, 63, f32, True)
    assert "multiple of 64" in _direct.unsupported(4000, 7, f32, False)
    assert "up to 8192" in _direct.unsupported(8256, 7, f32, False)
    assert "at most 128" in _direct.unsupported(4096, 129, f32, False)
    assert _direct.unsupported(64, 65, f32, False) == "h has 65 taps; at most the row length, 64"
    # fir_filter's rows: any multiple of 64, its taps named taps
    assert _direct.unsupported(2**20 + 64, 128, f32, False, linear=True) is None
    assert _direct.unsupported(100, 7, f32, False, linear=True) == "x's rows must have a multiple of 64 samples, got 100"
    assert _direct.unsupported(64, 129, f32, False, linear=True) == "taps has 129 taps; at most 128 (longer filters: method='fft')"
    assert _direct.unsupported(64, 9, f32, True, linear=True).startswith("taps must be host taps")


def test_auto_picks_direct_only_where_measured():
    assert _direct.faster(4096, 63) and _direct.faster(4096, 64)
    assert not _direct.faster(4096, 65)  # runs (up to 128 taps), never timed against the FFT kernel
    assert not _direct.faster(512, 33) and not _direct.faster(256, 7)


def test_pipelined_kernel_where_two_rows_fit():
    """The persistent two-buffer kernel: one row per block and two rows' shared memory within
    48 KiB (rows of 4096 samples); elsewhere it is refused by name, and convolve() runs it only
    when PIPELINE (not yet timed: off) says so."""
    assert _direct.pipelines(4096, 63, 2) and _direct.pipelines(4096, 128, 2)
    assert not _direct.pipelines(8192, 63, 2) and not _direct.pipelines(1024, 63, 2)
    with pytest.raises(ValueError, match="no pipelined kernel for rows of 1024 samples and 63 taps"):
        _direct.source(1024, 63, 2, pipe=True)
    assert _direct.PIPELINE is False
    src = _direct.source(4096, 63, 2, pipe=True)
    assert src.count("copy_async(xc, ") == 32 and src.count("copy_async_wait(1)") == 1  # 16 pairs, twice
    assert "while row < uint64(nrows):" in src and src.count("cuda.syncthreads()") == 4


def test_segments_of_fir_rows():
    assert _direct.segments(2**20) == (4096, 256)
    assert _direct.segments(8192) == (4096, 2)
    assert _direct.segments(6144) == (2048, 3)
    assert _direct.segments(4160) == (64, 65)
    assert _direct.segments(64) == (64, 1)


def test_linear_source_reads_the_previous_segment_or_zeros():
    """fir_filter's kernel: the halo before a segment from the segment before it in the row, or
    zeros at a row's start (no wraparound, no modulo of positions); after it zeros (zero taps)."""
    many, one, circ = _direct.source(4096, 127, 2, 256), _direct.source(4096, 127, 2, 1), _direct.source(4096, 127, 2)
    assert "first = row % uint64(256) * uint64(4096)" in many
    assert "    if first + tx < uint64(126):\n            xs[tx + (tx) // uint64(32) * uint64(2)] = float32(0)\n" in many
    assert "first" not in one and "x[row" not in one  # one segment per row: the halo is zeros
    assert "x[row * uint64(4096) + uint64(3970) + tx]" in circ  # circular: the row's own end
    assert all(" % " not in src.split("cuda.syncthreads()")[0].replace("row % uint64(256)", "") for src in (many, one, circ))


@pytest.mark.parametrize("fn", ["fft_convolve", "fir_filter"])
@pytest.mark.parametrize("method", ["dft", None, "FFT"])
def test_a_bad_method_is_refused_before_the_signal_is_read(method, fn):
    """(The other refusals of method="direct" need the signal on a device: tests/sim.)"""
    with pytest.raises(ValueError, match=re.escape(f"method must be 'auto', 'fft' or 'direct', got {method!r}")):
        getattr(kernels, fn)(object(), [1.0], method=method)


@pytest.mark.parametrize("method,x,h,want", [
    ("auto", np.zeros((2, 4096), np.float32), np.ones(63), "direct"),
    ("auto", np.zeros((2, 1024), np.float32), np.ones(64), "direct"),
    ("auto", np.zeros((2, 512), np.float32), np.ones(32), "direct"),
    ("auto", np.zeros((2, 512), np.float32), np.ones(33), "fft"),  # measured slower there
    ("auto", np.zeros((2, 256), np.float32), np.ones(7), "fft"),  # not measured
    ("auto", np.zeros((2, 4096), np.float32), np.ones(65), "fft"),  # runs, not measured beyond 64 taps
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
