#!/usr/bin/env bash
# Generates the Python modules of tandem's API (tandem/v1) and of the standard health protocol
# from proto/ into a folder (default: examples/python/generated), with Debian's protoc
# (protobuf-compiler) and grpc_python_plugin (protobuf-compiler-grpc).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${1:-$here/generated}"
plugin="${GRPC_PYTHON_PLUGIN:-$(command -v grpc_python_plugin || true)}"
if [[ -z "$plugin" ]]; then
  echo "generate_stubs: grpc_python_plugin not found (Debian package protobuf-compiler-grpc)" >&2
  exit 1
fi
mkdir -p "$out"
protoc=("${PROTOC:-protoc}" --python_out="$out" --grpc_out="$out" --plugin=protoc-gen-grpc="$plugin")
# tandem/v1/tandem.proto becomes the modules tandem.v1.tandem_pb2 and tandem.v1.tandem_pb2_grpc.
"${protoc[@]}" --proto_path="$repo/proto" "$repo/proto/tandem/v1/tandem.proto"
# health.proto becomes the top-level health_pb2: under its proto path it would be the package
# grpc.health.v1, which the grpc library's own package `grpc` would hide.
"${protoc[@]}" --proto_path="$repo/proto/grpc/health/v1" "$repo/proto/grpc/health/v1/health.proto"
echo "generate_stubs: wrote $out/tandem/v1/tandem_pb2{,_grpc}.py and $out/health_pb2{,_grpc}.py"
