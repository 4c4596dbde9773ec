# SPDX-License-Identifier: Apache-2.0
"""kernels.add_noise without a GPU: every bad argument is refused (named) before anything is
compiled or copied, and both of its kernels (float32 / float64 rows) type, lower and link to an
sm_90 cubin with cuRAND's Philox4_32_10 unit (the generator state a local record, no States array)."""

import numpy as np
import pytest
from numba import types

import kernels
from kernels import noise
from nvmath_device.aot import compile_kernel
from tests.benchmark_script import load

X32 = np.zeros((2, 8), np.float32)


def _noise_sig(arr):
    """noise_kernel's argument types as add_noise launches it."""
    f64 = types.float64
    return (arr, arr, types.float64[::1], f64, f64, f64, f64, types.uint64, types.int64, types.int64)


@pytest.mark.parametrize("factory,double,ty", [
    ("noise_kernel", False, types.float32), ("noise_kernel", True, types.float64),
    ("pair_noise_kernel", False, types.complex64), ("pair_noise_kernel", True, types.complex128),
])
def test_noise_kernels_link_for_sm90(factory, double, ty):
    """The scalar kernel on real rows and the pair kernel on complex64/complex128 views of them;
    after LTO neither keeps a stack frame (the Philox state in registers)."""
    arr = types.Array(ty, 2, "C")
    out = compile_kernel(getattr(noise, factory)(double), _noise_sig(arr), sm=90)
    assert out.cubin[:4] == b"\x7fELF"
    assert out.linked == ("nvmathdx_curand_Philox4_32_10.ltoir",)
    assert _frame_sizes(out.cubin) and not any(_frame_sizes(out.cubin))


def test_power_kernel_links_for_sm90():
    for ty in (types.float32, types.float64, types.complex64, types.complex128):
        out = compile_kernel(noise.power_kernel(), (types.Array(ty, 2, "C"), types.float64[::1], types.int64), sm=90)
        assert out.cubin[:4] == b"\x7fELF" and out.linked == ()


def _frame_sizes(cubin: bytes) -> list[int]:
    """EIATTR_FRAME_SIZE (0x11) of every function in a cubin's ``.nv.info`` section: the bytes of
    local memory (stack) each uses."""
    import struct

    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    heads = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names_at = heads[shstrndx][4]
    sizes = []
    for name, _typ, _flags, _addr, off, size in heads:
        if cubin[names_at + name:cubin.index(b"\0", names_at + name)] != b".nv.info":
            continue
        i = off
        while i < off + size:
            fmt, attr = cubin[i], cubin[i + 1]
            if fmt == 4:  # EIFMT_SVAL: a 16-bit size, then the value
                (n,) = struct.unpack_from("<H", cubin, i + 2)
                if attr == 0x11:
                    sizes.append(struct.unpack_from("<I", cubin, i + 8)[0])  # (function, frame size)
                i += 4 + n
            else:
                i += 2 if fmt == 1 else 4
    return sizes


def test_generator_state_lives_in_registers():
    """The Philox state is a local record whose address goes to cuRAND's functions; after LTO no
    function of the linked kernel keeps a stack frame (local memory), so the state and the draws
    stay in registers. Control: a local array indexed dynamically has a frame."""
    from numba import cuda, float32

    arr = types.Array(types.float32, 2, "C")
    for double in (False, True):
        ty = types.Array(types.float64 if double else types.float32, 2, "C")
        cubin = compile_kernel(noise.noise_kernel(double), _noise_sig(ty), sm=90).cubin
        sizes = _frame_sizes(cubin)
        assert sizes and not any(sizes), sizes

    def spills(x, n):
        a = cuda.local.array(64, float32)
        for i in range(64):
            a[(i * n) % 64] = x[0, i]
        x[0, 0] = a[n]

    assert max(_frame_sizes(compile_kernel(spills, (arr, types.int64), sm=90).cubin)) >= 256


def test_state_type_is_the_compiled_philox_state():
    """Outside the simulator the local state has the type numba gives states[i] of a
    StatesPhilox4_32_10 array (random.* type-check it against the generator)."""
    assert type(noise.PHILOX_STATE).__name__ == "CurandState"
    assert noise.PHILOX_STATE.generator == "Philox4_32_10"


def test_exported():
    assert kernels.add_noise.__wrapped__ is noise.add_noise and "add_noise" in kernels.__all__  # + Dask arrays


