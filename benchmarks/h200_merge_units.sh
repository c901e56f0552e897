#!/usr/bin/env bash
# Issue 3, head 512: the merge inside the team kernel at 2 rows too (two (column, 128 dims)
# units per work group, merged at once: MergeGroupedUnits) and bulk copies for the 16-column
# kernel, in one device call: the case table (defaults, and with the merge kernel: LADDER_KERNELS_FUSED=0), the GPU
# tests (in-kernel merge against graph replays, which merge with the merge kernel, bit for bit),
# then gemma4-31b-global at 32K (1/2/4 rows, 3D) side by side with the previous binary
# ($OLD, .carry/ladder-kernels-old) and with bulk copies nowhere / everywhere over three
# interleaved rounds, the timeline, the other presets,
# the TP=2 legacy/spec-aware ladder, PyTorch SDPA and (SANITIZE=1) memcheck and racecheck.
# CONFIGS ("binary env" pairs, ';'-separated, "-" for no environment) replaces the A/B list;
# VARIANTS ("6 7 8") also runs the head-512 cases with each d512 variant forced
# (benchmarks/h200_split_final.sh sets both).
set -uo pipefail
OUT=${OUT:-h200-out}
mkdir -p "$OUT"
K=${K:-.carry/ladder-kernels}
OLD=${OLD:-.carry/ladder-kernels-old}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
J=$(mktemp -d)
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
[ -x .carry/wgmma_layout ] && .carry/wgmma_layout
echo "== check, all cases (defaults)"
timeout 200 $K check --backend cuda 2>&1 | tee $OUT/check.txt | grep -vE "^PASS" | tail -4
echo "== check, head-512 cases with the merge kernel (FUSED=0), and in the kernel wherever resident (FUSED=1)"
LADDER_KERNELS_FUSED=0 timeout 100 $K check --backend cuda --case d512 2>&1 | tail -1
LADDER_KERNELS_FUSED=1 timeout 100 $K check --backend cuda --case d512 2>&1 | tail -1
for v in ${VARIANTS:-}; do echo "== check, head-512 cases, variant $v at every row count"
  LADDER_KERNELS_D512=$v timeout 100 $K check --backend cuda --case d512 2>&1 | tail -1; done
export R="--repeats 30 --warmup ${WARMUP:-400}"
g() { local bin=$1; shift; $bin bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 1,2,4 --policy 3d $R "$@" | grep -v "^back"; }
for round in 1 2 3; do
  # binary, then environment assignments ("-": none)
  IFS=';' read -r -a cfgs <<< "${CONFIGS:-new -;old -;new LADDER_KERNELS_EVICT_FIRST=0;new LADDER_KERNELS_BULK=0;new LADDER_KERNELS_MERGE_UNITS=1}"
  for cfg in "${cfgs[@]}"; do
    set -- $cfg
    bin=$K; [ "$1" = old ] && bin=$OLD
    vars=$2; [ "$vars" = - ] && vars=""
    echo "== round $round: $1 binary ${vars:-defaults}"
    env $vars bash -c "$(declare -f g); g $bin --json-out $J/g_$1_${vars:-default}_r$round.json"
  done
done
echo "== timeline (new)"
LADDER_KERNELS_TIMELINE=1 g $K 2>&1 | grep -E "timeline"
echo "== loads only (DIAG=1, new)"
LADDER_KERNELS_DIAG=1 g $K 2>&1 | grep -E "^cuda"
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
  # (.carry/tlib: the Debian libraries the test binaries need, where they were carried)
  LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$PWD/.carry/tlib timeout 200 $t --gtest_brief=1 2>&1 | tail -8
done
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    echo "== $tool, head-512 cases"
    timeout 200 compute-sanitizer --tool $tool $K check --backend cuda --case d512 --repeats 1 2>&1 | tail -2
  done
fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
