#!/bin/sh
# A stand-in for ladder-example-bench in the history page's browser test: the command runner's
# result lines, one per round, {"metric": "time_us", "value": V, "round": R}, with V = SIZE / 100
# times FACTOR, ±0.5 % (each process its own draw). No timing: the page's marks must not hang on
# how busy the machine is.
#   history_stand_in_bench.sh FACTOR --method M --size N --rounds R --seed S
factor="$1"
shift
rounds=1
size=1
while [ $# -gt 1 ]; do
  case "$1" in
    --rounds) rounds="$2" ;;
    --size) size="$2" ;;
  esac
  shift 2
done
awk -v r="$rounds" -v s="$size" -v f="$factor" -v seed="$$" 'BEGIN {
  srand(seed)
  for (i = 0; i < r; i++) {
    printf "{\"metric\": \"time_us\", \"value\": %.3f, \"round\": %d}\n", s / 100 * f * (1 + 0.01 * (rand() - 0.5)), i
  }
}'
