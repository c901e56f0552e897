#!/usr/bin/env bash
# Issue 3, head 512 at 4 rows: for each build in $BINS, the head-512 cases, the 4-row kernel's
# SASS (instruction counts by opcode, and the listing under $OUT), and the work groups'
# timeline; then $ROUNDS interleaved rounds of benchmarks/h200_bins.sh.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
BINS=${BINS:?builds to compare}
FN=${FN:-_ZN6ladder7kernels3gpu22TeamAttention512KernelINS1_3dev4Bf16ELi4ELNS1_11TeamScoringE3ELb0EEEvNS1_12KernelParamsE}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
for b in $BINS; do
  n=$(basename $b)
  echo "== check $n: $(timeout 120 $b check --backend cuda --case d512 2>&1 | tail -1)"
  if command -v cuobjdump > /dev/null; then
    cuobjdump -sass -fun "$FN" $b > ${OUT:-/tmp}/$n.sass 2>&1
    echo "== sass $n: $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' ${OUT:-/tmp}/$n.sass) instructions;" \
      $(grep -oE '^\s+/\*[0-9a-f]{4}\*/\s+(@!?U?P[0-9T] )?[A-Z0-9_]+' ${OUT:-/tmp}/$n.sass | awk '{print $NF}' | sed 's/\..*//' |
        sort | uniq -c | sort -rn | head -14 | awk '{printf "%s %s, ", $2, $1}')
    gzip -f ${OUT:-/tmp}/$n.sass
  fi
  echo "== timeline $n: $(LADDER_KERNELS_TIMELINE=1 $b bench --backend cuda --preset gemma4-31b-global --depths 32K --rows ${ROWS:-4} --policy 3d --repeats 30 --warmup 400 2>&1 | grep timeline | tail -1)"
done
BINS="$BINS" ROUNDS=${ROUNDS:-3} bash benchmarks/h200_bins.sh
