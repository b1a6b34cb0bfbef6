#!/usr/bin/env bash
# Prepares build/gpu-bundle: what scripts/gpu-check.sh needs on a bare CUDA machine beyond nvcc,
# CMake, a C++ compiler and python3 (GoogleTest's source, from Debian's googletest package). The
# device tool carries the folder with the working tree: run(carry=["build/gpu-bundle"], ...).
# Fails if the bundle outgrows the 64 MiB a carry may hold.
set -euo pipefail
cd "$(dirname "$0")/.."

source=/usr/src/googletest
if [[ ! -f $source/CMakeLists.txt ]]; then
  echo "prepare-gpu-check: $source is missing; install Debian's googletest package" >&2
  exit 1
fi
bundle=build/gpu-bundle
rm -rf "$bundle"
mkdir -p "$bundle"
cp -a "$source" "$bundle/googletest"
# The CUDA machine builds with its own compiler: nothing built here is carried.
size_kib=$(du -sk "$bundle" | cut -f1)
limit_kib=$((64 * 1024))
if ((size_kib > limit_kib)); then
  echo "prepare-gpu-check: $bundle is ${size_kib} KiB, over the ${limit_kib} KiB a carry holds" >&2
  exit 1
fi
echo "prepare-gpu-check: $bundle ready (${size_kib} KiB)"
