#!/usr/bin/env bash
# One device call: head-512 kernel variants measured side by side (h200_variants.sh), the best
# per score-tile height picked (BM 16: least 1-row + 2-row time; BM 32: least 4-row time), then
# the full run (h200_run.sh: case table, memcheck, sweeps, torch SDPA, ncu) under that choice.
# $OUT gets variants.json (every variant's points), check.txt, b_*.json, torch.json.
set -uo pipefail
OUT=${OUT:-h200-out}
mkdir -p "$OUT"
export B=${B:-/tmp/b}
VOUT=/tmp/variants CHECK=0 NCU=0 D512="${D512:-1 3 4 5}" D256=0 bash benchmarks/h200_variants.sh
best=$(python3 - "$OUT/variants.json" <<'PY'
import glob, json, re, sys
pts, t = [], {}
for f in sorted(glob.glob('/tmp/variants/g_v*.json')):
    v = int(re.search(r'g_v(\d+)', f).group(1))
    for p in json.load(open(f)):
        p['variant'] = v
        pts.append(p)
        t[(v, p['query_rows'])] = p['time_us_median']
json.dump(pts, open(sys.argv[1], 'w'), indent=1)
vs = sorted({v for v, _ in t})
b16 = min(vs, key=lambda v: t.get((v, 1), 1e9) + t.get((v, 2), 1e9))
b32 = min(vs, key=lambda v: t.get((v, 4), 1e9))
print(f"{b16},{b32}")
PY
)
echo "== chosen LADDER_KERNELS_D512=$best"
export LADDER_KERNELS_D512=$best
NCU=${NCU:-1} bash benchmarks/h200_run.sh
