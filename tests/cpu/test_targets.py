# SPDX-License-Identifier: Apache-2.0
"""benchmarks/targets.py on a made-up run: the kernels.json rows come from fused_kernels.py's own
finish_row, the other files carry the fields their scripts write. Every target met, then each
one missed in turn, files missing or given twice, and which floor each card's run is read at."""

import json
import os
import subprocess
import sys

import pytest

from tests.benchmark_script import load

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "targets.py")
H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def tg():
    return load("targets")


@pytest.fixture(scope="module")
def bk():
    return load("fused_kernels")


def _kernel_row(bk, case, ms, bytes_=3.44e9, ok=True, copy_bps=4.0e12):
    res = dict(shape="s", peer="p", bytes=bytes_, flops=1e9, ms=ms, peer_ms=4 * ms, rel_err=1e-7 if ok else 1e-2,
               ours_ref_err=1e-8, peer_ref_err=1e-8, first_call_s=1.0, peer_first_call_s=0.1)
    return bk.finish_row(case, res, flop_rate=6e13, copy_bps=copy_bps)


def _write_run(path, bk, device=H200, main_ms=0.60, matched_ms=1.0, fc_frac=0.92, bg_frac=0.96, plan=(12.0, 18.0),
               execute_us=19.0, fn_us=28.0, torch_us=20.0, copy_bps=4.0e12, skip=()):
    """A run directory in the layout gpu helpers write (fk/, fc/, bg/, co/, hm/). 3.44e9 bytes
    at 4.3e12 B/s: a 0.8 ms floor, so ``matched_ms`` 1.0 is 80 % of it."""
    files = {
        "fk/kernels.json": dict(meta=dict(device=device, copy_bps=copy_bps), rows=[
            _kernel_row(bk, "main_job", main_ms, bytes_=2 * 2**30, copy_bps=copy_bps),
            _kernel_row(bk, "matched", matched_ms, copy_bps=copy_bps)]),
        "fc/fft_convolution.json": dict(meta=dict(device=device), rows=[
            dict(size=4096, impl="cupy cuFFT (3 passes)", config="", ms=1.2, rel_err=3e-7, fraction_of_floor=0.3,
                 fraction_of_card_floor=0.3),
            dict(size=4096, impl="numba-mathdx, own FFT (kernels._regfft)", config="ept=16", ms=0.40, rel_err=2e-7,
                 fraction_of_floor=fc_frac, fraction_of_card_floor=fc_frac * 1.1),
            dict(size=4096, impl="numba-mathdx (ours)", config="wrong", ms=0.30, rel_err=0.5,
                 fraction_of_floor=1.2, fraction_of_card_floor=1.3)]),
        "bg/batched_gemm.json": dict(gpu=device, peak_bw=4.3e12, copy_bps=copy_bps, rows=[
            dict(case="64x64x64 float64", impl="cupy.matmul (cuBLAS batched)", ms=1.5, frac_floor=1.0, correct=True),
            dict(case="64x64x64 float64", impl="ours kc64x1r bd=128 G=1", ms=1.56, frac_floor=bg_frac, correct=True),
            dict(case="64x64x64 float64", impl="ours broken", ms=1.0, frac_floor=1.5, correct=False)]),
        "co/call_overhead.json": dict(meta=dict(device=device), rows=[
            dict(case="gemm", plan_equals_fast=True, plan_enqueue_us=plan[0], plan_sync_us=plan[1],
                 peer_enqueue_us=20.0, peer_sync_us=26.0)]),
        "hm/host_matmul.json": dict(meta=dict(gpu=device), results=[
            dict(case=cs, impl=impl, host_us_per_call=us) for cs, impl, us in (
                ("per call fp16 128^3 RELU_BIAS (execute + synchronize)", "nvmath_host Matmul.execute", execute_us),
                ("per call fp16 128^3 RELU_BIAS (execute + synchronize)", "nvmath_host matmul()", fn_us),
                ("per call fp16 128^3 RELU_BIAS (execute + synchronize)", "torch _addmm_activation", torch_us),
                ("per call fp16 16^3 RELU_BIAS (execute + synchronize)", "torch _addmm_activation", 1.0))]),
    }
    for rel, data in files.items():
        if rel.split("/")[1] in skip:
            continue
        os.makedirs(os.path.join(path, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(path, rel), "w") as f:
            json.dump(data, f)
    return str(path)


def test_every_target_met_on_an_h200_run(tg, bk, tmp_path):
    rows, meta = tg.check_run(_write_run(tmp_path, bk))
    assert meta["bound"] == "peak" and meta["devices"] == [H200]
    assert [r["met"] for r in rows] == [True] * len(rows) and len(rows) == 8, rows
    fc = next(r for r in rows if r["source"] == "fft_convolution.json")
    assert "0.400 ms, 92 %" in fc["figure"]  # the wrong-result row (0.30 ms) is not the best
    bg = next(r for r in rows if r["source"] == "batched_gemm.json")
    assert "1.560 ms, 96 %" in bg["figure"]


@pytest.mark.parametrize("change, missed", [
    (dict(matched_ms=1.01), "matched >= 80"), (dict(main_ms=0.621), "main job <="),
    (dict(fc_frac=0.89), "c2c FFT"), (dict(bg_frac=0.949), "65536 GEMMs"),
    (dict(plan=(12.0, 20.5)), "gemm plan call"), (dict(plan=(20.0, 25.0)), "gemm plan call"),
    (dict(execute_us=20.5), "Matmul.execute"), (dict(fn_us=30.5), "matmul()")])
def test_each_target_missed_alone(tg, bk, tmp_path, change, missed):
    rows, _ = tg.check_run(_write_run(tmp_path, bk, **change))
    assert [r["target"] for r in rows if r["met"] is False] == [
        next(r["target"] for r in rows if r["target"].startswith(missed))], rows


def test_a_failed_check_misses_its_target(tg, bk, tmp_path):
    path = _write_run(tmp_path, bk)
    with open(os.path.join(path, "fk", "kernels.json")) as f:
        data = json.load(f)
    data["rows"][1] = _kernel_row(bk, "matched", 0.5, ok=False)
    with open(os.path.join(path, "fk", "kernels.json"), "w") as f:
        json.dump(data, f)
    rows, _ = tg.check_run(path)
    row = next(r for r in rows if r["target"].startswith("matched"))
    assert row["met"] is False and "check FAILED" in row["figure"]


def test_another_card_is_read_at_its_own_copy_rate(tg, bk, tmp_path):
    # an H100 at 2.95e12 B/s: matched at 1.2 ms is 67 % of the 4.3e12 floor, 97 % of its own
    rows, meta = tg.check_run(_write_run(tmp_path, bk, device=H100, matched_ms=1.2, copy_bps=2.95e12))
    assert meta["bound"] == "card"
    matched = next(r for r in rows if r["target"].startswith("matched"))
    assert matched["met"] is True and "97 % of the card bound" in matched["figure"]
    main = next(r for r in rows if r["target"].startswith("main job"))
    # an H200's 0.62 ms scaled by the copy rates: 0.62 * 4.3 / 2.95 = 0.904 ms; 0.60 ms meets it
    assert main["met"] is True and "limit 0.904 ms" in main["figure"], main
    bg = next(r for r in rows if r["source"] == "batched_gemm.json")
    assert f"{96 * 4.3 / 2.95:.0f} %" in bg["figure"]
    rows, meta = tg.check_run(str(tmp_path), bound="peak")
    assert next(r for r in rows if r["target"].startswith("matched"))["met"] is False
    main = next(r for r in rows if r["target"].startswith("main job"))
    assert main["met"] is None and "not judged" in main["figure"]  # peak bound on an H100


def test_the_main_job_on_another_card_misses_its_scaled_time(tg, bk, tmp_path):
    # 0.62 * 4.3 / 2.95 = 0.9037 ms on an H100 copying at 2.95 TB/s
    rows, _ = tg.check_run(_write_run(tmp_path, bk, device=H100, main_ms=0.905, copy_bps=2.95e12))
    assert [r["target"] for r in rows if r["met"] is False] == [
        "main job <= 0.62 ms (H200), scaled to this card's copy rate"], rows


def test_missing_files_are_not_run_and_fail_the_exit_status(bk, tmp_path):
    path = _write_run(tmp_path, bk, skip=("host_matmul.json",))
    out = tmp_path / "t.md"
    p = subprocess.run([sys.executable, SCRIPT, path, "--out", str(out)], capture_output=True, text=True)
    assert p.returncode == 1, p.stderr
    assert "| (the targets from host_matmul.json) | not run | **no** |" in p.stdout
    assert out.read_text() == p.stdout and "6 of 7 met" in p.stdout


def test_all_met_exits_0(bk, tmp_path):
    p = subprocess.run([sys.executable, SCRIPT, _write_run(tmp_path, bk)], capture_output=True, text=True)
    assert p.returncode == 0 and "8 of 8 met" in p.stdout, p.stdout + p.stderr


def test_files_from_two_devices_are_not_one_run(tg, bk, tmp_path):
    path = _write_run(tmp_path, bk)
    with open(os.path.join(path, "co", "call_overhead.json")) as f:
        data = json.load(f)
    data["meta"]["device"] = H100
    with open(os.path.join(path, "co", "call_overhead.json"), "w") as f:
        json.dump(data, f)
    rows, meta = tg.check_run(path)
    assert meta["bound"] == "card" and meta["devices"] == sorted([H100, H200])
    assert "not one run" in tg.format_table(rows, meta)
    assert tg.main([path]) == 1


def test_a_file_twice_and_a_bad_directory_are_refused(tg, bk, tmp_path):
    path = _write_run(tmp_path, bk)
    os.makedirs(os.path.join(path, "co2"))
    with open(os.path.join(path, "co2", "call_overhead.json"), "w") as f:
        f.write("{}")
    with pytest.raises(ValueError, match=r"call_overhead.json is in RUN_DIR twice"):
        tg.check_run(path)
    with pytest.raises(ValueError, match=r"RUN_DIR must be a directory, got '/nonexistent'"):
        tg.check_run("/nonexistent")
    with pytest.raises(ValueError, match=r"bound must be 'peak', 'card' or None"):
        tg.check_run(path, bound="h200")
    p = subprocess.run([sys.executable, SCRIPT, "/nonexistent"], capture_output=True, text=True)
    assert p.returncode == 2 and "RUN_DIR must be a directory" in p.stderr


def test_a_file_in_another_layout_or_not_json_says_so(tg, bk, tmp_path):
    path = _write_run(tmp_path, bk)
    with open(os.path.join(path, "co", "call_overhead.json"), "w") as f:
        json.dump(dict(meta=dict(device=H200), rows=[dict(case="gemm")]), f)
    with open(os.path.join(path, "hm", "host_matmul.json"), "w") as f:
        f.write("{not json")
    rows, _ = tg.check_run(path)
    bad = {r["source"]: r["figure"] for r in rows if r["met"] is False}
    assert bad["call_overhead.json"] == "not the layout its benchmark writes: KeyError: 'plan_enqueue_us'"
    assert bad["host_matmul.json"].startswith("unreadable: JSONDecodeError:") and len(bad) == 2


def test_a_case_that_raised_misses_its_target(tg, bk, tmp_path):
    path = _write_run(tmp_path, bk)
    with open(os.path.join(path, "fk", "kernels.json")) as f:
        data = json.load(f)
    data["rows"][1] = dict(case="matched", error="RuntimeError: out of memory")  # run_cases' error row
    with open(os.path.join(path, "fk", "kernels.json"), "w") as f:
        json.dump(data, f)
    rows, _ = tg.check_run(path)
    assert [(r["target"], r["figure"]) for r in rows if r["met"] is False] == [
        ("matched >= 80 % of its bound", "failed: RuntimeError: out of memory")]
