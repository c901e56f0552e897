#!/usr/bin/env bash
# The one-host bench (docs/statistics.md, "One host: the paired design, measured"): how often the
# documented one-host workflow — both builds as the paired arms of one run, judged with
# `ladder compare RUN --arms build=base,new` — calls a build with a planted slowdown slower
# (power), and how often it calls a build slower or faster than itself (A/A false gates).
#
#   bench/one_host_bench.sh [RUNS] [MATRIX] [BASE] [PLANTED]
#     RUNS     runs of each kind (default 20)
#     MATRIX   a matrix with `bench: "{build}"` and axis build: [base, new] paired
#              (default matrices/examples/one-host-ab-cpu.yaml)
#     BASE     the base build (default build/command/ladder-example-bench)
#     PLANTED  the build with the planted slowdown (default build/command/ladder-example-bench-slow10)
#   LADDER=path/to/ladder  METRIC=time_us  OUT=dir (kept databases; default a temporary folder)
#
# Each planted run registers BASE as `base` and PLANTED as `new`; each A/A run registers BASE as
# both. Runs alternate (planted, A/A, planted, ...) so that both kinds see the same machine. Prints
# one line per run and the counts with Clopper–Pearson 95 % intervals; exit 0.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20}
matrix=${2:-matrices/examples/one-host-ab-cpu.yaml}
base=${3:-build/command/ladder-example-bench}
planted=${4:-build/command/ladder-example-bench-slow10}
ladder=${LADDER:-build/cli/ladder}
metric=${METRIC:-time_us}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
results=$out/verdicts.txt
: >"$results"
for i in $(seq 1 "$runs"); do
  for kind in planted aa; do
    db=$out/$kind-$i.db
    rm -f "$db" "$db"-*
    new=$planted
    [[ $kind == aa ]] && new=$base
    "$ladder" local "$matrix" --db "$db" --bench "base=$base" --bench "new=$new" >"$out/$kind-$i.log" 2>&1 ||
      { echo "run $kind $i failed:"; tail -5 "$out/$kind-$i.log"; exit 1; }
    "$ladder" compare 1 --db "$db" --arms build=base,new --metric "$metric" --json >"$out/$kind-$i.json"
    line=$(python3 - "$out/$kind-$i.json" "$kind" "$i" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
r = j["rows"][0]
q = r.get("ratio") or {}
print(sys.argv[2], sys.argv[3], r["matrix_verdict"].replace(" ", "_"), q.get("estimate"), q.get("lower"), q.get("upper"), q.get("df"))
PY
)
    echo "$line" | tee -a "$results"
  done
done
python3 - "$results" <<'PY'
import math, sys

def cp(k, n, conf=0.95):
    # Clopper–Pearson by bisection on the binomial tail.
    def tail_ge(p):  # P(X >= k)
        return sum(math.comb(n, j) * p**j * (1 - p)**(n - j) for j in range(k, n + 1))
    def tail_le(p):  # P(X <= k)
        return sum(math.comb(n, j) * p**j * (1 - p)**(n - j) for j in range(0, k + 1))
    a = (1 - conf) / 2
    def solve(f, target, increasing):
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            if (f(mid) < target) == increasing: lo = mid
            else: hi = mid
        return (lo + hi) / 2
    lower = 0.0 if k == 0 else solve(tail_ge, a, True)
    upper = 1.0 if k == n else solve(tail_le, a, False)
    return lower, upper

rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
for kind, want, what in (("planted", ("slower",), "power: planted build called slower"),
                         ("aa", ("slower", "faster"), "A/A false gates: slower or faster")):
    got = [r for r in rows if r[0] == kind]
    k = sum(r[2] in want for r in got)
    n = len(got)
    lo, hi = cp(k, n)
    ratios = sorted(float(r[3]) for r in got if r[3] != "None")
    widths = sorted((float(r[5]) / float(r[4])) ** 0.5 - 1 for r in got if r[4] != "None")
    print(f"{what}: {k}/{n} = {100*k/n:.1f} % [{100*lo:.1f}, {100*hi:.1f}]; "
          f"ratios {ratios[0]:.3f}-{ratios[-1]:.3f} (median {ratios[len(ratios)//2]:.3f}), "
          f"median half-width {100*widths[len(widths)//2]:.1f} %")
PY
