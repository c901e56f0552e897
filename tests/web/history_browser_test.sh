#!/usr/bin/env bash
# A matrix's history page in a real browser, from a real coordinator over a real database: the
# demo of docs/history.md (matrices/examples/history-cpu.yaml run five times by `ladder local`,
# the last two with a planted 3x slowdown, one tag holding markup), the baseline set, then
# `ladder coordinator --http` on that file. history_browser_test.mjs follows the run page's link
# to /matrices/history-cpu and checks each chart against `ladder history --json`: one point per
# run with its interval, the baseline marked, run 4 highlighted as where it began, the tags in
# each point's hover text, the markup inert; then the same chart in `ladder report --history`.
# The program measured is history_stand_in_bench.sh, not the timed sort: values fixed up to
# ±0.5 %, 3x from run 4, so that what the page marks does not hang on how busy the machine is (a
# timed sort on a loaded machine can leave run 5 inconclusive, and then nothing is located).
# Exits 77 (ctest SKIP) when chromium, node or playwright-core is missing.
#   history_browser_test.sh LADDER [SCREENSHOT_DIR]
# With SCREENSHOT_DIR it also writes web-history.png there (the whole page, to look at).
set -euo pipefail
ladder="$1"
shots="${2:-}"
here="$(cd "$(dirname "$0")" && pwd)"
modules="$here/../report"
skip() { echo "SKIP: $*"; exit 77; }
[[ -x /usr/bin/chromium || -n "${CHROMIUM:-}" ]] || skip "chromium not installed (apt-get install chromium)"
command -v node >/dev/null || skip "node not installed"
if [[ ! -d "$modules/node_modules/playwright-core" ]]; then
  (cd "$modules" && timeout 120 npm ci --no-audit --no-fund >/dev/null 2>&1) ||
    skip "playwright-core not installed and npm ci failed (run: cd tests/report && npm ci)"
fi
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
db="$work/h.db"
matrix="$here/../../matrices/examples/history-cpu.yaml"
markup='<script>window.pwned=1</script>'
# The builds: the stand-in at 1x (good) and 3x (slow), as `--bench sorter=PATH` takes them.
for build in good:1 slow:3; do
  printf '#!/bin/sh\nexec %q %s "$@"\n' "$here/history_stand_in_bench.sh" "${build#*:}" \
    >"$work/${build%:*}.sh"
  chmod +x "$work/${build%:*}.sh"
done
for i in 1 2 3 4 5; do
  build=good
  if ((i >= 4)); then build=slow; fi
  "$ladder" local "$matrix" --db "$db" --agents 5 --bench "sorter=$work/$build.sh" \
    --tag "build=$build" --tag "note=$markup" >"$work/local-$i.log" 2>&1 ||
    { cat "$work/local-$i.log"; exit 1; }
done
"$ladder" baseline set 1 --db "$db" >/dev/null
"$ladder" history history-cpu --db "$db" --json >"$work/history.json"
"$ladder" report 5 --db "$db" --history -o "$work/report.html" 2>/dev/null
"$ladder" coordinator --db "$db" --listen 127.0.0.1:0 --port-file "$work/port" --http 0 \
  2>"$work/coordinator.log" &
pids+=($!)
for _ in $(seq 600); do
  [[ -s "$work/port" ]] && grep -q "web pages: " "$work/coordinator.log" && break
  sleep 0.1
done
grep -q "web pages: " "$work/coordinator.log" || { cat "$work/coordinator.log"; exit 1; }
url="$(sed -n 's/.*web pages: \(http[^ ]*\)/\1/p' "$work/coordinator.log" | head -1)"
MARKUP="$markup" node "$here/history_browser_test.mjs" "$modules" "$url" "$work/history.json" \
  "$work/report.html" "$shots"
