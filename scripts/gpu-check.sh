#!/usr/bin/env bash
# Builds and runs every GPU test and GPU benchmark on a CUDA machine, writing a report: the first
# thing to run when a session is lent a GPU (see README, "GPU"). Needs only nvcc, CMake, a C++
# compiler and the bundle of scripts/prepare-gpu-check.sh in build/gpu-bundle (no package
# registry is needed); with a bundle made by `prepare-gpu-check.sh --engine-tests` it also runs
# the engine's GPU tests from the engine_test built there, and the whole-model figures
# (device_model_speed --device cuda).
#
#   scripts/gpu-check.sh [--allow-no-device] [--sanitize]
#
# When a test binary fails, its failed tests run again one process each, and a test that took
# the process down is named and the rest run without it: the report says which tests fail by
# themselves, not only after another kernel's sticky fault.
#
# Exits non-zero when a test fails, when the build fails, or when no GPU is visible (unless
# --allow-no-device: to check the script itself on a machine without one). --sanitize also runs
# the kernel tests under compute-sanitizer (memcheck, then racecheck on the shared-memory
# kernels): out-of-bounds and misaligned accesses, and shared-memory races, that a passing test
# can hide. It takes minutes of the device's time, so it is a switch.
#
# The report (report.md, the test log and nvidia-smi's output) goes to $OUT when set (the device
# tool brings that folder back), else to build/gpu-check. The device tool carries the working
# tree and the bundle in 64 MiB: the tracked tree is ~58 MB, 36 MB of it the bundled model,
# which no GPU test reads, so take it out of the index for the call and put it back after:
#   git rm -q --cached bundled/tandem-tiny-chat/model.safetensors
#   echo /bundled/tandem-tiny-chat/model.safetensors >> .git/info/exclude
#   (the call, carrying build/gpu-bundle)
#   git reset -q HEAD -- bundled/tandem-tiny-chat/model.safetensors   # and drop the exclude line
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

allow_no_device=0
sanitize=0
for arg in "$@"; do
  case $arg in
    --allow-no-device) allow_no_device=1 ;;
    --sanitize) sanitize=1 ;;
    *)
      echo "gpu-check: unknown argument '$arg' (--allow-no-device, --sanitize)" >&2
      exit 2
      ;;
  esac
done
out=${OUT:-build/gpu-check}
mkdir -p "$out"
report=$out/report.md
build=build/gpu-check-build
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)

{
  echo "# GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- nvcc: $("$nvcc" --version 2>/dev/null | tail -1 || echo missing)"
} >"$report"

if nvidia-smi >"$out/nvidia-smi.txt" 2>&1; then
  gpu=$(nvidia-smi --query-gpu=name,compute_cap,memory.total --format=csv,noheader | head -1)
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '. ')
  echo "- device: $gpu" >>"$report"
else
  echo "- device: none visible (nvidia-smi failed)" >>"$report"
  if ((!allow_no_device)); then
    echo "gpu-check: no GPU visible; see $out/nvidia-smi.txt" >&2
    exit 1
  fi
  arch=90
fi

status=0
configure=(cmake -S tools/gpu-check -B "$build" -DCMAKE_BUILD_TYPE=Release
  -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch"
  -DGTEST_SOURCE_DIR="$PWD/build/gpu-bundle/googletest")
if command -v ninja >/dev/null; then configure+=(-G Ninja); fi
if ! "${configure[@]}" >"$out/build.log" 2>&1 ||
  ! cmake --build "$build" -j "$(nproc)" >>"$out/build.log" 2>&1; then
  {
    echo
    echo "## Build FAILED (sm_$arch)"
    echo
    echo '```'
    tail -40 "$out/build.log"
    echo '```'
  } >>"$report"
  cat "$report"
  exit 1
fi
echo "- build: sm_$arch, ok" >>"$report"

