# SPDX-License-Identifier: Apache-2.0
"""kernels.plan on the GPU: a plan replays its recorded launches (no call of the function) and
gives, on new arrays, exactly the bits the function gives on them, for every kernels function,
CuPy and PyTorch arrays, several device inputs, ``out=`` in place, an input at an address the
vector accesses refuse (the recorded copy is replayed too), and on its own stream."""

from __future__ import annotations

import numpy as np
import pytest

import kernels
from kernels import _launch

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")
rng = np.random.default_rng(21)


def _sig(shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return cp.asarray(x.astype(dtype))


CASES = {
    "fft_convolve_real": (kernels.fft_convolve, lambda: ((_sig((16, 4096), np.float32), np.hanning(63)), {})),
    "fft_convolve_c128": (kernels.fft_convolve, lambda: ((_sig((8, 512), np.complex128), np.hanning(17)), {})),
    "fir_device_taps": (kernels.fir_filter, lambda: ((_sig((4, 70000), np.float32), _sig(127, np.float32)), {})),
    "matched_filter": (kernels.matched_filter, lambda: ((_sig((32, 1024), np.complex64), _sig(128, np.complex64)),
                                                        {"return_correlation": True})),
    "matched_real": (kernels.matched_filter, lambda: ((_sig((8, 1024), np.float32), np.hanning(64)), {})),
    "stft_power": (kernels.stft_power, lambda: ((_sig((4, 65536), np.float32), np.hanning(512), 256), {})),
    "batched_gemm": (kernels.batched_gemm, lambda: ((_sig((64, 32, 32), np.float32), _sig((64, 32, 32), np.float32)),
                                                    {})),
    "beamform_spectra": (kernels.beamform_spectra, lambda: ((_sig((16, 16, 256), np.complex64),
                                                             _sig((8, 16), np.complex64)), {})),
    "add_noise": (kernels.add_noise, lambda: ((_sig((8, 4096), np.complex64), 6.0), {"seed": 3})),
}


def _arrays(args, kwargs):
    return [a for a in args if isinstance(a, cp.ndarray)] + [v for v in kwargs.values() if isinstance(v, cp.ndarray)]


def _renew(args, kwargs):
    new = tuple(_sig(a.shape, a.dtype) if isinstance(a, cp.ndarray) else a for a in args)
    return new, {k: (_sig(v.shape, v.dtype) if isinstance(v, cp.ndarray) else v) for k, v in kwargs.items()}


def _bits(r):
    return [cp.asnumpy(a).tobytes() for a in (r if isinstance(r, tuple) else (r,))]


@pytest.mark.parametrize("graphs", [True, False], ids=["graph", "kernel_by_kernel"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_plan_replays_the_functions_bits_on_new_arrays(case, graphs, monkeypatch):
    """As one CUDA graph (the default) and with one cuLaunchKernel per kernel
    (NUMBA_MATHDX_PLAN_GRAPHS=0): a call launches what was recorded and gives the function's bits."""
    fn, make = CASES[case]
    args, kwargs = make()
    monkeypatch.setattr(_launch, "GRAPHS", graphs)
    p = kernels.plan(fn, *args, **kwargs)
    assert p.replayed, p
    assert p.graphed is graphs, p
    nlaunch = len(p._launches)
    assert nlaunch >= 1
    for _ in range(3):
        new, newk = _renew(args, kwargs)
        before = dict(_launch.stats)
        with monkeypatch.context() as m:  # a call must not run the function
            m.setattr(p, "fn", None)
            got = p(*_arrays(new, newk))
        assert _launch.stats["fast_launches"] - before["fast_launches"] == (0 if graphs else nlaunch)
        assert _launch.stats["graph_launches"] - before["graph_launches"] == (1 if graphs else 0)
        want = fn(*new, **newk)
        assert _bits(got) == _bits(want)
        assert all(not np.isnan(cp.asnumpy(a).astype(np.complex128)).any() for a in (got if isinstance(got, tuple) else (got,)))


def test_queued_graph_calls_keep_their_own_arrays():
    """Calls queued with no synchronisation between them: each graph launch runs with the
    parameters it was given (the driver copies them at the call), so each result is its input's."""
    fn, make = CASES["matched_filter"]
    args, kwargs = make()
    p = kernels.plan(fn, *args, **kwargs)
    assert p.graphed and len(p._launches) >= 2, p
    ins = [_renew(args, kwargs) for _ in range(16)]
    got = [p(*_arrays(a, k)) for a, k in ins]
    for (a, k), g in zip(ins, got):
        assert _bits(g) == _bits(fn(*a, **k))


def test_torch_tensors_and_in_place_noise():
    torch = pytest.importorskip("torch")
    x = torch.randn(8, 2048, device="cuda")
    p = kernels.plan(kernels.add_noise, x, 10.0, seed=9, out=x.clone())
    assert p.names == ["x", "out"]
    x2, o2 = torch.randn(8, 2048, device="cuda"), torch.empty(8, 2048, device="cuda")
    assert p(x2, o2) is o2
    want = kernels.add_noise(x2, 10.0, seed=9)
    assert torch.equal(o2, want)
    # planned with distinct x and out: an in-place call (x is out) would change what the kernels see
    with pytest.raises(ValueError, match="must share memory as the planned ones did"):
        p(x2, x2)
    q = kernels.plan(kernels.add_noise, x, 10.0, seed=9, out=x)
    y = x2.clone()
    assert q(y, y) is y and torch.equal(y, want)


def test_torch_results_come_fresh_from_torch_on_the_plans_stream():
    """A torch caller's results: new torch tensors per call (the plan's allocator), on the current
    stream and on a side stream given to the plan, equal bit for bit to the function's."""
    torch = pytest.importorskip("torch")
    taps = np.hanning(63)
    x = torch.randn(8, 4096, device="cuda")
    p = kernels.plan(kernels.fft_convolve, x, taps)
    x2 = torch.randn(8, 4096, device="cuda")
    y1, y2 = p(x2), p(x2)
    assert isinstance(y1, torch.Tensor) and y1.shape == (8, 4096) and y1.dtype == torch.float32
    assert y1.data_ptr() != y2.data_ptr()
    want = kernels.fft_convolve(x2, taps)
    assert torch.equal(y1, want) and torch.equal(y2, want)
    side = torch.cuda.Stream()
    ps = kernels.plan(kernels.fft_convolve, x, taps, stream=side.cuda_stream)
    torch.cuda.synchronize()  # x2 was made on the current stream
    ys = ps(x2)
    side.synchronize()
    assert torch.equal(ys, want)


def test_torch_tensors_whose_memory_differs_from_their_values_are_refused():
    """A lazy .conj() (conjugate bit) or negation (negative bit) keeps the storage as it was; a
    tensor that requires grad would not be recorded: each is refused by the function and by a
    call of a torch plan, naming the argument; resolved, the same values run and match."""
    torch = pytest.importorskip("torch")
    taps = np.hanning(17)
    x = torch.randn(8, 512, dtype=torch.complex64, device="cuda")
    p = kernels.plan(kernels.fft_convolve, x, taps)
    for bad, msg in [(x.conj(), r"^x: a torch tensor with the conjugate bit set .*\.resolve_conj\(\)"),
                     (x.clone().requires_grad_(True), r"^x: a torch tensor that requires grad .*\.detach\(\)")]:
        with pytest.raises(ValueError, match=msg):
            kernels.fft_convolve(bad, taps)
        with pytest.raises(ValueError, match=msg):
            p(bad)
    y = x.conj().resolve_conj()
    assert not y.is_conj() and torch.equal(p(y), kernels.fft_convolve(y, taps))
    negated = x.conj().imag  # a real view with the negative bit set
    assert negated.is_neg()
    with pytest.raises(ValueError, match=r"^x: a torch tensor with the negative bit set .*\.resolve_neg\(\)"):
        kernels.fft_convolve(negated, taps)


def _odd_complex(rows, n):
    """complex64 rows starting 4 bytes past an 8-byte boundary (a view into float32 memory)."""
    base = cp.asarray(rng.standard_normal(1 + 2 * rows * n).astype(np.float32))
    return base[1:].view(cp.complex64).reshape(rows, n)


def test_an_input_at_an_odd_address_replays_its_copy():
    x = _odd_complex(8, 1024)  # complex values the kernel cannot load as single 8-byte accesses
    assert x.data.ptr % 16 == 4
    p = kernels.plan(kernels.fft_convolve, x, np.hanning(33))
    assert len(p._launches) == 2  # the aligned copy, then the convolution
    x2 = _odd_complex(8, 1024)
    assert _bits(p(x2)) == _bits(kernels.fft_convolve(x2, np.hanning(33)))
    # (not x2.copy(): CuPy's own copy kernel reads the complex64 values at 4 bytes past an
    # 8-byte boundary and stops the context with CUDA_ERROR_MISALIGNED_ADDRESS)
    with pytest.raises(ValueError, match="address mod 16 = 4; got .*address mod 16 = 0"):
        p(cp.zeros(x2.shape, cp.complex64))


def test_a_plan_runs_on_its_stream():
    s = cp.cuda.Stream(non_blocking=True)
    x = _sig((16, 4096), np.float32)
    p = kernels.plan(kernels.fft_convolve, x, np.hanning(63), stream=s)
    assert p.stream.handle == s.ptr
    x2 = _sig((16, 4096), np.float32)
    y = p(x2)
    s.synchronize()
    assert _bits(y) == _bits(kernels.fft_convolve(x2, np.hanning(63)))


def test_numpy_results_cannot_be_planned():
    with pytest.raises(TypeError, match="needs at least one device array"):
        kernels.plan(kernels.fft_convolve, np.ones((2, 64), np.float32), np.ones(3))
    with pytest.raises(TypeError, match="returned a ndarray, not a device array"):
        kernels.plan(kernels.fft_convolve, np.ones((2, 64), np.float32), cp.ones(3))


def test_threads_share_one_plan_with_a_scratch_buffer():
    """Each call's launches are enqueued together (the plan's lock), so calls from several threads
    on one plan never interleave around its reused scratch buffer (the aligned copy)."""
    import threading

    x = _odd_complex(16, 512)
    p = kernels.plan(kernels.fft_convolve, x, np.hanning(17))
    assert len(p._launches) == 2
    inputs = [[_odd_complex(16, 512) for _ in range(8)] for _ in range(4)]
    outs = [[None] * 8 for _ in range(4)]

    def work(t):
        for i, xi in enumerate(inputs[t]):
            outs[t][i] = p(xi)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    cp.cuda.get_current_stream().synchronize()
    for t in range(4):
        for i in range(8):
            assert _bits(outs[t][i]) == _bits(kernels.fft_convolve(inputs[t][i], np.hanning(17)))


def test_small_cupy_results_of_a_call_share_one_allocation():
    """The matched filter's two small results (peak index, peak power) come from one CuPy
    allocation per call (kernels._plan.GROUP_BYTES), at 256-byte boundaries, not overlapping, new at
    each call, with the function's bits; a result over GROUP_BYTES keeps its own allocation."""
    from kernels import _plan

    x, t = _sig((8, 1024), np.complex64), _sig(128, np.complex64)
    p = kernels.plan(kernels.matched_filter, x, t)
    idx, power = p(x, t)
    idx2, power2 = p(x, t)
    want = kernels.matched_filter(x, t)
    for got in ((idx, power), (idx2, power2)):
        assert all(bool(cp.all(g == w)) for g, w in zip(got, want))
    assert power.data.ptr - idx.data.ptr == 256 and idx.data.mem is power.data.mem
    assert idx2.data.mem is not idx.data.mem
    x16 = _sig((16, 1024), np.complex64)
    peak, _, corr = kernels.plan(kernels.matched_filter, x16, t, return_correlation=True)(x16, t)
    assert idx.nbytes <= _plan.GROUP_BYTES < corr.nbytes  # 128 KiB of correlation: no group
    assert corr.data.mem is not peak.data.mem
