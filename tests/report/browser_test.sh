#!/usr/bin/env bash
# The report in a real browser: runs a small paired matrix end to end with `ladder local`, writes
# the HTML report and the list of compared cells, and drives Debian's chromium over it
# (browser_test.mjs); then the same for a small load matrix, whose page has the load charts. Exits 77 (ctest SKIP) when chromium, node or playwright-core is missing.
#   browser_test.sh LADDER_BINARY
set -euo pipefail
ladder="$1"
here="$(cd "$(dirname "$0")" && pwd)"
skip() { echo "SKIP: $*"; exit 77; }
[[ -x /usr/bin/chromium || -n "${CHROMIUM:-}" ]] || skip "chromium not installed (apt-get install chromium)"
command -v node >/dev/null || skip "node not installed"
if [[ ! -d "$here/node_modules/playwright-core" ]]; then
  # One attempt at installing the pinned playwright-core; offline machines skip.
  (cd "$here" && timeout 120 npm ci --no-audit --no-fund >/dev/null 2>&1) ||
    skip "playwright-core not installed and npm ci failed (run: cd tests/report && npm ci)"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$ladder" local "$here/report_e2e.yaml" --db "$work/results.db" >"$work/local.log" 2>&1 ||
  { cat "$work/local.log"; exit 1; }
"$ladder" report 1 --db "$work/results.db" -o "$work/report.html"
"$ladder" report 1 --db "$work/results.db" --format json -o "$work/report.json"
node -e 'const r = require(process.argv[1]);
         console.log(JSON.stringify(r.runs[0].comparisons.map((c) => c.cell)));' \
  "$work/report.json" >"$work/cells.json"
(cd "$here" && node browser_test.mjs "$work/report.html" "$work/cells.json")

# The load report: engine cells under closed-loop concurrency (load_e2e.yaml), whose page adds
# the throughput–latency and the ratio-against-concurrency charts; the JSON says what they hold.
"$ladder" local "$here/load_e2e.yaml" --db "$work/load.db" >"$work/load.log" 2>&1 ||
  { cat "$work/load.log"; exit 1; }
"$ladder" report 1 --db "$work/load.db" -o "$work/load.html"
"$ladder" report 1 --db "$work/load.db" --format json -o "$work/load.json"
node -e 'const r = require(process.argv[1]).runs[0];
         console.log(JSON.stringify(r.comparisons.map((c) => c.cell)));' \
  "$work/load.json" >"$work/load-cells.json"
node -e 'const l = require(process.argv[1]).runs[0].load;
         console.log(JSON.stringify({
           curves: l.curves.map((c) => ({arm: c.arm, cells: c.points.map((p) => p.cell)})),
           ratios: l.ratio_lines.flatMap((line) => line.points.map((p) => ({
             cell: p.cell, df: p.t.df ?? null}))),
         }));' "$work/load.json" >"$work/load-series.json"
cd "$here" && node browser_test.mjs "$work/load.html" "$work/load-cells.json" "$work/load-series.json"
