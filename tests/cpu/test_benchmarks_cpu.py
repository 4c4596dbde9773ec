# SPDX-License-Identifier: Apache-2.0
"""benchmarks/fused_kernels.py without a GPU: argument parsing, the rows it builds from (fake) case
results, the markdown table, the files it writes, and its exit status 2 when no GPU is usable."""

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.benchmark_script import load

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "fused_kernels.py")




@pytest.fixture(scope="module")
def bk():
    return load("fused_kernels")


def _fake(i):
    """A case result as the case functions return it, with distinct numbers per case."""
    return dict(shape=f"shape{i}", peer=f"peer{i}", bytes=4.3e9 * (i + 1), ms=2.0 + i, peer_ms=4.0 + 2 * i,
                rel_err=1.5e-7 * (i + 1), ours_ref_err=2.5e-8, peer_ref_err=3.5e-8,
                first_call_s=10.0 + i, peer_first_call_s=0.5)


def test_parse_args(bk):
    a = bk.parse_args([])
    assert a.out == "bench_out" and a.mbytes == 512 and a.cases == list(bk.CASES) and not a.profile_window
    a = bk.parse_args(["--out", "/tmp/x", "--mbytes", "64", "--cases", "fir", "gemm", "--profile-window"])
    assert (a.out, a.mbytes, a.cases, a.profile_window) == ("/tmp/x", 64, ["fir", "gemm"], True)
    assert (a.conv_method, a.fir_method) == ("auto", "auto")
    a = bk.parse_args(["--conv-method", "fft", "--fir-method", "direct", "--direct-pipeline"])
    assert (a.conv_method, a.fir_method, a.direct_pipeline) == ("fft", "direct", True)
    assert bk.parse_args(["--cufftdx-fft"]).cufftdx_fft and not bk.parse_args([]).cufftdx_fft
    assert bk.parse_args(["--own-fft-ept", "8"]).own_fft_ept == 8
    assert bk.parse_args(["--both-ffts", "--own-fft-ept", "32"]).both_ffts
    for bad in (["--cases", "nope"], ["--mbytes", "0"], ["--fir-method", "dft"], ["--cufftdx-fft", "--own-fft-ept", "8"],
                ["--fft-configs", "--own-fft-ept", "8"], ["--own-fft-ept", "64"],
                ["--cufftdx-fft", "--both-ffts"], ["--both-ffts", "--fft-configs"]):
        with pytest.raises(SystemExit):
            bk.parse_args(bad)


def test_own_fft_defaults_stay_the_librarys_without_flags(bk, monkeypatch):
    """A run without --own-fft-ept / --own-fft-buffers times the library's default FFT layout
    (it once set kernels._regfft.BUFFERS to None, two buffers where they fit, not the default one)."""
    from kernels import _fused, _regfft

    monkeypatch.setattr(_fused, "OWN_FFT", type(_fused.OWN_FFT)(_fused.OWN_FFT))
    monkeypatch.setattr(_regfft, "EPT", _regfft.EPT)
    monkeypatch.setattr(_regfft, "BUFFERS", _regfft.BUFFERS)
    ept, buffers = _regfft.EPT, _regfft.BUFFERS
    bk.use_own_fft(None, None)
    assert (_regfft.EPT, _regfft.BUFFERS) == (ept, buffers) and _regfft.BUFFERS == 1
    assert set(_fused.OWN_FFT_FUNCTIONS) <= set(_fused.OWN_FFT)
    assert bk.fft_layout().endswith("values per thread the library's per function and size (kernels._fused.OWN_FFT_EPT, else kernels._regfft.default_ept), shared-memory buffers per row 1")
    bk.use_own_fft(8, 2)
    assert (_regfft.EPT, _regfft.BUFFERS) == (8, 2)
    assert bk.fft_layout().endswith("values per thread 8, shared-memory buffers per row 2")
    assert "FFTs timed: ours" in bk.format_table([], dict(fft_layout=bk.fft_layout()))
    bk.use_cufftdx_fft()
    assert bk.fft_layout().startswith("cuFFTDx's")


