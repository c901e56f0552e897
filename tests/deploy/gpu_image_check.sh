#!/usr/bin/env bash
# The CUDA bundle on a GPU image with nothing else installed (the H200 machine: Ubuntu 24.04
# with the NVIDIA driver, none of our Debian libraries), the way a rented VM gets it:
#   1. the SkyPilot task's setup block, as written, unpacks and checks the bundle (HOME in a
#      temporary folder; ./dist copied where its file mount puts it);
#   2. the bundle's ladder: --version, ldd, the CUDA case table and a tiny CUDA bench;
#   3. a coordinator from the same bundle with TLS (a throwaway CA) and tokens required;
#      a CPU-only agent (CUDA hidden: the GPU in its inventory, no cuda feature) and the
#      SkyPilot run block as written (token as the secret, the CA as its file mount) join it;
#   4. a CUDA kernel matrix with no `requires:` is submitted and must finish, every
#      measurement from the CUDA agent (the cell's backend implies the feature).
# Prints the time from unpack to the first lease. Usage (repository root, after
# scripts/package.sh --cuda and extracting the SkyPilot blocks next to the tarball):
#   tests/deploy/gpu_image_check.sh DIST_DIR [OUT_DIR]
# DIST_DIR holds ladder-*-linux-x86_64-cuda.tar.gz, SHA256SUMS, skypilot-setup.sh and
# skypilot-run.sh (deploy_extract key deploy/skypilot/ladder-agent.yaml setup|run).
# VARIANT=cpu rehearses the same flow with the CPU bundle on a machine without a GPU.
set -euo pipefail
dist=$(cd "$1" && pwd)
out=${2:-$(mktemp -d)}
mkdir -p "$out"
variant=${VARIANT:-cuda}
tmp=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  sleep 2
  cp "$tmp"/*.log "$out/" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
now() { date +%s.%N; }
say() { echo "=== $*"; }
home=$tmp/home
mkdir -p "$home/.ladder/dist"
cp "$dist"/ladder-*-linux-x86_64-"$variant".tar.gz "$dist/SHA256SUMS" "$home/.ladder/dist/"

# A throwaway CA and a coordinator certificate for localhost.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/ca.key" -out "$tmp/ca.pem" -days 1 \
  -subj /CN=ladder-test-ca 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$tmp/server.key" -out "$tmp/server.csr" \
  -subj /CN=localhost 2>/dev/null
openssl x509 -req -in "$tmp/server.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" -CAcreateserial \
  -out "$tmp/server.pem" -days 1 \
  -extfile <(printf 'subjectAltName=DNS:localhost,IP:127.0.0.1') 2>/dev/null
cp "$tmp/ca.pem" "$home/.ladder/ca.pem"  # file_mounts: ~/.ladder/ca.pem: ./ca.pem

say "SkyPilot setup block, as written"
t_unpack=$(now)
env -i PATH=/usr/bin:/bin HOME="$home" LADDER_VARIANT="$variant" LADDER_BUNDLE_URL= LADDER_BUNDLE_SHA256= \
  bash "$dist/skypilot-setup.sh"
t_ready=$(now)
ladder=$home/.ladder/ladder/bin/ladder
du -sh "$home/.ladder/ladder" "$home/.ladder/dist"/*.tar.gz
env -i LD_LIBRARY_PATH= "$ladder" --version
cat "$home/.ladder/ladder/VERSION"
say "ldd"
env -i LD_LIBRARY_PATH= ldd "$ladder"

say "kernels check / bench on $variant"
env -i LD_LIBRARY_PATH= timeout 120 "$ladder" kernels check --backend "$variant" | tail -n 3
env -i LD_LIBRARY_PATH= timeout 120 "$ladder" kernels bench --backend "$variant" --preset tiny \
  --depths 1K,8K --rows 1,2

say "coordinator (TLS, tokens) + CPU-only agent + the SkyPilot run block"
db=$tmp/results.db
"$ladder" token create --role admin --db "$db" >"$tmp/admin.token"
"$ladder" token create --role agent --db "$db" >"$tmp/agent.token"
chmod 600 "$tmp"/*.token
"$ladder" coordinator --listen 127.0.0.1:0 --port-file "$tmp/port" --db "$db" --require-tokens \
  --tls-cert "$tmp/server.pem" --tls-key "$tmp/server.key" --heartbeat-ms 500 \
  >"$tmp/coordinator.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -s "$tmp/port" ]] && break; sleep 0.1; done
address=localhost:$(cat "$tmp/port")
client=(--coordinator "$address" --token-file "$tmp/admin.token" --tls-ca "$tmp/ca.pem")
# CUDA hidden: this agent sees the GPU through nvidia-smi but cannot run CUDA cells.
CUDA_VISIBLE_DEVICES= "$ladder" agent --coordinator "$address" --spool "$tmp/cpu-spool.db" \
  --token-file "$tmp/agent.token" --tls-ca "$tmp/ca.pem" --label role=cpu-only \
  >"$tmp/cpu-agent.log" 2>&1 &
pids+=($!)
env -i PATH=/usr/bin:/bin HOME="$home" LADDER_COORDINATOR="$address" \
  LADDER_TOKEN="$(cat "$tmp/agent.token")" LADDER_LABELS="--label role=skypilot-run" \
  SKYPILOT_TASK_ID=gpu-image-check bash "$dist/skypilot-run.sh" >"$tmp/skypilot-agent.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q registered "$tmp/skypilot-agent.log" && break; sleep 0.1; done
"$ladder" sessions "${client[@]}" || true

cat >"$tmp/m.yaml" <<'EOF'
name: bundle-cuda
description: a CUDA kernel matrix with no requires (the backend implies the feature)
runner: kernel
axes:
  depth: [1024, 8192]
  policy: [legacy, spec-aware]
fixed: {backend: BACKEND, preset: PRESET, query_rows: 2, repeats: 10, warmup: 2}
pair: [policy]
replicates: {sessions: 1, processes: 1, rounds: 2}
EOF
if [[ "$variant" == cuda ]]; then preset=gemma4-31b-global; else preset=tiny; fi
sed -i "s/BACKEND/$variant/; s/PRESET/$preset/" "$tmp/m.yaml"
say "submit --wait"
timeout 240 "$ladder" submit "$tmp/m.yaml" --wait "${client[@]}" >"$tmp/submit.out"
cat "$tmp/submit.out"
run_id=$(tail -n 1 "$tmp/submit.out")
t_done=$(now)
"$ladder" query "$run_id" --by depth,policy "${client[@]}" || true
"$ladder" sessions --json "${client[@]}" |
  grep -E '"(ladder|ladder_commit|ladder_backends|labels_json|labels)"|"cuda"' || true
grep -h "attempt" "$tmp/skypilot-agent.log" | head -n 3
echo "CPU-only agent: $(grep -c "attempt .*: running" "$tmp/cpu-agent.log" || true) attempts"
if [[ "$variant" == cuda ]] && grep -q "attempt .*: running" "$tmp/cpu-agent.log"; then
  echo "FAIL: the CPU-only agent ran a CUDA cell"; exit 1
fi
first_lease=$(grep -m1 "attempt .*: running" "$tmp/skypilot-agent.log" | cut -c1-23)
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
echo "unpack + checks: $(secs "$t_unpack" "$t_ready") s; first lease at $first_lease" \
     "(unpack started $(date -d "@$t_unpack" '+%H:%M:%S.%3N'));" \
     "matrix done $(secs "$t_unpack" "$t_done") s after the unpack started"
echo "gpu image check: passed"
