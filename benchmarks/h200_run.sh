#!/usr/bin/env bash
# One device call: build kernels/ standalone with CUDA, run the case table on the GPU, a
# compute-sanitizer pass on two cases, the benchmark sweeps and PyTorch SDPA on the same
# shapes. Results go to $OUT (or ./h200-out).
set -uo pipefail
OUT=${OUT:-h200-out}
mkdir -p "$OUT"
B=${B:-build-h200}
ARCH=${ARCH:-90a-real}  # sm_90a: the head-512 wgmma kernel (variant 9) is the 4-row default there
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
cmake -S kernels -B $B -G Ninja -DLADDER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$ARCH -DCMAKE_BUILD_TYPE=Release >$B.cmake.log 2>&1 || { tail -20 $B.cmake.log; exit 1; }
cmake --build $B -j16 >$B.build.log 2>&1 || { grep -E "error" $B.build.log | head -20; exit 1; }
echo "kernel variants: LADDER_KERNELS_D512=${LADDER_KERNELS_D512:-default} LADDER_KERNELS_D256=${LADDER_KERNELS_D256:-default}"
K=$B/ladder-kernels
$K devices
echo "== check"
timeout 240 $K check --backend cuda 2>&1 | tee $OUT/check.txt
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  echo "== memcheck (2 cases, 2 repeats)"
  timeout 120 compute-sanitizer --tool memcheck $K check --backend cuda --case spec2_d512 --repeats 2 2>&1 | tail -4
  timeout 60 compute-sanitizer --tool memcheck $K check --backend cuda --case mixed_rows --repeats 2 2>&1 | tail -4
fi
R="--repeats 20 --warmup 3"
echo "== bench"
$K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 1,2,4 --policy 2d,3d $R --json-out $OUT/b_global.json
$K bench --backend cuda --preset gemma4-31b-global-tp2 --depths 1K,4K,8K,16K,32K,64K --rows 2 --policy legacy,spec-aware $R --json-out $OUT/b_tp2.json
$K bench --backend cuda --preset gemma4-dense-256,llama-70b,gemma4-31b-sliding --depths 32K --rows 1,2,4 --policy auto $R --json-out $OUT/b_other.json
echo "== torch"
PYTHONUNBUFFERED=1 timeout 120 python3 benchmarks/torch_sdpa.py --presets gemma4-dense-256,llama-70b,gemma4-31b-global --depths 32768 --rows 1,2,4 --json $OUT/torch.json
if [ "${NCU:-0}" = 1 ] && command -v ncu >/dev/null; then
  echo "== ncu (one 3D launch + merge, gemma4-31b-global 32K, 2 rows)"
  timeout 120 ncu --clock-control none -k regex:"Unified|Merge" -c 2 --section SpeedOfLight --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis \
    $K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 2 --policy 3d --repeats 1 --warmup 0 2>&1 | grep -vE "^==PROF==|^\s*$" | tail -150
fi
