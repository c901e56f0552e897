#!/usr/bin/env bash
# Issue 3: the previous binary (.carry/ladder-kernels) against this one (.carry/ladder-kernels-new)
# on the presets a merge change touches (gemma4-31b-sliding, gemma4-dense-256, llama-70b at 32K,
# 1 and 4 rows, auto policy) and gemma4-31b-global (32K, 3D, 1 / 2 / 4 rows); $ROUNDS
# interleaved rounds, 30 calls after 300 warm-ups; every case of the new binary first.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
OLD=${OLD:-.carry/ladder-kernels}; NEW=${NEW:-.carry/ladder-kernels-new}
R="--repeats 30 --warmup 300"
echo "check: $(timeout 200 $NEW check --backend cuda 2>&1 | tail -1)"
echo "columns: sliding 1 4 | dense-256 1 4 | llama-70b 1 4 || global 1 2 4 (us)"
for round in $(seq ${ROUNDS:-3}); do for b in $OLD $NEW; do
  echo "$round $b $($b bench --backend cuda --preset gemma4-31b-sliding,gemma4-dense-256,llama-70b --depths 32K --rows 1,4 --policy auto $R | awk '/^cuda/{printf "%s ", $8}')|| $($b bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 1,2,4 --policy 3d $R | awk '/^cuda/{printf "%s ", $8}')"
done; done
