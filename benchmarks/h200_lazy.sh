#!/usr/bin/env bash
# Issue 3, head 512: the lazy running maximum (rescale only when a chunk's maximum exceeds the
# running one by more than 2^8) and split scores (variant 8) against the previous binary
# (.carry/ladder-kernels-old), three interleaved rounds; every case first.
set -uo pipefail
K=${K:-.carry/ladder-kernels}; OLD=${OLD:-.carry/ladder-kernels-old}; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
timeout 200 $K check --backend cuda 2>&1 | tail -3
LADDER_KERNELS_D512=8 timeout 100 $K check --backend cuda --case d512 2>&1 | tail -1
R="--repeats 30 --warmup 400"
for round in 1 2 3; do for v in "old" "new" "new LADDER_KERNELS_D512=8"; do
  echo "== round $round $v"; b=$OLD; [ "${v%% *}" = new ] && b=$K
  e=""; [ "$v" != "${v#* }" ] && e=${v#* }
  env $e $b bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 1,2,4 --policy 3d $R | awk '/^cuda/{print "rows " $4 ": " $8 " us " $11 "  " substr($0, index($0, "team"), 40)}'
done; done
