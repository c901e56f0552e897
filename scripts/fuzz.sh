#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for a while. They live in the asan preset's build
# (build-asan/: clang-14, ASan+UBSan, every library compiled with -fsanitize=fuzzer-no-link), so
# the sanitizer tests (scripts/sanitize.sh asan) and the fuzzers share one build of the libraries.
#
#   scripts/fuzz.sh                 # every target, 60 s each
#   scripts/fuzz.sh 600             # every target, 10 minutes each
#   scripts/fuzz.sh 60 matrix       # one target (matrix | admin | agent | engine)
#
# Each target starts from its committed seed corpus (fuzz/corpus/<target>/) plus what earlier
# runs found (build-asan/corpus/<target>/, not committed). A crash leaves its input in
# build-asan/artifacts/<target>/ and makes the script exit non-zero; reproduce it with
#   build-asan/fuzz/ladder-fuzz-<target> build-asan/artifacts/<target>/crash-...
# Environment: JOBS (build parallelism, default 2), FUZZ_FORK (libFuzzer -fork=N worker
# processes; unset: one process).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(matrix admin agent engine)
build=build-asan

command -v clang++-14 >/dev/null || { echo "fuzz: clang++-14 not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 1; }
cmake --preset asan >/dev/null
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
