#!/usr/bin/env bash
# README's test command and what CI runs (.ci/run).
#
#   bash scripts/test.sh [PYTEST ARGS...]   install the test dependencies, run scripts/lint.sh (ruff
#                                           + mypy: a type error fails the run), then the whole suite,
#                                           and print how long the suite took
#   bash scripts/test.sh --quick [ARGS...]  only the unit tier (-m "unit and not slow": no broker or
#                                           JVM process), nothing installed, no lint: under 2 minutes
#
# The full run installs with pip and apt-get (root or sudo, network): see scripts/setup-test-deps.sh.
# Tiers are pytest markers assigned in tests/conftest.py: unit, broker, reference, slow.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
if [[ "${1:-}" == "--quick" ]]; then
    quick=1
    shift
fi

if [[ $quick -eq 1 ]]; then
    exec python -m pytest -q -m "unit and not slow" "$@"
fi

python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e '.[test]'
# The repo's third-party test plugin (entry points in group strom.plugins): without it the
# entry-point connector and plugin tests would be skipped.
python -m pip install --quiet --no-deps -e tests/data/strom_test_plugin
# Debian packages, the reference jars and Tansu's venv: nothing is installed once tests run.
bash scripts/setup-test-deps.sh

bash scripts/lint.sh

start=$(date +%s)
status=0
python -m pytest -q "$@" || status=$?
elapsed=$(( $(date +%s) - start ))
printf 'test suite: %dm%02ds (exit %d)\n' $((elapsed / 60)) $((elapsed % 60)) "$status"
exit "$status"
