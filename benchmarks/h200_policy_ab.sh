#!/usr/bin/env bash
# Issue 3: this binary (every K/V copy under an L2 policy: evict-first or evict-unchanged)
# against the previous one (a hinted copy only under evict-first, plain copies otherwise), with
# the hint where it applies and with it off, two interleaved rounds; the case table first.
set -uo pipefail
K=${K:-.carry/ladder-kernels}; OLD=${OLD:-.carry/ladder-kernels-old}; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
timeout 200 $K check --backend cuda 2>&1 | tail -1
R="--repeats 30 --warmup 400"
for round in 1 2; do for b in new old; do for e in "" 0; do
  bin=$K; [ $b = old ] && bin=$OLD
  echo "== round $round, $b binary, evict-first ${e:-auto}"
  LADDER_KERNELS_EVICT_FIRST=$e $bin bench --backend cuda --preset gemma4-31b-global,llama-70b,gemma4-31b-sliding \
    --depths 32K --rows 1,2,4 --policy auto $R | awk '/^cuda/{print $2 " rows " $4 ": " $8 " us"}'
done; done; done
