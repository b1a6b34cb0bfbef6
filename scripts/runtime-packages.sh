#!/usr/bin/env bash
# Prints the runtime packages of scripts/runtime-packages.txt for this machine's distribution,
# one per line: column 1 on Debian 12, column 2 (or column 1 where it is empty) on Ubuntu 24.04.
# Used by scripts/install-runtime-packages.sh and tests/deploy/runtime_libs_test.sh.
#   scripts/runtime-packages.sh [--list FILE] [--distro debian-12|ubuntu-24.04]
set -euo pipefail

list="$(cd "$(dirname "$0")" && pwd)/runtime-packages.txt"
distro=""
while (($#)); do
  case "$1" in
    --list) list=$2; shift 2 ;;
    --distro) distro=$2; shift 2 ;;
    *) echo "runtime-packages: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

if [[ -z $distro ]]; then
  # shellcheck source=/dev/null
  distro=$(. /etc/os-release && echo "${ID}-${VERSION_ID}")
fi
case "$distro" in
  debian-12) column=1 ;;
  ubuntu-24.04) column=2 ;;
  *)
    echo "runtime-packages: no column for '$distro' in $list (debian-12 or ubuntu-24.04)" >&2
    exit 1
    ;;
esac

awk -v column="$column" -v list="$list" '
  /^[[:space:]]*(#|$)/ { next }
  NF > 2 { printf "runtime-packages: %s:%d: more than two columns\n", list, NR > "/dev/stderr"; bad = 1; next }
  { print (column == 2 && NF == 2) ? $2 : $1 }
  END { exit bad }
' "$list"
