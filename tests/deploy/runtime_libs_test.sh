#!/usr/bin/env bash
# The container images install scripts/runtime-packages.txt and nothing else at run time, so
# that list must name the package of every shared library the binary loads, and nothing more.
#
#   tests/deploy/runtime_libs_test.sh [--libs-only] BINARY
#
# 1. Every library `ldd BINARY` resolves comes from a package on the list for this distribution
#    (scripts/runtime-packages.sh), except those of libc6 and the CUDA driver, which the list
#    leaves out on purpose; no library is "not found"; and every listed package ships one of
#    them (no stale entries).
# 2. Unless --libs-only (the images' builder stage, where the Dockerfiles are not copied in):
#    Dockerfile and Dockerfile.cpu both build with scripts/setup.sh --build-only and
#    scripts/build.sh, run this test, install the list with scripts/install-runtime-packages.sh,
#    and install no package of their own.
# ctest registers it as deploy_runtime_libs (tests/CMakeLists.txt), for non-sanitizer builds.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
libs_only=false
if [[ ${1:-} == --libs-only ]]; then libs_only=true; shift; fi
if (($# != 1)); then
  echo "usage: $0 [--libs-only] BINARY" >&2
  exit 2
fi
binary=$1
failures=()
fail() { failures+=("$*"); }

# ---- 1. ldd against the package list ----------------------------------------------------------
excluded_packages=(libc6)                        # in every base image
excluded_libs='^(libcuda\.so|libnvidia-)'        # the driver: mounted from the host at run time

mapfile -t listed < <("$repo/scripts/runtime-packages.sh")
if ((${#listed[@]} == 0)); then fail "scripts/runtime-packages.txt lists no package"; fi
declare -A is_listed=() used=()
for p in "${listed[@]}"; do is_listed[$p]=1; done

ldd_out=$(ldd "$binary")  # fails (and so does the test) when BINARY is not a dynamic executable
names=() paths=()
while read -r line; do
  if [[ $line == *"not found"* ]]; then
    fail "ldd: ${line%% *} is not found"
  elif [[ $line =~ ^([^[:space:]]+)[[:space:]]+=\>[[:space:]]+(/[^[:space:]]+) ]]; then
    names+=("${BASH_REMATCH[1]}")
    paths+=("${BASH_REMATCH[2]}")
  fi
done <<<"$ldd_out"
if ((${#names[@]} == 0)); then fail "ldd resolved no library for $binary"; fi

# Which package owns each library. dpkg knows a file under one spelling; on a merged-/usr
# system ldd may print the other (/lib vs /usr/lib), or a symlink's name. One dpkg-query call
# for every spelling of every library keeps the test well under a second.
candidates_of() {
  local path=$1 real
  real=$(readlink -f "$path")
  printf '%s\n' "$path" "$real" "/usr${path#/usr}" "${path#/usr}" "/usr${real#/usr}" "${real#/usr}"
}
all_candidates=()
for path in "${paths[@]}"; do mapfile -t -O "${#all_candidates[@]}" all_candidates < <(candidates_of "$path"); done
declare -A owner_of=()
while IFS= read -r line; do
  [[ $line == diversion* ]] && continue
  owner_of[${line#*: }]=${line%%: *}
done < <(dpkg-query -S "${all_candidates[@]}" 2>/dev/null || true)
owner() {
  local candidate
  while read -r candidate; do
    if [[ -n ${owner_of[$candidate]:-} ]]; then
      local pkg=${owner_of[$candidate]}
      pkg=${pkg%%,*}       # a file two packages share: either will do
      echo "${pkg%%:*}"    # without the architecture
      return 0
    fi
  done < <(candidates_of "$1")
  return 1
}

for i in "${!names[@]}"; do
  name=${names[$i]} path=${paths[$i]}
  if [[ $name =~ $excluded_libs ]]; then continue; fi
  if ! pkg=$(owner "$path"); then
    fail "$name ($path) belongs to no package: the image could not install it"
    continue
  fi
  if [[ " ${excluded_packages[*]} " == *" $pkg "* ]]; then continue; fi
  if [[ -z ${is_listed[$pkg]:-} ]]; then
    fail "$name ($path) comes from package $pkg, which scripts/runtime-packages.txt does not list"
  fi
  used[$pkg]=1
done
for p in "${listed[@]}"; do
  if [[ -z ${used[$p]:-} ]]; then
    fail "scripts/runtime-packages.txt lists $p, but no library of $binary comes from it"
  fi
done

# ---- 2. both Dockerfiles use the same scripts -------------------------------------------------
if ! $libs_only; then
  required=(
    "scripts/setup.sh --build-only"
    "scripts/build.sh"
    "-DTANDEM_NATIVE=OFF"
    "-DTANDEM_BUILD_TESTS=OFF"
    "-DTANDEM_BUILD_BENCH=OFF"
    "tests/deploy/runtime_libs_test.sh --libs-only"
    "scripts/install-runtime-packages.sh"
  )
  for dockerfile in Dockerfile Dockerfile.cpu; do
    file="$repo/$dockerfile"
    if [[ ! -f $file ]]; then
      fail "$dockerfile is missing"
      continue
    fi
    for needle in "${required[@]}"; do
      if ! grep -qF -- "$needle" "$file"; then fail "$dockerfile does not use '$needle'"; fi
    done
    if grep -nE 'apt-get[[:space:]]+install|apt[[:space:]]+install' "$file" >/dev/null; then
      fail "$dockerfile installs packages itself: build packages belong in scripts/setup.sh," \
        "runtime packages in scripts/runtime-packages.txt"
    fi
  done
fi

if ((${#failures[@]})); then
  printf 'FAIL: %s\n' "${failures[@]}" >&2
  exit 1
fi
echo "ok: ${#names[@]} libraries from ${#listed[@]} listed packages (plus libc6)"
