#!/usr/bin/env bash
# Issue 4 on the H200, one device call: the GPU tests of the device-resident attention and of
# the synthetic engine's CUDA model, a smoke request against gemma4-31b, then the study's ladder
# (benchmarks/gemma4-synthetic-h200.yaml) through `ladder local`. Runs the carried binaries
# (scripts/carry.sh, plus test binaries in .carry/tests). Output goes to $OUT.
#   MATRIX=... LADDER_TIMEOUT_S=... to change the run.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.carry/lib:${LD_LIBRARY_PATH:-}
# cuBLAS (libcublasLt alone is 540 MB) is too large to carry: use the image's.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, s, "lib") for p in nvidia.__path__ for s in os.listdir(p)))' 2>/dev/null); do
  if [ -e "$d/libcublasLt.so.13" ]; then export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; echo "cuBLAS from $d"; break; fi
done
L=$PWD/.carry/ladder
OUT=${OUT:-$(mktemp -d)}
W=$(mktemp -d)
MATRIX=${MATRIX:-benchmarks/gemma4-synthetic-h200.yaml}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
ldd "$L" | grep -E "cublas|not found"

echo "== GPU tests"
for t in .carry/tests/*; do
  [ -x "$t" ] && "$t" --gtest_brief=1 2>&1 | tail -6
done

echo "== smoke: gemma4-31b on cuda, spec k=1, legacy, depth 32768, 16 tokens"
$L engine synthetic --preset gemma4-31b --device cuda --spec-k 1 --policy legacy --port 18080 \
  > $W/smoke.log 2>&1 &
SMOKE=$!
python3 - <<'PY' 2>&1 | tee $OUT/smoke.txt
import json, random, time, urllib.request
start = time.time()
while True:
    try:
        urllib.request.urlopen("http://localhost:18080/health", timeout=1); break
    except Exception:
        if time.time() - start > 150: raise SystemExit("engine not healthy in 150 s")
        time.sleep(0.5)
print(f"healthy after {time.time() - start:.1f} s")
def gen(depth, n):
    body = json.dumps({"prompt": [random.randrange(1000, 30000) for _ in range(depth)],
                       "max_tokens": n}).encode()
    t = time.time()
    r = json.load(urllib.request.urlopen(urllib.request.Request(
        "http://localhost:18080/v1/completions", body, {"Content-Type": "application/json"})))
    return time.time() - t, r["usage"]["completion_tokens"]
for depth in (1024, 32768):
    t8, n8 = gen(depth, 8); t40, n40 = gen(depth, 40)
    print(f"depth {depth}: {n8} tok {t8*1e3:.0f} ms, {n40} tok {t40*1e3:.0f} ms, "
          f"decode {(n40-n8)/(t40-t8):.1f} tok/s")
PY
kill $SMOKE; wait $SMOKE 2>/dev/null
head -5 $W/smoke.log; grep -E "PROBE|ATTN_PATH" $W/smoke.log | head -8

echo "== ladder local $MATRIX"
time timeout ${LADDER_TIMEOUT_S:-420} $L local $MATRIX --agents 1 --db $W/synthetic.db \
  --by policy,depth,spec 2>&1 | tee $OUT/local.txt | tail -60
cp $W/synthetic.db $OUT/ 2>/dev/null
$L report 1 --db $W/synthetic.db --format md > $OUT/report.md 2>&1
sed -n '/## Paired ratios/,/## Ladder/p' $OUT/report.md
$L report 1 --db $W/synthetic.db -o $OUT/report.html > /dev/null 2>&1
