# SPDX-License-Identifier: Apache-2.0
"""The simulator's GEMM layouts are the device's: same kernels, same fresh random inputs, GPU
(in this process) vs NUMBA_ENABLE_CUDASIM=1 (in a subprocess), compared element by element.

Per case (arrangements, real/complex, fp16/bf16/fp32/fp64, custom and suggested leading dimensions,
block shapes of rank 1 and 2, partial tiles, the swizzled tiled MMA), the kernels of
tests/sim/test_gemm_sim.py:

- the user-style kernel: copy helpers, ``C = alpha A B + beta C`` in shared memory and
  ``D = alpha (A B) + beta D`` with the register accumulator + ``fragment_coordinates``;
- the raw fragment kernel: random tiles and random starting accumulators, ``acc += A B``, and
  every thread's accumulator, rows and cols stored as they are. ``rows``/``cols`` must be
  identical (the simulator's table is compiled from cuBLASDx's partitioner, this proves it is
  the one the device runs); every accumulator value the simulator defines (not NaN) must equal
  the GPU's.

Run on the GPU machine: python -m pytest -q -m gpu tests/gpu/test_gemm_sim_crosscheck.py
"""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from nvmath_device import Matmul
from tests.harness import run_both_sides

# one xdist worker runs this module (its module fixture compiles/simulates every case): run
# the GPU suite with `-n N --dist loadgroup`
pytestmark = [pytest.mark.gpu, pytest.mark.xdist_group("test_gemm_sim_crosscheck")]

SM = 90  # H200; the simulator side has no GPU to ask
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
F16, F32, F64 = np.float16, np.float32, np.float64
ARR = ("row_major", "col_major")
# relative to the largest |value|, times max(k, 8); by C's real precision
TOL = {2: 5e-3, 4: 2e-6, 8: 1e-14}


def _cases():
    from tests.sim.test_gemm_sim import CASES as SIM_CASES

    c = dict(SIM_CASES)
    for a in ARR:
        for b in ARR:
            for cc in ARR:
                c[f"24x40x16-f32-{a[0]}{b[0]}{cc[0]}"] = dict(size=(24, 40, 16), precision=F32, arrangement=(a, b, cc))
    c.update({
        "32x32x32-f16-rcc": dict(size=(32, 32, 32), precision=F16, arrangement=("row_major", "col_major", "col_major")),
        "64x64x64-f64-ld-suggested": dict(size=(64, 64, 64), precision=F64, leading_dimension="suggested"),
        "32x32x32-f32-bd128": dict(size=(32, 32, 32), precision=F32, block_dim=128),
        "16x16x16-c64-bd16x2x2": dict(size=(16, 16, 16), precision=F32, data_type="complex", block_dim=(16, 2, 2)),
        "8x8x8-c128-bd32": dict(size=(8, 8, 8), precision=F64, data_type="complex", block_dim=32),
        "40x24x12-f64-rcr-ld13-41-25": dict(size=(40, 24, 12), precision=F64, leading_dimension=(13, 41, 25),
                                              arrangement=("row_major", "col_major", "row_major")),
    })
    return c


CASES = _cases()

# npz files store bfloat16 (ml_dtypes) arrays as raw 2-byte voids: view them back by operand
_OPERAND = {"A": 0, "SA": 0, "B": 1, "SB": 1, "C": 2, "D": 2, "ACC0": 2, "ACC": 2}


def _load(path, mm):
    out = {}
    for key, x in np.load(path).items():
        if x.dtype.kind == "V" and key in _OPERAND:
            x = x.view((mm.a_value_type, mm.b_value_type, mm.c_value_type)[_OPERAND[key]])
        out[key] = x
    return out