def test_every_case_has_a_runner(bk):
    assert set(bk.RUNNERS) == set(bk.CASES)
    assert set(bk.CASES) == {"main_job", "conv_real", "conv_complex", "fir", "matched", "stft", "gemm", "beamform"}
    assert all(callable(f) for f in bk.RUNNERS.values())


def test_finish_row_floor_and_verdict(bk):
    r = bk.finish_row("x", _fake(0))  # 4.3e9 bytes at 4.3e12 B/s: 1 ms floor
    assert r["floor_ms"] == pytest.approx(1.0)
    assert r["pct_floor"] == pytest.approx(50.0) and r["peer_pct_floor"] == pytest.approx(25.0)
    assert r["speedup"] == pytest.approx(2.0) and r["ok"] is True
    assert bk.finish_row("x", dict(_fake(0), rel_err=1e-3))["ok"] is False
    # a case's own tolerance / verdict wins
    assert bk.finish_row("x", dict(_fake(0), rel_err=5e-5, tol=1e-4))["ok"] is True
    assert bk.finish_row("x", dict(_fake(0), ok=False))["ok"] is False


def test_bound_is_the_larger_of_memory_and_arithmetic(bk):
    """1 ms memory floor; 4e12 FLOP at 1e15 FLOP/s = 4 ms arithmetic: the bound is 4 ms (fake
    numbers: a 2 ms run then reads 200 %, which in a real run would say the FLOP count is too high)."""
    r = bk.finish_row("x", dict(_fake(0), flops=4e12), flop_rate=1e15)
    assert r["arith_ms"] == pytest.approx(4.0) and r["bound_ms"] == pytest.approx(4.0)
    assert r["bound_by"] == "arithmetic" and r["pct_bound"] == pytest.approx(200.0)
    r = bk.finish_row("x", dict(_fake(0), flops=1e9), flop_rate=1e15)
    assert r["bound_by"] == "memory" and r["bound_ms"] == pytest.approx(1.0) and r["pct_bound"] == pytest.approx(50.0)
    assert bk._cfft_flops(1024) == 5 * 1024 * 10 and bk._rfft_flops(512) == 2.5 * 512 * 9


def test_card_bound_puts_the_floor_at_the_cards_copy_rate(bk):
    """4.3e9 bytes at a measured 2.15e12 B/s: a 2 ms card floor, so a 2 ms run is at 100 % of the
    card bound and 50 % of the H200-rate one; arithmetic still wins where it is larger; without a
    measured rate there is no card bound."""
    r = bk.finish_row("x", _fake(0), copy_bps=2.15e12)
    assert r["card_bound_ms"] == pytest.approx(2.0) and r["pct_card_bound"] == pytest.approx(100.0)
    assert r["pct_bound"] == pytest.approx(50.0)
    r = bk.finish_row("x", dict(_fake(0), flops=4e12), flop_rate=1e15, copy_bps=2.15e12)
    assert r["card_bound_ms"] == pytest.approx(4.0) and r["pct_card_bound"] == pytest.approx(200.0)
    r = bk.finish_row("x", _fake(0))
    assert r["card_bound_ms"] is None and r["pct_card_bound"] is None
    rows = bk.run_cases(["gemm"], {"gemm": lambda K, mb: _fake(0)}, K=None, mbytes=1, log=lambda s: None,
                        copy_bps=4.3e12)
    cells = [c.strip() for c in [ln for ln in bk.format_table(rows, dict(copy_bps=4.3e12)).splitlines()
                                  if ln.startswith("| gemm")][0].split("|")[1:-1]]
    assert cells[9] == "50%" == cells[8]


