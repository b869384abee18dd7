"""The status store's zombie guard on the bundled broker: two stores act as two workers (worker
id + group generation); ``put_safe`` from a worker of an older generation must not replace a newer
owner's status, in its own cache or for a third worker replaying the topic, while same-worker
writes, newer generations, plain ``put`` and tombstones still take effect (Kafka Connect's
``KafkaStatusBackingStore`` rules)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from strom.connect.runtime.distributed.status_store import KafkaStatusBackingStore, Status
from strom.core.testing import BrokerProcess

W1, W2 = "w1:8083", "w2:8083"
CONN = "conn-z"


def _conf(broker: BrokerProcess) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap}


class Stores:
    """Status stores on one fresh topic; every store made here is stopped at teardown.

    The topic has one partition: a store replaying it then sees every key's records in write
    order. With several partitions the order across keys is the readers' (a connector's
    tombstone may be read before its tasks' statuses, which then stay), in Kafka as here, and
    the tests about one key's records would not change with more partitions.
    """

    def __init__(self, broker: BrokerProcess, read_all: Any) -> None:
        self.broker = broker
        self.topic = f"status-{uuid.uuid4().hex[:8]}"
        self.made: list[KafkaStatusBackingStore] = []
        self._read_all = read_all

    def raw(self) -> list[tuple[str, bytes | None]]:
        """Every (key, value) written to the topic, in log order."""
        return [(key.decode(), value) for _, key, value in self._read_all(self.broker, self.topic)]

    def new(self) -> KafkaStatusBackingStore:
        c = _conf(self.broker)
        s = KafkaStatusBackingStore(self.topic, c, c, c, partitions=1, replication_factor=1)
        s.start()
        self.made.append(s)
        return s


@pytest.fixture
def stores(connect_broker: BrokerProcess, read_all: Any) -> Iterator[Stores]:
    st = Stores(connect_broker, read_all)
    yield st
    for s in st.made:
        s.stop()


def _conn(state: str, worker: str, gen: int, trace: str | None = None) -> Status:
    return Status(CONN, None, state, worker, trace, gen)


def _task(state: str, worker: str, gen: int, task: int = 0, trace: str | None = None) -> Status:
    return Status(CONN, task, state, worker, trace, gen)


def test_safe_write_from_older_generation_is_dropped(stores: Stores) -> None:
    old, new = stores.new(), stores.new()
    old.put(_conn("RUNNING", W1, 1))
    old.put(_task("RUNNING", W1, 1))
    # the connector and its task moved to w2 in generation 2; w1 (a zombie) has read that
    new.refresh()
    new.put(_conn("RUNNING", W2, 2))
    new.put(_task("RUNNING", W2, 2))
    old.refresh()
    assert old.get(CONN) == _conn("RUNNING", W2, 2)

    assert old.put_safe(_conn("FAILED", W1, 1, "boom")) is False
    assert old.put_safe(_task("UNASSIGNED", W1, 1)) is False
    assert old.put_safe(_task("FAILED", W1, 1, trace="boom")) is False
    # the writer's own cache keeps the newer owner's state
    assert old.get(CONN) == _conn("RUNNING", W2, 2)
    assert old.get_task(CONN, 0) == _task("RUNNING", W2, 2)
    # nothing reached the topic: a worker replaying it from scratch agrees
    third = stores.new()
    assert third.get(CONN) == _conn("RUNNING", W2, 2)
    assert third.get_all(CONN) == [_task("RUNNING", W2, 2)]
    written = [json.loads(v) for _, v in stores.raw() if v is not None]
    assert sorted((r["state"], r["worker_id"]) for r in written) == [("RUNNING", W1)] * 2 + [("RUNNING", W2)] * 2


def test_safe_write_by_same_worker_or_newer_generation_is_written(stores: Stores) -> None:
    s1, s2 = stores.new(), stores.new()
    s1.put(_conn("RUNNING", W1, 3))
    s1.put(_task("RUNNING", W1, 3))
    # same worker: its own failure replaces its own RUNNING, even from an older generation
    assert s1.put_safe(_conn("FAILED", W1, 2, "trace-1")) is True
    assert s1.put_safe(_task("UNASSIGNED", W1, 4)) is True
    assert s1.get(CONN) == _conn("FAILED", W1, 2, "trace-1")
    s2.refresh()
    assert s2.get(CONN) == _conn("FAILED", W1, 2, "trace-1")
    assert s2.get_task(CONN, 0) == _task("UNASSIGNED", W1, 4)
    # another worker of a newer, then of the same generation may also write safely
    assert s2.put_safe(_conn("UNASSIGNED", W2, 5)) is True
    s1.refresh()
    assert s1.put_safe(_conn("FAILED", W1, 5, "trace-2")) is True
    third = stores.new()
    assert third.get(CONN) == _conn("FAILED", W1, 5, "trace-2")
    assert third.get_task(CONN, 0) == _task("UNASSIGNED", W1, 4)


def test_plain_put_always_wins(stores: Stores) -> None:
    old, new = stores.new(), stores.new()
    new.put(_conn("RUNNING", W2, 7))
    new.put(_task("RUNNING", W2, 7))
    old.refresh()
    # put does not look at generations: an older worker's PAUSED/FAILED lands and shows
    old.put(_conn("PAUSED", W1, 1))
    old.put(_task("FAILED", W1, 1, trace="t"))
    assert old.get(CONN) == _conn("PAUSED", W1, 1)
    assert old.get_task(CONN, 0) == _task("FAILED", W1, 1, trace="t")
    new.refresh()
    assert new.get(CONN) == _conn("PAUSED", W1, 1)
    third = stores.new()
    assert third.get(CONN) == _conn("PAUSED", W1, 1)
    assert third.get_task(CONN, 0) == _task("FAILED", W1, 1, trace="t")


def test_stale_task_unassigned_is_ignored_on_read(stores: Stores) -> None:
    """A shutdown report written (plainly, or safely before the writer saw the new owner) after the
    new owner's RUNNING of a newer or equal generation is ignored by every reader; a connector's
    UNASSIGNED and a newer generation's task UNASSIGNED are not."""
    old, new = stores.new(), stores.new()
    new.put(_task("RUNNING", W2, 4))
    new.put(_task("RUNNING", W2, 4, task=1))
    new.put(_conn("RUNNING", W2, 4))
    # `old` has not read them: its safe write goes through, the topic holds it after RUNNING
    assert old.put_safe(_task("UNASSIGNED", W1, 3)) is True
    old.put(_task("UNASSIGNED", W1, 4, task=1))
    old.put(_conn("UNASSIGNED", W1, 3))
    keys = [k for k, _ in stores.raw()]
    assert keys.count(f"status-task-{CONN}-0") == 2
    third = stores.new()
    assert third.get_task(CONN, 0) == _task("RUNNING", W2, 4)
    assert third.get_task(CONN, 1) == _task("RUNNING", W2, 4, task=1)
    assert third.get(CONN) == _conn("UNASSIGNED", W1, 3)
    old.refresh()
    new.refresh()
    for s in (old, new):
        assert s.get_all(CONN) == [_task("RUNNING", W2, 4), _task("RUNNING", W2, 4, task=1)]
    # a newer generation's UNASSIGNED is applied
    old.put(_task("UNASSIGNED", W1, 5))
    assert old.get_task(CONN, 0) == _task("UNASSIGNED", W1, 5)
    third.refresh()
    assert third.get_task(CONN, 0) == _task("UNASSIGNED", W1, 5)


