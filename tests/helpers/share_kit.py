"""Helpers for share-group (KIP-932) tests and the share-group benchmark: broker settings that
let a test use short record locks, group configs through IncrementalAlterConfigs on the GROUP
resource, producing numbered records, and share-consumer worker processes
(tests/share/share_worker.py) whose output files are read back as :class:`WorkerLog`.

The same helpers serve strom's broker and Apache Kafka 4.3.1 (the reference): nothing here
knows which one it talks to.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka_wire import connect, roundtrip
from kio.schema.api_versions.v3.request import ApiVersionsRequest

REPO = Path(__file__).resolve().parents[2]
WORKER = REPO / "tests" / "share" / "share_worker.py"

# Broker settings both brokers get: Kafka's lower bounds for the group-level lock duration,
# session timeout and heartbeat interval are 15 s, 45 s and 5 s by default, too long for a test
# that waits for a lock to expire or a killed member to leave.
SHARE_BROKER_CONFIG: dict[str, str] = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.min.session.timeout.ms": "6000",
    "group.share.min.heartbeat.interval.ms": "1000",
}

# The APIs a share consumer cannot work without (Kafka's api keys).
SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 77, 78, 79
SHARE_CONSUMER_APIS = {SHARE_GROUP_HEARTBEAT: "ShareGroupHeartbeat", SHARE_FETCH: "ShareFetch",
                       SHARE_ACKNOWLEDGE: "ShareAcknowledge"}

TP = tuple[int, int]  # (partition, offset): one record


def coords(msg: Message) -> TP:
    """(partition, offset) of a consumed or delivered record (both are set on those)."""
    partition, offset = msg.partition(), msg.offset()
    assert partition is not None and offset is not None
    return partition, offset


def delivery_count(msg: Message) -> int:
    """A share consumer's record always carries its delivery count."""
    count = msg.delivery_count()
    assert count is not None
    return count


def advertised_apis(bootstrap: str) -> set[int]:
    """The api keys the broker lists in its ApiVersions response."""
    with connect(bootstrap) as sock:
        resp = roundtrip(sock, ApiVersionsRequest(client_software_name="strom-tests",
                                                  client_software_version="1"))
    return {int(k.api_key) for k in resp.api_keys}


def missing_share_apis(bootstrap: str) -> list[str]:
    have = advertised_apis(bootstrap)
    return [name for key, name in SHARE_CONSUMER_APIS.items() if key not in have]


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)


