# SPDX-License-Identifier: Apache-2.0
"""The fused kernels, run under the CUDA simulator, against NumPy/SciPy references."""

import numpy as np
import pytest

import kernels

rng = np.random.default_rng(7)


@pytest.fixture(scope="module", autouse=True)
def _traits():
    """Every FFT pair these tests use, in one NVRTC run."""
    from kernels._fused import prefetch

    prefetch([(64, p, r) for p in (np.float32, np.float64) for r in (False, True)])


def _rel(a, b):
    return np.linalg.norm(np.ravel(a - b)) / np.linalg.norm(np.ravel(b))


def _signal(shape, dtype):
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


TOL = {np.float32: 1e-5, np.complex64: 1e-5, np.float64: 1e-12, np.complex128: 1e-12}


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float64, np.complex128])
def test_fft_convolve(dtype):
    x = _signal((3, 64), dtype)
    h = rng.standard_normal(11)
    y = kernels.fft_convolve(x, h)
    ref = np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * np.fft.fft(h, 64), axis=-1)
    ref = ref if np.iscomplexobj(x) else ref.real
    assert y.dtype == x.dtype and y.shape == x.shape
    assert _rel(y, ref) < TOL[dtype]


@pytest.mark.parametrize("n", [64, 100])  # 64: folded real FFTs (real pairs); 100: normal mode
def test_fft_convolve_real_layouts(n):
    from kernels._fused import can_fold, fft_pair

    x = _signal((2, n), np.float32)
    h = rng.standard_normal(7)
    y = kernels.fft_convolve(x, h)
    ref = np.fft.ifft(np.fft.fft(x.astype(np.float64), axis=-1) * np.fft.fft(h, n), axis=-1).real
    assert _rel(y, ref) < TOL[np.float32]
    fwd, _ = fft_pair(n, np.float32, True, folded=can_fold(n))
    assert fwd.real_fft_options["real_mode"] == ("folded" if n == 64 else "normal")