def test_fft_work_bound(bk):
    """10^6 FFT pairs at a measured 5e8 pairs/s take 2 ms: against max(1 ms floor, 2 ms) a 2 ms
    run is at 100 %; the rate is asked for the case's own (n, real, pair) and its kernels
    function (whose FFT_CONFIGS entry sets the configuration; None for a case without one)."""
    asked = []

    def rate(n, real, pair, kernel, config):
        asked.append((n, real, pair, kernel, config))
        return 5e8

    r = bk.finish_row("x", dict(_fake(0), fft=(512, True, 10**6, True)), fft_rate=rate)
    assert asked == [(512, True, True, None, None)]
    bk.finish_row("matched", dict(_fake(0), fft=(1024, False, 10**6, True)), fft_rate=rate)
    assert asked[-1] == (1024, False, True, "matched_filter", None)
    bk.finish_row("beamform", dict(_fake(0), fft=(256, False, 10**6, False), fft_config=[8, 16]), fft_rate=rate)
    # its own descriptor's configuration; named beamform_spectra (our FFT's, with OWN_FFT)
    assert asked[-1] == (256, False, False, "beamform_spectra", [8, 16])
    assert r["fft_ms"] == pytest.approx(2.0) and r["pct_fft_bound"] == pytest.approx(100.0)
    r = bk.finish_row("x", dict(_fake(0), fft=(512, True, 10**5, False)), fft_rate=rate)
    assert r["fft_ms"] == pytest.approx(0.2) and r["pct_fft_bound"] == pytest.approx(50.0)  # the floor wins
    r = bk.finish_row("x", _fake(0), fft_rate=rate)  # a case without FFTs (gemm)
    assert r["fft_ms"] is None and r["pct_fft_bound"] is None


def test_run_cases_records_errors_and_continues(bk):
    def boom(K, mbytes):
        raise RuntimeError("no | luck\nsecond line")

    runners = {name: (lambda K, mb, i=i: _fake(i)) for i, name in enumerate(bk.CASES)}
    runners["fir"] = boom
    rows = bk.run_cases(bk.CASES, runners, K=None, mbytes=1, log=lambda s: None)
    assert [r["case"] for r in rows] == list(bk.CASES)
    fir = rows[bk.CASES.index("fir")]
    assert fir == dict(case="fir", error="RuntimeError: no | luck\nsecond line")
    assert all("ms" in r for r in rows if r["case"] != "fir")


def test_table_one_row_per_case_with_the_numbers(bk):
    runners = {name: (lambda K, mb, i=i: _fake(i)) for i, name in enumerate(bk.CASES)}
    runners["matched"] = lambda K, mb: (_ for _ in ()).throw(ValueError("bad template"))
    rows = bk.run_cases(bk.CASES, runners, K=None, mbytes=1, log=lambda s: None)
    md = bk.format_table(rows, dict(device="Fake GPU", mbytes=1))
    lines = md.splitlines()
    assert "Fake GPU" in lines[0]
    table = [ln for ln in lines if ln.startswith("|")]
    header, body = table[:2], table[2:]
    ncols = header[0].count("|")
    assert all(ln.count("|") == ncols for ln in table), md
    assert [ln.split("|")[1].strip() for ln in body] == list(bk.CASES)
    for i, (name, ln) in enumerate(zip(bk.CASES, body)):
        cells = [c.strip() for c in ln.split("|")[1:-1]]
        if name == "matched":
            assert cells[2] == "failed: ValueError: bad template" and cells[-1] == "FAILED"
            continue
        assert cells[1] == f"shape{i}" and cells[3] == f"peer{i}"
        assert cells[2] == f"{2.0 + i:.3f}" and cells[4] == f"{4.0 + 2 * i:.3f}"
        assert cells[5] == f"{(4.0 + 2 * i) / (2.0 + i):.2f}x"
        assert cells[6] == f"{100 * (i + 1) / (2.0 + i):.0f}%"  # floor (i+1) ms / ours
        assert cells[7] == f"{float(i + 1):.3f} (memory)" and cells[8] == cells[6]  # no FLOP rate: bound = floor
        assert cells[9] == "-"  # no copy rate measured: no card bound
        assert cells[10] == "-" and cells[11] == "-"  # no FFT rate measured: no FFT-work bound
        assert cells[12] == f"{100 * (i + 1) / (4.0 + 2 * i):.0f}%"
        assert cells[13] == f"{1.5e-7 * (i + 1):.1e}" and cells[14] == "2.5e-08" and cells[15] == "3.5e-08"
        assert cells[16] == f"{10.0 + i:.2f}" and cells[18] == "ok"
        assert cells[17] == "(compiled earlier)"  # the fake runners compile no kernel


