"""KafkaStreams: runs a :class:`Topology` against a Kafka cluster (Kafka's ``KafkaStreams``).

``start()`` creates the internal topics (``<application.id>-<name>-repartition`` with the
partition count of the upstream sub-topology's sources, ``<application.id>-<store>-changelog``
compacted, with the partition count of its sub-topology's sources) with the AdminClient, then
starts ``num.stream.threads`` :class:`StreamThread` s, each a member of the consumer group
``application.id``. ``store(name)`` gives read-only access (key, range, all) to the local
instances of a store across this instance's tasks (interactive queries).

Under exactly_once_v2 a thread's ``transactional.id`` is ``<application.id>-<process id>-<n>``
where the process id is a UUID kept in ``<state.dir>/<application.id>/`` (as Kafka Streams
does), so a restarted instance fences and aborts the transaction its crashed predecessor left
open instead of waiting for it to time out.
"""

from __future__ import annotations

import enum
import json
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from strom.streams.exceptions import StreamsError, TopologyError
from strom.streams.processor.stores import KeyValueStoreFacade
from strom.streams.runtime.config import StreamsConfig
from strom.streams.runtime.stream_thread import StreamThread, ThreadState
from strom.streams.state.changelogging import changelog_topic
from strom.streams.topology.topology import SinkNodeDef, SubTopology, Topology

PROCESS_FILE = "kafka-streams-process-metadata"


class State(enum.Enum):
    CREATED = "CREATED"
    REBALANCING = "REBALANCING"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    NOT_RUNNING = "NOT_RUNNING"
    ERROR = "ERROR"


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class ReadOnlyKeyValueStore:
    """Typed read access to one store over every local task holding a partition of it."""

    def __init__(self, name: str, parts: Callable[[], list[tuple[Any, KeyValueStoreFacade]]]) -> None:
        self.name = name
        self._parts = parts  # -> [(lock, facade)] of the tasks currently assigned here

    def get(self, key: Any) -> Any:
        for lock, facade in self._parts():
            with lock:
                value = facade.get(key)
            if value is not None:
                return value
        return None

    def _merged(self, fetch: Callable[[KeyValueStoreFacade], Iterator[tuple[Any, Any]]]) -> Iterator[tuple[Any, Any]]:
        rows: list[tuple[bytes, Any, Any]] = []
        for lock, facade in self._parts():
            with lock:
                # order across tasks by serialized key, as each task's store is ordered
                rows.extend((facade._kser(facade._topic, k) or b"", k, v) for k, v in fetch(facade))
        rows.sort(key=lambda r: r[0])
        return iter([(k, v) for _, k, v in rows])

    def range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        """Entries with serialized keys in [from_key, to_key] from all local partitions."""
        return self._merged(lambda f: f.range(from_key, to_key))

    def all(self) -> Iterator[tuple[Any, Any]]:
        return self._merged(lambda f: f.all())

    def approximate_num_entries(self) -> int:
        total = 0
        for lock, facade in self._parts():
            with lock:
                total += facade.approximate_num_entries()
        return total


