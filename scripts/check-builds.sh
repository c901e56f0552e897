#!/usr/bin/env bash
# The builds a user makes that the default (CPU, unity) build does not cover, compiled on every
# landing (scripts/test.sh runs this after ctest):
#
#   1. headers   every header of the libraries and the CLI compiled on its own (the
#                ladder_header_check target of the default build folder): a header that does not
#                include what it uses fails even where the unity build hides it
#   2. cuda      the CUDA release bundle as scripts/package.sh --cuda makes it (Release, one
#                compiler call per source, so a .cc missing an include fails too, and every
#                CUDA-only source and #if path), for sm_90a only (LADDER_CUDA_ARCHS; the release
#                archs stay package.sh's); then the bundle is unpacked and run: its checksums,
#                `ladder --version` listing the CUDA backend, `ladder kernels check` on the CPU
#   3. hip       kernels/ built on its own with Debian's hipcc for gfx90a (wave64) and gfx1030
#                (wave32), host and device code, linked into ladder-kernels
#
#   scripts/check-builds.sh [BUILD_DIR]     # default build/ (configured by scripts/test.sh)
#   CHECK_BUILDS="headers cuda" scripts/check-builds.sh
#
# A stage whose toolkit is missing (no nvcc, no hipcc) says so and is skipped, so the script
# also runs on a machine without them; CI's machine has both. Prints each stage's time.
# Exit status: non-zero when any build or check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
stages=${CHECK_BUILDS:-headers cuda hip}
jobs=${JOBS:-$(nproc)}
summary=()
status=0
run_stage() {  # NAME FUNCTION
  local began=$SECONDS
  if "$2"; then
    summary+=("$(printf '%-8s ok      %5d s' "$1" $((SECONDS - began)))")
  else
    summary+=("$(printf '%-8s FAILED  %5d s' "$1" $((SECONDS - began)))")
    status=1
  fi
}

headers() {
  [[ -f "$build_dir/build.ninja" ]] || { echo "check-builds: $build_dir is not configured" >&2; return 1; }
  cmake --build "$build_dir" --target ladder_header_check -j "$jobs"
}

nvcc_path() {
  local nvcc=${CUDACXX:-$(command -v nvcc || true)}
  [[ -n "$nvcc" || ! -x /usr/local/cuda/bin/nvcc ]] || nvcc=/usr/local/cuda/bin/nvcc
  echo "$nvcc"
}

cuda() {
  local out=build-ci-dist tarball unpacked bundle version rc=0
  rm -rf "$out"
  LADDER_CUDA_ARCHS=${LADDER_CUDA_ARCHS:-90a-real} LADDER_JOBS=$jobs \
    bash scripts/package.sh --cuda --out "$out" || return 1
  # The GPU arm of the one-host bench (command/examples/example_gpu_bench.cu) is CUDA code too.
  cmake --build build-pkg-cuda --target ladder-example-gpu-bench ladder-example-gpu-bench-slow10 \
    -j "$jobs" || return 1
  tarball=$(ls "$out"/ladder-*-linux-x86_64-cuda.tar.gz)
  (cd "$out" && sha256sum -c --quiet SHA256SUMS) || return 1
  unpacked=$(mktemp -d)
  tar -xzf "$tarball" -C "$unpacked"
  bundle=$(ls -d "$unpacked"/ladder-*-cuda)
  if ! (cd "$bundle" && sha256sum -c --quiet SHA256SUMS); then
    rc=1
  elif ! version=$("$bundle/bin/ladder" --version); then
    rc=1
  elif ! grep -q "cuda" <<<"$version"; then
    echo "check-builds: the CUDA bundle's --version lists no CUDA backend: $version" >&2
    rc=1
  else
    echo "$version"
    "$bundle/bin/ladder" kernels check --backend cpu || rc=1
  fi
  rm -rf "$unpacked"
  return $rc
}

hip() {
  local dir=build-ci-hip
  cmake -S kernels -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLADDER_HIP=ON >/dev/null &&
    cmake --build "$dir" -j "$jobs"
}

for stage in $stages; do
  case "$stage" in
    headers) run_stage headers headers ;;
    cuda)
      if [[ -z "$(nvcc_path)" ]]; then
        summary+=("cuda     skipped: no nvcc (set CUDACXX)")
      else
        run_stage cuda cuda
      fi ;;
    hip)
      if ! command -v hipcc >/dev/null; then
        summary+=("hip      skipped: no hipcc (scripts/setup-debian.sh installs Debian's)")
      else
        run_stage hip hip
      fi ;;
    *) echo "check-builds: unknown stage $stage (headers, cuda, hip)" >&2; exit 2 ;;
  esac
done
echo "== check-builds"
printf '   %s\n' "${summary[@]}"
exit $status
