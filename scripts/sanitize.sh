#!/usr/bin/env bash
# Builds the test suite under AddressSanitizer+UBSan (preset asan, build-asan/) and
# ThreadSanitizer (preset tsan, build-tsan/) and runs ctest in each, GPU tests excluded.
#
#   scripts/sanitize.sh              # both
#   scripts/sanitize.sh asan         # one
#   FRESH=1 scripts/sanitize.sh      # delete the build folders first (a from-scratch build;
#                                    # ccache still serves objects it has seen)
#   SUBSET=ci scripts/sanitize.sh    # what CI runs (scripts/test.sh): only the in-process test
#                                    # programs (no `ladder` binary to build), so both presets
#                                    # fit CI's time limit next to the full default suite
# Extra ctest arguments: CTEST_ARGS="-R coordinator" scripts/sanitize.sh tsan
# Prints the build and test time of each preset at the end. Exit status: non-zero if a build
# failed or any test failed (a sanitizer report fails its test).
set -euo pipefail
cd "$(dirname "$0")/.."
presets=("$@")
((${#presets[@]})) || presets=(asan tsan)
jobs=${JOBS:-2}

# Leak checking stays on; a sanitizer report aborts the test so ctest sees it.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

summary=()
status=0
for preset in "${presets[@]}"; do
  dir=build-$preset
  [[ "${FRESH:-0}" == 1 ]] && rm -rf "$dir"
  start=$(date +%s)
  cmake --preset "$preset" >/dev/null
  if [[ "${SUBSET:-}" == ci ]]; then
    # ASan+UBSan: parsing, storage, statistics, scheduling, the gRPC service and its wire
    # contract under abuse, the bench's 20 agents over gRPC and the CPU kernels (memory errors).
    # TSan: the scheduler and store under concurrent callers (scheduler_concurrency_test: long
    # polls, group commits, the reaper). Not the gRPC-driven programs: Debian's gRPC and
    # abseil are not built with TSan, so the synchronization inside them is invisible to it and
    # every callback they run looks racy (false reports, see docs/scaling.md).
    if [[ $preset == asan ]]; then
      programs=(tests/matrices/matrices_tests tests/db/db_tests tests/stats/stats_tests
                tests/report/analysis_tests tests/coordinator/coordinator_tests
                tests/coordinator/agent_service_tests tests/coordinator/protocol_tests
                tests/runner/runner_tests tests/bench/bench_tests
                tests/kernels/kernels_tests tests/engines/engines_robustness_tests)
    else
      programs=(tests/db/db_tests tests/coordinator/coordinator_tests)
    fi
    targets=()
    for program in "${programs[@]}"; do targets+=("$(basename "$program")"); done
    if ! cmake --build "$dir" -j "$jobs" --target "${targets[@]}"; then
      summary+=("$preset: BUILD FAILED after $(($(date +%s) - start)) s")
      status=1
      continue
    fi
    built=$(date +%s)
    # The programs run $jobs at a time (each is one process; the machine's cores would otherwise
    # wait on the slowest), each into a log of its own, printed whole when it ends.
    logs=$(mktemp -d)
    run_one() {  # PROGRAM -> exit status; its output in $logs/<name>.log
      local program=$1 name
      name=$(basename "$program")
      (cd "$dir/$(dirname "$program")" && "./$name" --gtest_brief=1) >"$logs/$name.log" 2>&1
      local rc=$?
      echo "== $preset: $program (exit $rc)"
      cat "$logs/$name.log"
      echo "$rc" >"$logs/$name.rc"
    }
    export -f run_one
    export dir preset logs
    printf '%s\n' "${programs[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ {}
    for program in "${programs[@]}"; do
      if [[ "$(cat "$logs/$(basename "$program").rc" 2>/dev/null)" != 0 ]]; then
        summary+=("$preset: $program FAILED")
        status=1
      fi
    done
    rm -rf "$logs"
    done_at=$(date +%s)
    summary+=("$preset (ci subset): build $((built - start)) s, tests $((done_at - built)) s")
    continue
  fi
  if ! cmake --build --preset "$preset" -j "$jobs"; then
    summary+=("$preset: BUILD FAILED after $(($(date +%s) - start)) s")
    status=1
    continue
  fi
  built=$(date +%s)
  # Sanitized binaries are 2-15x slower: longer per-test timeout than the default preset's.
  if ! ctest --test-dir "$dir" -j "$jobs" --output-on-failure --timeout 1200 -LE gpu \
      ${CTEST_ARGS:-}; then
    status=1
  fi
  done_at=$(date +%s)
  summary+=("$preset: build $((built - start)) s, tests $((done_at - built)) s")
done
printf 'sanitize: %s\n' "${summary[@]}"
exit "$status"
