#!/usr/bin/env bash
# Issue 18: the previous build ($OLD) against this one ($NEW) in one device call: the case table,
# the GPU test binaries in $T, compute-sanitizer (memcheck in stream and graph timing, racecheck)
# on $NEW, then $ROUNDS interleaved rounds of both builds at short and middle depths in stream and
# graph timing (policy auto). Output in $OUT: ab.jsonl (one bench JSON array per line with the
# build and the round beside it), check.txt, log.txt.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
OLD=${OLD:?previous build}; NEW=${NEW:?this build}; T=${T:-.carry/tests}
PRESETS=${PRESETS:-gemma4-31b-global,gemma4-31b-global-tp2,gemma4-dense-256,llama-70b,gemma4-31b-sliding}
W=${W:-100}; R=${R:-30}; G=${G:-20}
{
echo "== check: $(timeout 200 $NEW check --backend cuda 2>&1 | tee $OUT/check.txt | tail -1)"
for t in $T/*; do echo "== $(basename $t): $(timeout 200 $t 2>&1 | grep -E '^\[  (PASSED|FAILED|SKIPPED) ' | tr '\n' ' ')"; done
B="bench --backend cuda --repeats 2 --warmup 1"
for a in "--preset gemma4-31b-global --depths 1K --rows 1 --policy auto" "--preset gemma4-31b-global-tp2 --depths 1K --rows 4 --policy auto --graph --graph-calls 3" \
         "--preset gemma4-dense-256 --depths 1K --rows 5 --policy 3d --graph --graph-calls 3" "--preset gemma4-31b-global --depths 8K --rows 5 --policy 3d"; do
  echo "== memcheck $a: $(timeout 120 compute-sanitizer --tool memcheck $NEW $B $a 2>&1 | grep -E 'ERROR SUMMARY' | head -1)"
done
echo "== racecheck 1K 1 row auto (merge in kernel): $(timeout 150 compute-sanitizer --tool racecheck $NEW $B --preset gemma4-31b-global --depths 1K --rows 1 --policy auto 2>&1 | grep -E 'RACECHECK SUMMARY|hazard' | head -2 | tr '\n' ' ')"
: > $OUT/ab.jsonl
for round in $(seq ${ROUNDS:-3}); do for b in $OLD $NEW; do for mode in "" "--graph --graph-calls $G"; do
  echo "== round $round $b ${mode:-stream}"
  $b bench --backend cuda --preset $PRESETS --depths ${DEPTHS:-1K,2K,4K,8K} --rows ${ROWS:-1,4} --policy auto --warmup $W --repeats $R $mode --json-out /tmp/ab.json | grep '^cuda' | awk '{print $2, $3, $4, $6, $7, $8}'
  echo "{\"build\":\"$b\",\"round\":$round,\"results\":$(cat /tmp/ab.json)}" | tr -d '\n' >> $OUT/ab.jsonl; echo >> $OUT/ab.jsonl
done; done; done
} 2>&1 | tee $OUT/log.txt
