#!/usr/bin/env bash
# Issue 18: ladder and its peers timed the same way in one device call. Carried: .carry/ladder-kernels
# and the GPU test binaries in .carry/tests (a local -DLADDER_CUDA=ON build), and .peers/ (the
# git-ignored transcription of vLLM's Triton kernel, read by benchmarks/torch_sdpa.py).
# Correctness first (case table, GPU tests, memcheck of graph replays), then $ROUNDS rounds, each
# `ladder-kernels bench` in stream and graph timing and benchmarks/torch_sdpa.py (flash, cuDNN,
# vLLM 2D and 3D) in both timings, with the same warm-up, spin and graph size. Output in $OUT:
# ladder.jsonl (one JSON array per bench run, the round in "round"), peers_r<N>.json, log.txt.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
K=${K:-.carry/ladder-kernels}; T=${T:-.carry/tests}
PRESETS=${PRESETS:-gemma4-31b-global,gemma4-31b-global-tp2,gemma4-dense-256}
DEPTHS=${DEPTHS:-1024,8192,32768}; ROWS=${ROWS:-1,2,4}; ROWS3D=${ROWS3D:-5}  # ladder: auto at ROWS, 3D at ROWS3D
W=${W:-100}; R=${R:-30}; G=${G:-20}
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "== check: $(timeout 200 $K check --backend cuda 2>&1 | tee $OUT/check.txt | tail -1)"
for t in $T/*; do echo "== $(basename $t): $(timeout 200 $t 2>&1 | grep -E '^\[  (PASSED|FAILED|SKIPPED) ' | tr '\n' ' ')"; done
for a in "--preset gemma4-dense-256 --depths 1K --rows 1 --policy 3d" "--preset gemma4-31b-global --depths 8K --rows 2 --policy 3d"; do
  echo "== memcheck --graph $a: $(timeout 120 compute-sanitizer --tool memcheck $K bench --backend cuda $a --graph --graph-calls 3 --repeats 2 --warmup 1 2>&1 | grep -E 'ERROR SUMMARY' | head -1)"
done
: > $OUT/ladder.jsonl
for round in $(seq ${ROUNDS:-2}); do
  for mode in "" "--graph --graph-calls $G"; do
    echo "== round $round ladder ${mode:-stream}"
    for pr in "$ROWS auto" "$ROWS3D 3d"; do set -- $pr; [ -z "${2:-}" ] && continue
      $K bench --backend cuda --preset $PRESETS --depths $DEPTHS --rows $1 --policy $2 --warmup $W --repeats $R $mode --json-out /tmp/l.json | grep -v '^back'
      echo "{\"round\":$round,\"results\":$(cat /tmp/l.json)}" | tr -d '\n' >> $OUT/ladder.jsonl; echo >> $OUT/ladder.jsonl
    done
  done
  echo "== round $round peers"
  PYTHONUNBUFFERED=1 timeout 400 python3 benchmarks/torch_sdpa.py --presets $PRESETS --depths $DEPTHS \
    --rows $ROWS${ROWS3D:+,$ROWS3D} --warmup $W --repeats $R --graph-calls $G --timing stream,graph --json $OUT/peers_r$round.json
done
if [ -n "${SEGS:-}" ]; then
  echo "== 1K segments (graph timing): forced 3D at $SEGS segments against 2D"
  for s in $SEGS; do $K bench --backend cuda --preset $PRESETS --depths 1K --rows 1,4 --policy 3d --segments $s --warmup $W --repeats $R --graph --graph-calls $G | grep '^cuda'; done
  $K bench --backend cuda --preset $PRESETS --depths 1K --rows 1,4 --policy 2d --warmup $W --repeats $R --graph --graph-calls $G | grep '^cuda'
fi
} 2>&1 | tee $OUT/log.txt
