# SPDX-License-Identifier: Apache-2.0
"""The simulator's FFT layouts are the device's: same kernels, same fresh random inputs, GPU
(in this process) vs NUMBA_ENABLE_CUDASIM=1 (in a subprocess), compared element by element.

Two kernels per case: the user-style kernels of tests/fft_kernels.py (global in -> global out),
and a raw kernel that loads every register of every thread (also those outside the layout, with
random values), calls execute, and stores every register back: every register the simulator
defines (not NaN) must equal the GPU's.

Run on the GPU machine: python -m pytest -q -m gpu tests/gpu/test_fft_sim_crosscheck.py
"""

import os
import pickle

import numpy as np
import pytest

from nvmath_device import FFT
from tests.fft_kernels import crosscheck_run, layout_case, register_input
from tests.harness import run_both_sides

# one xdist worker runs this module (its module fixture compiles/simulates every case): run
# the GPU suite with `-n N --dist loadgroup`
pytestmark = [pytest.mark.gpu, pytest.mark.xdist_group("test_fft_sim_crosscheck")]

SM = 90  # H200; the simulator side has no GPU to ask
TOL = {np.float32: 1e-5, np.float64: 1e-12}
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fft(
    size,
    precision,
    fft_type,
    direction=None,
    ept="suggested",
    fpb="suggested",
    execution="Block",
    layout="natural",
    mode="normal",
):
    opts = None if fft_type == "c2c" else {"complex_layout": layout, "real_mode": mode}
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


def _cases():
    c = {
        "block-c2c-fwd-16-f32-suggested": _fft(16, F32, "c2c", "forward"),
        "block-c2c-fwd-128-f32-ept8-fpb2": _fft(128, F32, "c2c", "forward", 8, 2),
        "block-c2c-inv-128-f32-ept32-fpb1": _fft(128, F32, "c2c", "inverse", 32, 1),
        "block-c2c-inv-100-f32": _fft(100, F32, "c2c", "inverse"),
        "block-c2c-fwd-243-f32-ept27-fpb1": _fft(243, F32, "c2c", "forward", 27, 1),
        "block-c2c-fwd-64-f64-ept8-fpb2": _fft(64, F64, "c2c", "forward", 8, 2),
        "block-c2c-inv-17-f64-fpb2": _fft(17, F64, "c2c", "inverse", "suggested", 2),
        "block-r2c-243-f32-ept27-fpb1": _fft(243, F32, "r2c", None, 27, 1),
        "block-c2r-243-f32-ept27-fpb1": _fft(243, F32, "c2r", None, 27, 1),
        "block-r2c-17-f64-fpb2": _fft(17, F64, "r2c", None, "suggested", 2),
        "block-c2r-17-f64-fpb2": _fft(17, F64, "c2r", None, "suggested", 2),
        "thread-c2c-fwd-8-f32": _fft(8, F32, "c2c", "forward", execution="Thread"),
        "thread-c2c-inv-8-f32": _fft(8, F32, "c2c", "inverse", execution="Thread"),
        "thread-c2c-fwd-7-f64": _fft(7, F64, "c2c", "forward", execution="Thread"),
        "thread-r2c-7-f64": _fft(7, F64, "r2c", execution="Thread"),
        "thread-c2r-7-f64": _fft(7, F64, "c2r", execution="Thread"),
    }
    for ft in ("r2c", "c2r"):
        for layout in ("natural", "packed", "full"):
            for mode in ("normal", "folded"):
                c[f"block-{ft}-128-f32-ept8-fpb2-{layout}-{mode}"] = _fft(
                    128, F32, ft, None, 8, 2, "Block", layout, mode
                )
            c[f"block-{ft}-64-f64-ept4-fpb1-{layout}"] = _fft(
                64, F64, ft, None, 4, 1, "Block", layout
            )
            c[f"thread-{ft}-8-f32-{layout}"] = _fft(8, F32, ft, execution="Thread", layout=layout)
        c[f"thread-{ft}-16-f32-natural-folded"] = _fft(
            16, F32, ft, execution="Thread", layout="natural", mode="folded"
        )
    return c


CASES = _cases()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Fresh inputs for every case, run by the simulator (subprocess) and the GPU (here)."""
    from nvmath_device._build.fft_codegen import prefetch_traits

    prefetch_traits(list(CASES.values()))
    out = tmp_path_factory.mktemp("fft-sim-crosscheck")
    seed = int(np.random.SeedSequence().entropy % 2**32)
    print(f"fft simulator cross-check: seed {seed}, files in {out}")
    rng = np.random.default_rng(seed)
    for name, fft in CASES.items():
        batch = 2 * fft.ffts_per_block_value if fft.execution == "Block" else 40
        x, _ = layout_case(fft, batch, rng)
        np.save(out / f"{name}_x.npy", x)
        np.save(out / f"{name}_regs.npy", register_input(fft, batch, rng))
    with open(out / "cases.pkl", "wb") as f:
        pickle.dump(list(CASES.items()), f)
    run_both_sides(out, "tests.fft_kernels:crosscheck_run", crosscheck_run)
    return out


def _compare(gpu, sim, fft, what):
    assert gpu.shape == sim.shape and gpu.dtype == sim.dtype, what
    defined = ~np.isnan(sim)
    assert defined.any(), f"{what}: the simulator defined no value"
    assert np.isfinite(gpu[defined]).all(), (
        f"{what}: GPU left NaN/inf where the simulator has values"
    )
    scale = np.abs(sim[defined]).max()
    diff = np.abs(gpu[defined] - sim[defined])
    bad = diff > TOL[fft.precision] * scale
    if bad.any():
        where = np.argwhere(defined)[bad][:8]
        pytest.fail(
            f"{fft}: {what}: {bad.sum()} of {bad.size} values differ (max {diff.max() / scale:.2e} "
            f"relative to max |value|); first indices {where.tolist()}\n"
            f"gpu: {gpu[tuple(where.T)]}\nsim: {sim[tuple(where.T)]}"
        )


@pytest.mark.parametrize("name", list(CASES))
def test_simulator_matches_gpu(folder, name):
    fft = CASES[name]
    y_gpu, y_sim = (np.load(folder / f"{name}_y_{t}.npy") for t in ("gpu", "sim"))
    assert not np.isnan(y_sim).any() and not np.isnan(y_gpu).any()
    _compare(y_gpu, y_sim, fft, "user-style kernel output")
    r_gpu, r_sim = (np.load(folder / f"{name}_regsout_{t}.npy") for t in ("gpu", "sim"))
    _compare(r_gpu, r_sim, fft, "registers after execute")
