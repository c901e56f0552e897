#!/usr/bin/env bash
# Issue 3, head-512 speed: the previous default (d512 variant 3) side by side with the same
# kernel plus an L2 prefetch of the next 2 (variant 6) or 4 (variant 7) K/V tiles beyond the
# shared-memory stages, in one device call: the head-512 cases under each variant, then
# gemma4-31b-global 32K at 1/2/4 rows, variants interleaved over two rounds; the same for
# head 256 (variant 0 against 2 = 0 + 4 tiles prefetched). Runs the carried standalone
# ladder-kernels (.carry/ladder-kernels, built with -DCMAKE_CUDA_ARCHITECTURES=90-real).
# The prefetch variants lost (results/h200-prefetch/, docs/kernels.md) and were removed after
# this run: rerunning it needs the kernels of commit ec29c14.
set -uo pipefail
OUT=${OUT:-h200-out}
mkdir -p "$OUT"
K=${K:-.carry/ladder-kernels}
J=$(mktemp -d)  # the JSON of every point, gathered into one file at the end (few files come back)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
for v in 3 6 7; do
  echo "== check d512 variant $v"
  LADDER_KERNELS_D512=$v timeout 90 $K check --backend cuda --case d512 --repeats 3 2>&1 | tail -4
done
echo "== check d256 variant 2"
LADDER_KERNELS_D256=2 timeout 90 $K check --backend cuda --case d256 --repeats 3 2>&1 | tail -4
R="--repeats 20 --warmup 3"
for round in 1 2; do
  order="3 6 7"; [ $round = 2 ] && order="7 6 3"
  for v in $order; do
    echo "== round $round: gemma4-31b-global 32K, d512 variant $v"
    LADDER_KERNELS_D512=$v $K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 1,2,4 \
      --policy 3d $R --json-out $J/g_v${v}_r$round.json
  done
  for v in 0 2; do
    echo "== round $round: gemma4-dense-256 32K, d256 variant $v"
    LADDER_KERNELS_D256=$v $K bench --backend cuda --preset gemma4-dense-256 --depths 32K --rows 1,2,4 \
      --policy 3d $R --json-out $J/d_v${v}_r$round.json
  done
done
for f in $J/*.json; do echo "{\"file\": \"$(basename $f)\", \"result\": $(cat $f)}"; done > $OUT/bench.jsonl
