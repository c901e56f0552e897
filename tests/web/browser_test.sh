#!/usr/bin/env bash
# The web pages in a real browser, against a real coordinator (`--http`) and three real agents on
# loopback: the runs page sees the demo run appear, move and finish; the run page's summary and
# its results (the report library's page) match `ladder query`; the fleet page lists every
# session (browser_test.mjs). Exits 77 (ctest SKIP) when chromium, node or playwright-core is
# missing.
#   browser_test.sh LADDER_BINARY [SCREENSHOT_DIR]
# With SCREENSHOT_DIR it also writes web-runs.png, web-run.png and web-fleet.png there (docs/web.md's
# pictures: `tests/web/browser_test.sh build/cli/ladder docs/images`).
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
"$ladder" coordinator --db "$work/results.db" --listen 127.0.0.1:0 --port-file "$work/port" \
  --http 0 --heartbeat-ms 300 2>"$work/coordinator.log" &
pids+=($!)
for _ in $(seq 600); do
  [[ -s "$work/port" ]] && grep -q "web pages: " "$work/coordinator.log" && break
  sleep 0.1
done
[[ -s "$work/port" ]] || { cat "$work/coordinator.log"; exit 1; }
port="$(cat "$work/port")"
url="$(sed -n 's/.*web pages: \(http[^ ]*\)/\1/p' "$work/coordinator.log" | head -1)"
for name in a b c; do
  "$ladder" agent --coordinator "127.0.0.1:$port" --spool "$work/$name.spool" \
    2>"$work/agent-$name.log" &
  pids+=($!)
done
# The page opens first and submits through `ladder submit` once it is watching (SUBMIT).
SUBMIT="$ladder submit $here/../../matrices/examples/demo-cpu.yaml --coordinator 127.0.0.1:$port" \
QUERY="$ladder query 1 --db $work/results.db --json" \
  node "$here/browser_test.mjs" "$modules" "$url" "$shots"
