#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU suite (or any pytest selection) under NVIDIA compute-sanitizer: memcheck, racecheck and
# synccheck, one tool after the other, each log kept, and each tool's error count printed.
#
#   tests/gpu/sanitize.sh [-t "memcheck racecheck synccheck"] [-o LOGDIR] [-j WORKERS] [PYTEST ARGS...]
#
# Defaults: all three tools, logs in ./sanitizer-logs, 8 pytest-xdist workers, tests/gpu.
# Pytest options that start with '-' go after '--' (getopts stops there):
#   tests/gpu/sanitize.sh -t memcheck -j 8 -- --ignore=tests/gpu/test_soak_host.py tests/gpu
# On the H200 machine (16 cores, 141 GB) keep it to one tool at a time and -j 8 or fewer: with -j 10
# (memcheck) and -j 12 (racecheck) pytest got no further than 'bringing up nodes...' in 390 s / 115 s,
# and memcheck -j 8 beside synccheck -j 7 ran the GPU out of memory (cudaMalloc failures, which memcheck
# counts as errors). A whole-suite memcheck run needs more than one 10-minute device call with a cold
# disk cache: warm NUMBA_MATHDX_CACHE_DIR first (a plain GPU-suite run) in the same machine session.
# Every process the tool starts (pytest-xdist workers, notebook subprocesses) is checked. Exit
# status 1 when any tool reported an error. CuPy's memory pool hands out parts of larger
# allocations, so memcheck cannot see an overrun that stays inside a pool block; the suite's own
# NaN-poisoned outputs and bounds checks cover that.
set -uo pipefail
tools="memcheck racecheck synccheck"; logdir=sanitizer-logs; workers=8
while getopts "t:o:j:" opt; do
  case $opt in
    t) tools=$OPTARG ;; o) logdir=$OPTARG ;; j) workers=$OPTARG ;;
    *) echo "usage: $0 [-t TOOLS] [-o LOGDIR] [-j WORKERS] [PYTEST ARGS...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[[ $# -eq 0 ]] && set -- tests/gpu
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[[ -x $sanitizer ]] || { echo "compute-sanitizer not found (looked on PATH and in /usr/local/cuda/bin)" >&2; exit 2; }
mkdir -p "$logdir"
status=0
for tool in $tools; do
  rm -f "$logdir/$tool".*.log
  start=$(date +%s)
  "$sanitizer" --tool "$tool" --target-processes all --print-limit 50 \
      --log-file "$logdir/$tool.%p.log" \
      python3 -m pytest -q -m gpu -p no:cacheprovider -n "$workers" --dist loadgroup "$@" \
      > "$logdir/$tool.pytest.txt" 2>&1
  rc=$?
  errors=$(cat "$logdir/$tool".*.log 2>/dev/null | grep -Eo 'ERROR SUMMARY: [0-9]+' | awk '{s += $3} END {print s + 0}')
  summary=$(tail -n 1 "$logdir/$tool.pytest.txt")
  echo "$tool: $errors errors reported; pytest: $summary (exit $rc, $(( $(date +%s) - start )) s)"
  [[ $errors -ne 0 || $rc -ne 0 ]] && status=1
done
exit $status
