#!/usr/bin/env bash
# Copies a built `ladder` and the shared libraries it needs (but libc, libm and the loader) into
# .carry/, so it can run on a machine without our Debian packages (the H200 image):
#   LD_LIBRARY_PATH=.carry/lib .carry/ladder kernels check --backend cuda
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:-build/cli/ladder}
rm -rf .carry && mkdir -p .carry/lib
# Debug information would put the carried folder over the device's 64 MiB transfer limit.
strip --strip-debug -o .carry/ladder "$binary"
ldd "$binary" | awk '/=> \//{print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|ld-linux*|libpthread.so.*|libdl.so.*|librt.so.*) ;;
    libcuda.so.*) ;;  # the driver's, from the target machine
    libcublas*.so.*|libcudart.so.*) ;;  # from the target's CUDA toolkit (too large to carry):
                                        # LD_LIBRARY_PATH=.carry/lib:/usr/local/cuda/lib64
    *) cp -L "$lib" .carry/lib/ ;;
  esac
done
du -sh .carry
