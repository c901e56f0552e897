#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan+UBSan, in build-fuzz/) and runs each for a while.
#
#   scripts/fuzz.sh                 # every target, 60 s each
#   scripts/fuzz.sh 600             # every target, 10 minutes each
#   scripts/fuzz.sh 60 matrix       # one target (matrix | admin | agent)
#
# Each target starts from its committed seed corpus (fuzz/corpus/<target>/) plus what earlier
# runs found (build-fuzz/corpus/<target>/, not committed). A crash leaves its input in
# build-fuzz/artifacts/<target>/ and makes the script exit non-zero; reproduce it with
#   build-fuzz/fuzz/ladder-fuzz-<target> build-fuzz/artifacts/<target>/crash-...
# Environment: CXX (default clang++-14), CC (clang-14), JOBS (build parallelism, default 2),
# FUZZ_FORK (libFuzzer -fork=N worker processes; unset: one process).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(matrix admin agent)
CXX=${CXX:-clang++-14}
CC=${CC:-clang-14}
build=build-fuzz

command -v "$CXX" >/dev/null || { echo "fuzz: $CXX not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 1; }
cmake -S . -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_C_COMPILER="$CC" \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer" \
  -DLADDER_FUZZ=ON -DLADDER_TESTS=OFF -DLADDER_ENGINES=OFF >/dev/null
cmake --build "$build" -j "${JOBS:-2}" --target $(printf 'ladder-fuzz-%s ' "${targets[@]}")

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  artifacts="$build/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  echo "fuzz: ladder-fuzz-$t for ${seconds}s"
  if ! "$build/fuzz/ladder-fuzz-$t" "$corpus" "fuzz/corpus/$t" \
      -max_total_time="$seconds" -max_len=16384 -rss_limit_mb=2048 -timeout=10 \
      ${FUZZ_FORK:+-fork=$FUZZ_FORK} -print_final_stats=1 \
      -artifact_prefix="$artifacts/" 2>&1 | tail -n 25; then
    status=1
  fi
  if compgen -G "$artifacts/*" >/dev/null; then
    echo "fuzz: ladder-fuzz-$t left inputs in $artifacts/" >&2
    status=1
  fi
done
exit "$status"
