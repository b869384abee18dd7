"""TopologyTestDriver: runs a topology with no broker (Kafka's ``TopologyTestDriver``).

Input records are serialized with the test topic's serdes and fed, as bytes, to the source
node, exactly as a consumer would deliver them; sink output is kept per topic as bytes and
deserialized when read. Output to a topic the topology itself reads (repartition topics, or a
user topic that is also a source) is queued and processed after the current record, as Kafka's
driver does, so the whole topology runs end to end in one thread. Everything is partition 0.

The stores are a task's: built by :func:`strom.streams.runtime.task.make_store` in
``<state.dir>/<application.id>/0_0`` and, unless ``Materialized.with_logging_disabled()``,
wrapped in the change-logging layer (:func:`strom.streams.runtime.task.wrap_logging`);
aggregations run behind the record cache sized by ``statestore.cache.max.bytes`` (Kafka's
default, 10 MiB; 0 turns it off). As Kafka's driver does, it commits after every record it
processes (input or re-enqueued internal), after :meth:`TopologyTestDriver.advance_wall_clock_time`
and at :meth:`TopologyTestDriver.close`. A commit is a stream thread's: the record caches flush
(their net updates flow downstream), the changelog writes are "produced" to
``<application.id>-<store>-changelog`` (readable as output topics, and listed by
:meth:`TopologyTestDriver.producer_topic_names`), and every store commits with its changelog
offset. So an aggregation coalesces the updates one input record makes to a key (a
``flat_map_values`` into a ``count``, for instance) into one downstream update, exactly as a
task with caching on does within one commit interval.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from strom.streams.exceptions import StreamsError, TopologyError
from strom.streams.processor.api import Record
from strom.streams.processor.readonly import ReadOnlySessionStore, ReadOnlyWindowStore
from strom.streams.processor.stores import (
    CachedKeyValueStoreFacade,
    KeyValueStoreFacade,
    deserializer_of,
    serializer_of,
)
from strom.streams.runtime.config import StreamsConfig
from strom.streams.runtime.task import make_store, wrap_logging
from strom.streams.state.changelogging import (
    ChangeLoggingKeyValueStore,
    ChangeLoggingSessionStore,
    ChangeLoggingWindowStore,
    changelog_topic,
)
from strom.streams.state.checkpoint import task_dir
from strom.streams.topology.runtime import Headers, TopologyRuntime
from strom.streams.topology.topology import StoreSpec, Topology

#: Kafka's ``statestore.cache.max.bytes`` default (and its older name)
_CACHE_KEYS = ("statestore.cache.max.bytes", "cache.max.bytes.buffering")
_TASK_ID = "0_0"


class TestRecord:
    """A record read from an output topic."""

    __test__ = False  # not a pytest class
    __slots__ = ("headers", "key", "timestamp", "topic", "value")

    def __init__(self, topic: str, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        self.topic = topic
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers

    def __repr__(self) -> str:
        return f"TestRecord(topic={self.topic!r}, key={self.key!r}, value={self.value!r}, ts={self.timestamp})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, TestRecord) and (self.topic, self.key, self.value, self.timestamp)
                == (other.topic, other.key, other.value, other.timestamp))

    __hash__ = None  # type: ignore[assignment]


class TestInputTopic:
    __test__ = False

    def __init__(self, driver: TopologyTestDriver, topic: str, key_serde: Any, value_serde: Any) -> None:
        self.driver = driver
        self.topic = topic
        self._kser = serializer_of(key_serde)
        self._vser = serializer_of(value_serde)

    def pipe_input(self, key: Any = None, value: Any = None, timestamp: int | None = None,
                   headers: Sequence[tuple[str, bytes | None]] | None = None) -> None:
        """Send one record; without a timestamp it gets the driver's wall-clock time."""
        ts = self.driver.wall_clock_ms if timestamp is None else timestamp
        self.driver._pipe(self.topic, self._kser(self.topic, key), self._vser(self.topic, value), ts, headers)

    def pipe_value_list(self, values: Sequence[Any]) -> None:
        for v in values:
            self.pipe_input(None, v)

    def pipe_key_value_list(self, pairs: Sequence[tuple[Any, Any]]) -> None:
        for k, v in pairs:
            self.pipe_input(k, v)

    def pipe_record_list(self, records: Sequence[Record[Any, Any]]) -> None:
        for r in records:
            self.pipe_input(r.key, r.value, r.timestamp, r.headers)


