#!/usr/bin/env bash
# Builds relocatable release bundles of `ladder` on Debian 12, one tarball per platform:
#
#   dist/ladder-VERSION-linux-x86_64-cpu.tar.gz    always
#   dist/ladder-VERSION-linux-x86_64-cuda.tar.gz   when nvcc is found (or --cuda)
#   dist/ladder-VERSION-linux-x86_64-hip.tar.gz    with --hip (a ROCm toolchain's hipcc)
#   dist/SHA256SUMS                                the tarballs' checksums
#
# Each unpacks to ladder-VERSION-linux-x86_64-VARIANT/ holding
#   bin/ladder   stripped; its RPATH is $ORIGIN/../lib, so no LD_LIBRARY_PATH is needed
#   lib/         every shared library it needs from Debian (gRPC, protobuf, abseil, yaml-cpp,
#                SQLite, OpenSSL, ...), each with RPATH $ORIGIN; not glibc or the C++ runtime
#                (the host's; see below), not the GPU driver (libcuda, NVML: the host's)
#   VERSION      `ladder --version`, the platform, the oldest glibc it loads on, what it
#                takes from the host
#   SHA256SUMS   of everything above (`sha256sum -c SHA256SUMS` inside the folder)
#
# glibc comes from the host: it cannot be swapped under a process without shipping and calling
# the loader by hand. So does the C++ runtime (libstdc++, libgcc_s): Debian 12's libstdc++
# references arc4random@GLIBC_2.36, which Ubuntu 22.04's glibc 2.35 lacks, while every target
# has a GCC 12 or newer libstdc++ (Ubuntu 22.04: 12.3, 24.04: 14; GLIBCXX_3.4.30). The script
# reads the highest GLIBC_x.y and GLIBCXX_x.y.z versions the binary and lib/ reference and
# refuses a bundle needing more than Ubuntu 22.04 has (LADDER_MAX_GLIBC=2.35,
# LADDER_MAX_GLIBCXX=3.4.30).
#
# CUDA: sm_80 and sm_90a machine code plus compute_90 PTX, which the driver compiles for newer
# GPUs (LADDER_CUDA_ARCHS overrides). The CUDA runtime (libcudart, 0.7 MB) is bundled. cuBLAS
# (used by the synthetic engine's GPU model; libcublas + libcublasLt are 595 MB) comes from the
# host's CUDA toolkit of the same major version, found through the loader's paths or
# /usr/local/cuda/lib64 (the bundle's second RPATH entry), unless --with-cublas bundles it.
# A bundle built with CUDA 13 needs an NVIDIA driver >= 580; build with a CUDA 12 toolkit
# (CUDACXX=/usr/local/cuda-12.8/bin/nvcc) for older drivers.
# HIP: hipcc from PATH (Debian's builds gfx90a and gfx1030; LADDER_HIP_ARCHS="gfx90a;gfx942;
# gfx1030;gfx1100" with a ROCm 6 toolchain); libamdhip64 and its ldd closure are bundled, not
# what ROCm dlopens, so the host needs the same ROCm release (untested here: no ROCm machine).
#
# Usage: scripts/package.sh [--cpu] [--cuda] [--hip] [--with-cublas] [--out DIR] [--jobs N]
#        scripts/package.sh --cpu --binary build/cli/ladder --out DIR   (package a built binary)
# Builds in build-pkg-VARIANT/ (Release, no tests); needs patchelf (scripts/setup-debian.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

variants=()
out=dist
binary=""
with_cublas=0
jobs=${LADDER_JOBS:-$(nproc)}
max_glibc=${LADDER_MAX_GLIBC:-2.35}
max_glibcxx=${LADDER_MAX_GLIBCXX:-3.4.30}
cuda_archs=${LADDER_CUDA_ARCHS:-80-real;90a-real;90-virtual}
while (($#)); do
  case "$1" in
    --cpu|--cuda|--hip) variants+=("${1#--}") ;;
    --with-cublas) with_cublas=1 ;;
    --binary) binary=$2; shift ;;
    --out) out=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "package: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

nvcc=${CUDACXX:-$(command -v nvcc || true)}
[[ -n "$nvcc" || ! -x /usr/local/cuda/bin/nvcc ]] || nvcc=/usr/local/cuda/bin/nvcc
if ((${#variants[@]} == 0)); then
  variants=(cpu)
  [[ -n "$nvcc" ]] && variants+=(cuda)
fi
if [[ -n "$binary" && ${#variants[@]} -ne 1 ]]; then
  echo "package: --binary packages one build: name its variant (--cpu, --cuda or --hip)" >&2
  exit 2
fi
for tool in patchelf objdump strip sha256sum; do
  command -v "$tool" >/dev/null || { echo "package: $tool is missing (scripts/setup-debian.sh)" >&2; exit 2; }
done

build() {  # variant -> path of the built binary on stdout
  local variant=$1 dir=build-pkg-$1
  local flags=(-DCMAKE_BUILD_TYPE=Release -DLADDER_TESTS=OFF -DLADDER_CUDA=OFF -DLADDER_HIP=OFF)
  case "$variant" in
    cuda)
      [[ -n "$nvcc" ]] || { echo "package: --cuda needs nvcc (CUDACXX or PATH)" >&2; exit 2; }
      flags+=(-DLADDER_CUDA=ON "-DCMAKE_CUDA_COMPILER=$nvcc" "-DCMAKE_CUDA_ARCHITECTURES=$cuda_archs") ;;
    hip)
      flags+=(-DLADDER_HIP=ON)
      [[ -n "${LADDER_HIP_ARCHS:-}" ]] && flags+=("-DLADDER_HIP_ARCHS=$LADDER_HIP_ARCHS") ;;
  esac
  # Inside $(...), set -e does not reach these: a failed build must not package the binary an
  # earlier build left in the folder.
  cmake -S . -B "$dir" -G Ninja "${flags[@]}" >&2 || return 1
  cmake --build "$dir" --target ladder -j "$jobs" >&2 || return 1
  echo "$dir/cli/ladder"
}

# Libraries left to the host: glibc (and its loader), the C++ runtime and the GPU driver's
# user-space side.
host_library() {
  case "$1" in
    ld-linux*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*) return 0 ;;
    libutil.so.*|libanl.so.*|libnsl.so.*|libmvec.so.*) return 0 ;;
    libstdc++.so.*|libgcc_s.so.*) return 0 ;;
    libcuda.so.*|libnvidia-*.so*) return 0 ;;
    libcublas.so.*|libcublasLt.so.*) ((with_cublas == 0)) ;;
    *) return 1 ;;
  esac
}