def test_error_with_pipes_keeps_the_table_shape(bk):
    rows = [dict(case="fir", error="RuntimeError: a | b\nc")]
    table = [ln for ln in bk.format_table(rows, {}).splitlines() if ln.startswith("|")]
    assert table[2].count("|") == table[0].count("|")
    assert "a / b c" in table[2]


def test_write_results(bk, tmp_path):
    rows = [bk.finish_row("gemm", _fake(0)), dict(case="fir", error="E: x")]
    text = bk.write_results(str(tmp_path / "o"), rows, dict(device="D", mbytes=8))
    assert (tmp_path / "o" / "kernels.md").read_text() == text
    data = json.loads((tmp_path / "o" / "kernels.json").read_text())
    assert data["meta"]["device"] == "D" and [r["case"] for r in data["rows"]] == ["gemm", "fir"]
    assert data["rows"][0]["first_call_s"] == 10.0 and data["rows"][1]["error"] == "E: x"
    # call_overhead.py writes its own files and table through the same function
    other = bk.write_results(str(tmp_path / "o"), rows, dict(device="D"), "call_overhead",
                             lambda r, m: f"{len(r)} rows on {m['device']}\n")
    assert other == "2 rows on D\n" == (tmp_path / "o" / "call_overhead.md").read_text()
    assert json.loads((tmp_path / "o" / "call_overhead.json").read_text())["meta"] == {"device": "D"}


def test_import_kernels_gets_the_package_not_the_script(bk, monkeypatch):
    monkeypatch.setattr(sys, "path", [os.path.dirname(SCRIPT)] + sys.path)
    monkeypatch.delitem(sys.modules, "kernels", raising=False)
    mod = bk.import_kernels()
    assert hasattr(mod, "fft_convolve")
    assert os.path.samefile(mod.__file__, os.path.join(ROOT, "kernels", "__init__.py"))


def test_no_benchmark_shadows_a_package():
    """``python benchmarks/X.py`` puts benchmarks/ first on sys.path: a benchmarks/kernels.py
    made ``import kernels`` in every other benchmark load the script instead of the package."""
    packages = {"kernels", "nvmath_device", "nvmath_host"}
    names = {os.path.splitext(f)[0] for f in os.listdir(os.path.join(ROOT, "benchmarks"))}
    assert not names & packages


OVERHEAD = os.path.join(ROOT, "benchmarks", "call_overhead.py")


@pytest.mark.parametrize("script", [SCRIPT, OVERHEAD], ids=["fused_kernels", "call_overhead"])
@pytest.mark.parametrize("env", [{"NUMBA_ENABLE_CUDASIM": "1"},
                                 {"NUMBA_ENABLE_CUDASIM": "0", "CUDA_VISIBLE_DEVICES": ""}])
