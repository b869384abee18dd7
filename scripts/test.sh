#!/usr/bin/env bash
# Install strom with its test dependencies, the Debian packages and reference jars the tests
# need, then run the whole test suite. This is README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e '.[test]'
bash scripts/setup-test-deps.sh
python -m pytest -q "$@"
