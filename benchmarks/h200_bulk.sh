#!/usr/bin/env bash
# Issue 3, head 512: the team kernel loading by bulk copy (LADDER_KERNELS_BULK=1: cp.async.bulk
# of 1 KB rows from one warp per team, mbarrier completion) against the cp.async rings, in one
# device call: the head-512 cases under BULK=1 (and memcheck), gemma4-31b-global 32K at 1/2/4
# rows over three interleaved rounds, loads only (DIAG=1) and the timeline of each.
set -uo pipefail
K=${K:-.carry/ladder-kernels}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
echo "== check, head-512 cases, bulk copies"
LADDER_KERNELS_BULK=1 timeout 100 $K check --backend cuda --case d512 2>&1 | grep -vE "^PASS" | tail -3
LADDER_KERNELS_BULK=1 timeout 200 compute-sanitizer --tool memcheck $K check --backend cuda --case d512 --repeats 1 2>&1 | tail -1
R="--repeats 30 --warmup 400"
g() { $K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 1,2,4 --policy 3d $R "$@" 2>&1 | grep -E "^cuda|timeline"; }
for round in 1 2 3; do
  for b in 0 1; do echo "== round $round, bulk $b"; LADDER_KERNELS_BULK=$b g | awk '/^cuda/{print "rows " $4 ": " $8 " us " $10 " " $11} /timeline/'; done
done
for b in 0 1; do
  echo "== loads only, bulk $b"; LADDER_KERNELS_DIAG=1 LADDER_KERNELS_BULK=$b g | awk '/^cuda/{print "rows " $4 ": " $8 " us"}'
  echo "== arithmetic only, bulk $b"; LADDER_KERNELS_DIAG=2 LADDER_KERNELS_BULK=$b g | awk '/^cuda/{print "rows " $4 ": " $8 " us"}'
  echo "== timeline, bulk $b"; LADDER_KERNELS_TIMELINE=1 LADDER_KERNELS_BULK=$b g | grep timeline
done