# With a device visible, a test that finds none fails instead of skipping.
if ((!allow_no_device)); then export TANDEM_REQUIRE_CUDA=1; fi
# Runs a gtest binary (the command after the name), adding its summary to the report.
run_tests() {
  local name=$1
  shift
  "$@" --gtest_output="xml:$out/$name.xml" >"$out/$name.log" 2>&1
  local rc=$?
  ((rc == 0)) || status=1
  local summary
  summary=$(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+ test|^\[  SKIPPED \] [0-9]+ test' \
    "$out/$name.log" | sed 's/^/    /')
  {
    echo
    echo "## $name: $([[ $rc == 0 ]] && echo passed || echo FAILED)"
    echo
    echo "$summary"
    if ((rc != 0)); then
      echo
      echo '```'
      grep -E 'Failure|FAILED|error|^========= [A-Z]' -A4 "$out/$name.log" | head -80
      echo '```'
    fi
  } >>"$report"
  ((rc == 0)) || isolate_failures "$name" "$@"
}

# After a failed run: one kernel's fault (an illegal address, a trap) is sticky and fails every
# later test of the process, and a crash leaves the rest unrun. So each failed test runs again
# alone, and a test that took the process down is named and the others run without it: the
# report then says which tests fail by themselves. Costs device time only when something failed.
isolate_failures() {
  local name=$1
  shift
  local log=$out/$name.log
  # The command's own --gtest_filter (positive part), to narrow it further.
  local positive='*' negative='' arg
  for arg in "$@"; do
    if [[ $arg == --gtest_filter=* ]]; then
      positive=${arg#--gtest_filter=}
      if [[ $positive == *-* ]]; then
        negative=${positive#*-}
        positive=${positive%%-*}
      fi
    fi
  done
  {
    echo
    echo "### $name: the failures, one process each"
    echo
  } >>"$report"
  local crashed
  crashed=$(awk '/^\[ RUN      \] /{t=$4} /^\[( +OK|  FAILED|  SKIPPED) +\] /{t=""} END{print t}' \
    "$log")
  if [[ -n $crashed ]]; then
    echo "- $crashed took the process down; the tests after it did not run: running them now" \
      >>"$report"
    local rest="$positive-${negative:+$negative:}$crashed"
    "$@" --gtest_filter="$rest" >"$out/$name.without-crash.log" 2>&1
    echo "    - without it: $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+ test' \
      "$out/$name.without-crash.log" | tr '\n' ' ')" >>"$report"
    log=$out/$name.without-crash.log
  fi
  local failed count=0
  failed=$(grep -oE '^\[  FAILED  \] [^ ,]+(, where| \()' "$log" | awk '{print $4}' | sed 's/,$//' | sort -u)
  for test in $failed; do
    ((++count > 30)) && break
    if "$@" --gtest_filter="$test" >"$out/$name.alone.log" 2>&1; then
      echo "- $test: passes alone (failed after an earlier test's fault)" >>"$report"
    else
      echo "- $test: fails alone" >>"$report"
      cat "$out/$name.alone.log" >>"$out/$name.alone-failures.log"
    fi
  done
}

run_tests cuda_kernels_test "$build/cuda_kernels_test"

# compute-sanitizer over the kernel tests: every access checked (memcheck), then the kernels that
# share tiles through shared memory checked for races (racecheck).
if ((sanitize)); then
  sanitizer=$(command -v compute-sanitizer || echo "$(dirname "$nvcc")/compute-sanitizer")
  if [[ -x $sanitizer ]]; then
    run_tests memcheck timeout 480 "$sanitizer" --tool memcheck --error-exitcode 1 \
      "$build/cuda_kernels_test"
    run_tests racecheck timeout 480 "$sanitizer" --tool racecheck --error-exitcode 1 \
      "$build/cuda_kernels_test" --gtest_filter='*Attention*:*Sampling*:*DecodeBatch*'
  else
    status=1
    echo "- sanitize: compute-sanitizer not found next to $nvcc" >>"$report"
  fi
fi

# The engine's GPU tests, when prepare-gpu-check.sh --engine-tests carried a build of them: the
# whole model, the AVMP pools and the engine on the device against the CPU. Started through the
# carried loader with the carried libraries; fixtures from this tree.
engine=build/gpu-engine-run/engine
rm -rf build/gpu-engine-run
if [[ -f build/gpu-bundle/engine.tar.gz ]]; then
  mkdir -p build/gpu-engine-run
  tar -C build/gpu-engine-run -xzf build/gpu-bundle/engine.tar.gz
fi
# Runs a carried binary through the carried loader and libraries.
carried() {
  local binary=$1
  shift
  "$engine/lib/ld-linux-x86-64.so.2" --library-path "$engine/lib" "$engine/$binary" "$@"
}
if [[ -x $engine/engine_test ]]; then
  TANDEM_TEST_DATA=$PWD/tests/data run_tests engine_test carried engine_test \
    --gtest_filter='*Cuda*'
else
  echo "- engine_test: not carried (scripts/prepare-gpu-check.sh --engine-tests)" >>"$report"
fi

# The benchmarks, when there is a device to measure (their figures go to docs/BENCHMARKS.md).
if ((!allow_no_device)); then
  if "$build/cuda_kernels_bench" >"$out/cuda_kernels_bench.txt" 2>&1; then
    { echo; echo "## cuda_kernels_bench"; echo; cat "$out/cuda_kernels_bench.txt"; } >>"$report"
  else
    status=1
    {
      echo
      echo "## cuda_kernels_bench FAILED"
      echo
      echo '```'
      tail -20 "$out/cuda_kernels_bench.txt"
      echo '```'
    } >>"$report"
  fi
fi

# The whole model on the device through Generate, against the device's copy bandwidth and
# Linear rate (docs/BENCHMARKS.md takes the table).
if ((!allow_no_device)) && [[ -x $engine/device_model_speed ]]; then
  if carried device_model_speed --device cuda --prefill-tokens 512 --decode-tokens 64 \
    --weight-dtypes f32,bf16 >"$out/device_model_speed.txt" 2>&1; then
    { echo; echo "## device_model_speed"; echo; cat "$out/device_model_speed.txt"; } >>"$report"
  else
    status=1
    {
      echo
      echo "## device_model_speed FAILED"
      echo
      echo '```'
      tail -20 "$out/device_model_speed.txt"
      echo '```'
    } >>"$report"
  fi
fi

cat "$report"
exit $status
