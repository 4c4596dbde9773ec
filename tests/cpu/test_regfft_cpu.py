# SPDX-License-Identifier: Apache-2.0
"""kernels._regfft without a GPU: the passes' radices, the shared-memory layout of every exchange
(each element written once and read once; every warp access at its minimum number of
wavefronts, by the bank model; one base per thread plus constants), the bank model itself,
refusals naming the argument, and the sm_90 code of filter_kernel with it (nvdisasm of the test
extras): 8-byte shared accesses only, as many as the exchanges need, no local memory, no
float64."""

import os
import subprocess
import tempfile

import numpy as np
import pytest

from kernels import _fused, _regfft, _regfft_code

CONFIGS = [(n, e) for n in _regfft.SIZES for e in _regfft.EPTS if _regfft.unsupported(n, e, 1) is None]


def test_configs_cover_every_size():
    assert {n for n, _ in CONFIGS} == set(_regfft.SIZES)


@pytest.mark.parametrize("n,ept", CONFIGS)
def test_radices(n, ept):
    rads = _regfft_code.radices(n, ept)
    assert int(np.prod(rads)) == n and all(ept % r == 0 and r >= 2 for r in rads)
    assert all(r == ept for r in rads[1:])  # a smaller radix only first


def test_wavefront_model():
    assert _regfft_code.wavefronts(list(range(32))) == 2  # consecutive 8-byte words: one per half-warp
    assert _regfft_code.wavefronts([16 * t for t in range(32)]) == 32  # one bank pair: serialized
    assert _regfft_code.wavefronts([0] * 32) == 2  # one word (broadcast)
    assert _regfft_code.wavefronts([2 * t for t in range(16)]) == 2  # stride 2: two words per bank pair


