"""Connectors and a transformation for the runtime tests, registered as a strom plugin.

Load it with ``STROM_PLUGINS=strom_test_connect_plugins`` (this directory on ``PYTHONPATH``),
which is how the standalone-worker subprocess of the kill -9 test finds them.

* ``SeqSource``: each task emits ``count`` string records ``<prefix>-<task>-<n>`` (keys
  ``k-<n>``), ``batch`` per poll, resuming after its committed source offset.
* ``FileCollectSink``: buffers ``put`` records and appends their values, one per line, to
  ``file`` on ``flush`` (fsynced) — so what is in the file is exactly what was flushed.
  ``flush.fail.times`` makes the first N flushes fail (to test that offsets wait for flush);
  ``put.fail.on`` fails ``put`` on a value containing it; ``put.report.on`` hands such records
  to the errant record reporter instead; ``put.retriable.times`` makes the first N non-empty
  ``put`` calls raise RetriableException.
* ``FailOnValue``: a transformation raising DataException for values containing ``needle``.
* ``GatedTxnSource``: for ``transaction.boundary=connector``: its task returns ``count`` records
  in one poll (an open transaction), sets ``GATES[gate].in_transaction`` and, at its next poll,
  waits for ``GATES[gate].release`` before asking for the commit — so a test can act (fence the
  task) between the records and the commit of their transaction.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from strom.connect.api.config import ConfigDef
from strom.connect.api.connector import ConnectorTransactionBoundaries, SinkConnector, SourceConnector
from strom.connect.api.records import SinkRecord, SourceRecord, TopicPartition
from strom.connect.api.task import SinkTask, SourceTask, Task
from strom.connect.api.transforms import Transformation
from strom.connect.data import Schema
from strom.connect.exceptions import ConnectException, DataException, RetriableException
from strom.plugins.markers import hookimpl


class SeqSourceTask(SourceTask):
    def start(self, props: dict[str, str]) -> None:
        self.topic = props["topic"]
        self.count = int(props.get("count", "100"))
        self.batch = int(props.get("batch", "10"))
        self.delay = int(props.get("poll.delay.ms", "0")) / 1000
        self.prefix = props.get("prefix", "v")
        self.task = int(props["task.index"])
        self.poison = props.get("poison.at")  # n whose value gets the word "poison"
        self.partition = {"task": self.task}
        assert self.context is not None
        committed = self.context.offset_storage_reader.offset(self.partition)
        self.next = 0 if committed is None else int(committed["n"]) + 1

    def poll(self) -> list[SourceRecord] | None:
        if self.next >= self.count:
            time.sleep(0.05)
            return None
        if self.delay:
            time.sleep(self.delay)
        out = []
        for n in range(self.next, min(self.count, self.next + self.batch)):
            value = f"{self.prefix}-{self.task}-{n}"
            if self.poison is not None and n == int(self.poison):
                value += "-poison"
            out.append(SourceRecord(self.partition, {"n": n}, self.topic, None, Schema.STRING_SCHEMA,
                                    f"k-{n}", Schema.STRING_SCHEMA, value))
        self.next += len(out)
        return out

    def stop(self) -> None:
        pass


class SeqSource(SourceConnector):
    def start(self, props: dict[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return SeqSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self.props, "task.index": str(i)} for i in range(max_tasks)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return ConfigDef().define("topic", "STRING", importance="HIGH", doc="Destination topic.")


@dataclass
class Gate:
    in_transaction: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


GATES: dict[str, Gate] = {}


class GatedTxnSourceTask(SourceTask):
    def start(self, props: dict[str, str]) -> None:
        self.topic = props["topic"]
        self.count = int(props.get("count", "10"))
        self.gate = GATES.setdefault(props["gate"], Gate())
        self.sent = False
        self.stopped = threading.Event()

    def poll(self) -> list[SourceRecord] | None:
        if not self.sent:
            self.sent = True
            return [SourceRecord({"gate": 0}, {"n": n}, self.topic, None, Schema.STRING_SCHEMA, f"k-{n}",
                                 Schema.STRING_SCHEMA, f"gated-{n}") for n in range(self.count)]
        if not self.gate.in_transaction.is_set():
            self.gate.in_transaction.set()  # the records are in the open transaction now
            self.gate.release.wait(60)
            assert self.context is not None
            txn = self.context.transaction_context()
            assert txn is not None, "GatedTxnSource needs transaction.boundary=connector"
            txn.commit_transaction()
            return None
        self.stopped.wait(0.05)
        return None

    def stop(self) -> None:
        self.stopped.set()


class GatedTxnSource(SourceConnector):
    def start(self, props: dict[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return GatedTxnSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def can_define_transaction_boundaries(self, props: Any) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED

    def stop(self) -> None:
        pass


class HangOnStopSource(SourceConnector):
    """A connector without tasks whose ``stop()`` blocks until its gate's ``release`` is set
    (``in_transaction`` is set when stop() is entered): a connector that hangs on shutdown."""

    def start(self, props: dict[str, str]) -> None:
        self.gate = GATES.setdefault(props["gate"], Gate())

    def task_class(self) -> type[Task]:
        return SeqSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return []

    def stop(self) -> None:
        self.gate.in_transaction.set()
        self.gate.release.wait(120)


class FileCollectSinkTask(SinkTask):
    def start(self, props: dict[str, str]) -> None:
        self.file = props["file"]
        self.props_events = props.get("events.file")  # open/close calls, one line each
        self.fail_flushes = int(props.get("flush.fail.times", "0"))
        self.fail_put_on = props.get("put.fail.on")
        self.retriable_puts = int(props.get("put.retriable.times", "0"))
        self.report_on = props.get("put.report.on")  # handed to the errant record reporter
        self.reporter = self.context.errant_record_reporter() if self.context is not None else None
        self.buffer: list[str] = []
        self.flushes = 0

    def put(self, records: Sequence[SinkRecord]) -> None:
        if records and self.retriable_puts > 0:  # "the destination is briefly unavailable"
            self.retriable_puts -= 1
            assert self.context is not None
            self.context.timeout(100)
            raise RetriableException("try again")
        for r in records:
            if self.fail_put_on and self.fail_put_on in str(r.value):
                raise ConnectException(f"cannot write {r.value!r}")
            if self.report_on and self.report_on in str(r.value) and self.reporter is not None:
                self.reporter.report(r, DataException(f"refusing {r.value!r}")).result()
                continue
            self.buffer.append(f"{r.value}")

    def flush(self, offsets: dict[TopicPartition, int]) -> None:
        self.flushes += 1
        if self.flushes <= self.fail_flushes:
            raise ConnectException(f"flush {self.flushes} fails on purpose")
        if self.buffer:
            with open(self.file, "a") as f:
                f.write("".join(v + "\n" for v in self.buffer))
                f.flush()
                os.fsync(f.fileno())
            self.buffer.clear()

    def open(self, partitions: Any) -> None:
        self._event("open", partitions)

    def close(self, partitions: Any) -> None:
        # Buffered records of revoked partitions are dropped; they are redelivered (offsets
        # were committed only up to the last successful flush).
        self.buffer.clear()
        self._event("close", partitions)

    def _event(self, what: str, partitions: Any) -> None:
        events = self.props_events
        if events:
            with open(events, "a") as f:
                f.write(f"{what} {sorted(p.partition for p in partitions)}\n")

    def stop(self) -> None:
        pass


class FileCollectSink(SinkConnector):
    def start(self, props: dict[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return FileCollectSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass


class FailOnValue(Transformation):
    def configure(self, configs: Mapping[str, Any]) -> None:
        self.needle = configs["needle"]

    def apply(self, record: Any) -> Any:
        if self.needle in str(record.value):
            raise DataException(f"value contains {self.needle!r}")
        return record

    def config(self) -> ConfigDef:
        return ConfigDef().define("needle", "STRING", importance="HIGH")

    def close(self) -> None:
        pass


@hookimpl
def strom_connect_plugins() -> list[type]:
    return [SeqSource, FileCollectSink, FailOnValue, GatedTxnSource, HangOnStopSource]
