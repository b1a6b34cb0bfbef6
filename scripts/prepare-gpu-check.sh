#!/usr/bin/env bash
# Prepares build/gpu-bundle: what scripts/gpu-check.sh needs on a bare CUDA machine beyond nvcc,
# CMake, a C++ compiler and python3 (GoogleTest's source, from Debian's googletest package). The
# device tool carries the folder with the working tree: run(carry=["build/gpu-bundle"], ...).
# Fails if the bundle outgrows the 64 MiB a carry may hold.
#
#   scripts/prepare-gpu-check.sh [--engine-tests]
#
# --engine-tests also builds tests/engine and bench/e2e/device_model_speed here (build/gpu-engine:
# CUDA for sm_80 and sm_90, baseline x86-64 code) and carries them with every shared library
# they load, the dynamic loader included, gzipped (engine.tar.gz), so that the engine's GPU tests
# (the whole model, the AVMP pools and the engine on --device cuda) and the whole-model figures,
# which need Abseil, OpenBLAS and sentencepiece, run on a machine that has none of them. Their
# CUDA runtime is linked statically: they need a driver for CUDA 13.
set -euo pipefail
cd "$(dirname "$0")/.."

engine_tests=0
if [[ ${1:-} == --engine-tests ]]; then engine_tests=1; fi

source=/usr/src/googletest
if [[ ! -f $source/CMakeLists.txt ]]; then
  echo "prepare-gpu-check: $source is missing; install Debian's googletest package" >&2
  exit 1
fi
bundle=build/gpu-bundle
rm -rf "$bundle"
mkdir -p "$bundle"
cp -a "$source" "$bundle/googletest"

if ((engine_tests)); then
  build=build/gpu-engine
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_NATIVE=OFF \
    -DTANDEM_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=80;90" -DTANDEM_BUILD_BENCH=ON >/dev/null
  cmake --build "$build" --target engine_test device_model_speed
  staging=$(mktemp -d)
  trap 'rm -rf "$staging"' EXIT
  mkdir -p "$staging/engine/lib"
  for binary in tests/engine_test bench/device_model_speed; do
    cp "$build/$binary" "$staging/engine/"
    strip --strip-debug "$staging/engine/$(basename "$binary")"
    # Every library ldd resolves, and the loader itself (gpu-check.sh starts the binaries
    # through it, so the machine's own libc never meets the libraries built against ours).
    ldd "$build/$binary" | awk '$3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' |
      while read -r lib; do cp -L "$lib" "$staging/engine/lib/"; done
  done
  tar -C "$staging" -czf "$bundle/engine.tar.gz" engine
fi

size_kib=$(du -sk "$bundle" | cut -f1)
limit_kib=$((64 * 1024))
if ((size_kib > limit_kib)); then
  echo "prepare-gpu-check: $bundle is ${size_kib} KiB, over the ${limit_kib} KiB a carry holds" >&2
  exit 1
fi
echo "prepare-gpu-check: $bundle ready (${size_kib} KiB)"
