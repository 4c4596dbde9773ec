# SPDX-License-Identifier: Apache-2.0
"""benchmarks/ncu_table.py without a GPU: ncu's raw CSV (its own '==PROF==' lines mixed in) becomes
one row per kernel with the chosen metrics, the duration in microseconds whatever ncu's unit, the
shared-memory conflicts per instruction and the two largest stall reasons; a missing metric is '-'."""

from __future__ import annotations

import pytest

from tests.benchmark_script import load

HEADER = ['"ID"', '"Kernel Name"', '"gpu__time_duration.sum"', '"dram__throughput.avg.pct_of_peak_sustained_elapsed"',
          '"launch__registers_per_thread"',
          '"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"', '"smsp__inst_executed_op_shared_ld.sum"',
          '"smsp__inst_executed_op_shared_st.sum"',
          '"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"',
          '"smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio"',
          '"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"']
UNITS = ['""', '""', '"msecond"', '"%"', '"register/thread"', '""', '"inst"', '"inst"', '""', '""', '""']


def _csv(*rows):
    lines = ["==PROF== Connected to process 123", ",".join(HEADER), ",".join(UNITS)]
    lines += [",".join(f'"{c}"' for c in r) for r in rows]
    lines.append("==PROF== Disconnected from process 123")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def nt():
    return load("ncu_table")


def test_rows_and_table(nt):
    text = _csv(["0", "kernel(Array<float, 2>, Array<float, 1>)", "0.4331", "28.5", "99", "1,200", "4000", "2000",
                 "2.5", "7.25", "1.0"],
                ["1", "_copy(Array<float, 1>)", "0.010", "80.0", "16", "0", "0", "0", "0", "0", "3.0"])
    found = nt.rows(text)
    assert [r["kernel"] for r in found] == ["kernel", "_copy"]
    assert found[0]["gpu__time_duration.sum"] == pytest.approx(433.1)  # ms -> us
    md = nt.markdown(found).splitlines()
    assert md[0].startswith("| kernel | time us | DRAM % |") and md[1].startswith("|---|")
    cells = [c.strip() for c in md[2].split("|")[1:-1]]
    assert cells[:3] == ["kernel", "433", "28.5"]
    assert cells[-4:] == ["6e+03", "0.20", "-", "mio_throttle 7.2, barrier 2.5"]  # 1200 / (4000 + 2000)
    assert "-" in cells  # SM %, L1 %, ... absent from this log
    cells = [c.strip() for c in md[3].split("|")[1:-1]]
    assert cells[-4:] == ["0", "-", "-", "wait 3.0, mio_throttle 0.0"]  # no shared instructions: no ratio


def test_newer_metric_names_wavefronts_and_labels(nt):
    """ncu 2025's names (gpu__dram_throughput, smsp__sass_inst_executed_op_shared_*), numba's
    kernel names (module::function[mangled]) with the block size, and labels given in order."""
    header = ['"ID"', '"Kernel Name"', '"Block Size"', '"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"',
              '"smsp__sass_inst_executed_op_shared_ld.sum"', '"smsp__sass_inst_executed_op_shared_st.sum"',
              '"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"',
              '"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"',
              '"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"']
    lines = [",".join(header), ",".join(['""'] * len(header)),
             '"0","_fused::kernel[v1,cw51abc](Array<float, 2>)","(128, 1, 1)","34.90","2,000","1,000","3,000","2,000","7,000"',
             '"1","_fused::kernel[v2,cw51abc](Array<float, 2>)","(64, 3, 1)","48.0","0","0","0","0","0"']
    found = nt.rows("\n".join(lines))
    assert [r["kernel"] for r in found] == ["_fused::kernel (128,1,1)", "_fused::kernel (64,3,1)"]
    md = nt.markdown(found, ["conv_real"]).splitlines()
    cells = [c.strip() for c in md[2].split("|")[1:-1]]
    assert cells[0] == "conv_real: _fused::kernel (128,1,1)" and cells[2] == "34.9"
    assert cells[-4:-1] == ["3e+03", "1.00", "3.00"]  # 3000 conflicts, 9000 wavefronts / 3000 instructions
    assert [c.strip() for c in md[3].split("|")[1:-1]][0] == "_fused::kernel (64,3,1)"  # no label left


def test_not_an_ncu_log(nt):
    with pytest.raises(ValueError, match="no 'Kernel Name' column"):
        nt.rows('"a","b"\n"1","2"\n"3","4"')
    assert nt.rows("==PROF== nothing profiled") == []


def test_command_profiles_only_the_window(nt, capsys):
    assert nt.main(["--command", "--cases", "matched"]) == 0
    cmd = capsys.readouterr().out
    assert cmd.startswith("ncu --profile-from-start off --csv --page raw")
    assert "--section WarpStateStats" in cmd and cmd.strip().endswith("fused_kernels.py --profile-window --cases matched")
