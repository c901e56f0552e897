#!/usr/bin/env bash
# Quick start, part 1: install what is missing, build, and run the demo matrix end to end
# (a coordinator and two agents on loopback, the CPU kernel runner, results in ./ladder.db).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
cmake --preset default >/dev/null
cmake --build --preset default --target ladder
./build/cli/ladder local --db ladder.db "$@"
