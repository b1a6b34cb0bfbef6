#!/usr/bin/env bash
# Installs every system dependency of tandem from Debian's packages. Idempotent and
# non-interactive: it does nothing when everything is already installed.
#
#   scripts/setup.sh               everything: build, tests, benchmarks, fuzzing (what CI runs)
#   scripts/setup.sh --build-only  only what `scripts/build.sh -DTANDEM_BUILD_TESTS=OFF
#                                  -DTANDEM_BUILD_BENCH=OFF` needs (the container images)
#
# The same package names exist on Ubuntu 24.04, whose CUDA images build the CUDA container.
set -euo pipefail

build_only=false
for arg in "$@"; do
  case "$arg" in
    --build-only) build_only=true ;;
    *)
      echo "setup: unknown argument '$arg' (usage: scripts/setup.sh [--build-only])" >&2
      exit 2
      ;;
  esac
done

# What the release binary needs to build.
build_packages=(
  build-essential cmake ninja-build pkg-config
  libabsl-dev nlohmann-json3-dev libopenblas-dev libsentencepiece-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc prometheus-cpp-dev
  libssl-dev
)
# Everything else a developer and CI need.
dev_packages=(
  ccache git
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy python3-grpcio
  # tests only: raw HTTP/2 frames for the transport-abuse tests
  python3-h2
  # tests only: a real Prometheus scrapes /metrics; clang's libFuzzer runs the fuzz targets
  prometheus clang libclang-rt-14-dev
  # deployment checks (scripts/check-deploy.sh, tests/deploy/): yamllint, promtool (from
  # prometheus), haproxy -c, and the structural and live checks' YAML and schemas
  yamllint haproxy python3-yaml python3-jsonschema shellcheck
)

packages=("${build_packages[@]}")
if ! $build_only; then packages+=("${dev_packages[@]}"); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
