#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs them side by side for a bounded time (default
# 60 s each) from their committed seed corpora:
#   scripts/fuzz.sh [SECONDS [BUILD_DIR]]
# BUILD_DIR (default build/fuzz, configured here) may be any clang build configured with
# -DTANDEM_FUZZ=ON, such as scripts/test.sh's sanitizer build, whose objects the fuzzers then
# share. A crash, a sanitizer report, a leak or a slow input fails the run; libFuzzer writes the
# input that did it to BUILD_DIR/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
dir=${2:-build/fuzz}
if [[ $# -lt 2 ]]; then
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DTANDEM_CUDA=OFF -DTANDEM_BUILD_TESTS=OFF \
    -DTANDEM_BUILD_BENCH=OFF -DTANDEM_NATIVE=OFF -DTANDEM_FUZZ=ON >/dev/null
fi
cmake --build "$dir" --target chat_template_fuzzer request_validation_fuzzer openai_request_fuzzer \
  json_schema_fuzzer

mkdir -p "$dir/artifacts"
run() {
  local fuzzer=$1 seeds=$2
  # The fuzzer adds what it finds to its corpus: work on a copy, keep the committed seeds.
  local corpus=$dir/corpus/$fuzzer
  mkdir -p "$corpus"
  cp -n "$seeds"/* "$corpus"/
  echo "-- $fuzzer: ${seconds} s from $(find "$corpus" -type f | wc -l) inputs"
  "$dir/$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$dir/artifacts/" "$corpus" >"$dir/$fuzzer.log" 2>&1
}
# Side by side: each is one process, and a run is mostly the wall-clock time it is given.
fuzzers=(chat_template_fuzzer request_validation_fuzzer openai_request_fuzzer json_schema_fuzzer)
run chat_template_fuzzer tests/data/chat_templates/templates &
pids=($!)
run request_validation_fuzzer tests/data/fuzz/request_validation &
pids+=($!)
run openai_request_fuzzer tests/data/fuzz/openai_request &
pids+=($!)
run json_schema_fuzzer tests/data/fuzz/json_schema &
pids+=($!)
failed=0
for i in "${!fuzzers[@]}"; do
  if ! wait "${pids[$i]}"; then
    cat "$dir/${fuzzers[$i]}.log"
    echo "fuzz: ${fuzzers[$i]} failed (input in $dir/artifacts/)"
    failed=1
  else
    tail -n 6 "$dir/${fuzzers[$i]}.log"
  fi
done
exit "$failed"
