"""Generate ``core/errors.py``: one exception class per Kafka error code.

The source of truth for the codes and whether each is retriable is kio's ``ErrorCode`` (generated
from Kafka's message schemas). The class names and default messages are Apache Kafka's own: this
script runs a few lines of Java against the kafka-clients jar in ``.cache/kafka-ref/lib`` (put
there by ``scripts/setup-test-deps.sh``) to read ``org.apache.kafka.common.protocol.Errors``: each
code's exception class (``NotLeaderOrFollowerException`` becomes ``NotLeaderOrFollowerError``)
and ``Errors.X.message()``. It fails if Kafka and kio disagree on a code or on retriability.

Usage: ``python scripts/gen_kafka_errors.py [--jars DIR] [--check]``; ``--check`` exits 1 when
the checked-in module differs from what would be generated.
"""

from __future__ import annotations

import argparse
import builtins
import logging
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from kio.schema.errors import ErrorCode

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "core" / "errors.py"

_DUMP_JAVA = """
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.errors.RetriableException;
public class DumpErrors {
  public static void main(String[] args) {
    for (Errors e : Errors.values()) {
      Throwable ex = e.exception();
      String cls = ex == null ? "" : ex.getClass().getSimpleName();
      String msg = e.message() == null ? "" : e.message().replace('\\t', ' ').replace('\\n', ' ');
      System.out.println(e.code() + "\\t" + e.name() + "\\t" + cls + "\\t"
          + (ex instanceof RetriableException) + "\\t" + msg);
    }
  }
}
"""


@dataclass(frozen=True)
class KafkaCode:
    """One row of Kafka's ``Errors`` table."""

    code: int
    name: str
    java_class: str
    retriable: bool
    message: str


def read_kafka_errors(jars: Path) -> tuple[str, list[KafkaCode]]:
    """Kafka's version and its ``Errors`` table, read by running Java against the client jar."""
    clients = sorted(jars.glob("kafka-clients-*.jar"))
    if not clients:
        raise SystemExit(f"no kafka-clients jar in {jars}: run scripts/setup-test-deps.sh first")
    kafka_version = clients[-1].name.removeprefix("kafka-clients-").removesuffix(".jar")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "DumpErrors.java"
        src.write_text(_DUMP_JAVA)
        # The whole lib dir: Errors' static initializer needs slf4j.
        out = subprocess.run(["java", "-cp", f"{jars}/*", str(src)], check=True, capture_output=True,
                             text=True).stdout
    rows = []
    for line in out.splitlines():
        code, name, cls, retriable, message = line.split("\t", 4)
        rows.append(KafkaCode(int(code), name, cls, retriable == "true", message))
    return kafka_version, rows


def python_name(java_class: str, code: ErrorCode) -> str:
    """Kafka's class name with ``Error`` for ``Exception``; kio's name where that shadows a builtin."""
    stem = java_class.removesuffix("Exception")
    name = stem + "Error"
    if hasattr(builtins, name):
        # TimeoutException: TimeoutError would shadow the builtin every asyncio caller catches.
        return kio_name(code)
    return name


def kio_name(code: ErrorCode) -> str:
    """The class name today's code used: Kafka's error-code name in CamelCase."""
    return "".join(part.capitalize() for part in code.name.split("_")) + "Error"