def crosscheck_run(folder):
    """Run every case saved in ``folder`` (cases.pkl + NAME_in.npz) with this process's CUDA (GPU
    or simulator) and save NAME_<tag>.npz, tag "sim" under the simulator, else "gpu"."""
    from tests.sim.test_gemm_sim import run_case

    tag = "sim" if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0") else "gpu"
    with open(os.path.join(folder, "cases.pkl"), "rb") as f:
        cases = pickle.load(f)
    mms = {name: Matmul(sm=SM, **kw) for name, kw in cases}
    if tag == "sim":
        from nvmath_device._build.gemm_sim_tables import prefetch_fragment_tables

        prefetch_fragment_tables(list(mms.values()))  # one NVRTC run for the tables not cached yet
    else:
        from nvmath_device._build.gemm_codegen import prefetch_ltoir

        prefetch_ltoir(list(mms.values()))
    for name, mm in mms.items():
        inputs = _load(os.path.join(folder, f"{name}_in.npz"), mm)
        out = run_case(mm, inputs)
        np.savez(os.path.join(folder, f"{name}_{tag}.npz"), **out)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Fresh inputs for every case, run by the simulator (subprocess) and the GPU (here)."""
    from tests.sim.test_gemm_sim import case_inputs

    out = tmp_path_factory.mktemp("gemm-sim-crosscheck")
    seed = int(np.random.SeedSequence().entropy % 2**32)
    print(f"gemm simulator cross-check: seed {seed}, files in {out}")
    rng = np.random.default_rng(seed)
    for name, kw in CASES.items():
        np.savez(out / f"{name}_in.npz", **case_inputs(Matmul(sm=SM, **kw), 2, rng))
    with open(out / "cases.pkl", "wb") as f:
        pickle.dump(list(CASES.items()), f)
    run_both_sides(out, "tests.gpu.test_gemm_sim_crosscheck:crosscheck_run", crosscheck_run)
    return out


def _close(gpu, sim, mm, what, mask=None):
    assert gpu.shape == sim.shape and gpu.dtype == sim.dtype, what
    if mask is None:
        mask = np.ones(sim.shape, bool)
    g, s = gpu[mask], sim[mask]
    assert s.size and not np.isnan(s).any(), f"{what}: the simulator defined no value"
    assert np.isfinite(g).all(), f"{what}: the GPU left NaN/inf where the simulator has values"
    wide = np.complex128 if s.dtype.kind == "c" else np.float64
    scale = np.abs(s.astype(wide)).max()
    diff = np.abs(g.astype(wide) - s.astype(wide))
    tol = TOL[np.dtype(mm.precision[2]).itemsize] * max(mm.k, 8) * scale
    bad = diff > tol
    if bad.any():
        where = np.argwhere(mask)[bad][:8]
        pytest.fail(
            f"{mm!r}: {what}: {bad.sum()} of {bad.size} values differ (max {diff.max() / scale:.2e} "
            f"relative to max |value|); first indices {where.tolist()}\n"
            f"gpu: {gpu[tuple(where.T)]}\nsim: {sim[tuple(where.T)]}"
        )


@pytest.mark.parametrize("name", list(CASES))
def test_simulator_matches_gpu(folder, name):
    mm = Matmul(sm=SM, **CASES[name])
    gpu, sim = (_load(folder / f"{name}_{t}.npz", mm) for t in ("gpu", "sim"))
    m, n = mm.m, mm.n
    for key in ("ROWS", "COLS"):
        same = gpu[key] == sim[key]
        if not same.all():
            g, t, i = np.argwhere(~same)[0]
            pytest.fail(f"{mm!r}: fragment_coordinates {key.lower()} differ in {(~same).sum()} places; first: "
                        f"GEMM {g} thread {t} value {i}: gpu {gpu[key][g, t, i]}, sim {sim[key][g, t, i]}")
    for key in ("C", "D"):
        poison = np.ones(gpu[key].shape, bool)
        poison[:, :m, :n] = False
        assert np.isnan(gpu[key][poison]).all() and np.isnan(sim[key][poison]).all(), f"{key}: wrote outside C"
        _close(gpu[key], sim[key], mm, f"user-style kernel, {key}", ~poison)
    used = sim["ROWS"] >= 0
    assert np.isnan(sim["ACC"][~used]).all()
    _close(gpu["ACC"], sim["ACC"], mm, "accumulators after execute", used)
