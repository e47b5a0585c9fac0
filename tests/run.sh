#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs seglog with its test
# dependencies, checks lint, then runs pytest. CI (.ci/run) calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'
python3 -m ruff check .
python3 -m pytest -q "$@"
