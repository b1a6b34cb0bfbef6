#!/usr/bin/env bash
# Installs every system dependency of tandem from Debian's packages. Idempotent and
# non-interactive: it does nothing when everything is already installed.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libabsl-dev nlohmann-json3-dev libopenblas-dev libsentencepiece-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc prometheus-cpp-dev
  python3 python3-numpy python3-grpcio libssl-dev
  # tests only: raw HTTP/2 frames for the transport-abuse tests
  python3-h2
  # tests only: a real Prometheus scrapes /metrics; clang's libFuzzer runs the fuzz targets
  prometheus clang libclang-rt-14-dev
  # deployment checks (scripts/check-deploy.sh, tests/deploy/): yamllint, promtool (from
  # prometheus), haproxy -c, and the structural and live checks' YAML and schemas
  yamllint haproxy python3-yaml python3-jsonschema
)

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
