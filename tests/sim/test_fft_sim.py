# SPDX-License-Identifier: Apache-2.0
"""FFT.execute in user-style kernels under numba-cuda's simulator, against numpy.fft (float64).

Run: NUMBA_ENABLE_CUDASIM=1 python -m pytest -q tests/sim
"""

import traceback

import numpy as np
import pytest
from numba import cuda

from nvmath_device import FFT
from tests.fft_kernels import layout_case, make_block_kernel, run_fft
from tests.harness import launch_guarded

SM = 90
TOL = {np.float32: 2e-6, np.float64: 1e-13}


def _fft(
    size,
    precision,
    fft_type,
    direction=None,
    ept="suggested",
    fpb="suggested",
    execution="Block",
    layout=None,
    mode="normal",
):
    opts = None if fft_type == "c2c" else {"complex_layout": layout or "natural", "real_mode": mode}
    return FFT(
        size=size,
        precision=precision,
        fft_type=fft_type,
        direction=direction,
        elements_per_thread=ept,
        ffts_per_block=fpb,
        execution=execution,
        sm=SM,
        real_fft_options=opts,
    )


F32, F64 = np.float32, np.float64
REAL = [("r2c", None), ("c2r", None)]

# (id, descriptor arguments). Small blocks: the simulator runs one Python thread per CUDA thread.
BLOCK = [
    ("c2c-fwd-16-f32-suggested", (16, F32, "c2c", "forward")),
    ("c2c-fwd-128-f32-ept4-fpb2", (128, F32, "c2c", "forward", 4, 2)),
    ("c2c-fwd-128-f32-ept32-fpb1", (128, F32, "c2c", "forward", 32, 1)),
    ("c2c-inv-128-f32-ept8-fpb3", (128, F32, "c2c", "inverse", 8, 3)),
    ("c2c-fwd-100-f32-fpb2", (100, F32, "c2c", "forward", "suggested", 2)),
    ("c2c-inv-243-f32-ept27-fpb1", (243, F32, "c2c", "inverse", 27, 1)),
    ("c2c-fwd-64-f64-ept8-fpb2", (64, F64, "c2c", "forward", 8, 2)),
    ("c2c-inv-100-f64-fpb1", (100, F64, "c2c", "inverse", "suggested", 1)),
    ("c2c-fwd-5-f64-fpb2", (5, F64, "c2c", "forward", "suggested", 2)),
    ("r2c-100-f32-fpb1", (100, F32, "r2c", None, "suggested", 1)),
    ("c2r-100-f32-fpb1", (100, F32, "c2r", None, "suggested", 1)),
    ("r2c-17-f64-fpb2", (17, F64, "r2c", None, "suggested", 2)),
    ("c2r-17-f64-fpb2", (17, F64, "c2r", None, "suggested", 2)),
    ("c2r-243-f64-ept9-fpb1", (243, F64, "c2r", None, 9, 1)),
]
for _layout in ("natural", "packed", "full"):
    for _ft, _ in REAL:
        BLOCK.append(
            (f"{_ft}-128-f32-ept8-fpb2-{_layout}", (128, F32, _ft, None, 8, 2, "Block", _layout))
        )
        BLOCK.append(
            (f"{_ft}-64-f64-ept4-fpb1-{_layout}", (64, F64, _ft, None, 4, 1, "Block", _layout))
        )
        BLOCK.append(
            (
                f"{_ft}-128-f32-ept8-fpb1-{_layout}-folded",
                (128, F32, _ft, None, 8, 1, "Block", _layout, "folded"),
            )
        )

THREAD = []
for _prec, _sizes in ((F32, (2, 7, 16)), (F64, (8,))):
    for _n in _sizes:
        for _ft, _d in [("c2c", "forward"), ("c2c", "inverse"), *REAL]:
            THREAD.append(
                (
                    f"thread-{_ft}-{_d or ''}-{_n}-{np.dtype(_prec).name}",
                    (_n, _prec, _ft, _d, "suggested", "suggested", "Thread"),
                )
            )
for _layout, _n64 in (("packed", 6), ("full", 5)):
    for _ft, _ in REAL:
        for _n, _prec in ((8, F32),) if _ft == "r2c" else ((_n64, F64),):
            THREAD.append(
                (
                    f"thread-{_ft}-{_n}-{np.dtype(_prec).name}-{_layout}",
                    (_n, _prec, _ft, None, "suggested", "suggested", "Thread", _layout),
                )
            )
for _ft, _ in REAL:
    THREAD.append(
        (
            f"thread-{_ft}-16-f32-natural-folded",
            (16, F32, _ft, None, "suggested", "suggested", "Thread", "natural", "folded"),
        )
    )