def test_tombstones_delete_and_reset_the_guard(stores: Stores) -> None:
    s1, s2 = stores.new(), stores.new()
    s2.put(_conn("RUNNING", W2, 9))
    s2.put(_task("RUNNING", W2, 9))
    s2.put(_task("RUNNING", W2, 9, task=1))
    s1.refresh()
    s1.delete_connector(CONN, 2)
    assert s1.get(CONN) is None and s1.get_all(CONN) == [] and CONN not in s1.connectors()
    s2.refresh()
    assert s2.get(CONN) is None and s2.get_all(CONN) == []
    third = stores.new()
    assert third.get(CONN) is None and third.get_all(CONN) == []
    # with no status left, an older generation's safe write is allowed again
    assert s1.put_safe(_conn("UNASSIGNED", W1, 1)) is True
    assert s1.get(CONN) == _conn("UNASSIGNED", W1, 1)
    third.refresh()
    assert third.get(CONN) == _conn("UNASSIGNED", W1, 1)
    # DESTROYED is written as a tombstone, as Kafka does
    s1.put(_conn("DESTROYED", W1, 1))
    assert s1.get(CONN) is None
    third.refresh()
    assert third.get(CONN) is None
    assert [v for k, v in stores.raw() if k == f"status-connector-{CONN}"][-1] is None


def test_connector_tombstone_drops_its_task_statuses(stores: Stores) -> None:
    s1 = stores.new()
    s1.put(_conn("RUNNING", W1, 2))
    s1.put(_task("RUNNING", W1, 2))
    s1.put(_task("FAILED", W1, 2, task=3, trace="x"))
    s1.log.send(f"status-connector-{CONN}".encode(), None)  # only the connector's key
    s1.refresh()
    assert s1.get(CONN) is None and s1.get_all(CONN) == []
    third = stores.new()
    assert third.get(CONN) is None and third.get_all(CONN) == []


def test_own_writes_are_visible_at_once_and_not_rolled_back_by_the_reader(stores: Stores) -> None:
    s1 = stores.new()
    for i in range(40):
        st = _task("RUNNING" if i % 2 else "PAUSED", W1, i)
        s1.put(st)
        assert s1.get_task(CONN, 0) == st  # before the reader reads it back, and after
    s1.refresh()
    assert s1.get_task(CONN, 0) == _task("RUNNING", W1, 39)


def test_entry_rules() -> None:
    """Kafka's CacheEntry.canWriteSafely, with the sequence check used before retrying a write."""
    from strom.connect.runtime.distributed.status_store import _Entry
    e = _Entry()
    assert e.can_write_safely(_conn("FAILED", W1, 0))
    e.value = _conn("RUNNING", W2, 5)
    assert not e.can_write_safely(_conn("FAILED", W1, 4))
    assert e.can_write_safely(_conn("FAILED", W1, 5))
    assert e.can_write_safely(_conn("FAILED", W2, 1))
    seq = e.increment()
    assert e.can_write_safely(_conn("FAILED", W1, 6), seq)
    e.increment()
    assert not e.can_write_safely(_conn("FAILED", W1, 6), seq)
