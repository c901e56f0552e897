#!/usr/bin/env bash
# Compiles the GPU kernel source as HIP for a wave64 (gfx90a) and a wave32 (gfx1030) target
# with Debian's hipcc (ROCm 5.2), then builds the whole kernels/ project with -DLADDER_HIP=ON.
# No AMD GPU is needed (nothing runs). Usage: kernels/ci/check-hip.sh [build-dir]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-/tmp/ladder-kernels-hip}
command -v hipcc >/dev/null || { echo "hipcc not installed (apt-get install hipcc)"; exit 2; }
mkdir -p "$out"
for arch in gfx90a gfx1030; do
  echo "hipcc: gpu_backend.cu for $arch"
  hipcc -x hip -std=c++17 -O3 -fPIC --offload-arch=$arch -DLADDER_KERNELS_HIP=1 \
    -I"$here/include" -I"$here/src" -c "$here/src/gpu/gpu_backend.cu" -o "$out/gpu_backend_$arch.o"
done
cmake -S "$here" -B "$out/build" -G Ninja -DLADDER_HIP=ON >/dev/null
cmake --build "$out/build" -j2
"$out/build/ladder-kernels" devices
echo "HIP build OK (gfx90a, gfx1030)"
