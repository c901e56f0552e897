#!/usr/bin/env bash
# Issue 3: K/V copies under an L2 evict-first policy (the default; LADDER_KERNELS_EVICT_FIRST=0
# turns it off), so the partials written at the end stay in L2 for the merge: the case table,
# then every preset at 32K, 1/2/4 rows, over three interleaved rounds with and without the hint,
# and the head-512 timeline of each.
set -uo pipefail
K=${K:-.carry/ladder-kernels}; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
timeout 200 $K check --backend cuda 2>&1 | tail -1
R="--repeats 30 --warmup 400"
for round in 1 2 3; do for e in 1 0; do
  echo "== round $round, evict-first $e"
  LADDER_KERNELS_EVICT_FIRST=$e $K bench --backend cuda --preset gemma4-31b-global,gemma4-dense-256,llama-70b,gemma4-31b-sliding \
    --depths 32K --rows 1,2,4 --policy auto $R | awk '/^cuda/{print $2 " rows " $4 ": " $8 " us " $11}'
done; done
for e in 1 0; do
  echo "== timeline, evict-first $e"
  LADDER_KERNELS_TIMELINE=1 LADDER_KERNELS_EVICT_FIRST=$e $K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 1,2,4 --policy 3d $R 2>&1 | grep timeline
done
