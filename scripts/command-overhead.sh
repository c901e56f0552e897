#!/usr/bin/env bash
# What running under ladder costs a program: the program's own reported time when it runs alone
# against when ladder's command runner starts it (ladder local: a coordinator and an agent in one
# process, the agent polling the program's exit and reading its stderr), interleaved pair by pair
# so that the machine's drift falls on both. docs/command-runner.md quotes its output.
#
#   scripts/command-overhead.sh [PAIRS] [BENCH ARGS...]
#   scripts/command-overhead.sh 10 --method std_sort --size 1000000 --rounds 5 --seed 1
#
# BENCH is build/command/ladder-example-bench (LADDER_BIN, LADDER_EXAMPLE_BENCH override the
# paths). Prints one line per pair and the ratio of the means (under ladder / alone) with the
# spread of the per-pair ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
pairs=${1:-10}
shift || true
args=("$@")
((${#args[@]})) || args=(--method std_sort --size 1000000 --rounds 5 --seed 1)
ladder=${LADDER_BIN:-build/cli/ladder}
bench=${LADDER_EXAMPLE_BENCH:-build/command/ladder-example-bench}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rounds=5
for ((i = 0; i < ${#args[@]}; ++i)); do [[ ${args[i]} == --rounds ]] && rounds=${args[i + 1]}; done
{
  echo "name: command-overhead"
  echo "runner: command"
  printf 'command: {bench: program, args: ['
  sep=""
  for a in "${args[@]}"; do printf '%s"%s"' "$sep" "$a"; sep=", "; done
  echo ']}'
  echo "metrics: {time_us: {unit: us, better: lower}}"
  echo "axes: {arm: [ladder]}"
  echo "replicates: {sessions: 1, processes: 1, rounds: $rounds}"
} >"$work/m.yaml"
mean_of() { python3 -c 'import sys,json; v=[json.loads(l)["value"] for l in sys.stdin if l.startswith("{\"metric\"")]; print(sum(v)/len(v))'; }
for ((p = 1; p <= pairs; ++p)); do
  "$bench" "${args[@]}" >"$work/alone.out"  # to a file, as under ladder: no reader beside it
  alone=$(mean_of <"$work/alone.out")
  rm -f "$work/l.db"*
  "$ladder" local "$work/m.yaml" --agents 1 --db "$work/l.db" --bench "program=$bench" >/dev/null 2>&1
  "$ladder" export 1 --db "$work/l.db" --csv -o "$work/l.csv" >/dev/null 2>&1
  under=$(python3 -c 'import csv,sys; v=[float(r["value"]) for r in csv.DictReader(open(sys.argv[1])) if r["metric"]=="time_us"]; print(sum(v)/len(v))' "$work/l.csv")
  echo "pair $p  alone $alone us  under ladder $under us"
done | tee "$work/pairs"
python3 - "$work/pairs" <<'PY'
import sys, statistics
a, u = [], []
for line in open(sys.argv[1]):
    f = line.split()
    a.append(float(f[3])); u.append(float(f[7]))
r = [x / y for x, y in zip(u, a)]
print(f"under ladder / alone: ratio of means {statistics.mean(u) / statistics.mean(a):.4f}; "
      f"per-pair ratios median {statistics.median(r):.4f}, min {min(r):.4f}, max {max(r):.4f} "
      f"({len(r)} pairs)")
PY