class TestOutputTopic:
    __test__ = False

    def __init__(self, driver: TopologyTestDriver, topic: str, key_serde: Any, value_serde: Any) -> None:
        self.driver = driver
        self.topic = topic
        self._kde = deserializer_of(key_serde)
        self._vde = deserializer_of(value_serde)

    def _queue(self) -> deque[tuple[bytes | None, bytes | None, int, Headers]]:
        return self.driver._outputs.setdefault(self.topic, deque())

    def read_record(self) -> TestRecord:
        q = self._queue()
        if not q:
            raise StreamsError(f"output topic {self.topic!r} is empty")
        k, v, ts, h = q.popleft()
        return TestRecord(self.topic, self._kde(self.topic, k), self._vde(self.topic, v), ts, h)

    def read_key_value(self) -> tuple[Any, Any]:
        r = self.read_record()
        return r.key, r.value

    def read_value(self) -> Any:
        return self.read_record().value

    def read_records_to_list(self) -> list[TestRecord]:
        out = []
        while self._queue():
            out.append(self.read_record())
        return out

    def read_key_values_to_list(self) -> list[tuple[Any, Any]]:
        return [(r.key, r.value) for r in self.read_records_to_list()]

    def read_values_to_list(self) -> list[Any]:
        return [r.value for r in self.read_records_to_list()]

    def read_key_values_to_map(self) -> dict[Any, Any]:
        """Latest value per key (a None value removes the key)."""
        out: dict[Any, Any] = {}
        for k, v in self.read_key_values_to_list():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = v
        return out

    def get_queue_size(self) -> int:
        return len(self._queue())

    def is_empty(self) -> bool:
        return not self._queue()