@pytest.mark.parametrize("kw,exc,match", [
    (dict(snr_db="10"), TypeError, "snr_db must be a real number"),
    (dict(snr_db=True), TypeError, "snr_db must be a real number"),
    (dict(snr_db=1j), TypeError, "snr_db must be a real number"),
    (dict(snr_db=float("nan")), ValueError, "snr_db must be a finite"),
    (dict(snr_db=float("inf")), ValueError, "snr_db must be a finite"),
    (dict(seed=-1), ValueError, r"seed must be an integer from 0 to 2\*\*64 - 1, got -1"),
    (dict(seed=2**64), ValueError, "seed must be an integer from 0"),
    (dict(seed=1.5), TypeError, "seed must be an integer"),
    (dict(seed=True), TypeError, "seed must be an integer"),
    (dict(seed="1"), TypeError, "seed must be an integer"),
    (dict(signal_power=-1.0), ValueError, "signal_power must be >= 0"),
    (dict(signal_power="1"), TypeError, "signal_power must be a real number"),
    (dict(signal_power=float("nan")), ValueError, "signal_power must be a finite"),
    (dict(stream="default"), TypeError, "stream"),
    (dict(out=np.zeros((2, 7), np.float32)), ValueError, r"out must have x's shape \(2, 8\)"),
    (dict(out=np.zeros((2, 8), np.float64)), TypeError, "out must have x's dtype float32"),
    (dict(out=[[0.0] * 8] * 2), TypeError, "out must be a writable NumPy array"),
])
def test_bad_arguments_are_named(kw, exc, match):
    args = dict(snr_db=10.0)
    args.update(kw)
    snr = args.pop("snr_db")
    with pytest.raises(exc, match=match):
        kernels.add_noise(X32, snr, **args)


def test_read_only_out_is_refused():
    out = np.zeros_like(X32)
    out.flags.writeable = False
    with pytest.raises(TypeError, match="out must be a writable NumPy array"):
        kernels.add_noise(X32, 3.0, out=out)


@pytest.mark.parametrize("x,exc,match", [
    (np.zeros((2, 8), np.int32), TypeError, "x must have dtype float32 or float64 or complex64 or complex128"),
    (np.zeros((2, 2, 2), np.float32), ValueError, "x must have 1 or 2 dimension"),
    (np.zeros((2, 8), np.float16), TypeError, "x must have dtype"),
])
def test_bad_x_is_named(x, exc, match):
    with pytest.raises(exc, match=match):
        kernels.add_noise(x, 10.0)


def test_noise_scale_definition():
    assert noise.noise_scale(1.0, 0.0, False) == 1.0
    assert noise.noise_scale(4.0, 20.0, False) == pytest.approx(0.2)
    assert noise.noise_scale(2.0, 0.0, True) == pytest.approx(1.0)  # half the power per component
    assert noise.LANES == 256


# ------------------------------------------------------------------ benchmarks/random_fused.py

def _bench():
    return load("random_fused")


def test_benchmark_arguments():
    bk = _bench()
    a = bk.parse_args([])
    assert (a.out, a.mbytes, a.cases, a.reps) == ("bench_out", 512, ["real32", "complex64"], 20)
    a = bk.parse_args(["--out", "/tmp/r", "--mbytes", "8", "--cases", "complex64", "--reps", "5"])
    assert (a.out, a.mbytes, a.cases, a.reps) == ("/tmp/r", 8, ["complex64"], 5)
    for bad in (["--cases", "gbm"], ["--mbytes", "0"], ["--reps", "0"]):
        with pytest.raises(SystemExit):
            bk.parse_args(bad)


def test_benchmark_shapes_and_floor():
    bk = _bench()
    assert bk.shape_of("real32", 512) == (1024, 2**17)  # 512 MiB of float32 rows of 2**17
    assert bk.shape_of("complex64", 512) == (1024, 2**16)
    assert bk.shape_of("real32", 1) == (2, 2**17)
    assert bk.io_bytes("real32", (1024, 2**17)) == 2 * 512 * 2**20  # x read once, y written once
    assert bk.floor_ms(4.3e9) == pytest.approx(1.0)
    floor = bk.floor_ms(2 * 512 * 2**20)
    assert floor == pytest.approx(0.2497, abs=1e-4)


def test_benchmark_rows_and_table(tmp_path):
    bk = _bench()
    ours = bk.finish_row("real32", bk.OURS, (2, 4), 4.3e9, 2.0, 2.0, 0.01)
    peer = bk.finish_row("real32", "cupy two-pass", (2, 4), 4.3e9, 5.0, 2.0, 0.5)
    gone = bk.finish_row("real32", "nvmath-python device random", (2, 4), 4.3e9, None, 2.0,
                         note=bk.nvmath_reason() or "importable")
    assert ours["ratio"] == 1.0 and ours["pct_floor"] == pytest.approx(50.0) and ours["ok"] is True
    assert peer["ratio"] == 2.5 and peer["pct_floor"] == pytest.approx(20.0) and peer["ok"] is False
    text = bk.write_results(str(tmp_path), [ours, peer, gone], dict(device="fake", mbytes=8))
    assert "| real32 | 2 x 4 | ours (measured power) | 2.000 | 1.00x | 50% | 0.010 | ok |" in text
    assert "| 5.000 | 2.50x | 20% | 0.500 | MISMATCH |" in text
    assert "| nvmath-python device random | - | - | - | - | not run:" in text
    assert (tmp_path / "random_fused.md").read_text() == text
    import json

    assert len(json.loads((tmp_path / "random_fused.json").read_text())["rows"]) == 3


def test_benchmark_exits_2_without_a_gpu():
    import os
    import subprocess
    import sys

    from mathdx_operands import gpu_available

    if gpu_available():
        pytest.skip("a GPU is usable here: the benchmark would run")
    path = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "random_fused.py")
    run = subprocess.run([sys.executable, path, "--out", "/tmp/nmdx_random_fused_nogpu"], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 2, run.stderr[-2000:]
    assert "needs a CUDA GPU" in run.stderr and "Traceback" not in run.stderr
