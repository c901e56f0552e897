#!/usr/bin/env bash
# The whole system on the H200: a coordinator with tokens, two agent processes (two sessions on
# one GPU host), the CLI submitting a CUDA kernel matrix, then query and report. Runs the
# carried binary (scripts/carry.sh). Output goes to $OUT.
set -uo pipefail
# cuBLAS comes from the image's CUDA toolkit (too large to carry).
export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
L=$PWD/.carry/ladder
W=$(mktemp -d); OUT=${OUT:-$W}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$L kernels check --backend cuda 2>&1 | tail -25
$L token create --role admin --db $W/r.db > $W/admin.token 2>/dev/null
$L token create --role agent --db $W/r.db > $W/agent.token 2>/dev/null
$L coordinator --listen 127.0.0.1:0 --port-file $W/port --db $W/r.db --require-tokens \
  --heartbeat-ms 1000 > $W/coordinator.log 2>&1 &
for i in $(seq 50); do [ -s $W/port ] && break; sleep 0.2; done
A=127.0.0.1:$(cat $W/port)
for n in a b; do
  $L agent --coordinator $A --token-file $W/agent.token --spool $W/$n.db --label name=$n \
    > $W/agent-$n.log 2>&1 &
done
export LADDER_TOKEN=$(cat $W/admin.token)
$L validate matrices/examples/h200-spec-collapse.yaml
time RUN=$($L submit matrices/examples/h200-spec-collapse.yaml --wait --coordinator $A | tail -1)
$L status $RUN --coordinator $A
$L sessions --coordinator $A
$L query $RUN --coordinator $A --by depth,query_rows,policy
$L report $RUN --db $W/r.db --format md | head -60
$L report $RUN --db $W/r.db -o $OUT/h200-report.html
pkill -f "ladder agent"; kill %1 2>/dev/null; sleep 2
# After the coordinator closed the database: a copy taken while it runs misses the WAL.
cp $W/r.db $OUT/h200-results.db
tail -5 $W/coordinator.log
