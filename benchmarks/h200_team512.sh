#!/usr/bin/env bash
# Issue 3, head-512 speed: the team kernel (team_attention_kernel.h; d512 variant 6 scores by
# dims, the default for 8 score columns, variant 7 by column, the default for 16 and 32, where it
# fits) and the grouped merge (default for every head dim) against variant 3 and the two-pass
# merge (LADDER_KERNELS_MERGE=0), in one device call: the case table under the defaults and with
# each team variant forced, memcheck and racecheck on the head-512 cases, then
# gemma4-31b-global at 32K (1/2/4 rows, 3D) per configuration, interleaved over two rounds after
# a long warm-up (the SM clock ramps), the diagnostics (LADDER_KERNELS_DIAG=1/2/3: loads only,
# arithmetic only, no merge; LADDER_KERNELS_TIMELINE: work-group end times), the other presets
# with each merge, the TP=2 legacy/spec-aware ladder and PyTorch SDPA on the same shapes. Runs the carried
# standalone ladder-kernels (.carry/ladder-kernels, -DCMAKE_CUDA_ARCHITECTURES=90-real).
set -uo pipefail
OUT=${OUT:-h200-out}
mkdir -p "$OUT"
K=${K:-.carry/ladder-kernels}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
J=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "== check, all cases (default kernels)"
timeout 200 $K check --backend cuda 2>&1 | tee $OUT/check.txt | grep -vE "^PASS" | tail -8
for v in 6 7; do
  echo "== check, head-512 cases with team variant $v at every row count"
  LADDER_KERNELS_D512=$v timeout 100 $K check --backend cuda --case d512 2>&1 | tail -1
done
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    echo "== $tool, head-512 cases, defaults (team kernel by dims at 1 row, by column at 2-5)"
    timeout 200 compute-sanitizer --tool $tool $K check --backend cuda --case d512 --repeats 1 2>&1 | tail -1
  done
fi
R="--repeats 30 --warmup ${WARMUP:-400}"
g() { $K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 1,2,4 --policy 3d $R "$@" | grep -v "^back"; }
for round in 1 2; do
  # variant, grouped merge (0: two-pass), diag, merge in the kernel ("": where it pays, 0: never)
  for cfg in "default 1 0 -" "6 1 0 -" "7 1 0 -" "3 1 0 -" "default 0 0 -" "default 1 0 0" "default 1 1 -" \
             "default 1 2 -" "default 1 3 -"; do
    set -- $cfg
    v=$1; [ "$v" = default ] && v=""
    f=$4; [ "$f" = - ] && f=""
    echo "== round $round: d512 variant $1, grouped merge $2, diag $3, fused ${4/-/auto}"
    LADDER_KERNELS_D512=$v LADDER_KERNELS_MERGE=$2 LADDER_KERNELS_DIAG=$3 LADDER_KERNELS_FUSED=$f \
      g --json-out $J/g_v$1_m$2_d$3_f$4_r$round.json
  done
done
echo "== timeline of the last call (defaults)"
LADDER_KERNELS_TIMELINE=1 g 2>&1 | grep -E "timeline|cuda"
for m in 1 0; do
  echo "== other presets, online merge $m"
  LADDER_KERNELS_MERGE=$m $K bench --backend cuda --preset gemma4-dense-256,llama-70b,gemma4-31b-sliding --depths 32K \
    --rows 1,2,4 --policy auto $R --json-out $J/other_m$m.json | grep -v "^back"
done
echo "== TP=2 legacy vs spec-aware, 2 rows (default kernels)"
$K bench --backend cuda --preset gemma4-31b-global-tp2 --depths 1K,4K,8K,16K,32K,64K --rows 2 \
  --policy legacy,spec-aware $R --json-out $J/tp2.json | grep -v "^back"
echo "== torch"
PYTHONUNBUFFERED=1 timeout 120 python3 benchmarks/torch_sdpa.py --presets gemma4-dense-256,llama-70b --depths 32768 \
  --rows 1,2,4 --json $J/torch.json 2>&1 | tail -8
for f in $J/*.json; do echo "{\"file\": \"$(basename $f)\", \"result\": $(cat $f)}"; done > $OUT/bench.jsonl
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
