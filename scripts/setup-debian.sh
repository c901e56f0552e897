#!/usr/bin/env bash
# Installs the packages ladder needs. Idempotent; run as root (or it uses sudo).
#
#   scripts/setup-debian.sh           everything to build, test and package ladder (Debian 12:
#                                     this machine and CI; adds the browser, clang and hipcc
#                                     the test suite's HTML, fuzz and HIP checks use)
#   scripts/setup-debian.sh --agent   only what building `ladder` for an agent host needs, on
#                                     Debian 12 or Ubuntu 22.04/24.04 (a GPU VM image): the
#                                     compiler, CMake, Ninja and the libraries' -dev packages;
#                                     no test frameworks, Chromium, clang or hipcc
#
# Most agents need none of this: a release bundle (scripts/package.sh, docs/deploy.md) runs
# with nothing installed. Every --agent package name exists in Debian 12 (bookworm) and Ubuntu
# 22.04 (jammy) and 24.04 (noble). Ubuntu 22.04's CMake (3.22) is older than the 3.25 ladder
# needs: the script says so; install a newer one (`pip install cmake`) or use the bundle.
set -euo pipefail
mode=full
case "${1:-}" in
  "") ;;
  --agent) mode=agent ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "setup: unknown argument $1 (--agent or nothing)" >&2; exit 2 ;;
esac
packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libyaml-cpp-dev libsqlite3-dev libcli11-dev nlohmann-json3-dev
  libfmt-dev libspdlog-dev libcpp-httplib-dev libssl-dev
)
if [[ "$mode" == full ]]; then
  packages+=(
    ccache sqlite3
    googletest libgtest-dev libgmock-dev libbenchmark-dev
    python3 python3-prometheus-client python3-numpy openssl procps
    patchelf binutils curl
    chromium
    clang-14 libclang-rt-14-dev clang-format-14
    hipcc
  )
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi
cmake_version=$(cmake --version | sed -n '1s/.* //p')
if [[ "$(printf '%s\n3.25\n' "$cmake_version" | sort -V | head -1)" != 3.25 ]]; then
  echo "setup: CMake $cmake_version is older than the 3.25 ladder needs: install a newer one" \
       "(pip install cmake) or use a release bundle (docs/deploy.md)" >&2
fi