def _literal(text: str) -> str:
    # Double quotes, as the formatter writes them.
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(kafka_version: str, rows: list[KafkaCode]) -> str:
    """The text of ``core/errors.py``."""
    by_code = {row.code: row for row in rows}
    kio_codes = {int(c): c for c in ErrorCode}
    if set(by_code) != set(kio_codes):
        raise SystemExit(f"Kafka {kafka_version} and kio disagree on the codes: "
                         f"only Kafka {sorted(set(by_code) - set(kio_codes))}, "
                         f"only kio {sorted(set(kio_codes) - set(by_code))}")
    classes: list[tuple[ErrorCode, KafkaCode, str]] = []
    for value in sorted(kio_codes, key=lambda v: (v != -1, v)):
        code = kio_codes[value]
        row = by_code[value]
        if row.retriable != code.retriable:
            raise SystemExit(f"{code.name}: Kafka says retriable={row.retriable}, kio {code.retriable}")
        if code is ErrorCode.none:
            continue  # Errors.NONE has no exception
        classes.append((code, row, python_name(row.java_class, code)))
    names = [name for _, _, name in classes]
    if len(set(names)) != len(names):
        raise SystemExit(f"duplicate class names: {sorted(n for n in names if names.count(n) > 1)}")
    # A code name ending in ERROR or EXCEPTION would give "KafkaStorageErrorError": no alias.
    aliases = [(kio_name(code), name) for code, _, name in classes
               if kio_name(code) != name and kio_name(code) not in names
               and not kio_name(code).endswith(("ErrorError", "ExceptionError"))]

    out: list[str] = []
    w = out.append
    w('"""Kafka\'s error codes as exception classes, one per code (generated; do not edit).')
    w("")
    w("Each class carries ``code`` (kio's ``ErrorCode``), ``errno`` (its int), ``retriable`` and")
    w("``description`` (Kafka's ``Errors.X.message()``); :func:`for_code` finds the class of a code.")
    w("Names are Kafka's Java class names with ``Error`` for ``Exception``")
    w("(``NotLeaderOrFollowerException`` is :class:`NotLeaderOrFollowerError`); where Kafka's")
    w("error-code name reads differently, that name is an alias (``CorruptMessageError`` is")
    w(":class:`CorruptRecordError`). ``REQUEST_TIMED_OUT`` is :class:`RequestTimedOutError`, not")
    w("``TimeoutError``, which would shadow the builtin.")
    w("")
    w(f"Generated by scripts/gen_kafka_errors.py from kio {version('kio')}'s ErrorCode (codes, retriable)")
    w(f"and Apache Kafka {kafka_version}'s Errors (class names, messages). Regenerate with")
    w("``python scripts/gen_kafka_errors.py`` (needs java and .cache/kafka-ref: scripts/setup-test-deps.sh);")
    w("``--check`` tells whether this file is current.")
    w('"""')
    w("")
    w("from __future__ import annotations")
    w("")
    w("from kio.schema.errors import ErrorCode")
    w("")
    w("from strom.core.exceptions import KafkaError")
    w("")
    w("__all__ = [")
    for name in sorted([*names, *(a for a, _ in aliases), "KafkaError"]):
        w(f'    "{name}",')
    w('    "for_code",')
    w("]")
    for code, row, name in classes:
        w("")
        w("")
        w(f"class {name}(KafkaError):")
        w(f'    """{code.name.upper()} ({int(code)}): Kafka\'s {row.java_class}."""')
        w("")
        w(f"    code = ErrorCode.{code.name}")
        w(f"    errno = {int(code)}")
        w(f"    retriable = {code.retriable}")
        w(f"    description = {_literal(row.message)}")
    w("")
    w("")
    w("# Kafka's error-code names (Errors.X, kio's ErrorCode) where the Java class is named otherwise.")
    for alias, name in aliases:
        w(f"{alias} = {name}")
    w("")
    w("_BY_CODE: dict[int, type[KafkaError]] = {")
    for code, _, name in classes:
        w(f"    {int(code)}: {name},")
    w("}")
    w("")
    w("")
    w("def for_code(code: int) -> type[KafkaError]:")
    w('    """The exception class of a Kafka error code; :class:`KafkaError` (UNKNOWN_SERVER_ERROR) for a')
    w('    code Kafka does not define and for NONE."""')
    w("    return _BY_CODE.get(int(code), KafkaError)")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jars", type=Path, default=ROOT / ".cache" / "kafka-ref" / "lib")
    parser.add_argument("--check", action="store_true", help="exit 1 if core/errors.py is stale")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    text = render(*read_kafka_errors(args.jars))
    if args.check:
        if OUT.read_text() != text:
            log.error("%s is stale: run python scripts/gen_kafka_errors.py", OUT.relative_to(ROOT))
            return 1
        return 0
    OUT.write_text(text)
    log.info("wrote %s", OUT.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
