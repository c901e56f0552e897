#!/usr/bin/env bash
# The release bundle and the deploy files that install it, on CPU, without network:
#   - scripts/package.sh packages the already built `ladder` (no rebuild) into a CPU bundle;
#   - unpacked in a temporary folder, its files match SHA256SUMS, bin/ladder carries the RPATH
#     $ORIGIN/../lib and no RUNPATH, and ldd (with an empty environment) resolves every library
#     but glibc and the C++ runtime from the bundle's lib/, nothing from the build or source
#     tree;
#   - it runs with LD_LIBRARY_PATH empty: --version (commit and backends), through a symlink
#     in another folder (as /usr/local/bin/ladder), and the CPU kernel case table;
#   - the SkyPilot task's setup block runs as written (HOME in the temporary folder, ./dist as
#     its file mount would copy it) and leaves the binary its run block starts; the run block
#     starts the agent with the flags it passes (until it is stopped);
#   - cloud-init's installer script runs as written against a file:// URL with the bundle's
#     sha256 (and refuses a wrong one), and links the binary the systemd unit's ExecStart= runs;
#     its runcmd passes bash -n and runs that installer.
# Usage: bundle_test.sh SOURCE_DIR LADDER_BINARY DEPLOY_EXTRACT. Exit 77 (skipped) without
# patchelf (scripts/setup-debian.sh installs it).
set -euo pipefail
src=$(cd "$1" && pwd)
ladder=$(readlink -f "$2")
extract=$3
command -v patchelf >/dev/null || { echo "SKIP: patchelf is not installed"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ladder-bundle-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "--- $*"; }
build_dir=$(dirname "$(dirname "$ladder")")