def test_fft_convolve_1d_input():
    x = _signal((64,), np.float32)
    y = kernels.fft_convolve(x, [1.0, -1.0])
    assert y.shape == (64,)
    np.testing.assert_allclose(y, x - np.roll(x, 1), atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_fir_filter_matches_lfilter(dtype):
    from scipy.signal import lfilter

    x = _signal((2, 300), dtype)
    taps = rng.standard_normal(13)
    y = kernels.fir_filter(x, taps, fft_size=64)
    ref = lfilter(taps, 1, x.astype(np.complex128 if np.iscomplexobj(x) else np.float64), axis=-1)
    assert y.shape == x.shape and _rel(y, ref) < TOL[dtype]


@pytest.mark.parametrize("ntaps, length, pairs", [(13, 300, True), (12, 300, False), (13, 301, False)])
def test_fir_filter_real_pairs_and_scalar_paths(ntaps, length, pairs):
    """Folded real FIR: sample pairs move as one complex access when every segment starts on an
    even sample (odd tap count, even length); otherwise sample by sample. Both match lfilter."""
    from scipy.signal import lfilter

    from kernels._fused import pairs_ok

    n = 64
    assert pairs_ok(True, True, n, length, n - ntaps + 1, ntaps - 1) is pairs
    x = _signal((2, length), np.float32)
    taps = rng.standard_normal(ntaps)
    y = kernels.fir_filter(x, taps, fft_size=n)
    assert _rel(y, lfilter(taps, 1, x.astype(np.float64), axis=-1)) < TOL[np.float32]


def test_matched_filter_finds_the_planted_template():
    n = 64
    t = rng.standard_normal(16) + 1j * rng.standard_normal(16)
    x = 0.3 * _signal((4, n), np.complex64)
    shifts = [3, 17, 40, 47]
    for b, s in enumerate(shifts):
        x[b, s : s + 16] += t
    idx, power, corr = kernels.matched_filter(x, t, return_correlation=True)
    ref = np.fft.ifft(
        np.fft.fft(x.astype(np.complex128), axis=-1) * np.conj(np.fft.fft(t, n)), axis=-1
    )
    assert list(idx) == shifts == list(np.argmax(np.abs(ref) ** 2, axis=-1))
    np.testing.assert_allclose(power, (np.abs(ref) ** 2).max(axis=-1), rtol=1e-5)
    assert _rel(corr, ref) < 1e-5


@pytest.mark.parametrize("n", [96, 4096])
def test_matched_filter_peak_search_over_the_row_threads(n):
    """The row's peak is reduced over its threads as a tree (96: 4 threads of 24 values;
    4096: 256 threads, eight warps per row); peaks planted near both ends of the row."""
    from kernels._fused import fft_pair

    assert fft_pair(n, np.float32, False)[0].block_dim[0] == {96: 4, 4096: 256}[n]
    t = rng.standard_normal(16) + 1j * rng.standard_normal(16)
    x = 0.3 * _signal((3, n), np.complex64)
    shifts = [n - 16, 1, n // 2 + 3]
    for b, s in enumerate(shifts):
        x[b, s : s + 16] += t
    idx, power = kernels.matched_filter(x, t)
    ref = np.abs(np.fft.ifft(np.fft.fft(x.astype(np.complex128), axis=-1) * np.conj(np.fft.fft(t, n)), axis=-1)) ** 2
    assert list(idx) == shifts == list(np.argmax(ref, axis=-1))
    np.testing.assert_allclose(power, ref.max(axis=-1), rtol=1e-5)


def test_matched_filter_real_input():
    x = _signal((2, 64), np.float32)
    t = x[0, 5:25].copy()
    idx, _ = kernels.matched_filter(x, t)
    assert idx[0] == 5


@pytest.mark.parametrize(
    "nfft, hop, length, path",
    [(64, 32, 300, "pairs"), (64, 33, 300, "folded"), (64, 32, 301, "folded"), (100, 30, 300, "normal")],
)
def test_stft_power(nfft, hop, length, path):
    """Folded real FFTs load frame and window as sample pairs when hop and length are even,
    sample by sample otherwise; other sizes run cuFFTDx's normal real FFT. All match NumPy."""
    from kernels._fused import can_fold, pairs_ok

    assert ("normal" if not can_fold(nfft) else "pairs" if pairs_ok(True, True, nfft, length, hop, 0)
            else "folded") == path
    x = _signal((2, length), np.float32)
    w = np.hanning(nfft)
    p = kernels.stft_power(x, w, hop=hop)
    frames = 1 + (length - nfft) // hop
    ref = (
        np.abs(
            np.fft.rfft(
                np.stack([x[:, f * hop : f * hop + nfft] * w for f in range(frames)], axis=1), axis=-1
            )
        )
        ** 2
    )
    assert p.shape == (2, frames, nfft // 2 + 1) and _rel(p, ref) < 1e-5
    p1 = kernels.stft_power(x[1], w, hop=hop)  # a 1-D signal
    assert p1.shape == (frames, nfft // 2 + 1) and _rel(p1, ref[1]) < 1e-5


GEMM_CASES = [(np.float32, (16, 16, 16)), (np.complex64, (16, 16, 16)), (np.float64, (16, 16, 16)),
              (np.complex128, (8, 8, 8))]


@pytest.fixture(scope="module")
def _gemm_tables():
    """The simulator's register-fragment tables of every batched GEMM here, in one NVRTC run
    (compiled on first use otherwise, one descriptor at a time, by the first simulated thread)."""
    from kernels.gemm import _batched_descriptor
    from nvmath_device._build.gemm_sim_tables import prefetch_fragment_tables

    prefetch_fragment_tables([_batched_descriptor(*size, d) for d, size in GEMM_CASES])


def _gemm_operands(dtype, size, batch):
    m, n, k = size
    return _signal((batch, m, k), dtype), _signal((batch, k, n), dtype), _signal((batch, m, n), dtype)


def _gemm_reference(a, b, c, alpha, beta, with_c=True):
    """``alpha * a @ b (+ beta * c)`` in complex128, real where the operands are."""
    ref = alpha * (a.astype(np.complex128) @ b) + (beta * c.astype(np.complex128) if with_c else 0)
    return ref if np.iscomplexobj(a) else ref.real


@pytest.mark.parametrize("vector", [True, False], ids=["vector", "smem"])
@pytest.mark.parametrize("with_c", [False, True], ids=["ab", "abc"])
@pytest.mark.parametrize("dtype,size", GEMM_CASES, ids=[np.dtype(d).name for d, _ in GEMM_CASES])
def test_batched_gemm_both_kernels(dtype, size, with_c, vector, _gemm_tables):
    """Both kernels of batched_gemm (the vector one on padded tiles and the shared-memory one,
    forced) against NumPy float64; batch 5 is not a multiple of the shared-memory kernel's
    GEMMs per block, so its last block has idle slots. C is not modified."""
    from kernels.gemm import _batched_gemm

    batch = 5
    a, b, c = _gemm_operands(dtype, size, batch)
    c0 = c.copy()
    cplx = np.dtype(dtype).kind == "c"
    alpha = (1.5 - 0.25j) if cplx else 1.5
    beta = (-0.5 + 0.75j) if cplx else -0.5
    d, path = _batched_gemm(a, b, c if with_c else None, alpha, beta if with_c else 0.0, None, vector=vector)
    assert path == ("vector" if vector else "smem")
    ref = _gemm_reference(a, b, c, alpha, beta, with_c)
    assert d.dtype == np.dtype(dtype) and d.shape == (batch,) + size[:2]
    assert _rel(d, ref) < TOL[dtype]
    np.testing.assert_array_equal(c, c0)


@pytest.mark.parametrize("per_block", [1, 3])
@pytest.mark.parametrize("with_c", [False, True], ids=["ab", "abc"])
@pytest.mark.parametrize("dtype,size", GEMM_CASES + [(np.float32, (32, 32, 32)), (np.float32, (20, 20, 20))],
                         ids=[np.dtype(d).name for d, _ in GEMM_CASES] + ["float32-32", "float32-20"])
def test_vector_kernel_with_place_offsets(dtype, size, with_c, per_block, monkeypatch, _gemm_tables):
    """The vector kernel with its result's places as one register and constants
    (``kernels.gemm._VECTOR_OFFSETS``) gives the same D as NumPy, with and without C, in one
    and three slots per block (batch 7: idle slots in the last round). 20^3 fp32 has unused
    accumulator values, so it keeps one place per value."""
    from kernels import gemm
    from kernels.gemm import _batched_descriptor, _batched_gemm, _place_offsets

    monkeypatch.setattr(gemm, "_VECTOR_OFFSETS", True)
    mm = _batched_descriptor(*size, np.dtype(dtype))
    assert (_place_offsets(mm, mm.leading_dimension[2]) is None) == (size == (20, 20, 20))
    batch = 7
    a, b, c = _gemm_operands(dtype, size, batch)
    cplx = np.dtype(dtype).kind == "c"
    alpha, beta = ((1.5 - 0.25j), (-0.5 + 0.75j)) if cplx else (1.5, -0.5)
    d, path = _batched_gemm(a, b, c if with_c else None, alpha, beta if with_c else 0.0, None, per_block=per_block)
    assert path == "vector"
    assert _rel(d, _gemm_reference(a, b, c, alpha, beta, with_c)) < TOL[dtype]


@pytest.mark.parametrize("vector", [True, False], ids=["vector", "smem"])
def test_batched_gemm_several_per_block_and_c_with_zero_beta(vector, _gemm_tables):
    """Four GEMMs per block of the vector kernel (threadIdx.y slots; batch 7: one slot of the
    second block idle); c given with beta == 0 is ignored."""
    from kernels.gemm import _batched_gemm

    a, b, c = _gemm_operands(np.float32, (16, 16, 16), 7)
    d, path = _batched_gemm(a, b, c, 2.0, 0.0, None, vector=vector, per_block=4)
    assert path == ("vector" if vector else "smem")
    assert _rel(d, 2.0 * (a.astype(np.float64) @ b)) < TOL[np.float32]


@pytest.mark.parametrize("dtype,size", [(np.float32, (16, 16, 16)), (np.complex64, (16, 24, 8)),
                                        (np.float32, (32, 32, 32))])
def test_vector_batched_gemm_walks_the_batch_on_a_small_grid(dtype, size, _gemm_tables):
    """The vector kernel is persistent: one or two blocks of two slots walk a batch of 9 (the
    last round has idle slots), each loading the next GEMM while the current one runs. (16,
    24, 8) complex64: A has 64 vectors for 128 threads (threads without a vector of A); 32^3
    fp32: one warp per GEMM (:func:`kernels.gemm._block_threads`)."""
    from kernels.gemm import _batched_descriptor, _batched_gemm

    threads = {(16, 16, 16): 64, (16, 24, 8): 128, (32, 32, 32): 32}[size]  # cuBLASDx's, ours, ours
    assert _batched_descriptor(*size, dtype).block_dim == (threads, 1, 1)

    a, b, c = _gemm_operands(dtype, size, 9)
    ref = _gemm_reference(a, b, c, 0.5, 2.0)
    for blocks in (1, 2):
        d, path = _batched_gemm(a, b, c, 0.5, 2.0, None, per_block=2, blocks=blocks)
        assert path == "vector"
        assert _rel(d, ref) < TOL[dtype]



@pytest.mark.parametrize("dtype,size,slices,with_c", [
    (np.float64, (16, 16, 16), (4, 3, None), True),   # 4 slices a GEMM, 2 in flight
    (np.float64, (16, 16, 16), (8, 2, 2), False),     # 2 slices, 1 in flight, launch bounds
    (np.float32, (8, 16, 16), (4, 4, None), True),    # A's slices: 32 vectors for 64 threads
    (np.complex128, (8, 8, 8), (2, 9, None), True),   # 4 slices, 8 in flight: past a GEMM
    (np.float64, (16, 16, 16), (16, 1, None), True),  # one stage: each GEMM loaded whole, then multiplied
    (np.float32, (8, 16, 16), (4, 1, 3), False),      # one stage, 4 slices a GEMM, launch bounds
    (np.float64, (16, 16, 16), (16, 1, None, 32), True),  # one warp, not the vector kernel's 64 threads
])
def test_slice_batched_gemm_walks_the_batch(dtype, size, slices, with_c):
    """The K-slice kernel (``_batched_gemm(..., slices=(kc, depth, min_blocks))``): 2 and 3
    persistent blocks over a batch of 7, so slices of consecutive GEMMs of a block share its
    ring, and the ring wraps; alpha and beta * C applied in registers; C not modified."""
    from kernels.gemm import _batched_gemm

    a, b, c = _gemm_operands(dtype, size, 7)
    c0 = c.copy()
    cplx = np.dtype(dtype).kind == "c"
    alpha, beta = ((0.5 + 1j), (2.0 - 0.5j)) if cplx else (0.5, 2.0)
    ref = _gemm_reference(a, b, c, alpha, beta, with_c)
    for blocks in (2, 3):
        d, path = _batched_gemm(a, b, c if with_c else None, alpha, beta if with_c else 0.0, None, slices=slices,
                                blocks=blocks)
        assert path == "slices"
        assert d.dtype == np.dtype(dtype) and _rel(d, ref) < TOL[dtype]
    np.testing.assert_array_equal(c, c0)


@pytest.mark.parametrize("epilogue", ["stage", "ring", "pairs", "values"])
def test_slice_kernel_epilogues(epilogue):
    """Each way a K-slice result leaves the registers (``_batched_gemm`` picks "stage", and
    "pairs" / "values" where C's views are not aligned, which only a GPU shows): the same
    alpha * A @ B + beta * C for 3 GEMMs over 2 blocks, C and D as that epilogue takes them."""
    from numba import cuda

    from kernels.gemm import _gemm_descriptor, _pair_dtype, _slice_kernel

    a, b, c = _gemm_operands(np.float64, (16, 16, 16), 3)
    mm = _gemm_descriptor(16, 16, 8, np.float64, block_dim=64, alignment=(16, 16, 16), leading_dimension="suggested")
    kernel, smem = _slice_kernel(mm, 16, 2, True, None, epilogue)
    vt = {"stage": np.complex128, "ring": np.complex128, "pairs": _pair_dtype(np.float64), "values": np.float64}[epilogue]
    cd = cuda.to_device(c.reshape(3, -1).view(vt))
    dd = cuda.to_device(np.full((3, 256), np.nan).view(vt))
    kernel[2, 64, 0, smem](*(cuda.to_device(x.reshape(3, -1).view(np.complex128)) for x in (a, b)), cd, dd,
                           0.5, 2.0, 3)
    got = dd.copy_to_host().view(np.float64).reshape(3, 16, 16)
    assert _rel(got, 0.5 * (a @ b) + 2.0 * c) < TOL[np.float64]


@pytest.mark.parametrize("dtype,size,kc,depth,with_c,passes", [(np.float64, (16, 16, 16), 8, 2, True, 2),
                                                                (np.float64, (16, 16, 16), 4, 3, False, 4),
                                                                (np.float64, (16, 16, 16), 4, 4, True, 4),
                                                                (np.complex64, (16, 24, 16), 4, 3, True, 4),
                                                                (np.float64, (16, 16, 16), 16, 1, True, 1),
                                                                (np.float64, (16, 16, 16), 4, 1, False, 4)])
def test_slice_kernel_ring_epilogue_in_bands(dtype, size, kc, depth, with_c, passes):
    """The "ring" epilogue: the result through the stage the GEMM's last slice used, in bands of
    rows that fit a stage (2 or 4 here), while the next GEMM's first slices land in the others;
    no shared memory past the ring. 5 GEMMs over 2 blocks (each block's ring wraps across GEMMs
    at a different stage), against NumPy, with and without beta * C."""
    from numba import cuda

    from kernels.gemm import _gemm_descriptor, _ring_passes, _slice_kernel

    m, n, k = size
    batch = 5
    a, b, c = _gemm_operands(dtype, size, batch)
    mm = _gemm_descriptor(m, n, kc, dtype, block_dim=64, alignment=(16, 16, 16), leading_dimension="suggested")
    v = 16 // np.dtype(dtype).itemsize
    stage_v = -(-mm.shared_memory_size_ab // 16)
    assert _ring_passes(m, mm.leading_dimension.c // v, stage_v) == passes
    kernel, smem = _slice_kernel(mm, k, depth, with_c, None, "ring")
    assert smem == depth * stage_v * 16
    alpha, beta = (dtype(0.5 - 1j), dtype(2.0 + 0.5j)) if np.dtype(dtype).kind == "c" else (0.5, 2.0)
    cd = cuda.to_device(c.reshape(batch, -1).view(np.complex128))
    dd = cuda.to_device(np.full((batch, m * n), np.nan, dtype).view(np.complex128))
    kernel[2, 64, 0, smem](*(cuda.to_device(x.reshape(batch, -1).view(np.complex128)) for x in (a, b)), cd, dd,
                           alpha, beta, batch)
    got = dd.copy_to_host().view(dtype).reshape(batch, m, n)
    assert _rel(got, _gemm_reference(a, b, c, alpha, beta, with_c)) < TOL[dtype]


def test_ring_passes_are_the_fewest_bands_that_fit_a_stage():
    from kernels.gemm import _ring_passes

    assert _ring_passes(64, 33, 1102) == 2  # 64 x 64 x 16 fp64 slices: 32 rows of 33 vectors fit 1102
    assert _ring_passes(64, 33, 2142) == 1
    assert _ring_passes(12, 10, 35) == 4  # 3 rows of 10; 4 rows (3 bands) are 40 > 35, 5 does not divide 12
    assert _ring_passes(16, 40, 39) is None  # not even one row fits


def test_slice_epilogue_falls_back_where_the_c_tile_does_not_fit():
    """64^3 float64 in K slices of 32: 5 stages and the C tile fit sm_90's 227 KiB ("stage"),
    6 stages fit only without the tile ("pairs"), 7 stages not at all (None)."""
    from numba import cuda

    from kernels.gemm import _gemm_descriptor, _slice_epilogue

    mm = _gemm_descriptor(64, 64, 32, np.float64, block_dim=256, sm=90, alignment=(16, 16, 16),
                          leading_dimension="suggested")
    d = cuda.to_device(np.zeros((2, 64 * 64)))
    for depth, want, vt in ((5, "stage", np.complex128), (6, "pairs", np.complex128)):
        made, c2, d2 = _slice_epilogue(mm, 64, depth, False, None, d, d)
        assert made is not None and c2 is d2 and d2.dtype == vt and d2.shape == (2, 64 * 64 // 2)
        ring = depth * -(-mm.shared_memory_size_ab // 16) * 16
        assert made[1] == ring + (64 * mm.leading_dimension.c * 8 if want == "stage" else 0)
    assert _slice_epilogue(mm, 64, 7, False, None, d, d)[0] is None


def test_slice_epilogue_ring_takes_no_tile_past_the_ring(monkeypatch):
    """With "ring" first in ``_SLICE_EPILOGUE_ORDER``: 64^3 float64 in K slices of 32 at 6 stages
    (where "stage"'s C tile does not fit) runs "ring" on 16-byte vectors, the ring's shared
    memory only (the GPU test takes C off its alignment: the simulator has none)."""
    from numba import cuda

    import kernels.gemm
    from kernels.gemm import _gemm_descriptor, _slice_epilogue

    monkeypatch.setattr(kernels.gemm, "_SLICE_EPILOGUE_ORDER", ("ring", "pairs", "values"))
    mm = _gemm_descriptor(64, 64, 32, np.float64, block_dim=256, sm=90, alignment=(16, 16, 16),
                          leading_dimension="suggested")
    d = cuda.to_device(np.zeros((2, 64 * 64)))
    made, c2, d2 = _slice_epilogue(mm, 64, 6, False, None, d, d)
    assert made is not None and d2.dtype == np.complex128 and d2.shape == (2, 64 * 64 // 2)
    assert made[1] == 6 * -(-mm.shared_memory_size_ab // 16) * 16


def test_slice_kernel_says_which_epilogues_exist():
    from kernels.gemm import _gemm_descriptor, _slice_kernel

    mm = _gemm_descriptor(8, 16, 4, np.float32, block_dim=64, alignment=(16, 16, 16), leading_dimension="suggested")
    with pytest.raises(ValueError, match="epilogue must be one of 'stage', 'ring', 'pairs', 'values', got 'pair'"):
        _slice_kernel(mm, 16, 2, False, None, "pair")
    assert _slice_kernel(mm, 16, 2, False, None, "pairs") is None  # float32 FFMA fragments hold no pairs


@pytest.mark.parametrize("slices,match", [((5, 2, None), "kc must be a positive divisor of k = 16"),
                                          ((0, 2, None), "kc must be"),
                                          ((4, 10, None), "does not apply"),  # more stages than cp.async counts
                                          ((2, 2, None), "does not apply"),  # a slice row of 2 float32: 8 bytes
                                          ((4, 2, 0), "min_blocks must be None or a positive int"),
                                          ((4, 2, None, 48), "threads must be a multiple of 32 from 32 to 1024"),
                                          ((4, 2, None, 2048), "threads must be a multiple of 32"),
                                          ((4, 2), r"slices must be \(kc, depth, min_blocks\) or"),
                                          ([4, 2, None], "slices must be")])
def test_slice_batched_gemm_says_what_does_not_fit(slices, match):
    from kernels.gemm import _batched_gemm

    a, b, _ = _gemm_operands(np.float32, (16, 16, 16), 2)
    with pytest.raises(ValueError, match=match):
        _batched_gemm(a, b, None, 1.0, 0.0, None, slices=slices)


def test_slice_picks_run_in_place_of_the_vector_kernel(monkeypatch):
    """A shape in ``_SLICE_PICKS`` runs the K-slice kernel without ``slices=``; a pick that does
    not apply falls back to the vector kernel; ``vector=False`` still forces the shared-memory
    kernel; other shapes keep the vector kernel."""
    import kernels.gemm
    from kernels.gemm import _batched_gemm

    a, b, c = _gemm_operands(np.float64, (16, 16, 16), 5)
    ref = _gemm_reference(a, b, c, 0.5, 2.0)
    order = kernels.gemm._SLICE_EPILOGUE_ORDER
    monkeypatch.setattr(kernels.gemm, "_SLICE_PICKS", {(16, 16, 16, "float64"): ((16, 1, None, 32), order),
                                                       (16, 16, 16, "float32"): ((2, 2, None), order)})
    d, path = _batched_gemm(a, b, c, 0.5, 2.0, None, blocks=2)
    assert path == "slices" and _rel(d, ref) < TOL[np.float64]
    assert _batched_gemm(a, b, c, 0.5, 2.0, None, vector=False)[1] == "smem"
    a32, b32, c32 = (x.astype(np.float32) for x in (a, b, c))  # its pick: 8-byte slice rows, no fit
    d, path = _batched_gemm(a32, b32, c32, 0.5, 2.0, None)
    assert path == "vector" and _rel(d, ref) < TOL[np.float32]
    a8, b8, _ = _gemm_operands(np.float64, (8, 8, 8), 3)
    assert _batched_gemm(a8, b8, None, 1.0, 0.0, None)[1] == "vector"


def test_batched_gemm_runs_its_64_cubed_double_pick():
    """batched_gemm at 64^3 float64 runs its ``_SLICE_PICKS`` entry (one K slice of 64, 128
    threads, the result out through the ring's stage), with and without C, on a grid smaller
    than the batch; C is not modified."""
    import kernels.gemm
    from kernels.gemm import _batched_gemm

    assert kernels.gemm._SLICE_PICKS[(64, 64, 64, "float64")][1][0] == "ring"
    a, b, c = _gemm_operands(np.float64, (64, 64, 64), 3)
    c0 = c.copy()
    for cc, beta in ((c, -0.5), (None, 0.0)):
        d, path = _batched_gemm(a, b, cc, 1.5, beta, None, blocks=2)
        assert path == "slices"
        assert _rel(d, _gemm_reference(a, b, c, 1.5, beta, cc is not None)) < TOL[np.float64]
    np.testing.assert_array_equal(c, c0)


@pytest.mark.parametrize("per_row,padded,nt", [(8, 9, 32), (4, 5, 128), (32, 34, 32), (64, 66, 32), (3, 4, 64),
                                               (6, 7, 16)])
def test_tile_offset_is_the_padded_place_of_each_vector(per_row, padded, nt):
    """kernels.gemm._tile_offset's three forms (threads a multiple of a row's vectors; a row's
    vectors a multiple of the threads; neither) against the division they replace."""
    from kernels.gemm import _tile_offset

    off = _tile_offset(per_row, padded, nt)
    for tx in range(nt):
        for j in range(4):
            i = tx + j * nt
            assert off(tx, j) == (i // per_row) * padded + i % per_row, (tx, j)


@pytest.mark.parametrize("size", [(16, 32, 256), (16, 16, 12)], ids=["row-over-threads", "neither"])
def test_vector_batched_gemm_tile_offsets(size, _gemm_tables):
    """The vector kernel where a row of A has more 16-byte vectors than the block has threads
    ((16, 32, 256) float32: 64 vectors, one warp) and where neither count divides the other
    ((16, 16, 12): 3 vectors a row); a persistent grid of 2 blocks over a batch of 5."""
    from kernels.gemm import _batched_descriptor, _batched_gemm, _vector_kernel

    mm = _batched_descriptor(*size, np.float32)
    assert _vector_kernel(mm, 1, True) is not None
    a, b, c = _gemm_operands(np.float32, size, 5)
    d, path = _batched_gemm(a, b, c, 1.5, -0.5, None, blocks=2)
    assert path == "vector"
    assert _rel(d, 1.5 * (a.astype(np.float64) @ b) - 0.5 * c) < TOL[np.float32]

def test_batched_gemm_falls_back_when_rows_are_not_vectors():
    """(6, 6, 3) complex64: a row of A (3 values, 24 bytes) is not a whole number of 16-byte
    vectors: the shared-memory kernel."""
    from kernels.gemm import _batched_descriptor, _batched_gemm, _vector_kernel

    mm = _batched_descriptor(6, 6, 3, np.complex64)
    assert _vector_kernel(mm, 1, True) is None
    a, b, c = _gemm_operands(np.complex64, (6, 6, 3), 3)
    d, path = _batched_gemm(a, b, c, 1.0, 1.0, None)
    assert path == "smem"
    assert _rel(d, a.astype(np.complex128) @ b + c) < TOL[np.complex64]
    d2 = kernels.batched_gemm(a, b, c=c, beta=1.0)  # the public entry point, same kernel
    np.testing.assert_array_equal(d2, d)


BAD = [
    (
        lambda: kernels.fft_convolve(np.zeros((2, 64), np.int32), [1.0]),
        TypeError,
        "x must have dtype",
    ),
    (
        lambda: kernels.fft_convolve([1.0, 2.0], [1.0]),
        TypeError,
        "x must be a NumPy array or a GPU array",
    ),
    (
        lambda: kernels.fft_convolve(np.zeros((2, 2, 64), np.float32), [1.0]),
        ValueError,
        "x must have 1 or 2 dimension",
    ),
    (
        lambda: kernels.fft_convolve(np.zeros((2, 4099), np.float32), [1.0]),
        ValueError,
        "FFT length 4099 is not implemented",
    ),
    (
        lambda: kernels.fft_convolve(np.zeros((2, 64), np.float32), np.ones(65)),
        ValueError,
        "h has 65 taps",
    ),
    (
        lambda: kernels.fft_convolve(np.zeros((2, 64), np.float32), [1j]),
        TypeError,
        "h must be real",
    ),
    (
        lambda: kernels.fft_convolve(np.zeros((2, 64), np.float32), np.ones((2, 2))),
        ValueError,
        "h must be a non-empty 1-D",
    ),
    (
        lambda: kernels.fir_filter(np.zeros((2, 64), np.float32), np.ones(5), fft_size=48),
        ValueError,
        "fft_size must be a power of 2",
    ),
    (
        lambda: kernels.fir_filter(np.zeros((2, 64), np.float32), np.ones(40), fft_size=64),
        ValueError,
        "at least 2 \\* len\\(taps\\)",
    ),
    (
        lambda: kernels.matched_filter(np.zeros((2, 64), np.complex64), np.ones(65)),
        ValueError,
        "template must be a 1-D array of 1..64",
    ),
    (
        lambda: kernels.matched_filter(
            np.zeros((2, 64), np.complex64), np.ones(3), return_correlation=1
        ),
        TypeError,
        "return_correlation must be a bool",
    ),
    (
        lambda: kernels.stft_power(np.zeros((2, 64), np.complex64), np.ones(32), 8),
        TypeError,
        "x must have dtype float32 or float64",
    ),
    (
        lambda: kernels.stft_power(np.zeros((2, 64), np.float32), np.ones(32), 0),
        ValueError,
        "hop must be an int >= 1",
    ),
    (
        lambda: kernels.stft_power(np.zeros((2, 16), np.float32), np.ones(32), 4),
        ValueError,
        "fewer than one frame",
    ),
    (
        lambda: kernels.fft_convolve(np.zeros((2, 64), np.float32), [1.0], stream="fast"),
        TypeError,
        "stream must be None",
    ),
]


@pytest.mark.parametrize("call,exc,match", BAD, ids=[m for _, _, m in BAD])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
