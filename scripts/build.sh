#!/usr/bin/env bash
# Configures and builds tandem into build/release (CUDA code too when nvcc is found).
# Extra arguments go to CMake's configure step, e.g. scripts/build.sh -DTANDEM_CUDA=OFF
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build/release
