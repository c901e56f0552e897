#!/usr/bin/env bash
# Issue 3, head 512: the team kernel's work stealing (team_attention_kernel.h: each team a
# worker with a fixed home piece, then tail pieces claimed from a per-group counter), in one
# device call: the case table (defaults, fixed order, no tail), the GPU tests (direct launches
# against graph replays, bit for bit), memcheck and racecheck on the head-512 cases, then
# gemma4-31b-global at 32K (1/2/4 rows, 3D) over tail sizes x piece sizes, interleaved over two
# rounds, the work-group timeline with and without a tail, the other presets, the TP=2
# legacy/spec-aware ladder and PyTorch SDPA. Runs the carried standalone ladder-kernels
# (.carry/ladder-kernels) and test binaries (.carry/tests).
set -uo pipefail
OUT=${OUT:-h200-out}
mkdir -p "$OUT"
K=${K:-.carry/ladder-kernels}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
J=$(mktemp -d)
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "== check, all cases (defaults: stealing)"
timeout 200 $K check --backend cuda 2>&1 | tee $OUT/check.txt | grep -vE "^PASS" | tail -8
echo "== check, head-512 cases: fixed order (STEAL=0), no tail (TAIL=0), one-chunk pieces"
LADDER_KERNELS_STEAL=0 timeout 100 $K check --backend cuda --case d512 2>&1 | tail -1
LADDER_KERNELS_TAIL=0 timeout 100 $K check --backend cuda --case d512 2>&1 | tail -1
LADDER_KERNELS_PIECE=1 timeout 100 $K check --backend cuda --case d512 2>&1 | tail -1
R="--repeats 30 --warmup ${WARMUP:-400}"
g() { $K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 1,2,4 --policy 3d $R "$@" | grep -v "^back"; }
for round in 1 2; do
  # tail per mille, piece chunks, steal
  for cfg in "150 2 1" "0 2 1" "100 2 1" "250 2 1" "150 1 1" "150 4 1" "150 2 0"; do
    set -- $cfg
    echo "== round $round: tail $1, piece $2, steal $3"
    LADDER_KERNELS_TAIL=$1 LADDER_KERNELS_PIECE=$2 LADDER_KERNELS_STEAL=$3 g --json-out $J/g_t$1_p$2_s$3_r$round.json
  done
done
for t in 150 0; do
  echo "== timeline, tail $t"
  LADDER_KERNELS_TIMELINE=1 LADDER_KERNELS_TAIL=$t g 2>&1 | grep -E "timeline|cuda"
  echo "== loads only (DIAG=1), tail $t"
  LADDER_KERNELS_DIAG=1 LADDER_KERNELS_TAIL=$t g 2>&1 | grep -E "cuda"
done
if [ "${FULL:-1}" = 1 ]; then
echo "== other presets"
$K bench --backend cuda --preset gemma4-dense-256,llama-70b,gemma4-31b-sliding --depths 32K \
  --rows 1,2,4 --policy auto $R --json-out $J/other.json | grep -v "^back"
echo "== TP=2 legacy vs spec-aware, 2 rows"
$K bench --backend cuda --preset gemma4-31b-global-tp2 --depths 1K,4K,8K,16K,32K,64K --rows 2 \
  --policy legacy,spec-aware $R --json-out $J/tp2.json | grep -v "^back"
echo "== torch"
PYTHONUNBUFFERED=1 timeout 120 python3 benchmarks/torch_sdpa.py --presets gemma4-dense-256 --depths 32768 \
  --rows 1,2,4 --json $J/torch.json 2>&1 | tail -6
fi
for f in $J/*.json; do echo "{\"file\": \"$(basename $f)\", \"result\": $(cat $f)}"; done > $OUT/bench.jsonl
for t in .carry/tests/*; do
  echo "== $(basename $t)"
  timeout 200 $t --gtest_brief=1 2>&1 | tail -6
done
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    echo "== $tool, head-512 cases"
    timeout 240 compute-sanitizer --tool $tool $K check --backend cuda --case d512 --repeats 1 2>&1 | tail -2
  done
fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
