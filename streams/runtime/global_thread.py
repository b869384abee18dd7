"""GlobalStreamThread: keeps every global store (GlobalKTable) a full copy of its source topic.

Kafka's rule: a global store has no changelog; its source topic is its changelog. The thread
owns one instance of each global store per KafkaStreams instance, under
``<state.dir>/<application.id>/global/`` (RocksDB, or memory), reads *all* partitions of each
global topic with an assigned (group-less) consumer and runs each record through the store's
global processor (for a GlobalKTable: put/delete). :meth:`bootstrap` reads every partition up to
its end offset as of the call (progress is logged) and runs before any stream thread starts, so
joins see the whole table; afterwards the thread keeps polling. Every ``commit.interval.ms`` the
stores commit their data with the next source offsets in one WriteBatch, and the ``.checkpoint``
file of the global directory is rewritten; a restart resumes from those offsets.

Stream threads read the stores concurrently (join lookups, interactive queries): each store is
wrapped in :class:`LockedStore`, and the thread holds the same lock while it applies a batch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from strom.streams.exceptions import StreamsError
from strom.streams.runtime.config import StreamsConfig
from strom.streams.runtime.task import make_store
from strom.streams.state.checkpoint import write_checkpoint
from strom.streams.topology.errors import ErrorHandling
from strom.streams.topology.runtime import TopologyRuntime
from strom.streams.topology.topology import StoreSpec, Topology


class LockedStore:
    """A byte key-value store whose every call holds ``lock`` (iterators are materialized)."""

    def __init__(self, inner: Any, lock: threading.RLock) -> None:
        self.inner = inner
        self.lock = lock
        self.name = inner.name

    def get(self, key: bytes) -> bytes | None:
        with self.lock:
            return self.inner.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        with self.lock:
            self.inner.put(key, value)

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None:
        with self.lock:
            return self.inner.put_if_absent(key, value)

    def delete(self, key: bytes) -> bytes | None:
        with self.lock:
            return self.inner.delete(key)

    def range(self, from_key: bytes | None, to_key: bytes | None, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        with self.lock:
            return iter(list(self.inner.range(from_key, to_key, reverse)))

    def all(self, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        with self.lock:
            return iter(list(self.inner.all(reverse)))

    def approximate_num_entries(self) -> int:
        with self.lock:
            return int(self.inner.approximate_num_entries())

    def commit(self, offsets: dict[tuple[str, int], int]) -> None:
        with self.lock:
            self.inner.commit(offsets)

    def committed_offsets(self) -> dict[tuple[str, int], int]:
        with self.lock:
            return dict(self.inner.committed_offsets())

    def close(self) -> None:
        with self.lock:
            self.inner.close()


def _no_output(topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Any) -> None:
    raise StreamsError(f"a global store processor cannot produce records (to {topic!r})")


class GlobalStreamThread(threading.Thread):
    """See the module docstring."""

    def __init__(self, topology: Topology, config: StreamsConfig, errors: ErrorHandling,
                 log: Callable[[str], None]) -> None:
        super().__init__(name=f"{config.application_id}-GlobalStreamThread", daemon=True)
        self.config = config
        self.app = config.application_id
        self.log = log
        self.lock = threading.RLock()
        self.dir = Path(config.state_dir) / self.app / "global"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.error: BaseException | None = None
        self._stop_event = threading.Event()
        self.raw: dict[str, LockedStore] = {}
        #: store name -> source topic
        self.topics: dict[str, str] = {g.store.name: g.topic for g in topology.global_stores.values()}

        def factory(spec: StoreSpec) -> Any:
            locked = LockedStore(make_store(spec, self.dir), self.lock)
            self.raw[spec.name] = locked
            return locked

        # a runtime of the global stores alone: their processors, fed by their topics
        only_globals = Topology()
        only_globals.global_stores = dict(topology.global_stores)
        self.runtime = TopologyRuntime(only_globals, self.app, _no_output, task_id="global",
                                       default_key_serde=config.default_key_serde,
                                       default_value_serde=config.default_value_serde,
                                       store_factory=factory, state_dir=config.state_dir, errors=errors)
        self.stores = self.runtime.global_stores
        self.consumer = Consumer({
            "bootstrap.servers": config.bootstrap_servers,
            "group.id": f"{self.app}-global",  # never joined nor committed: partitions are assigned
            "client.id": f"{self.app}-global-consumer",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed" if config.exactly_once else "read_uncommitted",
            **config.consumer,
        })
        self._positions: dict[tuple[str, int], int] = {}
        self._dirty = False
        self.restored = 0

    # -- bootstrap --------------------------------------------------------------------------

    def _offsets(self) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        for store in self.raw.values():
            out.update(store.committed_offsets())
        return out

    def bootstrap(self, timeout_s: float = 300.0) -> None:
        """Assigns every partition of every global topic and reads each to its current end."""
        committed = self._offsets()
        assignment: list[TopicPartition] = []
        ends: dict[tuple[str, int], int] = {}
        md = self.consumer.list_topics(timeout=10)
        for topic in sorted(set(self.topics.values())):
            meta = md.topics.get(topic)
            if meta is None or meta.error is not None:
                raise StreamsError(f"global topic {topic!r} is missing; create it before starting the application")
            for p in sorted(meta.partitions):
                start = committed.get((topic, p))
                low, high = self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                begin = start if start is not None and start >= low else low
                assignment.append(TopicPartition(topic, p, start if start is not None and start >= low
                                                 else OFFSET_BEGINNING))
                self._positions[(topic, p)] = begin
                if high > begin:
                    ends[(topic, p)] = high
                    self.log(f"[{self.app}] global store of {topic}: restoring partition {p} from offsets "
                             f"{begin}..{high}")
        self.consumer.assign(assignment)
        deadline = time.monotonic() + timeout_s
        n = 0
        while ends:
            if time.monotonic() > deadline:
                raise StreamsError(f"global stores did not catch up within {timeout_s}s; behind: {sorted(ends)}")
            msgs = self.consumer.consume(1000, 0.2)
            with self.lock:
                for m in msgs:
                    err = m.error()
                    tp: Any = (m.topic(), m.partition())
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            ends.pop(tp, None)  # read_committed: the end is the last stable offset
                            continue
                        raise StreamsError(f"bootstrapping global store from {tp[0]}-{tp[1]}: {err}")
                    self._apply(m)
                    n += 1
                    if (m.offset() or 0) + 1 >= ends.get(tp, 0):
                        ends.pop(tp, None)
            if n and msgs:
                self.log(f"[{self.app}] global stores: restored {n} records")
        self.restored = n
        self.commit()

    def _apply(self, m: Any) -> None:
        ts = m.timestamp()[1]
        self.runtime.process_input(m.topic(), m.partition(), m.offset(), m.key(), m.value(),
                                   ts if ts >= 0 else int(time.time() * 1000), m.headers())
        self._positions[(m.topic(), m.partition())] = m.offset() + 1
        self._dirty = True

    # -- running ----------------------------------------------------------------------------

    def commit(self) -> None:
        """Stores' data with the next source offsets (one WriteBatch each), then the checkpoint."""
        with self.lock:
            if not self._dirty and (self.dir / ".checkpoint").exists():
                return
            for name, store in self.raw.items():
                topic = self.topics[name]
                store.commit({tp: off for tp, off in self._positions.items() if tp[0] == topic})
            write_checkpoint(self.dir, dict(self._positions))
            self._dirty = False

    def shutdown(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        interval = self.config.commit_interval / 1000
        next_commit = time.monotonic() + interval
        try:
            while not self._stop_event.is_set():
                msgs = self.consumer.consume(500, 0.1)
                if msgs:
                    with self.lock:
                        for m in msgs:
                            err = m.error()
                            if err is not None:
                                if err.code() == KafkaError._PARTITION_EOF:
                                    continue
                                if err.fatal():
                                    raise KafkaException(err)
                                self.log(f"[{self.app}] global consumer error: {err}")
                                continue
                            self._apply(m)
                if time.monotonic() >= next_commit:
                    self.commit()
                    next_commit = time.monotonic() + interval
            self.commit()
        except BaseException as exc:
            self.error = exc
            self.log(f"[{self.app}] {self.name} failed: {exc!r}")
        finally:
            self.consumer.close()
            self.runtime.close()  # closes the stores too

    def close_unstarted(self) -> None:
        """Releases the consumer and stores when start() failed before the thread ran."""
        self.consumer.close()
        self.runtime.close()
