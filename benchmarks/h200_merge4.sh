#!/usr/bin/env bash
# Issue 3, head 512, 4 rows: the merge inside the kernel with four units per work group at once
# (128 units, 33 work groups per KV head) against the merge kernel (LADDER_KERNELS_MERGE_UNITS=1,
# LADDER_KERNELS_FUSED=0), three interleaved rounds; the head-512 cases with FUSED=1 first.
set -uo pipefail
K=${K:-.carry/ladder-kernels}; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
LADDER_KERNELS_FUSED=1 timeout 100 $K check --backend cuda --case d512 2>&1 | tail -1
R="--repeats 30 --warmup 400"
for round in 1 2 3; do for v in "" "LADDER_KERNELS_MERGE_UNITS=1" "LADDER_KERNELS_FUSED=0"; do
  echo "== round $round ${v:-defaults}"
  env $v $K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 1,2,4 --policy 3d $R | awk '/^cuda/{print "rows " $4 ": " $8 " us " $11 " " ($0 ~ /merge in kernel/ ? "(merge in kernel)" : "")}'
done; done
LADDER_KERNELS_TIMELINE=1 $K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 4 --policy 3d $R 2>&1 | grep timeline
