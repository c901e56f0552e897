#!/usr/bin/env bash
# Formats every C++, CUDA and HIP source under git, new files not yet added included (unless
# ignored), with the repository's .clang-format (clang-format 14, installed by
# scripts/setup-debian.sh).
#   scripts/format.sh          # rewrite files in place
#   scripts/format.sh --check  # list the files that differ and exit 1 (nothing is written)
set -euo pipefail
cd "$(dirname "$0")/.."
format=$(command -v clang-format-14 || command -v clang-format || true)
if [[ -z "$format" ]]; then
  echo "clang-format not found: run scripts/setup-debian.sh" >&2
  exit 77  # ctest's skip code (tests/CMakeLists.txt: format.check)
fi
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cc' '*.h' '*.cu' '*.cuh' '*.hip' | grep -v '^tests/report/node_modules/')
if [[ "${1:-}" == --check ]]; then
  differ=0
  for f in "${files[@]}"; do
    if ! "$format" --style=file "$f" | cmp -s - "$f"; then
      echo "$f"
      differ=1
    fi
  done
  if ((differ)); then
    echo "these files differ from .clang-format: run scripts/format.sh" >&2
    exit 1
  fi
  exit 0
fi
printf '%s\0' "${files[@]}" | xargs -0 -n 50 "$format" --style=file -i
