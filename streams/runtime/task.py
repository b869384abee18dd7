"""StreamTask: one (sub-topology, partition) of an application, with its stores and state dir.

A task owns the stores of its sub-topology in ``<state.dir>/<application.id>/<task id>/``, each
wrapped in a change-logging store whose writes the stream thread drains to
``<application.id>-<store>-changelog`` (partition = the task's partition), and a
:class:`TopologyRuntime` fed only with its sub-topology's source topics.

Its life follows Kafka Streams' task states: CREATED (stores open) -> RESTORING (each logged store
replays its changelog from the offset committed with the store's last WriteBatch to the end of
the log) -> RUNNING (:meth:`StreamTask.start_processing` builds the processors and calls their
``init``; records are processed) -> CLOSED. Processors are initialised only once every store is
restored, so a processor reading its store in ``init`` sees the state it had before a restart.
Under exactly_once_v2 Kafka's rule applies: the ``.checkpoint`` file exists only while the task
is cleanly closed; a task opened without one (a crash) wipes its local state and restores it
entirely from the changelog.
"""

from __future__ import annotations

import enum
import logging
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from strom.streams.exceptions import StreamsError, TaskCorruptedError
from strom.streams.runtime.partition_group import PartitionGroup
from strom.streams.state.changelogging import (
    ChangeLoggingKeyValueStore,
    ChangeLoggingSessionStore,
    ChangeLoggingWindowStore,
    changelog_topic,
)
from strom.streams.state.checkpoint import delete_checkpoint, read_checkpoint, task_dir, write_checkpoint
from strom.streams.state.factory import build_store
from strom.streams.state.keyvalue import BytesKeyValueStore, InMemoryKeyValueStore
from strom.streams.state.session import BytesSessionStore
from strom.streams.state.window import BytesWindowStore
from strom.streams.topology.errors import ErrorHandling, is_retriable
from strom.streams.topology.runtime import Emit, EmitBatch, TopologyRuntime
from strom.streams.topology.topology import StoreSpec, SubTopology, Topology

ChangelogTP = tuple[str, int]
logger = logging.getLogger(__name__)


def make_store(spec: StoreSpec, directory: Path) -> Any:
    """The byte store of ``spec`` for the task (or global) directory ``directory``: RocksDB
    under ``directory/rocksdb`` or in memory, of the spec's kind (see state.factory)."""
    return build_store(spec, directory / "rocksdb")


def wrap_logging(raw: Any) -> Any:
    return _wrap(raw)


def _wrap(raw: Any) -> Any:
    """The change-logging wrapper matching a byte store's kind."""
    if isinstance(raw, BytesKeyValueStore):
        return ChangeLoggingKeyValueStore(raw)
    if isinstance(raw, BytesWindowStore):
        return ChangeLoggingWindowStore(raw)
    if isinstance(raw, BytesSessionStore):
        return ChangeLoggingSessionStore(raw)
    raise StreamsError(f"cannot change-log a store of type {type(raw).__name__}")


class TaskState(enum.Enum):
    """Kafka Streams' active task states (the subset this runtime goes through)."""

    CREATED = "CREATED"  # stores open, nothing restored, no processor exists
    RESTORING = "RESTORING"  # stores replaying their changelogs
    RUNNING = "RUNNING"  # processors initialised, records processed
    CLOSED = "CLOSED"