def test_exits_2_without_a_gpu(env, script, tmp_path):
    out = tmp_path / "o"
    p = subprocess.run([sys.executable, script, "--out", str(out)], capture_output=True, text=True,
                       env={**os.environ, **env}, timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "needs a CUDA GPU" in p.stderr and "Traceback" not in p.stderr
    assert not out.exists()


@pytest.fixture(scope="module")
def co():
    return load("call_overhead")


def test_call_overhead_table_and_check(co):
    """The table has one row per case (a failed case says why), and the fast-vs-numba check
    compares every output array bit for bit (NaN equal to NaN), so a changed value fails it."""
    a = co.parse_args(["--cases", "gemm", "stft", "--calls", "10", "--profile"])
    assert a.cases == ["gemm", "stft"] and a.calls == 10 and a.rounds == 5 and a.profile
    rows = [dict(case="gemm", numba_enqueue_us=300.0, numba_sync_us=320.5, fast_enqueue_us=60.0,
                 fast_sync_us=75.25, plan_enqueue_us=9.5, plan_sync_us=18.0, plan_launches_enqueue_us=12.5,
                 plan_launches_sync_us=21.0, peer_enqueue_us=40.0,
                 peer_sync_us=55.0, plan_gpu_us=4.94, peer_gpu_us=None, fast_equals_numba=True,
                 plan_equals_fast=False),
            dict(case="stft", error="AssertionError: differs")]
    text = co.format_table(rows, dict(device="D", rounds=5, calls=10, command="c"))
    assert ("| gemm | 300.0 / 320.5 | 60.0 / 75.2 | 9.5 / 18.0 | 12.5 / 21.0 | - | 40.0 / 55.0 | 4.9 / - | True, False |"
            in text)  # no PyTorch plan timed: "-"
    rows[0].update(plan_torch_enqueue_us=11.0, plan_torch_sync_us=19.5)
    assert "| 12.5 / 21.0 | 11.0 / 19.5 | 40.0 / 55.0 |" in co.format_table(rows, dict(device="D", rounds=5, calls=10,
                                                                                      command="c"))
    rows[0].update(plan_torch_enqueue_us=None, plan_torch_error="AssertionError: differs")
    assert "| 12.5 / 21.0 | failed: AssertionError: differs | 40.0 / 55.0 |" in co.format_table(
        rows, dict(device="D", rounds=5, calls=10, command="c"))
    assert "| stft | failed: AssertionError: differs" in text
    import numpy as np

    x = np.array([1.0, np.nan, 3.0], np.float32)
    assert co._bitwise_equal((x, np.int32(2)), (x.copy(), np.int32(2)), np)
    y = x.copy()
    y[2] = np.nextafter(np.float32(3.0), np.float32(4.0))
    assert not co._bitwise_equal(x, y, np)


def test_call_overhead_profile_names_the_functions_called(co, tmp_path):
    synced = []

    def work():
        return sorted(range(50))

    co.profile(work, 7, str(tmp_path / "p.txt"), lambda: synced.append(1), "gemm: function calls")
    text = (tmp_path / "p.txt").read_text()
    assert synced == [1] and "work" in text and "cumulative" in text and "internal time" in text
    assert "7    " in text or " 7 " in text  # work's call count
    assert text.startswith("# gemm: function calls\n")
    co.profile(work, 3, str(tmp_path / "p.txt"), lambda: None, "fir: function calls")  # appended
    text2 = (tmp_path / "p.txt").read_text()
    assert text2.startswith(text) and "# fir: function calls\n" in text2[len(text):]


def test_config_candidates_skip_the_suggestion_and_add_twice_its_rows(bk):
    valid = [(4, 1), (8, 1), (8, 3), (16, 1), (16, 2)]
    assert bk.config_candidates(valid, (8, 3)) == [(4, 1), (8, 1), (16, 1), (16, 2), (8, 6)]
    assert bk.config_candidates(valid, (8, 1)) == [(4, 1), (8, 3), (16, 1), (16, 2), (8, 2)]
    assert bk.config_candidates([(32, 1)], (32, 1)) == [(32, 2)]


class _FakeFFT:
    def __init__(self, ept, fpb):
        self.elements_per_thread_value, self.ffts_per_block_value = ept, fpb
        self.block_dim = (4096 // ept, fpb, 1)

    def valid(self, *knobs):
        assert knobs == ("elements_per_thread", "ffts_per_block")
        return [(16, 1), (32, 1), (64, 1)]


def test_sweep_runs_each_configuration_with_the_table_set(bk, monkeypatch):
    """The case runs first with the suggestion, then with each candidate set in FFT_CONFIGS under
    its FFT's key; a failing configuration is a row and the sweep goes on; the fastest correct row
    is marked; cases without FFTs are skipped; the table is left empty."""
    from kernels import _fused

    key = ("fft_convolve", 4096, "float32", True, True)
    other = ("matched_filter", 1024, "float32", False, False)
    monkeypatch.setattr(_fused, "FFT_CONFIGS", {key: (4, 1), other: (16, 1)})  # entries already there
    seen = []

    def fft_pair(n, precision, real, ept=None, fpb=None, folded=False, kernel=None):
        assert (n, real, folded) == (4096, True, True)
        if (ept, fpb) == ("suggested", "suggested"):
            return _FakeFFT(32, 1), None
        assert kernel == "fft_convolve"
        return _FakeFFT(*_fused.FFT_CONFIGS.get(key, (32, 1))), None

    def conv_real(K, mbytes):
        cfg = dict(_fused.FFT_CONFIGS)
        seen.append(cfg)
        ept = cfg.get(key, (32, 1))[0]
        if ept == 64:
            raise RuntimeError("too many registers | spilled")
        return dict(_fake(0), ms={32: 3.0, 16: 2.5, 4: 9.0}.get(ept, 4.0), fft=(4096, True, 8, True))

    monkeypatch.setattr(_fused, "fft_pair", fft_pair)
    monkeypatch.setitem(bk.RUNNERS, "conv_real", conv_real)
    monkeypatch.setitem(bk.RUNNERS, "gemm", lambda K, mb: pytest.fail("gemm has no FFT to sweep"))
    written = []
    rows = bk.sweep_fft_configs(["conv_real", "gemm"], None, 1, None, None, log=lambda s: None,
                                case_done=lambda rows: written.append(len(rows)))
    assert written == [4]  # after the one FFT case: its rows, before anything else runs
    assert seen == [{other: (16, 1)}, {other: (16, 1), key: (16, 1)}, {other: (16, 1), key: (64, 1)},
                    {other: (16, 1), key: (32, 2)}]
    assert [r.get("config") for r in rows] == ["ept 32 fpb 1 (suggested)", "ept 16 fpb 1", "(64, 1)", "ept 32 fpb 2"]
    assert rows[2]["error"] == "RuntimeError: too many registers | spilled"
    assert [r.get("best", False) for r in rows] == [False, True, False, False]
    assert rows[3]["block"] == [128, 2, 1]
    assert _fused.FFT_CONFIGS == {key: (4, 1), other: (16, 1)}  # as it was
    md = bk.format_config_table(rows, dict(device="Fake GPU", mbytes=1, command="x"))
    table = [ln for ln in md.splitlines() if ln.startswith("|")]
    assert all(ln.count("|") == table[0].count("|") for ln in table), md
    assert "| conv_real | ept 16 fpb 1 | 256x1x1 |" in md and "**fastest**" in table[3]
    assert "too many registers / spilled" in table[4]


def test_sweep_refuses_a_case_whose_fft_is_not_the_one_it_declares(bk, monkeypatch):
    from kernels import _fused

    monkeypatch.setattr(_fused, "FFT_CONFIGS", {})
    monkeypatch.setattr(_fused, "fft_pair", lambda n, p, real, ept=None, fpb=None, folded=False, kernel=None: (_FakeFFT(32, 1), None))
    monkeypatch.setitem(bk.RUNNERS, "stft", lambda K, mb: dict(_fake(0), fft=(1024, True, 8, False)))
    (row,) = bk.sweep_fft_configs(["stft"], None, 1, None, None, log=lambda s: None)
    assert row["error"].startswith("RuntimeError: stft ran FFTs of (1024, real=True); FFT_CASES says (512, True)")


def test_sweep_reports_the_compiled_kernels_registers(bk, monkeypatch):
    """The resources column reads the dispatcher's overload for the launch's argument types
    (numba's get_regs_per_thread wants a signature, not the tuple the launcher keys hold)."""
    from types import SimpleNamespace

    from kernels import _launch

    class Dispatcher:  # hashable, as the launcher keys need
        def __init__(self, overloads):
            self.overloads = overloads

    argtypes = ("float32[:, ::1]", "int64")
    kernel = Dispatcher({argtypes: SimpleNamespace(regs_per_thread=72, local_mem_per_thread=0)})
    monkeypatch.setattr(_launch, "_LAUNCHERS", {("old", (), 1): None})
    before = set(_launch._LAUNCHERS)
    assert bk._new_kernels_resources(before) == "(compiled earlier)"
    _launch._LAUNCHERS[(kernel, argtypes, 1)] = None
    assert bk._new_kernels_resources(before) == "72 regs, 0 B local"
    _launch._LAUNCHERS[(Dispatcher({}), argtypes, 1)] = None
    assert bk._new_kernels_resources(before) == "72 regs, 0 B local; ? (KeyError)"


def test_beamform_fft_config_is_its_kernels_own(bk, monkeypatch):
    """The FFT-work meter's configuration for beamform is the kernel's FFT descriptor's (built
    for sm_90 here: no GPU)."""
    from kernels import gemm

    real_fft = gemm._beamform_fft
    monkeypatch.setattr(gemm, "_beamform_fft", lambda beams, nsamp, prec, sm: real_fft(beams, nsamp, prec, 90))
    assert bk._beamform_fft_config(16, 256) == [8, 16]
    assert bk._beamform_fft_config(4, 64) == [4, 4]


def test_host_overhead_runs_on_its_fakes():
    """benchmarks/host_overhead.py (nvmath_host's Python per call, GPU calls faked) runs to its
    end: its fake torch tensor must answer everything ``wrap`` reads of a real one."""
    p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "host_overhead.py"), "--n", "20",
                        "--repeat", "1"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stdout.splitlines() if "us per call" in ln]
    assert len(lines) == 3 and lines[2].startswith("matmul() cache hit"), p.stdout


