#!/usr/bin/env bash
# Rebuilds Dockerfile.cpu's runtime stage without Docker, in a Debian 12 root made by
# debootstrap, and serves from it: the check for machines with no Docker engine (like CI's).
#   - installs scripts/runtime-packages.txt with scripts/install-runtime-packages.sh, as the
#     Dockerfile does;
#   - adds the same non-root user (10001) and the binary and bundled model at the same paths;
#   - starts `tandem serve` as that user with the image's environment (TANDEM_HOST,
#     TANDEM_HTTP_PORT) and asks for a chat completion over HTTP and for /metrics.
# Needs root, debootstrap and Debian's package mirror; about a minute. Not part of CI.
#   scripts/check-runtime-image.sh [TANDEM_BINARY]   (default build/release/tandem)
set -euo pipefail
cd "$(dirname "$0")/.."
tandem=${1:-build/release/tandem}
[[ -x $tandem ]] || { echo "check-runtime-image: no binary at $tandem" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "check-runtime-image: apt-get install debootstrap" >&2; exit 1; }

root=$(mktemp -d /tmp/tandem-runtime-root.XXXXXX)
chmod 755 "$root"  # the image's user must reach /usr/local/bin
server=""
cleanup() {
  if [[ -n $server ]]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  umount "$root/proc" 2>/dev/null || true
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT

echo "-- debootstrap bookworm (minbase) into $root"
debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$root.log" 2>&1 ||
  { cat "$root.log"; exit 1; }
rm -f "$root.log"
mount -t proc proc "$root/proc"
cp /etc/resolv.conf "$root/etc/resolv.conf"

echo "-- the runtime stage"
mkdir -p "$root/tmp/scripts"
cp scripts/runtime-packages.txt scripts/runtime-packages.sh scripts/install-runtime-packages.sh \
  "$root/tmp/scripts/"
chroot "$root" bash /tmp/scripts/install-runtime-packages.sh | tail -n 1
chroot "$root" bash -c 'groupadd --gid 10001 tandem && useradd --uid 10001 --gid tandem \
  --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin tandem'
strip --strip-debug -o "$root/usr/local/bin/tandem" "$tandem"
mkdir -p "$root/usr/local/share/tandem"
cp -r bundled/tandem-tiny-chat "$root/usr/local/share/tandem/"
if chroot "$root" ldd /usr/local/bin/tandem | grep "not found"; then
  echo "check-runtime-image: FAILED: libraries missing from scripts/runtime-packages.txt" >&2
  exit 1
fi

echo "-- tandem serve as UID 10001 with the image's environment"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http=$(port) grpc=$(port) metrics=$(port)
chroot --userspec=10001:10001 "$root" env TANDEM_HOST=0.0.0.0 TANDEM_HTTP_PORT="$http" \
  TANDEM_PORT="$grpc" TANDEM_METRICS_PORT="$metrics" /usr/local/bin/tandem serve \
  --memory-gib 0.05 >"$root/serve.log" 2>&1 &
server=$!
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$http/health" >/dev/null && break
  sleep 0.1
done
answer=$(curl -sf "http://127.0.0.1:$http/v1/chat/completions" -d \
  '{"model": "tandem-tiny-chat", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}') ||
  { cat "$root/serve.log"; echo "check-runtime-image: FAILED: no chat completion" >&2; exit 1; }
echo "$answer" | grep -q '"completion_tokens":4' ||
  { echo "check-runtime-image: FAILED: $answer" >&2; exit 1; }
curl -sf "http://127.0.0.1:$metrics/metrics" | grep -q '^tandem_requests_total' ||
  { echo "check-runtime-image: FAILED: /metrics" >&2; exit 1; }
echo "check-runtime-image: ok: the runtime stage's packages load tandem on a clean Debian 12," \
  "which serves as UID 10001"
