#!/usr/bin/env bash
# Resolve the reference Apache Kafka Connect worker's jars from Maven Central (pom.xml beside this
# script) into a cache dir; default <repo>/.cache/kconnect-ref/lib, or $1, or $STROM_KCONNECT_REF_LIB.
# Idempotent: when the jars for the pom's Kafka version are already there it does nothing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
lib="${1:-${STROM_KCONNECT_REF_LIB:-$repo/.cache/kconnect-ref/lib}}"
version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/pom.xml")"

# The stamp records which pom the jars came from, so a version bump re-resolves.
stamp="$lib/.pom.sha256"
want="$(sha256sum "$here/pom.xml" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -f "$lib/connect-runtime-$version.jar" && -f "$lib/connect-file-$version.jar" ]]; then
    exit 0
fi

if ! command -v mvn >/dev/null 2>&1; then
    echo "fetch.sh: mvn not found (apt-get install maven, or run scripts/setup-test-deps.sh)" >&2
    exit 1
fi

# Resolve into a fresh dir and swap it in, so an interrupted run never leaves half a classpath.
tmp="$lib.tmp.$$"
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
mvn -q -B -Dstyle.color=never -f "$here/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$tmp"
echo "$want" > "$tmp/.pom.sha256"
rm -rf "$lib"
mkdir -p "$(dirname "$lib")"
mv "$tmp" "$lib"
trap - EXIT
echo "fetch.sh: Apache Kafka Connect $version jars in $lib"
