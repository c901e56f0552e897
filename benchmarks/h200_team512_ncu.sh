#!/usr/bin/env bash
# Issue 3: the head-512 team kernel under ncu (clocks and caches left alone): in-place kernel
# and merge durations at 1 row, then the warp stall breakdown and the top stall locations of the
# compute-only run (LADDER_KERNELS_DIAG=2) at 2 rows.
K=.carry/ladder-kernels; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
N="ncu --clock-control none --cache-control none"
LADDER_KERNELS_D512=6 timeout 150 $N -k regex:"Team|Merge" -s 40 -c 2 --section SpeedOfLight \
  $K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 1 --policy 3d --repeats 5 --warmup 40 2>&1 |
  grep -E "Team|Merge|Duration|DRAM Through" | head -12
LADDER_KERNELS_D512=6 LADDER_KERNELS_DIAG=2 timeout 200 $N -k regex:"Team" -s 20 -c 1 --section WarpStateStats --section SourceCounters \
  $K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 2 --policy 3d --repeats 2 --warmup 20 2>&1 |
  grep -vE "^==PROF==|^\s*$|^    -----" | tail -60
