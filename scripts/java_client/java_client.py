"""Compile and run ClientCheck.java, the official Java Kafka client driven from pytest.

``JavaClient.build()`` compiles ``ClientCheck.java`` with ``javac`` against the kafka-clients
jar of the reference broker's lib dir (``scripts/kafka_ref``) into a cache dir, recompiling
only when the source or the jars change. ``JavaClient.run(...)`` runs one subcommand and
returns its JSON lines as dicts.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "ClientCheck.java"
sys.path.insert(0, str(HERE.parent / "kafka_ref"))

from kafka_ref import REPO_ROOT, KafkaRefError, ensure_jars, java_problem  # noqa: E402

BUILD_DIR = REPO_ROOT / ".cache" / "java-client"

# The client logs through slf4j-simple (in the lib dir) to stderr; keep it to warnings.
JVM_OPTS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]


@dataclass
class ClientRun:
    """One finished ClientCheck run."""

    args: list[str]
    returncode: int
    lines: list[dict[str, Any]]
    stderr: str

    def ops(self, op: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line.get("op") == op]

    def one(self, op: str) -> dict[str, Any]:
        found = self.ops(op)
        if len(found) != 1:
            raise AssertionError(f"expected one {op!r} line, got {len(found)}:\n{self.describe()}")
        return found[0]

    def describe(self) -> str:
        out = "\n".join(json.dumps(line) for line in self.lines[-40:])
        return f"$ ClientCheck {' '.join(self.args)}\nexit {self.returncode}\n{out}\nstderr:\n{self.stderr[-3000:]}"


class JavaClient:
    """The compiled ClientCheck program."""

    def __init__(self, build_dir: Path = BUILD_DIR) -> None:
        self.build_dir = build_dir
        self.lib = ensure_jars()

    def _clients_jar(self) -> Path:
        jars = sorted(self.lib.glob("kafka-clients-*.jar"))
        if not jars:
            raise KafkaRefError(f"no kafka-clients jar in {self.lib}")
        return jars[-1]

    def build(self) -> JavaClient:
        problem = java_problem()
        javac = shutil.which("javac")
        if problem is not None or javac is None:
            raise KafkaRefError(problem or "no javac on PATH (install a JDK, not only a JRE)")
        jar = self._clients_jar()
        digest = hashlib.sha256(SOURCE.read_bytes() + jar.name.encode()).hexdigest()
        stamp = self.build_dir / ".source.sha256"
        if stamp.exists() and stamp.read_text() == digest and (self.build_dir / "ClientCheck.class").exists():
            return self
        self.build_dir.mkdir(parents=True, exist_ok=True)
        for old in self.build_dir.glob("*.class"):
            old.unlink()
        proc = subprocess.run([javac, "-Xlint:all", "-Xlint:-options", "-cp", str(jar),
                               "-d", str(self.build_dir), str(SOURCE)],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise KafkaRefError(f"javac failed:\n{proc.stdout}\n{proc.stderr}")
        stamp.write_text(digest)
        return self

    def run(self, *args: str, props: dict[str, str] | None = None, timeout: float = 180.0) -> ClientRun:
        """Run ``ClientCheck <args...> [--prop k=v ...]``; parse its stdout as JSON lines."""
        java = shutil.which("java")
        assert java is not None
        argv = list(args)
        for key, value in (props or {}).items():
            argv += ["--prop", f"{key}={value}"]
        classpath = f"{self.build_dir}:{self.lib}/*"
        proc = subprocess.run([java, *JVM_OPTS, "-cp", classpath, "ClientCheck", *argv],
                              capture_output=True, text=True, timeout=timeout)
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        return ClientRun(argv, proc.returncode, lines, proc.stderr)


def main(argv: list[str]) -> int:
    """``python java_client.py produce 127.0.0.1:9092 topic 10 --prop acks=1``: print its lines."""
    run = JavaClient().build().run(*argv)
    for line in run.lines:
        print(json.dumps(line))
    if run.stderr:
        print(run.stderr, file=sys.stderr, end="")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