class TopologyTestDriver:
    """Drives a topology in-process; see the module docstring.

    ``config`` takes ``application.id`` (default ``"test"``), ``default.key.serde`` /
    ``default.value.serde`` (Serde objects), ``state.dir`` (else a temporary directory
    removed at close) and ``statestore.cache.max.bytes`` (the record cache; default 10 MiB as
    in Kafka, 0 forwards every update of an aggregation at once). ``topic_partitions`` gives
    partition counts of source topics for the co-partitioning check that a real cluster would
    make (default: 1 each).
    """

    def __init__(self, topology: Topology, config: Mapping[str, Any] | None = None,
                 initial_wall_clock_ms: int | None = None,
                 topic_partitions: Mapping[str, int] | None = None) -> None:
        config = dict(config or {})
        self.application_id = str(config.get("application.id", "test"))
        self.wall_clock_ms = int(time.time() * 1000) if initial_wall_clock_ms is None else initial_wall_clock_ms
        check_copartitioning(topology, topic_partitions or {})
        self._tmp: str | None = None
        state_dir = config.get("state.dir")
        if state_dir is None:
            self._tmp = state_dir = tempfile.mkdtemp(prefix="strom-ttd-")
        self._outputs: dict[str, deque[tuple[bytes | None, bytes | None, int, Headers]]] = {}
        self._offsets: dict[str, int] = {}
        self._pending: deque[tuple[str, bytes | None, bytes | None, int, Headers]] = deque()
        self._processing = False
        self._closed = False
        directory: Path = task_dir(str(state_dir), self.application_id, _TASK_ID)
        directory.mkdir(parents=True, exist_ok=True)
        #: store name -> its change-logging layer (stores with logging enabled)
        self.logged: dict[str, ChangeLoggingKeyValueStore | ChangeLoggingWindowStore | ChangeLoggingSessionStore] = {}
        #: changelog topic -> offset of its next record
        self._changelog_end: dict[str, int] = {}

        def task_store(spec: StoreSpec) -> Any:
            # the stores a KafkaStreams task has: RocksDB unless Materialized says in_memory,
            # change-logged unless logging is disabled; a global store's topic is its changelog
            store = make_store(spec, directory)
            if spec.logging_enabled and spec.name not in topology.global_stores:
                store = wrap_logging(store)
                self.logged[spec.name] = store
            return store

        self.runtime = TopologyRuntime(topology, self.application_id, self._emit,
                                       default_key_serde=config.get("default.key.serde"),
                                       default_value_serde=config.get("default.value.serde"),
                                       wall_clock_ms=self.wall_clock_ms, state_dir=str(state_dir),
                                       store_factory=task_store,
                                       cache_max_entries=_cache_max_entries(self.application_id, config))
        self.topology = topology

    # -- topics -----------------------------------------------------------------------------

    def create_input_topic(self, topic: str, key_serde: Any = None, value_serde: Any = None) -> TestInputTopic:
        if topic not in self.runtime.sources:
            raise TopologyError(f"topic {topic!r} is not a source topic of the topology; "
                                f"known: {sorted(self.runtime.sources)}")
        return TestInputTopic(self, topic, key_serde, value_serde)

    def create_output_topic(self, topic: str, key_serde: Any = None, value_serde: Any = None) -> TestOutputTopic:
        return TestOutputTopic(self, topic, key_serde, value_serde)

    def producer_topic_names(self) -> set[str]:
        return set(self._outputs)

    def _emit(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers) -> None:
        self._outputs.setdefault(topic, deque()).append((key, value, timestamp, headers))
        if topic in self.runtime.sources:
            # consumed by the topology itself: processed after the current record
            self._pending.append((topic, key, value, timestamp, headers))
            if topic.startswith(f"{self.application_id}-") and topic[len(self.application_id) + 1:] \
                    in self.topology.internal_topics:
                self._outputs[topic].pop()  # internal topics are not observable as output

    def _pipe(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers) -> None:
        if self._closed:
            raise StreamsError("the TopologyTestDriver is closed")
        self._pending.append((topic, key, value, timestamp, headers))
        if self._processing:
            return
        self._processing = True
        try:
            while self._pending:
                t, k, v, ts, h = self._pending.popleft()
                offset = self._offsets.get(t, 0)
                self._offsets[t] = offset + 1
                self.runtime.process_input(t, 0, offset, k, v, ts, h)
                # Kafka's driver commits after every record it processes
                self._commit()
        finally:
            self._processing = False
            self._pending.clear()

    def _commit(self) -> None:
        """A stream thread's commit of the task (see the module docstring); what the cache
        flush sends to topics the topology reads is queued like any output."""
        self.runtime.flush_caches()
        offsets: dict[tuple[str, int], int] = {}
        for name, store in self.logged.items():
            pending = store.drain_changelog()
            if not pending:
                continue
            topic = changelog_topic(self.application_id, name)
            # a compacted topic keeps the last value per key: a task sends only that one
            latest = dict(pending)
            out = self._outputs.setdefault(topic, deque())
            for key, value in latest.items():
                out.append((key, value, self.wall_clock_ms, None))
            end = self._changelog_end.get(topic, 0) + len(latest)
            self._changelog_end[topic] = end
            offsets[(topic, 0)] = end
        for name, raw in self.runtime.raw_stores.items():
            if name in self.topology.global_stores:
                continue
            tp = (changelog_topic(self.application_id, name), 0)
            raw.commit({tp: offsets[tp]} if tp in offsets else {})

    # -- clock and stores -------------------------------------------------------------------

    def advance_wall_clock_time(self, ms: int) -> None:
        """Move the wall clock forward and run the wall-clock punctuations that are due."""
        if ms < 0:
            raise StreamsError(f"cannot move the wall clock backwards ({ms} ms)")
        self.wall_clock_ms += ms
        self.runtime.punctuate_wall_clock(self.wall_clock_ms)
        self._commit()
        # records a punctuation (or the commit's cache flush) sent to topics the topology reads
        if self._pending:
            t, k, v, ts, h = self._pending.popleft()
            self._pipe(t, k, v, ts, h)

    def get_key_value_store(self, name: str) -> KeyValueStoreFacade | CachedKeyValueStoreFacade:
        store = self.runtime.stores.get(name) or self.runtime.global_stores.get(name)
        if store is None:
            raise TopologyError(f"no key-value store named {name!r}; stores: "
                                f"{sorted(self.runtime.stores) + sorted(self.runtime.global_stores)}")
        return store

    def _store_of_kind(self, name: str, kind: str) -> KeyValueStoreFacade:
        spec = self.topology.stores.get(name)
        if spec is None or spec.kind != kind:
            known = sorted(n for n, sp in self.topology.stores.items() if sp.kind == kind)
            raise TopologyError(f"no {kind.replace('_', '-')} store named {name!r}; {kind} stores: {known}")
        return self.runtime.stores[name]

    def get_window_store(self, name: str) -> ReadOnlyWindowStore:
        """Read-only view of window store ``name`` (Kafka's ``getWindowStore``)."""
        facade = self._store_of_kind(name, "window")
        return ReadOnlyWindowStore(name, lambda: [(contextlib.nullcontext(), facade)])

    def get_session_store(self, name: str) -> ReadOnlySessionStore:
        """Read-only view of session store ``name`` (Kafka's ``getSessionStore``)."""
        facade = self._store_of_kind(name, "session")
        return ReadOnlySessionStore(name, lambda: [(contextlib.nullcontext(), facade)])

    def get_all_state_stores(self) -> dict[str, KeyValueStoreFacade | CachedKeyValueStoreFacade]:
        return {**self.runtime.stores, **self.runtime.global_stores}

    def close(self) -> None:
        if self._closed:
            return
        try:
            # as Kafka's driver: a clean close commits first (cache flush, changelogs, stores)
            self._commit()
            if self._pending:
                t, k, v, ts, h = self._pending.popleft()
                self._pipe(t, k, v, ts, h)
        finally:
            self._closed = True
            self.runtime.close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cache_max_entries(application_id: str, config: Mapping[str, Any]) -> int:
    """The record cache size a task of this config gets (StreamsConfig's rule)."""
    size = next((config[k] for k in _CACHE_KEYS if k in config), None)
    conf: dict[str, Any] = {"application.id": application_id, "bootstrap.servers": "test-driver:9092"}
    if size is not None:
        conf["statestore.cache.max.bytes"] = size
    return StreamsConfig.load(conf).cache_max_entries()


def check_copartitioning(topology: Topology, partitions: Mapping[str, int]) -> None:
    """Joined inputs must have equal partition counts (internal topics are created to match)."""
    for group in topology.copartition_groups:
        external = sorted(t for t in group if t not in topology.internal_topics)
        counts = {t: partitions.get(t, 1) for t in external}
        if len(set(counts.values())) > 1:
            detail = ", ".join(f"{t} ({n} partitions)" for t, n in counts.items())
            raise TopologyError(f"topics not co-partitioned: {detail}; joined topics need the same number "
                                f"of partitions (repartition one side first)")