bundle() {  # variant binary
  local variant=$1 bin=$2 version name stage root lib libs
  version=$("$bin" --version | sed -n '1s/^ladder //p')
  [[ -n "$version" ]] || { echo "package: $bin --version printed no version" >&2; exit 1; }
  name=ladder-$version-linux-x86_64-$variant
  stage=$(mktemp -d)
  root=$stage/$name
  mkdir -p "$root/bin" "$root/lib"
  strip --strip-unneeded -o "$root/bin/ladder" "$bin"
  chmod 0755 "$root/bin/ladder"
  # ldd lists the whole closure (direct and indirect); "not found" is a broken build.
  if ldd "$bin" | grep -q 'not found'; then
    ldd "$bin" | grep 'not found' >&2
    echo "package: $bin has unresolved libraries" >&2
    exit 1
  fi
  local host_kept=()
  while read -r soname path; do
    if host_library "$soname"; then
      host_kept+=("$soname")
      continue
    fi
    cp -L "$path" "$root/lib/$soname"
    chmod 0644 "$root/lib/$soname"
    patchelf --force-rpath --set-rpath '$ORIGIN' "$root/lib/$soname"
  done < <(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
  # DT_RPATH (not RUNPATH): searched for the libraries' own dependencies too, and not
  # overridden by a stray LD_LIBRARY_PATH on the host.
  local rpath='$ORIGIN/../lib'
  [[ "$variant" == cuda && $with_cublas == 0 ]] && rpath+=':/usr/local/cuda/lib64'
  patchelf --force-rpath --set-rpath "$rpath" "$root/bin/ladder"

  # The oldest glibc and libstdc++ this loads on: the highest versions any file references.
  local glibc glibcxx
  highest() {  # PREFIX: the highest PREFIX<version> referenced by bin/ and lib/
    objdump -T "$root/bin/ladder" "$root"/lib/* 2>/dev/null |
      grep -o "(${1}[0-9][0-9.]*)" | tr -d '()' | sed "s/^$1//" | sort -uV | tail -n 1
  }
  glibc=$(highest GLIBC_)
  glibcxx=$(highest GLIBCXX_)
  newer() { [[ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -n 1)" != "$2" ]]; }
  if newer "$glibc" "$max_glibc" || newer "$glibcxx" "$max_glibcxx"; then
    echo "package: the bundle needs glibc $glibc and GLIBCXX $glibcxx, newer than Ubuntu" \
         "22.04's $max_glibc and $max_glibcxx:" >&2
    objdump -T "$root/bin/ladder" "$root"/lib/* |
      grep -F -e "(GLIBC_$glibc)" -e "(GLIBCXX_$glibcxx)" >&2 || true
    exit 1
  fi

  {
    "$bin" --version
    echo "platform linux-x86_64 (built on $(. /etc/os-release && echo "$PRETTY_NAME"))"
    echo "requires glibc >= $glibc, libstdc++ with GLIBCXX_$glibcxx (GCC 12 or newer)"
    echo "from the host: ${host_kept[*]}"
    [[ "$variant" == cuda ]] && echo "requires an NVIDIA driver for CUDA $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p') or newer"
    true
  } > "$root/VERSION"
  (cd "$root" && find bin lib VERSION -type f | LC_ALL=C sort | xargs sha256sum > SHA256SUMS)

  mkdir -p "$out"
  local mtime
  mtime=$(git log -1 --format=%ct 2>/dev/null || date +%s)
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" \
      -C "$stage" -czf "$out/$name.tar.gz" "$name"
  (cd "$out" && sha256sum ladder-*-linux-*.tar.gz > SHA256SUMS)
  echo "package: $out/$name.tar.gz ($(du -h "$out/$name.tar.gz" | cut -f1)," \
       "$(du -sh "$root" | cut -f1) unpacked; glibc >= $glibc)"
  rm -rf "$stage"
}

for variant in "${variants[@]}"; do
  if [[ -n "$binary" ]]; then
    bundle "$variant" "$binary"
  else
    built=$(build "$variant") || { echo "package: the $variant build failed" >&2; exit 1; }
    bundle "$variant" "$built"
  fi
done
