#!/usr/bin/env bash
# Issue 3, head 512: several builds side by side ($BINS, default every .carry/ladder-kernels*),
# $ROUNDS interleaved rounds at $ROWS rows (gemma4-31b-global, 32K, 3D, 30 calls after 400
# warm-ups); CHECK=1 runs the head-512 cases on each first.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
BINS=${BINS:-$(ls .carry/ladder-kernels*)}
R="--repeats 30 --warmup 400"
if [ "${CHECK:-0}" = 1 ]; then for b in $BINS; do echo "== check $b: $(timeout 100 $b check --backend cuda --case d512 2>&1 | tail -1)"; done; fi
for round in $(seq ${ROUNDS:-3}); do for b in $BINS; do
  echo "== round $round $b ${ENV:-}"
  env ${ENV:-} $b bench --backend cuda --preset ${PRESET:-gemma4-31b-global} --depths ${DEPTHS:-32K} --rows ${ROWS:-1,2,4} --policy 3d $R |
    awk '/^cuda/{print "rows " $4 ": " $8 " us " $11 "  " substr($0, index($0, "team"), 36)}'
done; done
