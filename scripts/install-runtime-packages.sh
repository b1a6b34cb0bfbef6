#!/usr/bin/env bash
# Installs the runtime packages of scripts/runtime-packages.txt for this distribution, without
# recommends, and empties apt's caches: the runtime stage of both container images runs it.
set -euo pipefail

mapfile -t packages < <("$(dirname "$0")/runtime-packages.sh")
echo "install-runtime-packages: ${packages[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${packages[@]}"
apt-get clean
rm -rf /var/lib/apt/lists/*
