#!/usr/bin/env bash
# cmake/BuildInfoWrite.cmake (what `ladder --version` and the agent's inventory say this build
# is) run against a scratch git repository: the header names the commit the tree is at when the
# build runs, with "-dirty" while a tracked file differs from it, a later commit once made
# (without configuring again), "unknown" outside a checkout; and it is left untouched while its
# text would not change, so a build that changes nothing rebuilds nothing.
#
#   build_info_test.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: build_info_test.sh SOURCE_DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
repo=$tmp/repo
out=$tmp/generated/ladder/build_info.h
write() {  # write SOURCE_DIR
  cmake -DLADDER_SOURCE_DIR="$1" -DLADDER_BUILD_VERSION=9.8.7 \
    "-DLADDER_BUILD_BACKENDS=cpu, cuda 13.0 sm_80 sm_90a" \
    -DLADDER_BUILD_INFO_IN="$src/cmake/build_info.h.in" -DLADDER_BUILD_INFO_OUT="$out" \
    -P "$src/cmake/BuildInfoWrite.cmake"
}
commit() { sed -n 's/.*kCommit\[\] = "\(.*\)";/\1/p' "$out"; }

git init -q "$repo"
git -C "$repo" config user.email test@example.invalid
git -C "$repo" config user.name test
echo one >"$repo/file"
git -C "$repo" add file
git -C "$repo" commit -qm one
first=$(git -C "$repo" rev-parse --short=12 HEAD)

write "$repo"
[[ "$(commit)" == "$first" ]] || fail "commit '$(commit)', expected $first"
grep -q 'kVersion\[\] = "9.8.7";' "$out" || fail "no version 9.8.7 in the header"
grep -q 'kBackends\[\] = "cpu, cuda 13.0 sm_80 sm_90a";' "$out" || fail "backends not as given"

touch -d '2001-02-03 04:05:06' "$out"
before=$(stat -c %Y "$out")
write "$repo"
[[ "$(stat -c %Y "$out")" == "$before" ]] || fail "an unchanged header was rewritten"

echo two >"$repo/file"
write "$repo"
[[ "$(commit)" == "$first-dirty" ]] || fail "commit '$(commit)' with a changed tracked file"
echo untracked >"$repo/new-file"
git -C "$repo" checkout -q file
write "$repo"
[[ "$(commit)" == "$first" ]] || fail "an untracked file made it '$(commit)'"

echo three >"$repo/file"
git -C "$repo" commit -qam three
second=$(git -C "$repo" rev-parse --short=12 HEAD)
write "$repo"
[[ "$(commit)" == "$second" && "$second" != "$first" ]] || fail "after a commit '$(commit)', expected $second"

mkdir "$tmp/tarball"
write "$tmp/tarball"
[[ "$(commit)" == unknown ]] || fail "outside a checkout '$(commit)'"
echo "build_info: commit, -dirty, a later commit, unknown, unchanged header untouched: ok"
