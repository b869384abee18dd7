"""The console's long-lived AdminClient reads offsets after a partition's leader epoch moves on.

A broker killed -9 and started again on the same data dir and port shuts down uncleanly: the
controller takes it out of the ISR and elects it again at the unfencing (KIP-966, as Kafka 4.3.1
does), so every partition's leader epoch moves on (0 -> 2). librdkafka's AdminClient sends the
epoch it cached in ListOffsets, the broker answers FENCED_LEADER_EPOCH, and the client does not
refresh its metadata on that error: without a new client a group's end offsets and lag (and a
reset to earliest/latest) read -1 until the console restarts. And when the group page was open
before the kill, librdkafka's re-bootstrap (every broker was away) leaves the group's cached
coordinator pointing at a decommissioned broker handle, so every later call for the group timed
out, for ever. Real broker, the console's own ``Cluster`` called as its API handlers call it
(``/api/topics/{name}``, ``/api/groups/{name}``, the sampler).
"""

from __future__ import annotations

from ck_helpers import create_topic, make_consumer, make_producer, wait_for_topic
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from diff_wire import WireClient

from strom.console.kafka import Cluster, ConsoleError
from strom.core.testing import BrokerProcess, wait_for

PARTITIONS = 2
BEFORE = 7  # records per partition before the kill
AFTER = 3  # and after the restart: the offsets read then are fresh, not remembered
COMMITTED = 4


def _leader_epochs(bootstrap: str, topic: str) -> dict[int, int]:
    """Metadata v12's leader epoch of each partition that has a leader."""
    with WireClient(bootstrap, client_id="console-epoch-test", timeout=10) as c:
        t = c.metadata([topic]).topics[0]
    return {int(p.partition_index): int(p.leader_epoch) for p in t.partitions
            if p.error_code == 0 and p.leader_id >= 0}


def _produce(bootstrap: str, topic: str, per_partition: int) -> None:
    producer = make_producer(bootstrap, acks="all")
    for p in range(PARTITIONS):
        for i in range(per_partition):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0


def _offsets(cluster: Cluster, topic: str) -> dict[int, tuple[int, int]]:
    return {p["partition"]: (p["start_offset"], p["end_offset"]) for p in cluster.topic(topic)["partitions"]}


def _lag(topic: str, end: int) -> list[dict[str, object]]:
    return [{"topic": topic, "partition": p, "committed": COMMITTED, "end_offset": end, "lag": end - COMMITTED}
            for p in range(PARTITIONS)]


def _setup(broker: BrokerProcess, topic: str) -> str:
    """A topic with BEFORE records in each partition and a group that committed COMMITTED."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(admin, topic, partitions=PARTITIONS)
    wait_for_topic(admin, topic, PARTITIONS)
    _produce(broker.bootstrap, topic, BEFORE)
    group = f"{topic}-group"
    consumer = make_consumer(broker.bootstrap, group_id=group)
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, COMMITTED) for p in range(PARTITIONS)], asynchronous=False)
    finally:
        consumer.close()
    return group


def _kill9_restart(broker: BrokerProcess, topic: str) -> None:
    """kill -9, start on the same data dir and port, until Metadata shows every partition led with
    a leader epoch newer than before; then AFTER more records in each partition."""
    epochs = _leader_epochs(broker.bootstrap, topic)
    assert sorted(epochs) == list(range(PARTITIONS))
    broker.kill()
    broker.start()
    moved = wait_for(lambda: (lambda now: now if sorted(now) == sorted(epochs) and
                              all(now[p] > epochs[p] for p in now) else None)(
                                  _leader_epochs(broker.bootstrap, topic)),
                     timeout=30, what="every partition led again with a new leader epoch", ignore=(OSError,))
    assert all(moved[p] > epochs[p] for p in epochs), (epochs, moved)
    _produce(broker.bootstrap, topic, AFTER)


def test_group_lag_after_a_kill9_restart_moves_the_leader_epoch(fresh_broker: BrokerProcess,
                                                                topic_name: str) -> None:
    """The topic page was open (the client cached leader epoch 0), the group page was not."""
    broker = fresh_broker.start()
    group = _setup(broker, topic_name)
    cluster = Cluster(broker.bootstrap)  # the console's one client for its whole life
    assert _offsets(cluster, topic_name) == {p: (0, BEFORE) for p in range(PARTITIONS)}

    _kill9_restart(broker, topic_name)
    total = BEFORE + AFTER
    # One call each, no waiting: the broker serves, so the console reads it now. group_lag asks
    # ListOffsets with no Metadata request before it: the cached epoch meets FENCED_LEADER_EPOCH.
    assert cluster.group_lag(group) == _lag(topic_name, total)
    assert _offsets(cluster, topic_name) == {p: (0, total) for p in range(PARTITIONS)}
    assert {k: v for k, v in cluster.end_offsets().items() if k[0] == topic_name} == \
        {(topic_name, p): total for p in range(PARTITIONS)}
    # Reset to latest reads the same offsets (it would have committed -1 before).
    assert cluster.reset_offsets(group, "latest", None) == [
        {"topic": topic_name, "partition": p, "committed": total, "end_offset": total, "lag": 0}
        for p in range(PARTITIONS)]


def test_the_group_page_recovers_after_a_kill9_restart(fresh_broker: BrokerProcess, topic_name: str) -> None:
    """The group page was open before the kill (the client cached the group's coordinator): one
    call times out, the next one has a new client and the right offsets."""
    broker = fresh_broker.start()
    group = _setup(broker, topic_name)
    cluster = Cluster(broker.bootstrap)
    assert cluster.group(group)["lag"] == _lag(topic_name, BEFORE)

    _kill9_restart(broker, topic_name)
    # The overview page: the client's Metadata request re-learns broker 1 after its re-bootstrap.
    assert [b["port"] for b in cluster.overview()["brokers"]] == [broker.port]
    calls: list[str] = []

    def page() -> bool:
        calls.append("group")
        try:
            return bool(cluster.group(group)["lag"] == _lag(topic_name, BEFORE + AFTER))
        except ConsoleError as e:
            calls.append(str(e))
            raise

    wait_for(page, timeout=40, what="the group page's lag", ignore=(ConsoleError,))
    # The first call waits on the decommissioned coordinator handle (librdkafka's own timeout),
    # the next one, with a new client, is right.
    assert len(calls) == 3 and calls[0] == calls[2] == "group", calls
    assert "Timed out" in calls[1] or "TimeoutError" in calls[1], calls
