#!/usr/bin/env bash
# Issue 3: the case table (defaults; head 512 with the team kernel forced) and gemma4-31b-global
# 32K with the team kernel and variant 3, each whole and arithmetic-only, two rounds.
K=.carry/ladder-kernels; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
timeout 100 $K check --backend cuda 2>&1 | tail -1
LADDER_KERNELS_D512=6 timeout 100 $K check --backend cuda --case d512 2>&1 | tail -1
R="--repeats 30 --warmup 400"
for round in 1 2; do for v in 6 3; do for d in 0 2; do
echo "== round $round variant $v diag $d"
LADDER_KERNELS_D512=$v LADDER_KERNELS_DIAG=$d $K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 1,2,4 --policy 3d $R | grep -v "^back\|copy" | cut -c1-100
done; done; done