# Descriptors of the misuse and API tests below.
MISC = {
    "c2c64": _fft(64, F32, "c2c", "forward", 8, 2),
    "c2c64inv": _fft(64, F32, "c2c", "inverse", 8, 2),
    "c2c16d": _fft(16, F64, "c2c", "forward", 4, 1),
    "thread16": _fft(16, F32, "c2c", "forward", execution="Thread"),
    "fwd512": _fft(512, F32, "c2c", "forward", 8, 2),
    "inv512": _fft(512, F32, "c2c", "inverse", 8, 2),
}


@pytest.fixture(scope="module", autouse=True)
def _traits():
    """All descriptors' traits in one NVRTC run (~10-20 s the first time, then from the cache)."""
    from nvmath_device._build.fft_codegen import prefetch_traits

    prefetch_traits([_fft(*a) for _, a in BLOCK + THREAD] + list(MISC.values()))


def _check(fft, batch, seed=0):
    rng = np.random.default_rng(seed)
    x, expected = layout_case(fft, batch, rng)
    y = run_fft(fft, x, threads_per_block=4)
    assert y.dtype == fft.output_type
    assert not np.isnan(y).any(), f"{fft}: output not fully written"
    scale = np.abs(expected).max()
    err = np.abs(y - expected).max() / scale
    assert err < TOL[fft.precision], f"{fft}: max error {err:.2e} (relative to max |y|)"


@pytest.mark.parametrize("args", [a for _, a in BLOCK], ids=[i for i, _ in BLOCK])
def test_block(args):
    fft = _fft(*args)
    _check(fft, 2 * fft.ffts_per_block_value)


@pytest.mark.parametrize("args", [a for _, a in THREAD], ids=[i for i, _ in THREAD])
def test_thread(args):
    _check(_fft(*args), 6)  # 2 blocks of 4 threads, the last 2 threads without an FFT


def test_complex_registers_and_two_ffts_in_one_kernel():
    """value_type register arrays, shared array of value_type, forward then inverse (from the GPU suite)."""
    fwd, inv = MISC["fwd512"], MISC["inv512"]

    @cuda.jit
    def roundtrip(x):
        td = cuda.local.array(fwd.storage_size, dtype=fwd.value_type)
        smem = cuda.shared.array(0, dtype=fwd.value_type)
        b = cuda.blockIdx.x * fwd.ffts_per_block + cuda.threadIdx.y
        for i in range(fwd.elements_per_thread):
            td[i] = x[b, cuda.threadIdx.x + i * fwd.stride]
        fwd.execute(td, smem)
        for i in range(fwd.elements_per_thread):
            td[i] = td[i] * 2.0
        cuda.syncthreads()
        inv.execute(td, smem)
        for i in range(fwd.elements_per_thread):
            x[b, cuda.threadIdx.x + i * fwd.stride] = td[i]

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((4, 512)) + 1j * rng.standard_normal((4, 512))).astype(np.complex64)
    d = cuda.to_device(x)
    roundtrip[2, fwd.block_dim, 0, fwd.shared_memory_size](d)
    np.testing.assert_allclose(d.copy_to_host(), x * 2 * 512, rtol=1e-4, atol=1e-3)


def test_numpy_scalar_dtypes_and_alignment_work_in_the_simulator():
    """cuda.shared.array(0, dtype=np.complex64) and alignment= (both fine on the GPU)."""
    fft = MISC["c2c64"]

    @cuda.jit
    def kernel(x, addr):
        td = cuda.local.array(8, dtype=np.complex64)
        r = cuda.local.array(3, dtype=np.float32, alignment=64)
        smem = cuda.shared.array(0, dtype=np.complex64)
        b = cuda.blockIdx.x * 2 + cuda.threadIdx.y
        for i in range(8):
            td[i] = x[b, cuda.threadIdx.x + i * 8]
        fft.execute(td, smem)
        for i in range(8):
            x[b, cuda.threadIdx.x + i * 8] = td[i]
        if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0:
            addr[0] = r.ctypes.data % 64

    x = np.ones((2, 64), np.complex64)
    addr = np.full(1, -1, np.int64)
    kernel[1, fft.block_dim, 0, fft.shared_memory_size](x, addr)
    assert addr[0] == 0
    np.testing.assert_allclose(x[:, 0], 64)
    np.testing.assert_allclose(x[:, 1:], 0, atol=1e-5)


