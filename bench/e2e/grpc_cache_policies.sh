#!/usr/bin/env bash
# The whole server under each prefix-cache policy, over real gRPC: for every policy a fresh
# `tandem serve` on loopback, then the same `tandem bench` load (multi-turn sessions sharing a
# system prompt, closed loop), one after the other in one run so that the ratios compare like
# with like on a noisy machine. Prints a markdown table for docs/BENCHMARKS.md.
#
#   bench/e2e/grpc_cache_policies.sh [MODEL_DIR] [-- extra tandem bench flags]
#   e.g. bench/e2e/grpc_cache_policies.sh bundled/tandem-tiny-chat -- --concurrency 16 --requests 128
set -euo pipefail
cd "$(dirname "$0")/../.."
tandem=build/release/tandem
model=${1:-bundled/tandem-tiny-chat}
shift || true
[[ ${1:-} == "--" ]] && shift
bench_flags=("$@")
((${#bench_flags[@]})) || bench_flags=(--concurrency 8 --requests 96 --turns 6 --system-tokens 512 --user-tokens 64)
policies=(${POLICIES:-none sglang-plus marconi})
out=$(mktemp -d)
trap 'kill "${server:-}" 2>/dev/null || true; rm -rf "$out"' EXIT

echo "model $model; bench ${bench_flags[*]}"
echo
echo "| policy | TTFT p50 | TTFT p95 | inter-token p50 | end-to-end p50 | output tok/s | token hit rate | errors |"
echo "|---|---|---|---|---|---|---|---|"
for policy in "${policies[@]}"; do
  "$tandem" serve --model "$model" --cache-policy "$policy" --port 0 --no-metrics \
    >"$out/serve.out" 2>"$out/serve.err" &
  server=$!
  port=""
  for _ in $(seq 600); do
    port=$(sed -n 's/^tandem serving on .*:\([0-9]*\)$/\1/p' "$out/serve.out")
    [[ -n $port ]] && break
    sleep 0.1
  done
  [[ -n $port ]] || { cat "$out/serve.err"; exit 1; }
  "$tandem" bench --address "127.0.0.1:$port" --json "${bench_flags[@]}" >"$out/$policy.json"
  kill -TERM "$server"
  wait "$server" || true
  server=""
  python3 - "$policy" "$out/$policy.json" <<'PY'
import json, sys
policy, path = sys.argv[1], sys.argv[2]
r = json.load(open(path))
ms = lambda s: f"{s * 1000:.1f} ms"
print(f"| {policy} | {ms(r['ttft_s']['p50'])} | {ms(r['ttft_s']['p95'])} | "
      f"{ms(r['inter_token_s']['p50'])} | {ms(r['e2e_s']['p50'])} | "
      f"{r['output_tokens_per_s']:.0f} | {r['token_hit_rate']:.3f} | {r['errors']} |")
PY
done
