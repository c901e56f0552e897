#!/usr/bin/env bash
# Quick start, part 1: install what is missing, build, and run the demo matrix end to end (a
# coordinator and three agents on loopback, one per session, the CPU kernel runner, results in
# ./ladder.db); then what ladder is for: the paired 3D/2D ratio per depth and query rows with its
# interval and verdict, the variance split by level, and where the HTML report is.
#
# LADDER_DEMO_SKIP_BUILD=1 skips the setup and the build (tests run the demo this way).
set -euo pipefail
cd "$(dirname "$0")/.."
LADDER=${LADDER:-./build/cli/ladder}
if [[ "${LADDER_DEMO_SKIP_BUILD:-0}" != 1 ]]; then
  bash scripts/setup-debian.sh
  cmake --preset default >/dev/null
  cmake --build --preset default --target ladder
fi
DB=${LADDER_DEMO_DB:-ladder.db}
HTML=${DB%.db}-report.html
"$LADDER" local --db "$DB" "$@"
echo
# `latest`: the run just made, whatever ran before in this database.
"$LADDER" report latest --db "$DB" --format text --sections ratios,variance
"$LADDER" report latest --db "$DB" -o "$HTML" 2>/dev/null
echo
echo "HTML report (chart, every table, all three interval methods): $HTML"