def set_group_config(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs (SET) on the GROUP resource: how an operator changes a share
    group's ``share.*`` settings (``kafka-configs --entity-type groups``)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def group_config(**overrides: str) -> dict[str, str]:
    """Group settings for a test: read from the start of the topic (the records are produced
    before any consumer joins), plus ``overrides`` (keys with '_' for '.')."""
    out = {"share.auto.offset.reset": "earliest"}
    out.update({k.replace("_", "."): v for k, v in overrides.items()})
    return out


def produce(bootstrap: str, topic: str, count: int, partitions: int, *, value_size: int = 16,
            extra: dict[str, str | int] | None = None) -> set[TP]:
    """``count`` records spread round-robin over ``partitions``; the (partition, offset) of each,
    from the delivery reports. Fails if any record is not acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", **(extra or {})})
    written: set[TP] = set()
    failed: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            failed.append(err)
        else:
            written.add(coords(msg))

    pad = b"x" * max(0, value_size - 8)
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=b"%08d" % i + pad, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)  # local queue full: serve delivery reports until there is room
        producer.poll(0)
    left = producer.flush(60)
    assert not failed and not left, f"{len(failed)} failed ({failed[:3]}), {left} unacknowledged"
    return written


@dataclass
class WorkerLog:
    """What one share_worker.py process wrote."""

    received: list[tuple[int, int, int]] = field(default_factory=list)  # partition, offset, delivery count
    accepted: list[TP] = field(default_factory=list)  # acknowledgements the broker confirmed
    refused: list[tuple[int, str, int]] = field(default_factory=list)  # partition, error, offset
    acked: list[tuple[int, int, str]] = field(default_factory=list)  # --script: partition, offset, type given
    values: list[tuple[int, int, str]] = field(default_factory=list)  # --values: partition, offset, value
    held: bool = False
    closed: bool = False

    @classmethod
    def read(cls, path: Path) -> WorkerLog:
        out = cls()
        if not path.exists():
            return out
        for line in path.read_text().splitlines():
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "R" and len(parts) == 4:
                out.received.append((int(parts[1]), int(parts[2]), int(parts[3])))
            elif parts[0] == "A" and len(parts) == 3:
                out.accepted += [(int(parts[1]), int(o)) for o in parts[2].split(",")]
            elif parts[0] == "E" and len(parts) == 4:
                out.refused += [(int(parts[1]), parts[2], int(o)) for o in parts[3].split(",")]
            elif parts[0] == "V" and len(parts) == 4:
                out.values.append((int(parts[1]), int(parts[2]), parts[3]))
            elif parts[0] == "K" and len(parts) == 4:
                out.acked.append((int(parts[1]), int(parts[2]), parts[3]))
            elif parts[0] == "H":
                out.held = True
            elif parts[0] == "C":
                out.closed = True
        return out


class ShareWorkers:
    """share_worker.py processes in a test's directory: start them, watch their output, stop
    them all (a stop file), or SIGKILL one."""

    def __init__(self, workdir: Path, bootstrap: str, topic: str, group: str) -> None:
        self.workdir = workdir
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.stop_file = workdir / f"stop-{group}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        workdir.mkdir(parents=True, exist_ok=True)

    def out(self, name: str) -> Path:
        return self.workdir / f"{self.group}-{name}.out"

    def start(self, name: str, *, mode: str = "implicit", hold: bool = False,
              command: list[str] | None = None, script: str | None = None, values: bool = False) -> None:
        """A Python worker, or ``command`` (the Java worker) given the same arguments after it;
        ``script`` (Java worker, explicit mode) names its per-record acknowledgement rule;
        ``values`` (Java worker) has it write each record's value."""
        argv = [*(command or [sys.executable, str(WORKER)]), "--bootstrap", self.bootstrap, "--topic", self.topic,
                "--group", self.group, "--mode", mode, "--out", str(self.out(name)), "--stop", str(self.stop_file)]
        if hold:
            argv.append("--hold")
        if script:
            argv += ["--script", script]
        if values:
            argv.append("--values")
        err = open(self.workdir / f"{self.group}-{name}.err", "wb")  # noqa: SIM115 (the child keeps it)
        self.procs[name] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        err.close()

    def log(self, name: str) -> WorkerLog:
        return WorkerLog.read(self.out(name))

    def logs(self) -> dict[str, WorkerLog]:
        return {name: self.log(name) for name in self.procs}

    def stderr(self, name: str) -> str:
        path = self.workdir / f"{self.group}-{name}.err"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def kill(self, name: str) -> None:
        """SIGKILL: no close, no acknowledgement, its TCP connections simply drop."""
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def wait_until(self, check: Callable[[dict[str, WorkerLog]], bool], timeout: float, what: str, *,
                   expected: set[TP] | None = None) -> dict[str, WorkerLog]:
        """Poll the workers' output until ``check`` holds; fail naming ``what``, each worker's
        state (and stderr of any that died) and the ``expected`` records never accepted."""
        deadline = time.monotonic() + timeout
        while True:
            logs = self.logs()
            if check(logs):
                return logs
            if time.monotonic() > deadline:
                missing = "" if expected is None else "\n" + describe_missing(expected - set(accepted_counts(logs.values())))
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}:\n{self.describe(logs)}{missing}")
            time.sleep(0.2)

    def describe(self, logs: dict[str, WorkerLog]) -> str:
        lines = []
        for name, wl in logs.items():
            proc = self.procs[name]
            lines.append(f"  {name}: received {len(wl.received)}, accepted {len(wl.accepted)}, "
                         f"refused {len(wl.refused)}, exit {proc.poll()}")
            if proc.poll() not in (None, 0, -9):
                lines.append(self.stderr(name))
        return "\n".join(lines)

    def stop_all(self, timeout: float = 60.0) -> dict[str, WorkerLog]:
        """Create the stop file; wait for every live worker to close (sending its last
        acknowledgements) and exit 0."""
        self.stop_file.touch()
        deadline = time.monotonic() + timeout
        for name, proc in self.procs.items():
            if proc.returncode is not None:
                continue
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise AssertionError(f"worker {name} did not close within {timeout:.0f}s:\n{self.stderr(name)}") \
                    from None
            assert proc.returncode == 0, f"worker {name} exited {proc.returncode}:\n{self.stderr(name)}"
        return self.logs()

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def accepted_counts(logs: Iterable[WorkerLog]) -> Counter[TP]:
    """How many times each record's acceptance was confirmed, over all workers."""
    counts: Counter[TP] = Counter()
    for wl in logs:
        counts.update(wl.accepted)
    return counts


def accepted_total(logs: dict[str, WorkerLog]) -> int:
    return sum(len(wl.accepted) for wl in logs.values())


def describe_missing(missing: set[TP]) -> str:
    """Records never accepted, per partition: how many, and the first and last offsets."""
    by_partition: dict[int, list[int]] = {}
    for p, o in missing:
        by_partition.setdefault(p, []).append(o)
    return "; ".join(f"partition {p}: {len(offs)} never accepted, offsets {min(offs)}..{max(offs)} "
                     f"(first {sorted(offs)[:8]})" for p, offs in sorted(by_partition.items())) or "none missing"
