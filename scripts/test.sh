#!/usr/bin/env bash
# Install strom with its test dependencies, the Debian packages and reference jars the tests
# need, then run the whole test suite. This is README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e '.[test]'
# The repo's third-party test plugin (entry points in group strom.plugins): without it the
# entry-point connector tests would be skipped at collection.
python -m pip install --quiet --no-deps -e tests/data/strom_test_plugin
bash scripts/setup-test-deps.sh
python -m pytest -q "$@"
