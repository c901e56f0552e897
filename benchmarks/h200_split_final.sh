#!/usr/bin/env bash
# Issue 3, head 512, split scores at 4 rows (variant 8), the lazy running maximum, one row
# address per copying thread and the teams merged while writing out, in one device call: the
# harness of benchmarks/h200_merge_units.sh (case table, GPU tests, sanitizers, other presets,
# TP=2, torch) with each scoring variant forced, and this binary against the session's first
# ($OLD, .carry/ladder-kernels-old), by column at 4 rows and with the merge kernel.
CONFIGS="new -;old -;new LADDER_KERNELS_D512=7;new LADDER_KERNELS_MERGE_UNITS=1" VARIANTS="6 7 8" \
  exec bash "$(dirname "$0")/h200_merge_units.sh" "$@"
