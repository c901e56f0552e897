#!/usr/bin/env bash
# Issue 3, head 512 at 4 rows: four settings side by side, four interleaved rounds (gemma4-31b-
# global 32K 3D, 1 / 2 / 4 rows): the previous binary (.carry/ladder-kernels) with its defaults
# and with the merge kernel (LADDER_KERNELS_FUSED=0), a build with the lean merge
# (.carry/ladder-kernels-s1) on the merge kernel, and this build (.carry/ladder-kernels-new).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R="--repeats 30 --warmup 400"
for round in 1 2 3 4; do
  for spec in "old:X=1:.carry/ladder-kernels" "oldF0:LADDER_KERNELS_FUSED=0:.carry/ladder-kernels" \
              "s1F0:LADDER_KERNELS_FUSED=0:.carry/ladder-kernels-s1" "s2:X=1:.carry/ladder-kernels-new"; do
    IFS=: read -r name e b <<< "$spec"
    echo "$round $name $(env "$e" "$b" bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 1,2,4 --policy 3d $R | awk '/^cuda/{printf "%s ", $8}')"
  done
done
