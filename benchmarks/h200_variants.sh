#!/usr/bin/env bash
# One device call for tuning: build, the case table (default kernels, then the head-512/256
# cases again under every other kernel variant), the head-512 and head-256 3D points under each
# variant (LADDER_KERNELS_D512 / LADDER_KERNELS_D256, see gpu_backend.cu), and an ncu summary of
# one default launch (attention kernel + merge). Results go to $OUT (or ./h200-out); the bench
# JSON to $VOUT (default $OUT). CHECK=0 skips the default case table.
set -uo pipefail
OUT=${OUT:-h200-out}
mkdir -p "$OUT"
VOUT=${VOUT:-$OUT}
mkdir -p "$VOUT"
B=${B:-/tmp/b}
D512=${D512:-0 1 2}
D256=${D256:-0 1}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
cmake -S kernels -B $B -G Ninja -DLADDER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=Release >$B.cmake.log 2>&1 || { tail -20 $B.cmake.log; exit 1; }
cmake --build $B -j16 >$B/build.log 2>&1 || { grep -E "error" $B/build.log | head -20; exit 1; }
K=$B/ladder-kernels
if [ "${CHECK:-1}" = 1 ]; then
  echo "== check (defaults)"
  timeout 150 $K check --backend cuda 2>&1 | tee $OUT/check.txt
fi
for v in $D512; do [ "$v" = 0 ] || { echo "== check d512 variant $v"; LADDER_KERNELS_D512=$v timeout 60 $K check --backend cuda --case d512 --repeats 3 2>&1 | tail -5; }; done
for v in $D256; do [ "$v" = 0 ] || { echo "== check d256 variant $v"; LADDER_KERNELS_D256=$v timeout 60 $K check --backend cuda --case d256 --repeats 3 2>&1 | tail -5; }; done
R="--repeats 20 --warmup 3"
for v in $D512; do
  echo "== gemma4-31b-global, d512 variant $v"
  LADDER_KERNELS_D512=$v $K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 1,2,4 --policy 3d $R --json-out $VOUT/g_v$v.json
done
for v in $D256; do
  echo "== gemma4-dense-256, d256 variant $v"
  LADDER_KERNELS_D256=$v $K bench --backend cuda --preset gemma4-dense-256 --depths 32K --rows 1,2,4 --policy 3d $R --json-out $VOUT/d_v$v.json
done
if [ "${NCU:-1}" = 1 ] && command -v ncu >/dev/null; then
  echo "== ncu (default kernels, gemma4-31b-global 32K, ${NCU_ROWS:-1} row(s)): attention + merge"
  timeout 120 ncu --clock-control none -k regex:"Unified|Merge" -c 2 --section SpeedOfLight --section Occupancy \
    $K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows ${NCU_ROWS:-1} --policy 3d --repeats 1 --warmup 0 2>&1 \
    | grep -E "UnifiedAttention|MergeSegments|Duration|DRAM Through|Memory Through|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Block Limit|Registers Per" | sed -E 's/\(KernelParams\).*//' | tee $OUT/ncu.txt
fi
