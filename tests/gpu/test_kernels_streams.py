# SPDX-License-Identifier: Apache-2.0
"""On the GPU: device inputs (taps, template, window, weights) cause no host synchronisation,
and cached device constants are shared correctly between streams and threads."""

import gc
import threading
import time

import numpy as np
import pytest

import kernels

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")
rng = np.random.default_rng(5)

_SPIN = r'''
extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
'''


def _spin(stream, cycles=int(6e8)):
    """Keep ``stream`` busy for ``cycles`` SM clocks (~0.3 s at 2 GHz)."""
    k = cp.RawKernel(_SPIN, "spin")
    with stream:
        k((1,), (1,), (np.int64(cycles),))


def _rel(a, b):
    return float(np.linalg.norm(np.ravel(a - b)) / np.linalg.norm(np.ravel(b)))


def _cases():
    """(name, call(stream), NumPy reference) with every small operand a CuPy array."""
    x = rng.standard_normal((64, 512)).astype(np.float32)
    h = rng.standard_normal(17)
    xc = (rng.standard_normal((64, 512)) + 1j * rng.standard_normal((64, 512))).astype(np.complex64)
    t = xc[3, 100:164].copy()
    xl = rng.standard_normal((8, 5000)).astype(np.float32)
    w = np.hanning(256)
    xb = rng.standard_normal((16, 8, 256)) + 1j * rng.standard_normal((16, 8, 256))
    xb = xb.astype(np.complex64)
    wb = (rng.standard_normal((4, 8)) + 1j * rng.standard_normal((4, 8))).astype(np.complex64)
    dx, dh, dxc, dt, dxl, dw, dxb, dwb = map(cp.asarray, (x, h, xc, t, xl, w, xb, wb))
    conv = np.fft.irfft(np.fft.rfft(x, axis=-1) * np.fft.rfft(h, 512), 512, axis=-1)
    fir = np.array([np.convolve(r.astype(np.float64), h)[:5000] for r in xl])
    corr = np.fft.fft(xc.astype(np.complex128), axis=-1) * np.conj(np.fft.fft(t, 512))
    corr = np.fft.ifft(corr, axis=-1)
    frames = np.stack([xl[:, f * 64:f * 64 + 256] for f in range(1 + (5000 - 256) // 64)], axis=1)
    stft = np.abs(np.fft.rfft(frames * w, axis=-1)) ** 2
    beam = np.fft.fft(np.einsum("bc,ncs->nbs", wb.astype(np.complex128), xb), axis=-1)
    return [
        ("fft_convolve", lambda s: kernels.fft_convolve(dx, dh, stream=s), conv),
        ("fir_filter", lambda s: kernels.fir_filter(dxl, dh, stream=s), fir),
        ("matched_filter",
         lambda s: kernels.matched_filter(dxc, dt, return_correlation=True, stream=s)[2], corr),
        ("stft_power", lambda s: kernels.stft_power(dxl, dw, 64, stream=s), stft),
        ("beamform_spectra", lambda s: kernels.beamform_spectra(dxb, dwb, stream=s), beam),
    ]


@pytest.mark.parametrize("case", range(5), ids=["fft_convolve", "fir_filter", "matched_filter",
                                                "stft_power", "beamform_spectra"])
def test_device_inputs_do_not_synchronise_the_host(case):
    """With the caller's (blocking) stream busy for ~0.3 s, a call with CuPy taps / template /
    window / weights returns at once: no ``.get()`` (it waited for the stream before)."""
    name, call, ref = _cases()[case]
    s = cp.cuda.Stream()  # blocking: a copy on the legacy default stream would wait for it
    call(s)  # compile, and fill the memory pool
    s.synchronize()
    _spin(s)
    t0 = time.perf_counter()
    y = call(s)
    host = time.perf_counter() - t0
    done_early = s.done
    s.synchronize()
    assert host < 0.1 and not done_early, f"{name}: call took {host:.3f} s (stream done: {done_early})"
    assert _rel(cp.asnumpy(y), ref) < 1e-4


def test_same_host_taps_from_two_streams():
    """A spectrum uploaded on one stream and used at once on another (a cache hit there)."""
    s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    x = rng.standard_normal((256, 1024)).astype(np.float32)
    dx = cp.asarray(x)
    for trial in range(20):
        h = rng.standard_normal(31)  # new taps each trial: a miss on s1, then a hit on s2
        ref = np.fft.irfft(np.fft.rfft(x, axis=-1) * np.fft.rfft(h, 1024), 1024, axis=-1)
        y1 = kernels.fft_convolve(dx, h, stream=s1)
        y2 = kernels.fft_convolve(dx, h, stream=s2)
        s1.synchronize()
        s2.synchronize()
        assert _rel(cp.asnumpy(y1), ref) < 1e-5 and _rel(cp.asnumpy(y2), ref) < 1e-5, trial


def test_same_host_taps_from_two_threads_with_evictions():
    """Two threads, each on its own stream, cycle through more taps than the cache keeps."""
    x = rng.standard_normal((64, 512)).astype(np.float32)
    taps = [rng.standard_normal(9) for _ in range(40)]
    refs = [np.fft.irfft(np.fft.rfft(x, axis=-1) * np.fft.rfft(h, 512), 512, axis=-1) for h in taps]
    errors = []

    def work(tid):
        try:
            with cp.cuda.Device(0):
                s = cp.cuda.Stream(non_blocking=True)
                dx = cp.asarray(x)
                for r in range(5):
                    order = range(40) if (tid + r) % 2 else range(39, -1, -1)
                    outs = [(i, kernels.fft_convolve(dx, taps[i], stream=s)) for i in order]
                    s.synchronize()
                    for i, y in outs:
                        err = _rel(cp.asnumpy(y), refs[i])
                        if err > 1e-5:
                            errors.append((tid, r, i, err))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((tid, repr(e)))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_reader_stream_gone_before_the_eviction():
    """Threads read a cached spectrum on their own streams and end (their CuPy streams are
    destroyed with them); later misses evict the entry, whose eviction records an event on each
    reader's stream: the cache must have kept those streams alive (before: a crash in
    cuEventRecord on a dangling handle, seen once in the whole suite at -n 15)."""
    x = rng.standard_normal((16, 256)).astype(np.float32)
    dx = cp.asarray(x)
    h0 = rng.standard_normal(7)

    def reader():
        s = cp.cuda.Stream(non_blocking=True)
        kernels.fft_convolve(dx, h0, stream=s)
        s.synchronize()

    for _ in range(4):
        t = threading.Thread(target=reader)
        t.start()
        t.join()
    gc.collect()
    for i in range(40):  # more new taps than the cache keeps: h0's entry is evicted
        h = rng.standard_normal(7)
        y = kernels.fft_convolve(dx, h)
        ref = np.fft.irfft(np.fft.rfft(x, axis=-1) * np.fft.rfft(h, 256), 256, axis=-1)
        assert _rel(cp.asnumpy(y), ref) < 1e-5, i


def test_same_taps_on_two_gpus():
    """The cache keys on the CUDA context: each GPU gets its own copy of the spectrum."""
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    x = rng.standard_normal((32, 256)).astype(np.float32)
    h = rng.standard_normal(11)
    ref = np.fft.irfft(np.fft.rfft(x, axis=-1) * np.fft.rfft(h, 256), 256, axis=-1)
    for dev in (0, 1, 0, 1):
        with cp.cuda.Device(dev):
            y = kernels.fft_convolve(cp.asarray(x), h)
            assert y.device.id == dev
            assert _rel(cp.asnumpy(y), ref) < 1e-5