def test_host_matmul_profile_appends_a_titled_section(tmp_path):
    hm = load("host_matmul")
    synced = []
    path = str(tmp_path / "p.txt")
    hm.profile(lambda: sorted(range(30)), lambda: synced.append(1), 4, path, "nvmath_host matmul(), 128^3")
    text = open(path).read()
    assert synced == [1] * 4 and text.startswith("# nvmath_host matmul(), 128^3\n") and "cumulative" in text


def test_execute_variants_table_and_minimal_executor():
    """execute_variants.py: rows against torch's, and its floor executor's launch arguments (the
    plan's, with the new result as D, and as C where the plan reads C from D)."""
    ev = load("execute_variants")
    rows = [dict(name="torch _addmm_activation", best_us=20.0, rounds_us=[20.0, 20.5], gpu_us=6.1, workspace=None),
            dict(name="Matmul.execute (library)", best_us=19.75, rounds_us=[19.75, 21.0], gpu_us=6.4, workspace=1024)]
    text = ev.table(rows, "GPU", 128)
    assert "| Matmul.execute (library) | 19.75 | -0.25 | 19.75 / 21.00 | 6.40 | 1024 |" in text
    assert "| torch _addmm_activation | 20.00 | +0.00 |" in text
    calls = []
    args = SimpleNamespace(values=lambda: tuple(range(16)), c_from_d=True)
    ex = SimpleNamespace(args=args, fn=lambda *v: calls.append(v) or 0, current_stream=None, rt=None)
    d = SimpleNamespace(data_ptr=lambda: 0xD0)
    mini = ev._MinimalExecutor(ex, lambda: d)
    assert mini.run(0x5, True) == (d, {})
    (call,) = calls
    assert call[10] == call[8] == 0xD0 and call[15] == 0x5 and call[:8] == tuple(range(8))
    ex.fn = lambda *v: 7
    with pytest.raises(RuntimeError, match="status 7"):
        ev._MinimalExecutor(ex, lambda: d).run(0, True)
