#!/usr/bin/env bash
# Builds the whole kernels/ project with -DLADDER_HIP=ON: Debian's hipcc (ROCm 5.2) compiles the
# GPU kernel source once for both offload targets, a wave64 (gfx90a) and a wave32 (gfx1030) one
# (LADDER_HIP_ARCHS in kernels/CMakeLists.txt).
# No AMD GPU is needed (nothing runs). Usage: kernels/ci/check-hip.sh [build-dir]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-/tmp/ladder-kernels-hip}
command -v hipcc >/dev/null || { echo "hipcc not installed (apt-get install hipcc)"; exit 2; }
mkdir -p "$out"
cmake -S "$here" -B "$out/build" -G Ninja -DLADDER_HIP=ON >/dev/null
cmake --build "$out/build" -j2
"$out/build/ladder-kernels" devices
echo "HIP build OK (gfx90a, gfx1030)"