step "package.sh --cpu --binary $ladder"
bash "$src/scripts/package.sh" --cpu --binary "$ladder" --out "$tmp/dist"
tarballs=("$tmp"/dist/ladder-*-linux-x86_64-cpu.tar.gz)
((${#tarballs[@]} == 1)) && [[ -f "${tarballs[0]}" ]] || fail "no single CPU tarball in dist/"
tarball=${tarballs[0]}
name=$(basename "$tarball" .tar.gz)
(cd "$tmp/dist" && sha256sum -c --quiet SHA256SUMS) || fail "dist/SHA256SUMS does not match"

step "unpack and check the layout"
mkdir "$tmp/unpacked"
tar -xzf "$tarball" -C "$tmp/unpacked"
root=$tmp/unpacked/$name
[[ "$(ls "$tmp/unpacked")" == "$name" ]] || fail "the tarball must hold one folder named $name"
for f in bin/ladder VERSION SHA256SUMS lib; do [[ -e "$root/$f" ]] || fail "no $f in the bundle"; done
[[ -x "$root/bin/ladder" ]] || fail "bin/ladder is not executable"
(cd "$root" && sha256sum -c --quiet SHA256SUMS) || fail "SHA256SUMS does not match"
grep -q '^requires glibc >= 2\.' "$root/VERSION" || fail "VERSION does not state the glibc"
readelf -d "$root/bin/ladder" | grep -q 'RPATH.*\[\$ORIGIN/\.\./lib\]' || fail "bin/ladder's RPATH"
! readelf -d "$root/bin/ladder" | grep -q RUNPATH || fail "bin/ladder has a RUNPATH"
! readelf -d "$root/bin/ladder" "$root"/lib/* | grep -F -e "$build_dir" -e "$src/" ||
  fail "a dynamic section names the build or source tree"

step "ldd: only glibc and the C++ runtime from the host, the rest from lib/"
deps=$(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH= ldd "$root/bin/ladder")
! grep -F -e "$build_dir" -e "$src/" <<<"$deps" || fail "ldd lists the build or source tree"
! grep -q 'not found' <<<"$deps" || fail "unresolved libraries"
while read -r soname arrow path _; do
  [[ "$arrow" == "=>" && "$path" == /* ]] || continue
  case "$soname" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|ld-linux*) ;;
    libstdc++.so.*|libgcc_s.so.*) ;;
    *) [[ "$(readlink -f "$path")" == "$root/lib/$soname" ]] || fail "$soname comes from $path" ;;
  esac
done <<<"$deps"

step "runs from the unpacked copy with LD_LIBRARY_PATH empty"
version=$(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH= "$root/bin/ladder" --version)
echo "$version"
grep -q '^ladder [0-9]' <<<"$version" || fail "--version: no version line"
grep -q '^commit [0-9a-f]\{12\}\|^commit unknown' <<<"$version" || fail "--version: no commit"
grep -q '^backends cpu' <<<"$version" || fail "--version: no backends"
mkdir "$tmp/usr-local-bin"
ln -s "$root/bin/ladder" "$tmp/usr-local-bin/ladder"
env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH= "$tmp/usr-local-bin/ladder" --version >/dev/null ||
  fail "does not run through a symlink"
env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH= "$root/bin/ladder" kernels check --backend cpu |
  tail -n 1

step "SkyPilot: setup as written, then the run block starts the agent"
sky=$src/deploy/skypilot/ladder-agent.yaml
"$extract" key "$sky" setup >"$tmp/setup.sh"
"$extract" key "$sky" run >"$tmp/run.sh"
bash -n "$tmp/setup.sh" && bash -n "$tmp/run.sh"
home=$tmp/home
mkdir -p "$home/.ladder"
cp -r "$tmp/dist" "$home/.ladder/dist"  # file_mounts: ~/.ladder/dist: ./dist
# file_mounts: ~/.ladder/ca.pem: ./ca.pem (a throwaway self-signed certificate)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -subj /CN=localhost -keyout "$tmp/ca.key" -out "$home/.ladder/ca.pem" 2>/dev/null
env -i PATH=/usr/bin:/bin HOME="$home" LADDER_VARIANT=cpu LADDER_BUNDLE_URL= \
  LADDER_BUNDLE_SHA256= bash "$tmp/setup.sh" || fail "SkyPilot setup failed"
grep -q "ladder/ladder/bin/ladder agent" "$tmp/run.sh" || fail "run does not start setup's binary"
[[ -x "$home/.ladder/ladder/bin/ladder" ]] || fail "setup left no ~/.ladder/ladder/bin/ladder"
# The agent keeps retrying an unreachable coordinator: still running after 3 s means the run
# block and its flags were accepted (bad flags exit 2 at once).
rc=0
env -i PATH=/usr/bin:/bin HOME="$home" LADDER_COORDINATOR=127.0.0.1:9 LADDER_TOKEN=not-a-token \
  LADDER_LABELS="--label provider=test" timeout -s TERM 3 bash "$tmp/run.sh" \
  >"$tmp/run.log" 2>&1 || rc=$?
[[ $rc -eq 124 ]] || { cat "$tmp/run.log"; fail "the run block exited with $rc"; }
[[ "$(stat -c %a "$home/.ladder/ladder-token")" == 600 ]] || fail "token file is not 0600"

step "cloud-init: the installer as written, from a file:// URL with the sha256"
ci=$src/deploy/cloud-init/user-data.yaml
"$extract" write-file "$ci" /usr/local/sbin/ladder-install >"$tmp/ladder-install"
"$extract" runcmd "$ci" >"$tmp/runcmd.sh"
bash -n "$tmp/ladder-install" && bash -n "$tmp/runcmd.sh"
grep -q "^'/usr/local/sbin/ladder-install'$" "$tmp/runcmd.sh" || fail "runcmd does not run the installer"
sha=$(sha256sum "$tarball" | cut -d' ' -f1)
printf 'LADDER_BUNDLE_URL=file://%s\nLADDER_BUNDLE_SHA256=%s\n' "$tarball" "$sha" >"$tmp/agent.env"
env -i PATH=/usr/bin:/bin LADDER_ENV_FILE="$tmp/agent.env" LADDER_PREFIX="$tmp/opt/ladder" \
  LADDER_BINDIR="$tmp/bin" bash "$tmp/ladder-install" || fail "the installer failed"
[[ "$(readlink "$tmp/bin/ladder")" == "$tmp/opt/ladder/bin/ladder" ]] || fail "no bindir/ladder link"
env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH= "$tmp/bin/ladder" --version >/dev/null
# The unit runs the installer's default link.
grep -q '^ExecStart=/usr/local/bin/ladder agent ' "$src/deploy/systemd/ladder-agent.service" ||
  fail "the unit does not run /usr/local/bin/ladder"
grep -q 'bindir=${LADDER_BINDIR:-/usr/local/bin}' "$tmp/ladder-install" || fail "installer's bindir"
printf 'LADDER_BUNDLE_URL=file://%s\nLADDER_BUNDLE_SHA256=%s\n' "$tarball" "${sha//?/0}" >"$tmp/bad.env"
if env -i PATH=/usr/bin:/bin LADDER_ENV_FILE="$tmp/bad.env" LADDER_PREFIX="$tmp/opt/bad" \
     LADDER_BINDIR="$tmp/badbin" bash "$tmp/ladder-install" >/dev/null 2>&1; then
  fail "the installer accepted a wrong sha256"
fi
[[ ! -e "$tmp/opt/bad" && ! -e "$tmp/badbin/ladder" ]] || fail "a refused bundle was installed"
echo "bundle test: passed"
