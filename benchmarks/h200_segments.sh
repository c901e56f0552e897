#!/usr/bin/env bash
# Issue 18: the 3D segment count at short and middle depths, and 5 rows (MTP, 4 drafts) in 3D, in
# stream and graph timing, $ROUNDS interleaved rounds. Carried: $K (a -DLADDER_CUDA=ON build).
# Output in $OUT: segments.jsonl (one bench JSON array per line, the round and the forced segment
# count beside it: 0 = the policy's own), log.txt.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
K=${K:-.carry/ladder-kernels}
PRESETS=${PRESETS:-gemma4-31b-global,gemma4-31b-global-tp2,gemma4-dense-256}
W=${W:-100}; R=${R:-30}; G=${G:-20}
: > $OUT/segments.jsonl
{
for round in $(seq ${ROUNDS:-2}); do
  for mode in "" "--graph --graph-calls $G"; do
    for s in ${SEGS:-0 16 32 64 128}; do
      extra=""; [ "$s" != 0 ] && extra="--segments $s"
      echo "== round $round ${mode:-stream} segments $s"
      $K bench --backend cuda --preset $PRESETS --depths ${DEPTHS:-1K,8K} --rows ${ROWS:-1,4,5} --policy 3d --warmup $W --repeats $R $mode $extra --json-out /tmp/s.json | grep '^cuda'
      echo "{\"round\":$round,\"forced_segments\":$s,\"results\":$(cat /tmp/s.json)}" | tr -d '\n' >> $OUT/segments.jsonl; echo >> $OUT/segments.jsonl
    done
  done
done
} 2>&1 | tee $OUT/log.txt
