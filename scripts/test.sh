#!/usr/bin/env bash
# Quick start, part 2: install what is missing, build everything, run the whole test suite.
# .ci/run calls this. GPU tests (label `gpu`) skip themselves where no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
preset=${LADDER_PRESET:-default}
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
ctest --preset "$preset" "$@"
