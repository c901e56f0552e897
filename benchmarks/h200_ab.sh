#!/usr/bin/env bash
# Issue 3, head 512: the current binary (.carry/ladder-kernels, under each setting in $VARIANTS,
# ';'-separated, "" = defaults) against the previous one (.carry/ladder-kernels-old), $ROUNDS
# interleaved rounds at 1, 2 and 4 rows (gemma4-31b-global, 32K, 3D); every case first
# (CHECK=0 skips it). SASS=<kernel regex>: the copy instructions of that kernel, from cuobjdump.
set -uo pipefail
K=${K:-.carry/ladder-kernels}; OLD=${OLD:-.carry/ladder-kernels-old}; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
[ "${CHECK:-1}" = 1 ] && timeout 200 $K check --backend cuda 2>&1 | tail -1
if [ -n "${SASS:-}" ]; then
  cuobjdump -sass $K > /tmp/sass.txt 2>&1
  awk -v re="$SASS" '/Function :/{on = ($0 ~ re)} on' /tmp/sass.txt > /tmp/sass_k.txt
  echo "sass: $(grep -c . /tmp/sass_k.txt) lines, $(grep -c LDGSTS /tmp/sass_k.txt) LDGSTS"; grep LDGSTS /tmp/sass_k.txt | head -${SASS_LINES:-4}
fi
R="--repeats 30 --warmup 400"
IFS=';' read -r -a vs <<< "${VARIANTS:-}"; [ ${#vs[@]} = 0 ] && vs=("")
for round in $(seq ${ROUNDS:-3}); do
  echo "== round $round old"
  $OLD bench --backend cuda --preset gemma4-31b-global --depths 32K --rows ${ROWS:-1,2,4} --policy 3d $R | awk '/^cuda/{print "rows " $4 ": " $8 " us " $11 "  " substr($0, index($0, "team"), 36)}'
  for v in "${vs[@]}"; do echo "== round $round new ${v:-defaults}"
    env $v $K bench --backend cuda --preset gemma4-31b-global --depths 32K --rows ${ROWS:-1,2,4} --policy 3d $R | awk '/^cuda/{print "rows " $4 ": " $8 " us " $11 "  " substr($0, index($0, "team"), 36)}'
  done
done
