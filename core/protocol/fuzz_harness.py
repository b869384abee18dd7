"""The harness around :mod:`strom.core.protocol.fuzz` for a fuzz run against a real broker process.

A broker started for fuzzing (no topic auto-creation, so a flipped topic name creates nothing;
no initial rebalance delay, so the seeds' JoinGroups answer at once) with its output tapped for
ERROR and traceback lines, the seeds of every API it advertises, the broker's RSS, and the
checks every run ends with: the broker is alive, every answer carried its request's
correlation id, and it logged no ERROR or traceback.

Used by the CI slices tests/faults/test_fuzz_protocol.py and tests/faults/test_fuzz_share_groups.py;
it sits beside the engine so bench/fuzz_protocol.py can use it too.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

from strom.core.protocol import fuzz
from strom.core.records.builder import SimpleRecord, build_batch
from strom.core.testing import BrokerProcess

__all__ = ["BROKER_CONFIG", "LogTap", "fuzz_broker", "harm", "rss_kib", "seeds_for", "tap_output"]

BROKER_CONFIG = {"auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0"}


class LogTap(collections.deque[str]):
    """The broker's output as BrokerProcess pumps it, keeping every ERROR and traceback line
    (the deque itself keeps only the last 2,000 lines)."""

    def __init__(self) -> None:
        super().__init__(maxlen=2000)
        self.bad: list[str] = []

    def append(self, line: str) -> None:
        if " ERROR " in line or "Traceback" in line:
            self.bad.append(line)
        super().append(line)


def tap_output(broker: BrokerProcess) -> LogTap:
    """Put a :class:`LogTap` in place of ``broker.output``, holding what it printed so far."""
    tap = LogTap()
    for line in broker.output:
        tap.append(line)  # one by one: deque.extend would bypass the ERROR check in append
    broker.output = tap
    return tap


@contextlib.contextmanager
def fuzz_broker(data_dir: Path, config: Mapping[str, str] | None = None) -> Iterator[tuple[BrokerProcess, LogTap]]:
    """A started broker with :data:`BROKER_CONFIG` (and ``config``) and its output tapped; stopped after."""
    proc = BrokerProcess(data_dir, config={**BROKER_CONFIG, **(config or {})})
    proc.start()
    tap = tap_output(proc)
    try:
        yield proc, tap
    finally:
        proc.stop()


def seeds_for(bootstrap: str, topic: str, value: bytes) -> tuple[dict[int, tuple[int, int]], list[fuzz.Seed]]:
    """The broker's advertised API versions and the fuzzer's seeds for them, their records three
    of ``value`` on ``topic``."""
    versions = fuzz.api_versions(bootstrap)
    records = build_batch([SimpleRecord(b"key", value) for _ in range(3)])
    return versions, fuzz.build_seeds(versions, fuzz.SeedContext(topic=topic, records=records))


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    """A memory figure of /proc/<pid>/status in KiB: VmRSS, RssAnon (heap) or RssFile (mapped files)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for pid {pid}")


def harm(broker: BrokerProcess, tap: LogTap, stats: fuzz.FuzzStats, summary: str) -> list[str]:
    """What a fuzz run did to the broker: empty when it is alive, every answer carried its
    request's correlation id and it logged no ERROR or traceback; else one line per finding."""
    if not broker.alive:
        return [f"the broker died after {summary}:\n{broker.log_text()[-5000:]}"]
    found: list[str] = []
    if stats.wrong_correlation:
        found.append(f"{stats.wrong_correlation} answers with a wrong correlation id: {stats.examples}")
    if tap.bad:
        found.append("the broker logged errors or tracebacks:\n" + "\n".join(tap.bad[:30]))
    return found