class StreamTask:
    """The processors and stores of one task; driven by its :class:`StreamThread`.

    Creating a task opens its stores only; the thread then calls :meth:`restore` and
    :meth:`start_processing`, in that order, before routing records to :attr:`process_input`.
    """

    #: the processors and stores of the task; exists from :meth:`start_processing` on
    runtime: TopologyRuntime
    #: entry point of input records (the runtime's); exists from :meth:`start_processing` on
    process_input: Callable[..., None]
    #: entry point of the records of one poll from one partition (the runtime's process_batch)
    process_batch: Callable[..., None]
    #: the record queues of the task's input partitions, when it has several (the stream thread's)
    partition_group: PartitionGroup | None = None

    def __init__(self, topology: Topology, sub: SubTopology, partition: int, *, application_id: str,
                 state_dir: str, emit: Emit, exactly_once: bool, default_key_serde: Any,
                 default_value_serde: Any, errors: ErrorHandling | None = None,
                 global_stores: Mapping[str, Any] | None = None, cache_max_entries: int = 0,
                 emit_batch: EmitBatch | None = None) -> None:
        self.topology = topology
        self.sub = sub
        self.partition = partition
        self.id = f"{sub.id}_{partition}"
        self.application_id = application_id
        self.exactly_once = exactly_once
        self.state = TaskState.CREATED
        self.dir: Path = task_dir(state_dir, application_id, self.id)
        if exactly_once and self.dir.exists() and not (self.dir / ".checkpoint").exists():
            # unclean shutdown under EOS: local state may be ahead of the committed changelog
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        # what the runtime is built with once the stores are restored
        self._runtime_args: dict[str, Any] = dict(
            emit=emit, task_id=self.id, default_key_serde=default_key_serde,
            default_value_serde=default_value_serde, state_dir=state_dir, errors=errors,
            global_stores=global_stores, cache_max_entries=cache_max_entries, emit_batch=emit_batch)
        #: store name -> the store the runtime gets (change-logging wrapper when logged), own
        #: stores of this sub-topology only
        self.stores: dict[str, Any] = {}
        #: store name -> change-logging wrapper (only logged stores of this sub-topology)
        self.logged: dict[str, Any] = {}
        try:
            for name in sub.stores:
                spec = topology.stores[name]
                store = make_store(spec, self.dir)
                if spec.logging_enabled:
                    store = _wrap(store)
                    self.logged[name] = store
                self.stores[name] = store
        except BaseException:
            self._close_stores()
            raise
        #: records replayed from changelogs when this task was created (restore progress)
        self.restored = 0
        self.changelog_tps: dict[str, ChangelogTP] = {
            name: (changelog_topic(application_id, name), partition) for name in self.logged}

    # -- restore ----------------------------------------------------------------------------

    def restore(self, consumer_conf: dict[str, Any], log: Callable[[str], None] = logger.info,
                timeout_s: float = 120.0) -> int:
        """Replays each logged store's changelog from its committed offset to the end."""
        if self.state is not TaskState.CREATED and self.state is not TaskState.RESTORING:
            raise StreamsError(f"task {self.id}: restore in state {self.state.value}")
        self.state = TaskState.RESTORING
        if not self.logged:
            return 0
        total = 0
        deadline = time.monotonic() + timeout_s
        consumer = Consumer({**consumer_conf, "enable.partition.eof": True, "enable.auto.commit": False})
        try:
            for name, store in self.logged.items():
                topic, part = self.changelog_tps[name]
                start = store.committed_offsets().get((topic, part), 0)
                low, high = self._watermarks(consumer, topic, part, deadline, log)
                if high <= max(start, low):
                    continue
                log(f"[{self.application_id}] task {self.id}: restoring store {name!r} from "
                    f"{topic}-{part} offsets {max(start, low)}..{high}")
                records = self._read(consumer, topic, part, start if start > low else OFFSET_BEGINNING,
                                     timeout_s)
                n = store.restore(records, (topic, part),
                                  on_progress=lambda k, nm=name: log(
                                      f"[{self.application_id}] task {self.id}: store {nm!r} "
                                      f"restored {k} records"))
                total += n
        finally:
            consumer.close()
        self.restored += total
        return total

    def _watermarks(self, consumer: Consumer, topic: str, part: int, deadline: float,
                    log: Callable[[str], None]) -> tuple[int, int]:
        """The changelog partition's watermarks; a broker that is away is waited for until the
        restore's deadline (task.timeout.ms), then TaskCorruptedError (the thread retries)."""
        while True:
            try:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, part), timeout=max(0.1, min(10.0, deadline - time.monotonic())))
                return int(low), int(high)
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if not is_retriable(err):
                    raise
                if time.monotonic() >= deadline:
                    raise TaskCorruptedError(f"task {self.id}: the end of {topic}-{part} could not be read "
                                             f"before task.timeout.ms: {err.str()}") from exc
                log(f"[{self.application_id}] WARN task {self.id}: waiting for the end offset of {topic}-{part} "
                    f"({err.str()})")

    @staticmethod
    def _read(consumer: Consumer, topic: str, part: int, start: int,
              timeout_s: float) -> Iterator[tuple[int, bytes, bytes | None]]:
        consumer.assign([TopicPartition(topic, part, start)])
        deadline = time.monotonic() + timeout_s
        while True:
            if time.monotonic() > deadline:
                raise TaskCorruptedError(f"restoring {topic}-{part} did not reach the end in {timeout_s}s")
            msgs: list[Any] = consumer.consume(1000, 0.5)
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        consumer.unassign()
                        return
                    if is_retriable(err):
                        continue  # the broker is away: the consumer reconnects, the deadline bounds it
                    raise StreamsError(f"restoring {topic}-{part}: {err}")
                key = m.key()
                if key is None:
                    continue
                yield m.offset(), key, m.value()

    # -- commit and close -------------------------------------------------------------------

    def drain_changelogs(self) -> list[tuple[ChangelogTP, list[tuple[bytes, bytes | None]]]]:
        """Pending changelog writes per changelog partition, last write per key only."""
        out = []
        for name, store in self.logged.items():
            pending = store.drain_changelog()
            if pending:
                # a compacted topic keeps the last value per key: earlier ones need not be sent
                out.append((self.changelog_tps[name], list(dict(pending).items())))
        return out

    def commit_stores(self, changelog_offsets: dict[ChangelogTP, int]) -> None:
        """Writes every store's buffered state with its changelog offset in one WriteBatch."""
        for name, store in self.stores.items():
            tp = self.changelog_tps.get(name)
            offsets = {tp: changelog_offsets[tp]} if tp is not None and tp in changelog_offsets else {}
            store.commit(offsets)
        if not self.exactly_once:
            self._write_checkpoint()

    def start_processing(self) -> None:
        """RESTORING -> RUNNING: builds the processors over the restored stores and calls their
        ``init`` (Kafka initialises the topology only after restoration completes)."""
        if self.state is TaskState.RUNNING:
            return
        if self.state is TaskState.CLOSED:
            raise StreamsError(f"task {self.id} is closed")
        if self.exactly_once:
            # from here on the stores change: while processing under EOS no checkpoint exists,
            # so a crash forces wipe + restore
            delete_checkpoint(self.dir)
        own = self.stores

        def factory(spec: StoreSpec) -> Any:
            if spec.name in own:
                return own[spec.name]
            # the runtime instantiates every store of the topology; others are never touched
            return InMemoryKeyValueStore(spec.name)

        self.runtime = TopologyRuntime(self.topology, self.application_id, store_factory=factory,
                                       **self._runtime_args)
        self.process_input = self.runtime.process_input
        self.process_batch = self.runtime.process_batch
        self.state = TaskState.RUNNING

    def _committed(self) -> dict[ChangelogTP, int]:
        offsets: dict[ChangelogTP, int] = {}
        for store in self.logged.values():
            offsets.update(store.committed_offsets())
        return offsets

    def _write_checkpoint(self) -> None:
        write_checkpoint(self.dir, self._committed())

    def close(self, clean: bool) -> None:
        """Closes processors and stores; a clean close (after a commit) writes the checkpoint.

        A task that never started processing (its restore failed) has only its stores to close.
        """
        if self.state is TaskState.CLOSED:
            return
        offsets = self._committed() if clean else None
        if self.state is TaskState.RUNNING:
            self.runtime.close()  # processors, then every store it holds (ours included)
        else:
            self._close_stores()
        self.state = TaskState.CLOSED
        if offsets is not None:
            write_checkpoint(self.dir, offsets)

    def _close_stores(self) -> None:
        for store in self.stores.values():
            close = getattr(store, "close", None)
            if close is not None:
                close()

    def checkpoint(self) -> dict[ChangelogTP, int]:
        return read_checkpoint(self.dir)
