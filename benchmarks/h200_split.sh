#!/usr/bin/env bash
# Issue 3, head 512: split scores (variant 8: S^T by dims, softmax by column) against the
# defaults (2 rows by column with bulk copies, 4 rows by column), with and without bulk copies,
# three interleaved rounds; the head-512 cases under variant 8 first (check prints one line).
set -uo pipefail
K=${K:-.carry/ladder-kernels}; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
for b in 0 1; do echo "== check d512, variant 8, bulk $b"
  LADDER_KERNELS_D512=8 LADDER_KERNELS_BULK=$b timeout 100 $K check --backend cuda --case d512 2>&1 | tail -1; done
R="--repeats 30 --warmup 400"
for round in 1 2 3; do for v in "" "LADDER_KERNELS_D512=8" "LADDER_KERNELS_D512=8 LADDER_KERNELS_BULK=1"; do
  echo "== round $round ${v:-defaults}"
  env $v $K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 2,4 --policy 3d $R | awk '/^cuda/{print "rows " $4 ": " $8 " us " $11 " " $0}' | cut -c1-200
done; done
