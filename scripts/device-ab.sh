#!/usr/bin/env bash
# Runs kernel A/B matrices on a GPU machine from a carried build and writes the results database
# and the paired-ratio report. An A/B of kernel variants or tunings is a matrix whose paired axis
# is the variant (kernels/ab/kernels-ab-*.yaml): ladder measures both arms in one session,
# interleaved in a seeded order, and reports the ratio with its interval.
#
# Here (a CUDA build, then the folder to carry):
#   cmake --preset cuda && cmake --build build-cuda --target ladder kernels_gpu_tests
#   scripts/carry.sh build-cuda/cli/ladder
#   cp scripts/device-ab.sh kernels/ab/kernels-ab-*.yaml .carry/
#   cp build-cuda/tests/kernels/kernels_{,device_}gpu_tests .carry/   # optional: run before the matrices
# On the GPU machine:
#   cd .carry && LD_LIBRARY_PATH=lib:/usr/local/cuda/lib64 bash device-ab.sh OUT [MATRIX.yaml ...]
# Writes OUT/device.txt (GPU, driver, clocks, build), OUT/check.txt (the case table and the GPU
# tests: a variant that computes wrong answers has no speed worth reporting), OUT/local.txt (what
# each `ladder local` printed), OUT/ab.db (every measurement) and OUT/report.md (`ladder report`:
# paired ratios per matrix and the crossover a `locate` matrix found; with REPEAT=1 the first
# matrix runs twice and `ladder compare` gives the spread between the two runs). SANITIZE=1 adds
# compute-sanitizer runs to check.txt. Exit status: that of the first step that failed.
set -uo pipefail
out=${1:?usage: device-ab.sh OUT [MATRIX.yaml ...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
ladder=${LADDER:-$here/ladder}
# One agent per session of the matrix (ladder local's default), unless AGENTS says otherwise. They
# share the one GPU a point at a time (the kernel runner's turn), so a "session" here is an agent
# session on this machine, not another VM.
agent_flags=()
if [ -n "${AGENTS:-}" ]; then agent_flags=(--agents "$AGENTS"); fi
matrices=("$@")
if [ ${#matrices[@]} -eq 0 ]; then matrices=("$here"/kernels-ab-*.yaml); fi
mkdir -p "$out"
db=$out/ab.db
status=0
step() {  # step NAME COMMAND...: runs it, notes a failure, goes on
  local name=$1
  shift
  echo "\$ $*"
  "$@"
  local rc=$?
  if [ $rc -ne 0 ]; then
    echo "[$name exited $rc]"
    if [ $status -eq 0 ]; then status=$rc; fi
  fi
}

{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
  "$ladder" --version
} > "$out/device.txt" 2>&1

{
  step check "$ladder" kernels check --backend cuda
  for t in kernels_gpu_tests kernels_device_gpu_tests; do
    if [ -x "$here/$t" ]; then step "$t" "$here/$t" --gtest_brief=1; fi
  done
  # SANITIZE=1: compute-sanitizer over the head-512 cases (memcheck) and one team-kernel case
  # (racecheck), where the toolkit has it.
  sanitizer=${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer
  if [ "${SANITIZE:-0}" = 1 ] && [ -x "$sanitizer" ] && [ -x "$here/kernels_gpu_tests" ]; then
    step memcheck timeout 200 "$sanitizer" --tool memcheck --error-exitcode 1 "$here/kernels_gpu_tests" --gtest_brief=1 \
      --gtest_filter='*GpuCaseTable*d512*'
    step racecheck timeout 150 "$sanitizer" --tool racecheck --error-exitcode 1 "$here/kernels_gpu_tests" --gtest_brief=1 \
      --gtest_filter='*GpuCaseTable*decode_d512_gqa8_4k:*GpuCaseTable*spec4_d512_bs32_1234'
  fi
  # Warm-up: clocks up and every kernel loaded before the first timed point of a matrix.
  step warm-up "$ladder" kernels bench --backend cuda --preset gemma4-31b-global --depths 32K --rows 1,4 \
    --warmup 2000 --repeats 200
} > "$out/check.txt" 2>&1

runs=()
for m in "${matrices[@]}"; do
  step "local $(basename "$m")" "$ladder" local "$m" "${agent_flags[@]}" --db "$db" >> "$out/local.txt" 2>&1
  runs+=("$(basename "$m" .yaml)")
done
if [ "${REPEAT:-0}" = 1 ]; then
  step "local repeat" "$ladder" local "${matrices[0]}" "${agent_flags[@]}" --db "$db" >> "$out/local.txt" 2>&1
fi

{
  run=0
  for name in "${runs[@]}"; do
    run=$((run + 1))
    echo "## run $run: $name"
    echo
    step "report $run" "$ladder" report "$run" --db "$db" --format md --sections locate,ratios,variance
    echo
  done
  if [ "${REPEAT:-0}" = 1 ]; then
    echo "## run 1 against its repeat, run $((run + 1))"
    echo
    step compare "$ladder" compare 1 $((run + 1)) --db "$db"
  fi
} > "$out/report.md" 2>&1
exit $status
