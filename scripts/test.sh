#!/usr/bin/env bash
# Quick start, part 2: install what is missing, build everything, run the whole test suite,
# then the sanitizer subset (AddressSanitizer+UBSan and ThreadSanitizer builds of the in-process
# test programs; scripts/sanitize.sh) and a 30-second libFuzzer run per target (scripts/fuzz.sh).
# .ci/run calls this. GPU tests (label `gpu`) skip themselves where no GPU is present.
# LADDER_SANITIZE=0 skips the sanitizer builds, LADDER_FUZZ_SECONDS=0 the fuzz run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
preset=${LADDER_PRESET:-default}
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
ctest --preset "$preset" "$@"
if [[ "${LADDER_SANITIZE:-1}" != 0 ]]; then
  SUBSET=ci bash scripts/sanitize.sh asan tsan
fi
# A short libFuzzer run of the matrix parser and the admin API's request handling from their
# committed seed corpora (clang-14, ASan+UBSan); LADDER_FUZZ_SECONDS=0 skips it.
if [[ "${LADDER_FUZZ_SECONDS:-30}" != 0 ]]; then
  bash scripts/fuzz.sh "${LADDER_FUZZ_SECONDS:-30}"
fi
