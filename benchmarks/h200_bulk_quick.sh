#!/usr/bin/env bash
# Issue 3, head 512: the bulk-copy A/B alone (LADDER_KERNELS_BULK=0|1, three rounds) and the
# head-512 cases under BULK=1; a short device call while tuning.
set -uo pipefail
K=.carry/ladder-kernels; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
LADDER_KERNELS_BULK=1 timeout 100 $K check --backend cuda --case d512 2>&1 | tail -1
R="--repeats 30 --warmup 400"
for round in 1 2 3; do for b in 0 1; do echo "== round $round, bulk $b"; LADDER_KERNELS_BULK=$b $K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 1,2,4 --policy 3d $R | awk '/^cuda/{print "rows " $4 ": " $8 " us " $11}'; done; done
