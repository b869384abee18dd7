"""Standby replicas (``num.standby.replicas``): warm copies of other instances' task stores.

Kafka Streams places standby tasks with its own assignor. strom.streams takes active tasks from
librdkafka's range assignor, so placement is computed afterwards, identically on every
instance, from the group's description (:class:`~strom.streams.runtime.membership.GroupView`):

* instances (KafkaStreams processes, one per process id, whatever their thread count) are
  sorted by process key into a ring;
* a task active on the instance at ring position ``i`` gets standbys on the next
  ``min(num.standby.replicas, instances - 1)`` instances ``i+1, i+2, ...``;
* placement is recomputed every two seconds while the group is Stable (never mid-rebalance).

A standby task opens the task's persistent (RocksDB), change-logged stores in the same task
directory an active task would use, and a :class:`StandbyManager` thread applies their
changelog partitions to them, committing each batch with its next offset (one WriteBatch). When
a stream thread is given the task, it first calls :meth:`StandbyManager.release`: the standby
writes its ``.checkpoint`` and closes, and the active task restores only the changelog records
the standby had not yet applied. Under exactly_once_v2 the standby reads read_committed and, as
an active task, keeps no checkpoint while open (a crash means wipe and restore). In-memory
stores get no standby (their copy would not survive the hand-over).
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, ConsumerGroupState, KafkaError, TopicPartition

from strom.streams.runtime.config import StreamsConfig
from strom.streams.runtime.membership import GroupView
from strom.streams.runtime.task import make_store, wrap_logging
from strom.streams.state.changelogging import changelog_topic
from strom.streams.state.checkpoint import delete_checkpoint, task_dir, write_checkpoint
from strom.streams.state.factory import DslStoreSupplier
from strom.streams.topology.topology import SubTopology, Topology

TaskKey = tuple[int, int]
TP = tuple[str, int]


def standby_eligible(topology: Topology, sub: SubTopology) -> list[str]:
    """Stores of ``sub`` a standby can keep: change-logged and persistent."""
    out = []
    for name in sub.stores:
        spec = topology.stores[name]
        if (spec.logging_enabled and spec.store_type == "rocksdb"
                and (spec.supplier is None or isinstance(spec.supplier, DslStoreSupplier))):
            out.append(name)
    return out


def place_standbys(owners: dict[TaskKey, str], instances: Iterable[str], replicas: int) -> dict[TaskKey, list[str]]:
    """task -> instances keeping a standby of it (the ring rule of the module docstring)."""
    ring = sorted(instances)
    out: dict[TaskKey, list[str]] = {}
    if not ring:
        return out
    k = min(replicas, len(ring) - 1)
    for task, owner in owners.items():
        if owner not in ring:
            continue
        i = ring.index(owner)
        out[task] = [ring[(i + j) % len(ring)] for j in range(1, k + 1)]
    return out


class StandbyTask:
    """The eligible stores of one task, kept up to date from their changelogs."""

    def __init__(self, topology: Topology, sub: SubTopology, partition: int, config: StreamsConfig) -> None:
        app = config.application_id
        self.id = f"{sub.id}_{partition}"
        self.dir = task_dir(config.state_dir, app, self.id)
        self.exactly_once = config.exactly_once
        if self.exactly_once and self.dir.exists() and not (self.dir / ".checkpoint").exists():
            shutil.rmtree(self.dir)  # same rule as an active task: no checkpoint, no trust
        self.dir.mkdir(parents=True, exist_ok=True)
        self.stores: dict[TP, Any] = {}
        for name in standby_eligible(topology, sub):
            self.stores[(changelog_topic(app, name), partition)] = wrap_logging(
                make_store(topology.stores[name], self.dir))
        if self.exactly_once:
            delete_checkpoint(self.dir)
        #: changelog records applied since the standby opened
        self.applied = 0

    def positions(self) -> dict[TP, int | None]:
        return {tp: store.committed_offsets().get(tp) for tp, store in self.stores.items()}

    def apply(self, tp: TP, records: list[tuple[int, bytes, bytes | None]]) -> None:
        self.applied += self.stores[tp].restore(records, tp)

    def close(self) -> None:
        offsets: dict[TP, int] = {}
        for store in self.stores.values():
            offsets.update(store.committed_offsets())
        for store in self.stores.values():
            store.close()
        write_checkpoint(self.dir, offsets)


class StandbyManager(threading.Thread):
    """Opens, updates and closes this instance's standby tasks (see the module docstring)."""

    def __init__(self, topology: Topology, config: StreamsConfig, subs: list[SubTopology],
                 resolve: Callable[[str], str], group: GroupView, process_key: str,
                 log: Callable[[str], None]) -> None:
        super().__init__(name=f"{config.application_id}-StandbyThread", daemon=True)
        self.topology = topology
        self.config = config
        self.app = config.application_id
        self.group = group
        self.process_key = process_key
        self.log = log
        self.lock = threading.RLock()
        self.subs = [s for s in subs if standby_eligible(topology, s)]
        self._topic_sub = {resolve(t): s for s in self.subs for t in s.source_topics}
        self._sub_topics = {s.id: [resolve(t) for t in s.source_topics] for s in self.subs}
        self.tasks: dict[TaskKey, StandbyTask] = {}
        self._active: set[TaskKey] = set()  # tasks active on this instance: never standbys here
        self._by_tp: dict[TP, StandbyTask] = {}
        self._reassign = True
        self._stop_event = threading.Event()
        self.error: BaseException | None = None
        #: records applied by standbys that were later handed to an active task here
        self.handed_over: dict[str, int] = {}
        self.consumer = Consumer({
            "bootstrap.servers": config.bootstrap_servers,
            "group.id": f"{self.app}-standby",  # assigned partitions only, never committed
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed" if config.exactly_once else "read_uncommitted",
            **config.consumer,
        })

    # -- called by stream threads -----------------------------------------------------------

    def release(self, key: TaskKey) -> None:
        """``key`` becomes active here: close its standby (checkpointed) first."""
        with self.lock:
            self._active.add(key)
            task = self.tasks.pop(key, None)
            if task is None:
                return
            for tp in task.stores:
                self._by_tp.pop(tp, None)
            task.close()
            self.handed_over[task.id] = task.applied
            self._reassign = True
            self.log(f"[{self.app}] standby task {task.id} handed over to an active task "
                     f"after applying {task.applied} changelog records")

    def deactivated(self, keys: Iterable[TaskKey]) -> None:
        with self.lock:
            self._active.difference_update(keys)

    # -- placement --------------------------------------------------------------------------

    def desired(self) -> set[TaskKey] | None:
        """Tasks this instance should keep standbys of; None while the group is not Stable."""
        instances = self.group.instances(refresh=True)
        if self.group.state is not ConsumerGroupState.STABLE or self.process_key not in instances:
            return None
        owners: dict[TaskKey, str] = {}
        for proc, inst in instances.items():
            for topic, p in inst.partitions:
                sub = self._topic_sub.get(topic)
                if sub is not None:
                    owners[(sub.id, p)] = proc
        placement = place_standbys(owners, instances, self.config.num_standby_replicas)
        return {task for task, holders in placement.items() if self.process_key in holders}

    def _sync(self, wanted: set[TaskKey]) -> None:
        with self.lock:
            wanted = wanted - self._active
            for key in [k for k in self.tasks if k not in wanted]:
                task = self.tasks.pop(key)
                for tp in task.stores:
                    self._by_tp.pop(tp, None)
                task.close()
                self._reassign = True
            for key in sorted(wanted - set(self.tasks)):
                sub = next(s for s in self.subs if s.id == key[0])
                task = StandbyTask(self.topology, sub, key[1], self.config)
                self.tasks[key] = task
                for tp in task.stores:
                    self._by_tp[tp] = task
                self._reassign = True
                self.log(f"[{self.app}] standby task {task.id} opened")

    def _assign(self) -> None:
        with self.lock:
            if not self._reassign:
                return
            self._reassign = False
            parts = []
            for task in self.tasks.values():
                for tp, pos in task.positions().items():
                    parts.append(TopicPartition(tp[0], tp[1], pos if pos is not None else OFFSET_BEGINNING))
        self.consumer.assign(parts)

    # -- loop -------------------------------------------------------------------------------

    def shutdown(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        next_placement = 0.0
        try:
            while not self._stop_event.is_set():
                if time.monotonic() >= next_placement:
                    next_placement = time.monotonic() + 2.0
                    try:
                        wanted = self.desired()
                    except Exception as exc:  # the group may not exist yet; try again later
                        self.log(f"[{self.app}] standby placement: {exc!r}")
                        wanted = None
                    if wanted is not None:
                        self._sync(wanted)
                self._assign()
                msgs: list[Any] = self.consumer.consume(1000, 0.2) if self._by_tp else []
                if not msgs:
                    if not self._by_tp:
                        self._stop_event.wait(0.2)
                    continue
                batches: dict[TP, list[tuple[int, bytes, bytes | None]]] = {}
                for m in msgs:
                    err = m.error()
                    if err is not None:
                        if err.code() != KafkaError._PARTITION_EOF:
                            self.log(f"[{self.app}] standby consumer error: {err}")
                        continue
                    if m.key() is not None:
                        batches.setdefault((m.topic(), m.partition()), []).append((m.offset(), m.key(), m.value()))
                with self.lock:
                    for tp, records in batches.items():
                        task = self._by_tp.get(tp)
                        if task is not None:  # else released meanwhile: the active task restores
                            task.apply(tp, records)
        except BaseException as exc:
            self.error = exc
            self.log(f"[{self.app}] {self.name} failed: {exc!r}")
        finally:
            with self.lock:
                for task in self.tasks.values():
                    task.close()
                self.tasks.clear()
                self._by_tp.clear()
            self.consumer.close()

    def stats(self) -> dict[str, int]:
        """task id -> changelog records applied, for the standbys open now."""
        with self.lock:
            return {t.id: t.applied for t in self.tasks.values()}
