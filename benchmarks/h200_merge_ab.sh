#!/usr/bin/env bash
# Issue 3, head 512: this binary (.carry/ladder-kernels) against the previous one
# (.carry/ladder-kernels-old) on gemma4-31b-global 32K, 1/2/4 rows, 3D, three interleaved rounds,
# then ncu warp stalls per SASS instruction at 1 row (by dims) and 4 rows (by column) into
# $OUT/stalls (benchmarks/h200_team512_stalls.sh). Results: benchmarks/results/h200-merge-units/.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R="--repeats 30 --warmup 400"
for round in 1 2 3; do for b in new old; do
  bin=.carry/ladder-kernels; [ $b = old ] && bin=.carry/ladder-kernels-old
  $bin bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 1,2,4 --policy 3d $R | awk -v b=$b -v r=$round '/^cuda/{printf "round %s %s rows %s: %s us %s\n", r, b, $4, $8, $10}'
done; done
V=6 ROWS=1 OUT=$OUT/stalls bash benchmarks/h200_team512_stalls.sh
V=7 ROWS=4 OUT=$OUT/stalls bash benchmarks/h200_team512_stalls.sh
ls -la $OUT/stalls
