#!/usr/bin/env bash
# Checks the deployment files under deploy/ without a cluster (CI runs it from scripts/test.sh):
#   1. yamllint (.yamllint) over every YAML file of deploy/;
#   2. promtool check rules + promtool test rules (deploy/prometheus);
#   3. haproxy -c on deploy/proxy/haproxy.cfg;
#   4. tests/deploy/check_manifests.py: renders the kustomizations and checks ports, selectors,
#      `tandem serve` flags, the drain timing, metric names and the proxies' session hashing;
#   5. kubernetes-validate --strict on the rendered manifests, when it is installed (PyPI, a
#      developer tool: build/devtools/bin from scripts/install-dev-tools.sh, or one on PATH);
#      otherwise it says it skipped.
# Installs nothing: scripts/setup.sh installs yamllint, prometheus (promtool), haproxy and
# python3-yaml. Usage: scripts/check-deploy.sh [TANDEM_BINARY]   (default build/release/tandem)
set -euo pipefail
cd "$(dirname "$0")/.."

tandem=${1:-build/release/tandem}
if [[ ! -x $tandem ]]; then
  echo "check-deploy: no tandem binary at $tandem: build it (scripts/build.sh) or pass its path" >&2
  exit 1
fi
# Debian's python3-yaml belongs to the system interpreter (a pyenv/venv python3 may lack it).
python=/usr/bin/python3
[[ -x $python ]] || python=python3

for tool in yamllint promtool haproxy; do
  if ! command -v "$tool" >/dev/null; then
    echo "check-deploy: $tool is missing: run scripts/setup.sh" >&2
    exit 1
  fi
done

render_dir=$(mktemp -d)
trap 'rm -rf "$render_dir"' EXIT
started=$SECONDS
step_start=$SECONDS
step_done() { echo "-- $1: ok ($((SECONDS - step_start)) s)"; step_start=$SECONDS; }

echo "-- yamllint"
yamllint -c .yamllint --strict deploy/ .yamllint
step_done yamllint

echo "-- promtool"
promtool check rules deploy/prometheus/tandem-rules.yaml
(cd deploy/prometheus && promtool test rules tandem-rules.test.yaml)
step_done promtool

echo "-- haproxy -c"
haproxy -c -f deploy/proxy/haproxy.cfg
step_done "haproxy -c"

echo "-- tests/deploy/check_manifests.py"
"$python" tests/deploy/check_manifests.py --tandem "$tandem" --render-dir "$render_dir" \
  >"$render_dir/check_manifests.log" || { cat "$render_dir/check_manifests.log"; exit 1; }
grep -v '^ok ' "$render_dir/check_manifests.log" || true
step_done check_manifests

echo "-- kubernetes-validate"
# scripts/install-dev-tools.sh puts a pinned one in build/devtools; else one on PATH.
kubernetes_validate=build/devtools/bin/kubernetes-validate
[[ -x $kubernetes_validate ]] || kubernetes_validate=$(command -v kubernetes-validate || true)
if [[ -n $kubernetes_validate ]]; then
  # Kubernetes 1.30 is the oldest the manifests support (the preStop sleep action); and the
  # newest schema this kubernetes-validate knows. CRD kinds (monitoring.coreos.com, keda.sh,
  # gateway.networking.k8s.io, inference.networking.k8s.io) have no schema there; check_manifests.py
  # checks them against tests/deploy/crd_schemas.py.
  for version in 1.30.0 ""; do
    "$kubernetes_validate" --strict --quiet --no-warn ${version:+-k "$version"} "$render_dir"/*.yaml
  done
  step_done kubernetes-validate
else
  echo "-- kubernetes-validate: skipped: not installed (scripts/install-dev-tools.sh, or" \
    "pip install kubernetes-validate)"
fi
echo "check-deploy: all checks passed in $((SECONDS - started)) s"