def test_unspecified_registers_and_shared_memory_are_poisoned():
    """Registers outside the output layout and the FFT's shared memory hold NaN after execute."""
    fft = _fft(128, F32, "r2c", None, 8, 2, "Block", "natural")  # output_ept 5 of storage 8
    s2 = 2 * fft.storage_size

    @cuda.jit
    def kernel(out, sm):
        r = cuda.local.array(s2, dtype=np.float32)
        smem = cuda.shared.array(0, dtype=np.float32)
        for i in range(s2):
            r[i] = 1.0
        fft.execute(r, smem)
        t = cuda.threadIdx.x + cuda.blockDim.x * cuda.threadIdx.y
        for i in range(s2):
            out[t, i] = r[i]
        if t == 0:
            for i in range(sm.shape[0]):
                sm[i] = smem[i]

    out = np.zeros((fft.max_threads_per_block, s2), np.float32)
    sm = np.zeros(fft.shared_memory_size // 4, np.float32)
    kernel[1, fft.block_dim, 0, fft.shared_memory_size](out, sm)
    assert np.isnan(sm).all()
    assert np.isnan(out[:, 2 * fft.output_ept :]).all()
    assert not np.isnan(out[0, : 2 * fft.output_ept]).any()  # thread 0 holds 5 output values
    # thread 1 holds elements 1, 17, 33, 49 (and 65 is past output_length 65): register 4 is NaN
    assert not np.isnan(out[1, :8]).any() and np.isnan(out[1, 8:10]).all()


# ------------------------------------------------------------------------------------ misuse


def _block_io(fft):
    x = np.zeros((2 * fft.ffts_per_block_value, fft.size), fft.value_type)
    return cuda.to_device(x), cuda.to_device(x.copy())


def test_wrong_block_shape():
    fft = MISC["c2c64"]
    kernel = make_block_kernel(fft)
    bx, by, bz = fft.block_dim
    for bad in [(bx * 2, by, 1), (bx, by + 1, 1), bx * by]:
        with pytest.raises(ValueError, match=r"fft.block_dim = \(8, 2, 1\).*blockDim"):
            launch_guarded(kernel, 1, bad, fft.shared_memory_size, *_block_io(fft))


def test_too_little_shared_memory():
    fft = MISC["c2c64"]
    kernel = make_block_kernel(fft)
    with pytest.raises(
        ValueError, match=f"needs fft.shared_memory_size = {fft.shared_memory_size}"
    ):
        launch_guarded(kernel, 1, fft.block_dim, fft.shared_memory_size - 8, *_block_io(fft))
    with pytest.raises(ValueError, match="has 0 bytes"):
        launch_guarded(kernel, 1, fft.block_dim, 0, *_block_io(fft))


def _registers_kernel(fft, make_regs, smem_kind="dynamic"):
    @cuda.jit
    def kernel(x):
        r = make_regs()
        if smem_kind == "dynamic":
            fft.execute(r, cuda.shared.array(0, dtype=np.float32))
        elif smem_kind == "local":
            fft.execute(r, cuda.local.array(4096, dtype=np.float32))
        elif smem_kind == "none":
            fft.execute(r)
        else:
            fft.execute(r, cuda.shared.array(0, dtype=np.float32))

    return kernel


@pytest.mark.parametrize(
    "make_regs,exc,match",
    [
        (
            lambda: np.empty(16, np.float32),
            TypeError,
            r"thread_data.*complex128.*float64.*got an array of float32",
        ),
        (
            lambda: np.empty(8, np.complex64),
            TypeError,
            r"thread_data.*complex128.*got an array of complex64",
        ),
        (lambda: np.empty((4, 2), np.complex128), TypeError, r"thread_data.*1-D contiguous"),
        (
            lambda: np.empty(3, np.complex128),
            ValueError,
            r"thread_data.*has 3 complex128 values.*at least 4",
        ),
        (
            lambda: np.empty(7, np.float64),
            ValueError,
            r"thread_data.*has 7 float64 values.*at least 8",
        ),
        (lambda: 1.0, TypeError, r"thread_data.*must be a local array"),
    ],
    ids=["f32-for-f64", "c64-for-c128", "2d", "short-complex", "short-real", "scalar"],
)
def test_wrong_thread_data(make_regs, exc, match):
    fft = MISC["c2c16d"]  # float64, storage_size 4
    assert fft.storage_size == 4
    with pytest.raises(exc, match=match):
        launch_guarded(
            _registers_kernel(fft, make_regs), 1, fft.block_dim, fft.shared_memory_size, np.zeros(1)
        )


def test_shared_memory_must_be_shared_and_given():
    fft = MISC["c2c16d"]

    def regs():
        return np.zeros(4, np.complex128)

    with pytest.raises(TypeError, match="shared_memory.*is not shared memory"):
        launch_guarded(
            _registers_kernel(fft, regs, "local"),
            1,
            fft.block_dim,
            fft.shared_memory_size,
            np.zeros(1),
        )
    with pytest.raises(TypeError, match=r"execution='Block' takes \(thread_data, shared_memory\)"):
        launch_guarded(
            _registers_kernel(fft, regs, "none"),
            1,
            fft.block_dim,
            fft.shared_memory_size,
            np.zeros(1),
        )


def test_thread_execution_with_shared_memory():
    fft = MISC["thread16"]

    @cuda.jit
    def kernel(x):
        r = cuda.local.array(fft.storage_size, dtype=fft.value_type)
        smem = cuda.shared.array(0, dtype=fft.value_type)
        fft.execute(r, smem)

    with pytest.raises(
        TypeError, match=r"execution='Thread' takes \(thread_data,\) only.*no shared memory"
    ):
        launch_guarded(kernel, 1, 4, 1024, np.zeros(1))


def _partial_kernel(fft, variant):
    s = fft.storage_size
    vt = fft.value_type
    other = MISC["c2c64inv"]

    @cuda.jit
    def kernel(x):
        r = cuda.local.array(s, dtype=vt)
        smem = cuda.shared.array(0, dtype=vt)
        for i in range(s):
            r[i] = 0
        skip = cuda.threadIdx.x == 3 and cuda.threadIdx.y == 1
        if variant == "return" and skip:
            return
        if variant == "barrier" and skip:
            cuda.syncthreads()  # a different barrier than execute's: the simulator pairs them
            cuda.syncthreads()
            return
        if variant == "other-fft" and cuda.threadIdx.y == 1:
            other.execute(r, smem)
        else:
            fft.execute(r, smem)
        if variant == "twice" and not skip:
            fft.execute(r, smem)

    return kernel


@pytest.mark.parametrize(
    "variant,match",
    [
        ("return", r"1 of 16 thread\(s\) did not reach call #1: threadIdx \(3, 1, 0\)"),
        ("barrier", r"1 of 16 thread\(s\) did not reach call #1: threadIdx \(3, 1, 0\)"),
        ("twice", r"1 of 16 thread\(s\) did not reach call #2: threadIdx \(3, 1, 0\)"),
        ("other-fft", r"different FFT descriptors"),
    ],
    ids=["return-early", "syncthreads-instead", "second-call-skipped", "different-fft"],
)
def test_every_thread_must_call_execute(variant, match):
    fft = MISC["c2c64"]
    with pytest.raises(RuntimeError, match=match):
        launch_guarded(
            _partial_kernel(fft, variant), 2, fft.block_dim, fft.shared_memory_size, np.zeros(1)
        )


def test_execute_outside_a_kernel():
    fft = MISC["c2c64"]
    with pytest.raises(RuntimeError, match="only be called inside a @cuda.jit kernel"):
        fft.execute(np.zeros(8, np.complex64), np.zeros(1024, np.complex64))


# ------------------------------------------------------------------------ errors inside execute
def _errors_kernel(fft, short_thread=-1):
    s, vt = fft.storage_size, fft.value_type

    @cuda.jit
    def kernel(x):
        n = s - 1 if cuda.threadIdx.x == short_thread else s
        r = np.zeros(n, vt)
        smem = cuda.shared.array(0, dtype=vt)
        fft.execute(r, smem)
        cuda.syncthreads()
        fft.execute(r, smem)

    return kernel


def _full_text(e):
    return "".join(traceback.format_exception(e))


def test_one_thread_with_a_bad_argument_reaches_the_caller():
    fft = MISC["c2c16d"]  # 4 threads, storage_size 4
    for _ in range(10):  # which thread the simulator reports first is up to its thread scheduling
        with pytest.raises(ValueError, match=r"thread_data.*has 3 complex128 values.*at least 4") as info:
            launch_guarded(_errors_kernel(fft, short_thread=1), 1, fft.block_dim, fft.shared_memory_size,
                    np.zeros(1), timeout=30)
        assert "_check_registers" in _full_text(info.value)  # the traceback of the raise


def test_an_error_inside_the_block_round_reaches_the_caller(monkeypatch):
    """An exception while the block's FFTs are computed (here an IndexError in thread 2's part)
    reaches the caller with its message and traceback from every thread: the other threads of the
    round stop with it instead of running on with registers that were never computed (before,
    about a third of the launches reported 'did not reach call #2' instead)."""
    import nvmath_device._sim.fft as sim_fft

    fft = MISC["c2c16d"]
    gather = sim_fft._gather

    def failing_gather(p, dst, row, x, regs):
        if x == 2:
            raise IndexError("index 99 is out of bounds in thread 2's part")
        return gather(p, dst, row, x, regs)

    monkeypatch.setattr(sim_fft, "_gather", failing_gather)
    for _ in range(15):
        with pytest.raises(IndexError, match="index 99 is out of bounds in thread 2's part") as info:
            launch_guarded(_errors_kernel(fft), 1, fft.block_dim, fft.shared_memory_size, np.zeros(1),
                    timeout=30)
        assert "failing_gather" in _full_text(info.value)
