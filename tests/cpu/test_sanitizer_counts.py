# SPDX-License-Identifier: Apache-2.0
"""tests/gpu/sanitizer_counts.py, the counter behind sanitize.sh, on logs in compute-sanitizer's
formats (as printed by compute-sanitizer 2025 on the H200: memcheck, racecheck, a cut run)."""
import importlib.util
import subprocess
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "gpu" / "sanitizer_counts.py"
_spec = importlib.util.spec_from_file_location("sanitizer_counts", _PATH)
sc = importlib.util.module_from_spec(_spec)
sys.modules["sanitizer_counts"] = sc      # dataclasses look their module up there
_spec.loader.exec_module(sc)

P = "========= "

MEMCHECK_FINISHED = [
    P + "COMPUTE-SANITIZER",
    P + "Invalid __global__ write of size 4 bytes",
    P + "    at mod::oob_write[abi:v1,xyz](Array<float, (int)1, C, mutable, aligned>, long long)+0x180",
    P + "    by thread (0,0,0) in block (8,0,0)",
    P + "    Access to 0x7f60a6808800 is out of bounds",
    P + "    Saved host backtrace up to driver entry point at kernel launch time",
    P + "        Host Frame: launch in dispatcher.py:700",
    P + "        Host Frame: test_oob in test_x.py:26",
    P + "        Host Frame: pytest_pyfunc_call in python.py:167",
    P,
    P + "Invalid __shared__ read of size 8 bytes",
    P + "    at mod::k+0x10",
    P,
    P + "Target application returned an error",
    P + "ERROR SUMMARY: 3 errors",
    P + "ERROR SUMMARY: 1 error was not printed. Use --print-limit option to adjust the number of printed errors",
]

API_ERRORS_CUT = [
    P + "COMPUTE-SANITIZER",
] + [
    line
    for _ in range(3)
    for line in (
        P + 'Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to "invalid argument" on CUDA API call to cuGetProcAddress_v2.',
        P + "    Saved host backtrace up to driver entry point at error",
        P + "        Host Frame:  [0xd4a2] in cydriver.cpython-312-x86_64-linux-gnu.so",
        P + "        Host Frame: ensure_initialized in driver.py:290",
        P + "        Host Frame: <module> in 03_device_gemm.py:68",
        P,
    )
]

RACE = [
    P + "COMPUTE-SANITIZER",
    P + "Error: Race reported between Write access at mod::smem_race[abi:v2,q](Array<float>)+0x1d0",
    P + "    and Read access at mod::smem_race[abi:v2,q](Array<float>)+0x1e0 [256 hazards]",
    P,
    P + "Warning: Race reported between Write access at mod::other(int)+0x10",
    P + "RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)",
]

CLEAN_RACE = [P + "COMPUTE-SANITIZER", P + "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"]


def test_summary_is_the_count_and_the_not_printed_remark_is_not_added():
    c = sc.count(MEMCHECK_FINISHED)
    assert c.errors == 3 and c.summaries == 1
    assert c.kinds[("memory access", "Invalid __global__ write")] == 1
    assert c.kinds[("memory access", "Invalid __shared__ read")] == 1
    # the deepest frame outside the libraries: the test, not numba's dispatcher or pytest
    assert c.where[("memory access", "Invalid __global__ write")] == "test_oob (test_x.py:26)"


def test_racecheck_summary_counts_errors_and_warnings_apart():
    c = sc.count(RACE)
    assert (c.errors, c.warnings, c.summaries) == (1, 1, 1)
    assert c.kinds[("race", "in mod::smem_race")] == 1
    assert sc.count(CLEAN_RACE).errors == 0 and sc.count(CLEAN_RACE).summaries == 1


def test_a_cut_run_counts_its_printed_records_and_says_it_did_not_finish():
    c = sc.count(API_ERRORS_CUT)
    assert c.summaries == 0 and c.errors == 3
    key = ("API error", "CUDA_ERROR_INVALID_VALUE from cuGetProcAddress_v2")
    assert c.kinds[key] == 3 and c.where[key] == "<module> (03_device_gemm.py:68)"
    text = sc.report("memcheck", c)
    assert "did not finish" in text and "3 API error" in text


def test_logs_of_several_processes_add_up():
    c = sc.count(MEMCHECK_FINISHED + CLEAN_RACE + RACE)
    assert c.summaries == 3 and c.errors == 4


def test_command_line_exit_status(tmp_path):
    clean, dirty = tmp_path / "clean.log", tmp_path / "dirty.log"
    clean.write_text("\n".join(CLEAN_RACE) + "\n")
    dirty.write_text("\n".join(RACE) + "\n")
    run = lambda *a: subprocess.run([sys.executable, str(_PATH), *a], capture_output=True, text=True)  # noqa: E731
    ok = run("racecheck", str(clean))
    assert ok.returncode == 0 and "racecheck: 0 errors in 1 summary" in ok.stdout
    bad = run("racecheck", str(clean), str(dirty))
    assert bad.returncode == 1 and "1 errors in 2 summaries" in bad.stdout
    missing = run("memcheck", str(tmp_path / "memcheck.*.log"))
    assert missing.returncode == 1 and "no log" in missing.stdout
    assert run().returncode == 2


FAKE_SANITIZER = r"""#!/usr/bin/env bash
# compute-sanitizer's outer behaviour: run the target command, then (only when it has exited)
# write the banner and the summary into --log-file (%p: this process's id) and pass its status on;
# interrupted itself, it leaves without them (what the H200 run showed: the banner only).
trap 'exit 130' INT
log=
while [[ $1 == --* ]]; do
  case $1 in --log-file) log=$2; shift 2 ;; --tool|--target-processes|--print-limit) shift 2 ;; *) shift ;; esac
done
"$@"; rc=$?
printf '========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n' > "${log//%p/$$}"
exit $rc
"""


def test_a_time_limited_run_stops_pytest_inside_the_tool_and_keeps_its_summary(tmp_path):
    """sanitize.sh -T stops pytest (inside the tool), not the tool: the tool then sees its target
    exit and writes its summary. (Stopping the tool lost every record: a cut racecheck run on the
    H200 logged only its banner.)"""
    import os
    import time

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "compute-sanitizer"
    fake.write_text(FAKE_SANITIZER)
    fake.chmod(0o755)
    py = bin_dir / "python3"  # this interpreter (a wrapper: a symlink would leave its virtual env)
    py.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    py.chmod(0o755)
    (tmp_path / "test_slow.py").write_text(
        "import time\nimport pytest\npytestmark = pytest.mark.gpu\n\n\ndef test_slow():\n    time.sleep(90)\n")
    script = Path(__file__).resolve().parents[1] / "gpu" / "sanitize.sh"
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    t0 = time.monotonic()
    p = subprocess.run(["bash", str(script), "-t", "racecheck", "-j", "1", "-T", "4", "-o", str(tmp_path / "logs"),
                        "--", "-W", "ignore", "test_slow.py"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    out = p.stdout + p.stderr
    assert took < 60, out  # the test sleeps 90 s: pytest was stopped at the limit
    assert "racecheck: 0 errors in 1 summary" in out, out  # the tool's summary was written after the stop
    assert "stopped at the -T limit" in out, out
    assert p.returncode == 1, out  # a cut run is not a clean run
