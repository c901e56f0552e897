#!/usr/bin/env bash
# Issue 3: one device call that checks a build end to end: the case table, the GPU test
# binaries, compute-sanitizer (memcheck at 1 and 4 rows and 2D, racecheck at 4 rows), then
# $OLD against $NEW side by side (benchmarks/h200_bins.sh and benchmarks/h200_presets_ab.sh)
# and the TP=2 policy comparison. Test binaries under .carry/tests, their libraries in .carry/tlib or .carry/lib (scripts/carry.sh).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.carry/tlib:$PWD/.carry/lib:/usr/local/cuda/lib64
OLD=${OLD:?previous build}; NEW=${NEW:?this build}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== check"; timeout 200 $NEW check --backend cuda 2>&1 | tail -32
for t in .carry/tests/*; do echo "== $(basename $t): $(timeout 200 $t 2>&1 | grep -E '^\[  (PASSED|FAILED|SKIPPED) ' | tr '\n' ' ')"; done
B="bench --backend cuda --preset gemma4-31b-global --repeats 2 --warmup 1"
for a in "--depths 32K --rows 4 --policy 3d" "--depths 32K --rows 1 --policy 3d" "--depths 4K --rows 4 --policy 2d"; do
  echo "== memcheck $a: $(timeout 150 compute-sanitizer --tool memcheck $NEW $B $a 2>&1 | grep -E 'ERROR SUMMARY' | head -1)"
done
echo "== racecheck 4K 4 rows 3d: $(timeout 200 compute-sanitizer --tool racecheck $NEW $B --depths 4K --rows 4 --policy 3d 2>&1 | grep -E 'RACECHECK SUMMARY|hazard' | head -3 | tr '\n' ' ')"
BINS="$OLD $NEW" ROUNDS=${ROUNDS:-3} bash benchmarks/h200_bins.sh
OLD=$OLD NEW=$NEW ROUNDS=2 bash benchmarks/h200_presets_ab.sh | grep -v '^check'
echo "== TP=2 global, 2 rows, legacy then spec-aware (us)"
$NEW bench --backend cuda --preset gemma4-31b-global-tp2 --depths 1K,4K,8K,16K,32K,64K --rows 2 --policy legacy,spec-aware --repeats 20 --warmup 50 | awk '/^cuda/{print $3, $5, $8}'
