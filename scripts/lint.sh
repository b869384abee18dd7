#!/usr/bin/env bash
# The lint gate: ruff over the repository, then mypy over strom (resolved through the
# strom/<folder> symlinks, so "strom.core..." is checked as the package, not as "core"), tests,
# examples, bench and scripts; scope and per-module settings are in pyproject.toml [tool.mypy].
#
# mypy reports strom/<folder>/x.py; paths are rewritten to <folder>/x.py, the file you edit, so
# `bash scripts/lint.sh | cut -d: -f1 | sort | uniq -c` counts errors per real file.
# Exit status: 0 only when ruff and mypy both report nothing. The last line is a summary.
set -uo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python}
to_real_paths() { sed -E 's#^strom/(core|plugins|connect|streams|tiered|spark_bridge|console)/#\1/#'; }

ruff_out=$($PY -m ruff check --output-format concise --quiet . 2>&1)
ruff_rc=$?
mypy_out=$($PY -m mypy --no-error-summary --hide-error-context "$@" 2>&1 | to_real_paths)
mypy_rc=${PIPESTATUS[0]}

[ -n "$ruff_out" ] && printf '%s\n' "$ruff_out"
[ -n "$mypy_out" ] && printf '%s\n' "$mypy_out"

ruff_n=$(printf '%s\n' "$ruff_out" | grep -cE '^[^:]+:[0-9]+:[0-9]+: ')
mypy_n=$(printf '%s\n' "$mypy_out" | grep -c ': error: ')
mypy_files=$(printf '%s\n' "$mypy_out" | grep ': error: ' | cut -d: -f1 | sort -u | grep -c .)
if [ "$ruff_rc" -eq 0 ] && [ "$mypy_rc" -eq 0 ]; then
    echo "lint: OK (ruff 0, mypy 0 errors)"
    exit 0
fi
echo "lint: FAILED (ruff $ruff_n, mypy $mypy_n errors in $mypy_files files; ruff exit $ruff_rc, mypy exit $mypy_rc)"
exit 1
