#!/usr/bin/env bash
# Issue 3, head-512 speed, second try: the previous default (d512 variant 3) side by side with
# the same kernel whose K/V loads carry cp.async's L2 fetch-size hint (variant 6: 256 B,
# variant 7: 128 B; head 256: variant 2 = 0 + 256 B), each with the merge launched plainly and
# with programmatic dependent launch (LADDER_KERNELS_PDL=1), in one device call: the case table
# under PDL and the head-512/256 cases under each variant, then gemma4-31b-global and
# gemma4-dense-256 at 32K, 1/2/4 rows, configurations interleaved over two rounds. Runs the
# carried standalone ladder-kernels (.carry/ladder-kernels, -DCMAKE_CUDA_ARCHITECTURES=90-real).
# After this run the hint variants were removed and PDL became the default (LADDER_KERNELS_PDL=0
# turns it off); rerunning the hint variants needs the kernels of commit a3d91e2.
set -uo pipefail
OUT=${OUT:-h200-out}
mkdir -p "$OUT"
K=${K:-.carry/ladder-kernels}
J=$(mktemp -d)  # every point's JSON, gathered into one file at the end (few files come back)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "== check, all cases, merge with PDL"
LADDER_KERNELS_PDL=1 timeout 150 $K check --backend cuda 2>&1 | tail -3
for v in 6 7; do
  echo "== check d512 variant $v (PDL)"
  LADDER_KERNELS_PDL=1 LADDER_KERNELS_D512=$v timeout 90 $K check --backend cuda --case d512 --repeats 3 2>&1 | tail -2
done
echo "== check d256 variant 2 (PDL)"
LADDER_KERNELS_PDL=1 LADDER_KERNELS_D256=2 timeout 90 $K check --backend cuda --case d256 --repeats 3 2>&1 | tail -2
R="--repeats 20 --warmup 3"
for round in 1 2; do
  configs="3:0 3:1 6:0 6:1 7:0 7:1"; [ $round = 2 ] && configs="7:1 7:0 6:1 6:0 3:1 3:0"
  for c in $configs; do
    v=${c%:*}; pdl=${c#*:}
    echo "== round $round: gemma4-31b-global 32K, d512 variant $v, PDL $pdl"
    LADDER_KERNELS_PDL=$pdl LADDER_KERNELS_D512=$v $K bench --backend cuda --preset gemma4-31b-global \
      --depths 32K --rows 1,2,4 --policy 3d $R --json-out $J/g_v${v}_pdl${pdl}_r$round.json | grep -v "^back"
  done
  for c in 0:0 0:1 2:0 2:1; do
    v=${c%:*}; pdl=${c#*:}
    echo "== round $round: gemma4-dense-256 32K, d256 variant $v, PDL $pdl"
    LADDER_KERNELS_PDL=$pdl LADDER_KERNELS_D256=$v $K bench --backend cuda --preset gemma4-dense-256 \
      --depths 32K --rows 1,2,4 --policy 3d $R --json-out $J/d_v${v}_pdl${pdl}_r$round.json | grep -v "^back"
  done
done
for f in $J/*.json; do echo "{\"file\": \"$(basename $f)\", \"result\": $(cat $f)}"; done > $OUT/bench.jsonl
