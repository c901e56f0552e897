#!/usr/bin/env bash
# Quick start, part 2: install what is missing, build everything, run the whole test suite,
# then the sanitizer subset (AddressSanitizer+UBSan (clang-14) and ThreadSanitizer builds of the
# in-process test programs; scripts/sanitize.sh) and a 30-second libFuzzer run per target
# (scripts/fuzz.sh). Prints how long each stage took.
# Between the two, the builds a user makes that the default one does not cover
# (scripts/check-builds.sh): every header compiled on its own, the CUDA release bundle built one
# source per compiler call (so a missing include fails) and run from its tarball, and the HIP
# kernels for gfx90a and gfx1030.
# .ci/run calls this. GPU tests (label `gpu`) skip themselves where no GPU is present.
# LADDER_SANITIZE=0 skips the sanitizer builds, LADDER_FUZZ_SECONDS=0 the fuzz run,
# LADDER_CHECK_BUILDS=0 the GPU and header builds.
set -euo pipefail
cd "$(dirname "$0")/.."
stages=()
began=$(date +%s)
stage() {  # stage NAME: notes how long the stage that just ended took
  local now
  now=$(date +%s)
  stages+=("$(printf '%-26s %5d s' "$1" $((now - began)))")
  began=$now
}
report_stages() {
  ((${#stages[@]})) || return 0
  echo "== time per stage"
  printf '   %s\n' "${stages[@]}"
}
trap report_stages EXIT
bash scripts/setup-debian.sh
stage "packages"
# Build folders of one tree share ccache's objects where their compiler calls are the same.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
preset=${LADDER_PRESET:-default}
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
stage "build ($preset)"
ctest --preset "$preset" "$@"
stage "ctest"
if [[ "${LADDER_CHECK_BUILDS:-1}" != 0 ]]; then
  bash scripts/check-builds.sh build
  stage "headers, cuda, hip builds"
fi
if [[ "${LADDER_SANITIZE:-1}" != 0 ]]; then
  SUBSET=ci bash scripts/sanitize.sh asan tsan
  stage "sanitizers (asan, tsan)"
fi
# A short libFuzzer run of the matrix parser, the agent API and the admin API's request handling
# from their committed seed corpora, built in build-asan beside the ASan tests (one clang-14
# build of the libraries serves both); LADDER_FUZZ_SECONDS=0 skips it.
if [[ "${LADDER_FUZZ_SECONDS:-30}" != 0 ]]; then
  bash scripts/fuzz.sh "${LADDER_FUZZ_SECONDS:-30}"
  stage "fuzz (build + run)"
fi
