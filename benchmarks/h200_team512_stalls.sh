#!/usr/bin/env bash
# Issue 3: where the head-512 team kernel's warps stall, per SASS instruction, at 1, 2 and 4
# query rows (gemma4-31b-global, 32K, clocks and caches left alone). Writes one CSV of the
# source page per row count under $OUT (or ./ncu-stalls) for offline ranking.
K=${K:-.carry/ladder-kernels}; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
O=${OUT:-ncu-stalls}; mkdir -p "$O"
N="ncu --clock-control none --cache-control none"
for r in ${ROWS:-1 2 4}; do
  LADDER_KERNELS_D512=${V:-6} timeout 150 $N -k regex:"Team" -s 20 -c 1 --section WarpStateStats --section SourceCounters \
    --section SpeedOfLight -o "$O/team_r$r" -f \
    $K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows $r --policy 3d --repeats 2 --warmup 20 >/dev/null 2>&1
  ncu -i "$O/team_r$r.ncu-rep" --page source --csv --print-source sass > "$O/team_r$r.sass.csv" 2>"$O/team_r$r.err"
  ncu -i "$O/team_r$r.ncu-rep" --page details --section WarpStateStats --section SpeedOfLight 2>&1 | grep -vE "^\s*$|----" | head -60 > "$O/team_r$r.details.txt"
  rm -f "$O/team_r$r.ncu-rep"
  echo "rows $r: $(wc -l < "$O/team_r$r.sass.csv") sass lines"; head -c 300 "$O/team_r$r.err"
done
