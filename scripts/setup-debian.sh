#!/usr/bin/env bash
# Installs every Debian 12 package ladder needs to build and test. Idempotent; run as root.
set -euo pipefail
packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev libsqlite3-dev sqlite3 libcli11-dev nlohmann-json3-dev
  libfmt-dev libspdlog-dev libcpp-httplib-dev libssl-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  python3 openssl procps
  chromium
  clang-14 libclang-rt-14-dev
  hipcc
)
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