class KafkaStreams:
    """A running instance of a streams application; see the module docstring."""

    def __init__(self, topology: Topology, config: Mapping[str, Any] | StreamsConfig,
                 log: Callable[[str], None] | None = None) -> None:
        self.config = StreamsConfig.load(config)
        topology.validate()
        if topology.global_stores:
            raise StreamsError("KafkaStreams does not run global stores/GlobalKTables yet; "
                               "use the TopologyTestDriver for them")
        self.topology = topology
        self.app = self.config.application_id
        self.log = log or _stderr
        self.subtopologies: list[SubTopology] = topology.subtopologies()
        self._threads: list[StreamThread] = []
        self._state = State.CREATED

    # -- topics -----------------------------------------------------------------------------

    def resolve_topic(self, name: str) -> str:
        return f"{self.app}-{name}" if name in self.topology.internal_topics else name

    def internal_topic_specs(self, source_partitions: Mapping[str, int]) -> dict[str, tuple[int, dict[str, str]]]:
        """Real internal topic name -> (partitions, topic config), given external topics' counts."""
        counts: dict[str, int] = dict(source_partitions)
        rp = self.topology.repartition_partitions
        for _ in range(len(self.subtopologies) + 1):  # propagate through chains of repartitions
            for sub in self.subtopologies:
                for node_name in sub.nodes:
                    node = self.topology.nodes[node_name]
                    if not (isinstance(node, SinkNodeDef) and node.topic in self.topology.internal_topics):
                        continue
                    real = self.resolve_topic(node.topic)
                    known = [counts[self.resolve_topic(t)] for t in sub.source_topics
                             if self.resolve_topic(t) in counts]
                    n = rp.get(node.topic) or (max(known) if known else None)
                    if n is not None:
                        counts[real] = n
        specs: dict[str, tuple[int, dict[str, str]]] = {}
        for topic in self.topology.internal_topics:
            real = self.resolve_topic(topic)
            if real not in counts:
                raise TopologyError(f"cannot size repartition topic {real!r}: no upstream source partitions")
            specs[real] = (counts[real], {})
        for sub in self.subtopologies:
            n = max(counts[self.resolve_topic(t)] for t in sub.source_topics)
            for store in sub.stores:
                if self.topology.stores[store].logging_enabled:
                    specs[changelog_topic(self.app, store)] = (n, {"cleanup.policy": "compact"})
        return specs

    def _create_internal_topics(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.config.bootstrap_servers, **self.config.admin})
        md = admin.list_topics(timeout=30)
        external = {t for sub in self.subtopologies for t in sub.source_topics
                    if t not in self.topology.internal_topics}
        missing = sorted(t for t in external if t not in md.topics or md.topics[t].error is not None)
        if missing:
            raise StreamsError(f"source topics missing: {missing}; create them before starting the application")
        specs = self.internal_topic_specs({t: len(md.topics[t].partitions) for t in external})
        new = [NewTopic(name, num_partitions=n, replication_factor=self.config.replication_factor, config=cfg)
               for name, (n, cfg) in sorted(specs.items()) if name not in md.topics]
        if not new:
            return
        for name, fut in admin.create_topics(new, operation_timeout=30).items():
            try:
                fut.result()
                self.log(f"[{self.app}] created internal topic {name} ({specs[name][0]} partitions)")
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise StreamsError(f"creating internal topic {name!r} failed: {exc}") from exc

    def _process_id(self) -> str:
        directory = Path(self.config.state_dir) / self.app
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / PROCESS_FILE
        try:
            return str(json.loads(path.read_text())["processId"])
        except (FileNotFoundError, ValueError, KeyError):
            pid = str(uuid.uuid4())
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"processId": pid}))
            tmp.replace(path)
            return pid

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        if self._state is not State.CREATED:
            raise StreamsError(f"KafkaStreams can only be started once (state {self._state.value})")
        self._state = State.REBALANCING
        try:
            self._create_internal_topics()
            pid = self._process_id()
            for i in range(1, self.config.num_stream_threads + 1):
                self._threads.append(StreamThread(self.topology, self.config, self.subtopologies,
                                                  self.resolve_topic, f"{self.app}-{pid}-{i}", i, self.log))
        except BaseException:
            self._state = State.ERROR
            raise
        for t in self._threads:
            t.start()

    def close(self, timeout: float | None = None) -> bool:
        """Stops the threads (commit, close tasks, leave the group); True if all stopped in time."""
        if self._state in (State.CREATED, State.NOT_RUNNING):
            self._state = State.NOT_RUNNING
            return True
        self._state = State.PENDING_SHUTDOWN
        for t in self._threads:
            t.shutdown()
        for t in self._threads:
            t.join(timeout)
        done = not any(t.is_alive() for t in self._threads)
        failed = any(t.state is ThreadState.ERROR for t in self._threads)
        self._state = State.ERROR if failed else State.NOT_RUNNING if done else State.PENDING_SHUTDOWN
        return done

    def state(self) -> State:
        if self._state in (State.CREATED, State.NOT_RUNNING, State.PENDING_SHUTDOWN, State.ERROR):
            return self._state
        states = [t.state for t in self._threads]
        if any(s is ThreadState.ERROR for s in states):
            return State.ERROR
        if states and all(s is ThreadState.RUNNING for s in states):
            return State.RUNNING
        return State.REBALANCING

    def errors(self) -> list[BaseException]:
        return [t.error for t in self._threads if t.error is not None]

    def store(self, name: str) -> ReadOnlyKeyValueStore:
        """Read-only view of store ``name`` over this instance's tasks (interactive queries)."""
        if name not in self.topology.stores:
            raise StreamsError(f"no state store named {name!r}; stores: {sorted(self.topology.stores)}")

        def parts() -> list[tuple[Any, KeyValueStoreFacade]]:
            out = []
            for t in self._threads:
                with t.lock:
                    for task in t.tasks.values():
                        if name in task.sub.stores:
                            out.append((t.lock, task.runtime.stores[name]))
            return out

        return ReadOnlyKeyValueStore(name, parts)

    def __enter__(self) -> KafkaStreams:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