@pytest.mark.parametrize("n,ept", CONFIGS)
def test_exchanges_are_permutations_without_conflicts(n, ept):
    T = n // ept
    ns = 1
    rads = _regfft_code.radices(n, ept)
    for R in rads[:-1]:
        e = _regfft_code.exchange(n, ept, ns, R)
        def pad(a, e=e):
            return _regfft_code._padded(a, e["P"], e["pad"])

        wbase = [pad(_regfft_code._write_index(t, 0, 0, n, T, ns, R)) for t in range(T)]
        writes = [wbase[t] + e["write"][b][r] for t in range(T) for b in range(ept // R) for r in range(R)]
        # the constants reproduce the padded layout exactly
        assert writes == [pad(_regfft_code._write_index(t, b, r, n, T, ns, R))
                          for t in range(T) for b in range(ept // R) for r in range(R)]
        reads = [pad(t) + e["read"][i] for t in range(T) for i in range(ept)]
        assert reads == [pad(t + T * i) for t in range(T) for i in range(ept)]
        assert len(set(writes)) == n and set(reads) == set(writes)  # each element once, all read back
        assert max(writes) < e["space"]
        per_warp = 2 * min(32, T) // 32 if T >= 32 else 1
        assert (e["write_wf"], e["read_wf"]) == (per_warp, per_warp), (ns, R, e)
        ns *= R


def test_padding_is_needed_and_found():
    """The first exchange of 512 = 8 x 8 x 8 writes with stride 8: unpadded, 8-way conflicts."""
    T, ns, R = 64, 1, 8
    plain = [_regfft_code._write_index(t, 0, 0, 512, T, ns, R) for t in range(32)]
    assert _regfft_code.wavefronts(plain) == 16
    assert _regfft_code.exchange(512, 8, 1, 8)["pad"] > 0


@pytest.mark.parametrize("kw,match", [
    (dict(size=100, direction="forward"), "size must be a power of 2"),
    (dict(size=8192, direction="forward"), "size must be a power of 2"),
    (dict(size=512, direction="sideways"), "direction must be"),
    (dict(size=512, direction="forward", elements_per_thread=64), "elements_per_thread must be"),
    (dict(size=256, direction="forward", elements_per_thread=32), "at least 16 threads"),
    (dict(size=64, direction="forward", elements_per_thread=8), "at least 16 threads"),
    (dict(size=512, direction="forward", ffts_per_block=0), "ffts_per_block"),
    (dict(size=4096, direction="forward", elements_per_thread=4, ffts_per_block=2), "ffts_per_block"),
    (dict(size=4096, direction="forward", elements_per_thread=16, ffts_per_block=2), "more than the 49152"),
])
def test_refusals(kw, match):
    with pytest.raises(ValueError, match=match):
        _regfft.RegFFT(**kw)


def test_real_descriptor_attributes():
    """cuFFTDx's folded layout: pairs in, n/2 + 1 values out (one more register, the Nyquist bin)."""
    f, i = _regfft.pair(512, 16, 4, real=True)
    assert (f.fft_type, f.direction, i.fft_type, i.direction) == ("r2c", "forward", "c2r", "inverse")
    assert f.real_fft_options == {"complex_layout": "natural", "real_mode": "folded"}
    assert (f.stride, f.elements_per_thread_value, f.storage_size) == (16, 32, 17)
    assert (f.input_ept, f.output_ept, f.input_length, f.output_length) == (16, 17, 256, 257)
    assert (i.input_ept, i.output_ept, i.input_length, i.output_length) == (17, 16, 257, 256)
    assert f.block_dim == (16, 4, 1) and f.shared_memory_size == i.shared_memory_size
    src = _regfft_code.source(256, 16, 4, -1, kind="r2c", buffers=1)[0]
    assert src.count("store_complex") == 16 + 16 + 1  # one exchange, the partners' (+ Z[0] again at n)


@pytest.mark.parametrize("kw,match", [
    (dict(size=512, fft_type="r2r"), "fft_type must be"),
    (dict(size=511, fft_type="r2c"), "even int"),
    (dict(size=512, fft_type="r2c", direction="inverse"), "direction of a r2c FFT"),
    (dict(size=64, fft_type="c2r"), "c2r of 64 real points: the complex size"),
])
def test_real_refusals(kw, match):
    with pytest.raises(ValueError, match=match):
        _regfft.RegFFT(**kw)


def test_ept_override(monkeypatch):
    monkeypatch.setattr(_regfft, "EPT", 8)
    assert _regfft.default_ept(4096) == 8
    monkeypatch.setattr(_regfft, "EPT", 16)
    assert _regfft.default_ept(128) == 8  # 16 leaves fewer than 16 threads: the default instead


def test_own_fft_ept_table(monkeypatch):
    """OWN_FFT_EPT sets the matched filter's 1024 points at 32 values per thread (one warp per
    row) from its row floor up (or where the rows are not given), default_ept's 16 below it;
    other functions, sizes and precisions keep default_ept's; an explicit count or
    ``_regfft.EPT`` wins over the table; where our FFT declines, cuFFTDx's pair does not get the
    table's count."""
    def ept(n, kernel, precision=np.float32, **kw):
        return _fused.fft_pair(n, precision, False, kernel=kernel, **kw)[0].elements_per_thread_value

    count, floor = _fused.OWN_FFT_EPT[("matched_filter", 1024, "float32", False, False)]
    assert count == 32 and floor > 8
    assert ept(1024, "matched_filter") == 32 and _regfft.pair(1024, 32)[0].warp_sync
    assert ept(1024, "matched_filter", rows=floor) == ept(1024, "matched_filter", rows=10 * floor) == 32
    assert ept(1024, "matched_filter", rows=floor - 1) == ept(1024, "matched_filter", rows=8) == 16
    assert ept(1024, "matched_filter", rows=8, ept=32) == 32
    assert ept(1024, "fft_convolve") == ept(512, "matched_filter") == 16
    assert ept(1024, "matched_filter", ept=8) == 8
    monkeypatch.setattr(_regfft, "EPT", 16)
    assert ept(1024, "matched_filter") == 16
    monkeypatch.setattr(_regfft, "EPT", None)
    asked = []

    def declines(n, e, f, real):
        asked.append(e)
        raise ValueError("declined")

    monkeypatch.setattr(_fused, "own_pair", declines)
    monkeypatch.setattr(_fused, "_fft_pair", lambda *a: a)
    cufftdx = _fused.fft_config(1024, np.float32, False, False, "matched_filter")  # its own table's: (16, 1)
    assert _fused.fft_pair(1024, np.float32, False, kernel="matched_filter") == (1024, np.float32, False, *cufftdx,
                                                                                  False)
    assert asked == [32] and cufftdx[0] != 32


def test_executor_registers_argument():
    with pytest.raises(ValueError, match="registers must be"):
        _regfft.RegFFT(512, "forward").executor("half")


def _typing_error(fwd, rdt, rlen, sdt):
    """The message of compiling a kernel that calls ``fwd.execute`` on registers of ``rdt``
    (``rlen`` values) and a dynamic shared array of ``sdt`` (numba's type inference, no GPU)."""
    from numba import cuda
    from numba.core.errors import TypingError

    from nvmath_device.aot import compile_kernel

    def k(x):
        r = cuda.local.array(rlen, rdt)
        sc = cuda.shared.array(0, sdt)
        r[0] = x[0]
        fwd.execute(r, sc)
        x[0] = r[0]

    from numba import types
    with pytest.raises(TypingError) as e:
        compile_kernel(k, (types.float32[::1],), sm=90)
    return str(e.value)


@pytest.mark.parametrize("rdt,sdt,bad", [(np.float64, np.complex64, "got r of float64"),
                                         (np.float32, np.float32, "got sc of float32"),
                                         (np.int32, np.complex64, "got r of int32")])
def test_execute_typing_errors(rdt, sdt, bad):
    """A kernel calling RegFFT.execute with registers or shared memory of another type fails to
    type, with a message that says what is allowed (before NVVM runs)."""
    fwd = _regfft.RegFFT(512, "forward")
    msg = _typing_error(fwd, rdt, 32, sdt)
    assert "r must be a 1-D local array of 32 float32 or 16 complex64 values" in msg and bad in msg


def test_execute_python_form_checks():
    """The simulator's form checks the same things, and r's length as well."""
    fwd = _regfft.RegFFT(512, "forward")
    sc = np.zeros(fwd.shared_memory_size // 8, np.complex64)
    with pytest.raises(TypeError, match="got r of 8 values"):
        fwd.execute(np.zeros(8, np.complex64), sc)
    with pytest.raises(TypeError, match="got sc of float32"):
        fwd.execute(np.zeros(32, np.float32), sc.view(np.float32))
    with pytest.raises(TypeError, match="got r of float64 with 2 dimension"):
        fwd.execute(np.zeros((2, 32)), sc)


def test_equal_descriptors_share_a_numba_type():
    from numba.cuda.typing.typeof import typeof  # numba-cuda's (kernel arguments and closures)

    a, b = _regfft.RegFFT(512, "forward"), _regfft.RegFFT(512, "forward")
    assert a is not b and typeof(a) == typeof(b) and typeof(a) != typeof(_regfft.RegFFT(512, "inverse"))


def test_one_buffer(monkeypatch):
    """buffers=1 (the default, BUFFERS = 1): half the shared memory of two, a barrier before each
    later write; equal descriptors are equal (one kernel each), other buffer counts are not."""
    assert _regfft.BUFFERS == 1 and _regfft.RegFFT(1024, "forward").buffers == 1
    two, one = _regfft.RegFFT(1024, "forward", buffers=2), _regfft.RegFFT(1024, "forward", buffers=1)
    assert (two.buffers, one.buffers) == (2, 1) and one.shared_memory_size * 2 == two.shared_memory_size
    assert one != two and one == _regfft.RegFFT(1024, "forward", buffers=1)
    assert hash(one) == hash(_regfft.RegFFT(1024, "forward", buffers=1))
    src = _regfft_code.source(1024, 16, 2, -1, buffers=1)[0]
    assert src.count("cuda.syncthreads()") == 3  # two exchanges: 2 + 1
    monkeypatch.setattr(_regfft, "BUFFERS", 1)
    fwd, inv = _regfft.pair(1024)
    assert fwd.buffers == inv.buffers == 1 and _regfft.pair(1024) == (fwd, inv)
    monkeypatch.setattr(_regfft, "BUFFERS", None)
    assert _regfft.pair(1024)[0].buffers == 2
    assert _regfft.RegFFT(4096, "forward", buffers=2).buffers == 1  # two do not fit 48 KiB: one
    with pytest.raises(ValueError, match="buffers must be None, 1 or 2"):
        _regfft.RegFFT(512, "forward", buffers=3)


def test_descriptor_cache(monkeypatch):
    """descriptor(): one RegFFT per arguments and EPT / BUFFERS, None where it cannot be built
    (remembered: RegFFT is not tried again); pair() from the same cache, ValueError instead."""
    fwd = _regfft.descriptor(512, "forward", None, 2)
    assert fwd is _regfft.descriptor(512, "forward", None, 2) and fwd.ffts_per_block_value == 2
    assert _regfft.pair(512, None, 2)[0] is fwd
    monkeypatch.setattr(_regfft, "BUFFERS", 2)
    two = _regfft.descriptor(512, "forward", None, 2)
    assert two.buffers == 2 and two != fwd
    monkeypatch.setattr(_regfft, "EPT", 8)
    assert _regfft.descriptor(512, "forward", None, 2).ept == 8
    made = []
    real_init = _regfft.RegFFT.__init__
    monkeypatch.setattr(_regfft.RegFFT, "__init__", lambda self, *a, **k: made.append(a) or real_init(self, *a, **k))
    assert _regfft.descriptor(4096, "forward", 16, 2) is None  # two 4096-point rows: over 48 KiB
    assert _regfft.descriptor(4096, "forward", 16, 2) is None and len(made) == 1
    with pytest.raises(ValueError, match="ffts_per_block=2: .* bytes of shared memory"):
        _regfft.pair(4096, 16, 2)
    with pytest.raises(ValueError, match="size must be a power of 2"):
        _regfft.pair(96)
    assert len(made) == 2  # pair(4096, 16, 2)'s forward came from the cache


def test_descriptor_attributes():
    f = _regfft.RegFFT(1024, "forward")
    assert (f.elements_per_thread_value, f.stride, f.ffts_per_block_value) == (16, 64, 2)
    assert f.block_dim == (64, 2, 1) and f.output_length == 1024 and f.value_type == np.complex64
    assert f.fft_type == "c2c" and f.real_fft_options is None
    # one buffer of the padded row per row slot (2 rows), 8 bytes per word; two buffers: twice that
    e = max(_regfft_code.exchange(1024, 16, ns, 16)["space"] for ns in (4, 64))
    assert f.shared_memory_size == 2 * e * 8
    assert _regfft.RegFFT(1024, "forward", buffers=2).shared_memory_size == 2 * 2 * e * 8


def test_generated_source_is_float32_only():
    src, consts, _, _ = _regfft_code.source(1024, 16, 1, -1, buffers=2)
    assert "float64" not in src and all(isinstance(v, float) for v in consts)
    assert src.count("cuda.syncthreads()") == 2  # two exchanges, two buffers: one barrier each
    assert _regfft_code.source(1024, 16, 1, -1, buffers=1)[0].count("cuda.syncthreads()") == 3  # one buffer
    single = _regfft_code.source(4096, 16, 1, -1, buffers=None)[0]  # two of 34 KiB do not fit 48 KiB: one
    assert single.count("cuda.syncthreads()") == 3
    warp = _regfft_code.source(512, 16, 4, -1, warp=True, buffers=2)[0]
    assert warp.count("cuda.syncwarp()") == 2 and "syncthreads" not in warp


def _run_dft(R, sign, tw, conj):
    """The DFT code of :meth:`_regfft_code._Gen.dft` on R random points (and random unit twiddles
    when ``tw``), run in float64 NumPy: (inputs, twiddles or None, outputs, emitted lines)."""
    from types import SimpleNamespace

    g = _regfft_code._Gen()
    x = [(f"xr{r}", f"xi{r}") for r in range(R)]
    w = [None] + [(f"wr{r}", f"wi{r}") for r in range(1, R)] if tw else None
    out = g.dft(x, sign, w, conj)
    vals = rng.standard_normal(R) + 1j * rng.standard_normal(R)
    ws = np.exp(2j * np.pi * rng.random(R)) if tw else None
    env = {"cuda": SimpleNamespace(fma=lambda a, b, c: a * b + c)}
    env.update({name: value for value, name in g.consts.items()})
    for r in range(R):
        env[f"xr{r}"], env[f"xi{r}"] = vals[r].real, vals[r].imag
        if tw:
            env[f"wr{r}"], env[f"wi{r}"] = ws[r].real, ws[r].imag
    exec("\n".join(line.strip() for line in g.lines), env)

    def value(name):
        return eval(name, env) if isinstance(name, str) else name

    return vals, ws, np.array([value(re) + 1j * value(im) for re, im in out]), g.lines


rng = np.random.default_rng(37)


@pytest.mark.parametrize("R", [2, 4, 8, 16, 32])
@pytest.mark.parametrize("sign", [-1, 1])
@pytest.mark.parametrize("tw,conj", [(False, False), (True, False), (True, True)])
def test_dft_codelet_matches_numpy(R, sign, tw, conj):
    """The butterflies' arithmetic forms (rotations as a factor times two FFMAs' worth, twiddle
    products folded into the first butterflies with A - B = (A + B) - 2 B) compute the DFT of
    x times the twiddles (or their conjugates), exp(sign 2 pi i r k / R)."""
    x, ws, y, lines = _run_dft(R, sign, tw, conj)
    if tw:
        ws[0] = 1
        x = x * (np.conj(ws) if conj else ws)
    ref = np.fft.fft(x) if sign < 0 else np.fft.ifft(x) * R
    assert np.allclose(y, ref, rtol=0, atol=1e-12 * np.abs(x).sum()), (R, sign, tw, conj)
    # folded: one explicit fma per component of A - B in every pair but the first (whose A = a)
    assert sum("cuda.fma(" in line for line in lines) == (R - 2 if tw else 0)


def test_warp_rows():
    assert _regfft_code.warp_rows(512, 16, 4) and _regfft_code.warp_rows(256, 16, 2)  # 32 / 16 threads per row
    assert not _regfft_code.warp_rows(512, 8, 2)  # 64 threads per row: the block's barrier
    assert not _regfft_code.warp_rows(256, 16, 1)  # a block of 16 threads: not a whole warp


def _sass(n, ept, matched=False):
    """sm_90 code of the c2c filter kernel (or, with ``matched``, the matched filter's kernel)
    with our FFT of ``n`` points at ``ept``: (compiled kernel, nvdisasm text, opcode counts)."""
    import sys

    from numba import types

    from kernels import spectral
    from nvmath_device.aot import compile_kernel

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    from sass_counts import find_nvdisasm, opcodes

    nv = find_nvdisasm()
    assert nv, "nvdisasm not found: the test extras install nvidia-cuda-nvdisasm"
    fwd, inv = _regfft.pair(n, ept)
    c = types.complex64[::1]
    if matched:
        k = spectral._matched_kernel(fwd, inv, False)
        argtypes = (types.complex64[:, ::1], c, types.complex64[:, ::1], types.int32[::1], types.float32[::1],
                    types.int64)
    else:
        k = _fused.filter_kernel(fwd, inv, False, False, flat=True)
        argtypes = (c, c, c, types.int64, types.int64, types.int64, types.int64)
    ck = compile_kernel(k, argtypes, sm=90)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.cubin")
        with open(path, "wb") as f:
            f.write(ck.cubin)
        text = subprocess.run([nv, "-c", path], capture_output=True, text=True, check=True).stdout
    return ck, text, opcodes(text)


@pytest.mark.parametrize("n,ept", [(512, 8), (512, 16), (4096, 16)])
def test_sm90_code(n, ept):
    ck, text, ops = _sass(n, ept)
    exchanges = len(_regfft_code.radices(n, ept)) - 1
    assert ck.frame_bytes == 0
    # block barriers: one per exchange (two buffers; 4096: one buffer, one more before each later
    # write) and the kernel's between the FFTs; none where every row is a warp (512 / 16: 32 threads)
    fwd = _regfft.pair(n, ept)[0]
    want = 0 if fwd.warp_sync else 2 * (exchanges if fwd.buffers == 2
                                        else 2 * exchanges - 1) + 1
    assert ops.get("BAR", 0) == want, (n, ept, ops.get("BAR"))
    assert text.count("LDS.64") == ops["LDS"] == 2 * exchanges * ept  # forward and inverse
    assert text.count("STS.64") == ops["STS"] == 2 * exchanges * ept
    assert not any(op in ops for op in ("DADD", "DMUL", "DFMA", "F2F"))
    assert "CS2R" not in ops, ops["CS2R"]  # rows past the batch load the last row: nothing zeroed first
    _assert_fma_shaped(ept, ops)


def _assert_fma_shaped(ept, ops):
    """With passes of radix FOLD_RADIX or more the butterflies' arithmetic is mostly FFMAs (rotations
    by constants and folded twiddles); plain products then adds gave more FADDs than FFMAs (sm_90,
    matched filter 1024 / 32: FADD 1171, FFMA 736 before; 731 and 1188 after)."""
    if ept >= _regfft_code.FOLD_RADIX:
        assert ops["FADD"] < ops["FFMA"], (ops["FADD"], ops["FFMA"])


@pytest.mark.parametrize("n,ept", [(512, 16), (1024, 32), (1024, 16)])
def test_matched_filter_sm90_code(n, ept):
    """Rows of one warp (32 threads: 512 / 16, 1024 / 32): the peak search by shuffles and no
    block barrier; wider rows: the tree in shared memory, one barrier between the FFTs and one
    per level of the tree beside the exchanges'. No local memory either way."""
    ck, text, ops = _sass(n, ept, matched=True)
    _assert_fma_shaped(ept, ops)
    # rows past the batch load the last row: no registers zeroed before the loads (one CS2R per
    # value when the loads were predicated); the peak's index is 32-bit, its register number
    # selected per value (a 64-bit element index took an IADD3.X per value: 33 at 1024 / 32)
    assert "CS2R" not in ops, ops["CS2R"]
    assert text.count("IADD3.X") < ept, text.count("IADD3.X")
    fwd = _regfft.pair(n, ept)[0]
    exchanges = len(_regfft_code.radices(n, ept)) - 1
    levels = (fwd.block_dim[0] - 1).bit_length()
    assert ck.frame_bytes == 0
    if fwd.warp_sync:
        assert "BAR" not in ops and ops.get("SHFL", 0) == 2 * levels, (ops.get("BAR"), ops.get("SHFL"))
        assert ops["LDS"] == ops["STS"] == 2 * exchanges * ept  # the exchanges' only
    else:
        assert "SHFL" not in ops
        per_exchange = 1 if fwd.buffers == 2 else 2
        fft_bars = 2 * (per_exchange * exchanges - (fwd.buffers == 1))
        assert ops.get("BAR", 0) == fft_bars + 1 + levels, (ops.get("BAR"), fft_bars, levels)
