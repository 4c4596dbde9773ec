#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU suite (or any pytest selection) under NVIDIA compute-sanitizer: memcheck, racecheck and
# synccheck, one tool after the other, each log kept, and each tool's error count printed.
#
#   tests/gpu/sanitize.sh [-t "memcheck racecheck synccheck"] [-o LOGDIR] [-j WORKERS] [-T SECONDS] [PYTEST ARGS...]
#
# Defaults: all three tools, logs in ./sanitizer-logs, 8 pytest-xdist workers, tests/gpu, no time
# limit (-T: each tool's run is stopped after SECONDS; the records printed until then are counted and
# the line says the tool did not finish). The counts come from tests/gpu/sanitizer_counts.py: the
# tools' own summaries (racecheck's RACECHECK SUMMARY included), one line per kind of report, with
# the first test or line it came from. Every process (xdist workers, subprocesses) logs into one file.
# Pytest options that start with '-' go after '--' (getopts stops there):
#   tests/gpu/sanitize.sh -t memcheck -j 8 -- --ignore=tests/gpu/test_soak_host.py tests/gpu
# On the H200 machine (16 cores, 141 GB) keep it to one tool at a time and -j 8 or fewer: with -j 10
# (memcheck) and -j 12 (racecheck) pytest got no further than 'bringing up nodes...' in 390 s / 115 s,
# and memcheck -j 8 beside synccheck -j 7 ran the GPU out of memory (cudaMalloc failures, which memcheck
# counts as errors). Warm NUMBA_MATHDX_CACHE_DIR first (a plain GPU-suite run, ~310 s at -n 15) in
# the same machine session: then memcheck -j 8 over the suite less the soak ran ~99 % of its 1028
# tests in 560 s (2026-12-02), and racecheck -j 8 over the nine modules with our shared-memory kernels
# (473 tests) took 437 s; after a warm-up run, racecheck -j 8 over the sim cross-checks, the pipeline
# tests and the beamform tests (81 tests) passed in 301 s with its summary written (2026-12-03).
# Each test's outcome is written to LOGDIR/TOOL.tests.txt as it ends (tests/gpu/conftest.py, NMDX_TEST_LOG),
# so a run cut by -T still names what passed and what failed; failures are printed after the counts.
# Every process the tool starts (pytest-xdist workers, notebook subprocesses) is checked. Exit
# status 1 when any tool reported an error. CuPy's memory pool hands out parts of larger
# allocations, so memcheck cannot see an overrun that stays inside a pool block; the suite's own
# NaN-poisoned outputs and bounds checks cover that.
set -uo pipefail
tools="memcheck racecheck synccheck"; logdir=sanitizer-logs; workers=8; limit=0
while getopts "t:o:j:T:" opt; do
  case $opt in
    t) tools=$OPTARG ;; o) logdir=$OPTARG ;; j) workers=$OPTARG ;; T) limit=$OPTARG ;;
    *) echo "usage: $0 [-t TOOLS] [-o LOGDIR] [-j WORKERS] [-T SECONDS] [PYTEST ARGS...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[[ $# -eq 0 ]] && set -- tests/gpu
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[[ -x $sanitizer ]] || { echo "compute-sanitizer not found (looked on PATH and in /usr/local/cuda/bin)" >&2; exit 2; }
mkdir -p "$logdir"
status=0
for tool in $tools; do
  rm -f "$logdir/$tool".*.log "$logdir/$tool.tests.txt" "$logdir/$tool.tests.txt.failures"
  start=$(date +%s)
  # The limit stops pytest inside the tool (SIGINT: pytest ends its workers and exits), so the
  # tool sees its targets exit and writes its records and summary; stopping the tool itself lost
  # every target's records (2026-12-02: a cut racecheck run logged only its banner).
  NMDX_TEST_LOG="$logdir/$tool.tests.txt" "$sanitizer" --tool "$tool" --target-processes all --print-limit 50 \
      --log-file "$logdir/$tool.%p.log" \
      timeout --signal=INT --kill-after=60 "$limit" \
      python3 -m pytest -q -m gpu -p no:cacheprovider -n "$workers" --dist loadgroup "$@" \
      > "$logdir/$tool.pytest.txt" 2>&1
  rc=$?
  summary=$(tail -n 1 "$logdir/$tool.pytest.txt")
  python3 "$(dirname "$0")/sanitizer_counts.py" "$tool" "$logdir/$tool".*.log; counted=$?
  touch "$logdir/$tool.tests.txt"
  echo "$tool: tests ended: $(cut -d' ' -f1 "$logdir/$tool.tests.txt" | sort | uniq -c | xargs) (each with its outcome in $logdir/$tool.tests.txt)"
  grep -E '^(FAILED|ERROR) ' "$logdir/$tool.tests.txt" | head -20
  took=$(( $(date +%s) - start ))  # the tool may not pass timeout's 124 on: judge the cut by the clock
  echo "$tool: pytest: $summary (exit $rc$([[ $limit -gt 0 && $took -ge $limit ]] && echo ', stopped at the -T limit'), $took s)"
  [[ $counted -ne 0 || $rc -ne 0 ]] && status=1
done
exit $status
