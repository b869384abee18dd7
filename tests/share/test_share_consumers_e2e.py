"""Share groups end to end (issue 25, item 3), each test against strom and Apache Kafka 4.3.1.

Consumers are real: confluent-kafka's ``ShareConsumer`` (implicit and explicit acknowledgement)
in worker processes (tests/share/share_worker.py) or in the test itself, and Java's
``KafkaShareConsumer`` (tests/share/java/ShareWorker.java). What counts as "accepted" is what
the broker confirmed: the acknowledgement commit callback without an error.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, Message, Producer, ShareConsumer, TopicPartition
from kafka_ref import KafkaRef, classpath, ensure_jars
from ref_fixtures import skip_without_java
from share_kit import (
    TP,
    ShareWorkers,
    WorkerLog,
    accepted_counts,
    accepted_total,
    coords,
    create_topic,
    delivery_count,
    group_config,
    produce,
    set_group_config,
)

from strom.core.testing import BrokerProcess

log = logging.getLogger(__name__)

JAVA_WORKER = Path(__file__).resolve().parent / "java" / "ShareWorker.java"
# The five-consumer test's size; the issue asks for 100,000 (STROM_SHARE_RECORDS for other runs).
RECORDS = int(os.environ.get("STROM_SHARE_RECORDS", "100000"))

Broker = BrokerProcess | KafkaRef


def _names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"share-{suffix}", f"g-{suffix}"


def java_command() -> list[str]:
    skip_without_java()
    return ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath(ensure_jars()), str(JAVA_WORKER)]


CLIENTS = [pytest.param("ck-implicit", id="ck-implicit"), pytest.param("ck-explicit", id="ck-explicit"),
           pytest.param("java-implicit", id="java-implicit", marks=pytest.mark.reference),
           pytest.param("java-explicit", id="java-explicit", marks=pytest.mark.reference)]


def _start(workers: ShareWorkers, name: str, client: str, *, hold: bool = False) -> None:
    lang, _, mode = client.partition("-")
    workers.start(name, mode=mode or "implicit", hold=hold, command=java_command() if lang == "java" else None)


class Acks:
    """Acknowledgements of an in-test explicit ShareConsumer: the type given to each record, and
    what the broker confirmed (the commit callback reports offsets of every type, so the type is
    remembered here) or refused."""

    def __init__(self, consumer: ShareConsumer) -> None:
        self.consumer = consumer
        self.pending: dict[TP, AcknowledgeType] = {}
        self.accepted: list[TP] = []
        self.confirmed: list[tuple[TP, AcknowledgeType]] = []
        self.refused: list[tuple[TP, str]] = []

    def __call__(self, msg: Message, kind: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        self.pending[coords(msg)] = kind
        self.consumer.acknowledge(msg, kind)

    def on_commit(self, offsets: dict[TopicPartition, set[int]], exc: KafkaException | None) -> None:
        for tp, done in offsets.items():
            for offset in done:
                key = (tp.partition, offset)
                kind = self.pending.pop(key, AcknowledgeType.ACCEPT)
                if exc is not None:
                    self.refused.append((key, str(exc)))
                    continue
                self.confirmed.append((key, kind))
                if kind == AcknowledgeType.ACCEPT:
                    self.accepted.append(key)


def explicit_consumer(bootstrap: str, group: str, topic: str) -> tuple[ShareConsumer, Acks]:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    acks = Acks(consumer)
    consumer.set_acknowledgement_commit_callback(acks.on_commit)
    consumer.subscribe([topic])
    return consumer, acks


def poll_until(consumer: ShareConsumer, handle: Callable[[Message], None], done: Callable[[], bool],
               timeout: float, what: str) -> None:
    """Poll, hand each record to ``handle`` (which acknowledges it), commit, until ``done()``."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        msgs = consumer.poll(0.5)
        for msg in msgs:
            assert msg.error() is None, msg.error()
            handle(msg)
        if msgs:
            consumer.commit_sync(10)


# 2-8 s per arm on the 2-CPU machine (strom and Kafka alike): not slow.
@pytest.mark.parametrize("client", CLIENTS)
def test_five_consumers_share_100k_records_each_accepted_exactly_once(share_broker: Broker, client: str,
                                                                       tmp_path: Path) -> None:
    topic, group = _names()
    create_topic(share_broker.bootstrap, topic, 2)
    set_group_config(share_broker.bootstrap, group, group_config())
    # Half before the consumers start, half while they consume.
    written = produce(share_broker.bootstrap, topic, RECORDS // 2, 2)
    with ShareWorkers(tmp_path, share_broker.bootstrap, topic, group) as workers:
        for i in range(5):
            _start(workers, f"c{i}", client)
        written |= produce(share_broker.bootstrap, topic, RECORDS - RECORDS // 2, 2)
        assert len(written) == RECORDS
        workers.wait_until(lambda logs: accepted_total(logs) >= RECORDS, 50, f"{RECORDS:,} accepted records",
                           expected=written)
        logs = workers.stop_all()
    counts = accepted_counts(logs.values())
    assert set(counts) == written, f"missing {len(written - set(counts))}, unknown {len(set(counts) - written)}"
    twice = {tp: n for tp, n in counts.items() if n > 1}
    assert not twice, f"{len(twice)} records accepted more than once, e.g. {list(twice.items())[:5]}"
    refused = [r for wl in logs.values() for r in wl.refused]
    assert not refused, f"acknowledgements refused: {refused[:5]}"
    # How the records were spread is the broker's and the clients' business (the first consumer
    # may take everything before the others join); it is logged, not asserted.
    log.info("accepted per consumer: %s", {name: len(wl.accepted) for name, wl in logs.items()})


# The holder is always explicit (--hold never acknowledges); ``client`` picks the client and the
# acknowledgement mode of the two consumers that take over its records.
@pytest.mark.parametrize("client", CLIENTS)
def test_killed_consumer_holding_locks_its_records_go_to_the_others(share_broker: Broker, client: str,
                                                                    tmp_path: Path) -> None:
    topic, group = _names()
    create_topic(share_broker.bootstrap, topic, 1)
    set_group_config(share_broker.bootstrap, group, group_config(
        share_record_lock_duration_ms="2000", share_session_timeout_ms="6000", share_heartbeat_interval_ms="1000"))
    written = produce(share_broker.bootstrap, topic, 200, 1)
    with ShareWorkers(tmp_path, share_broker.bootstrap, topic, group) as workers:
        _start(workers, "holder", client, hold=True)
        workers.wait_until(lambda logs: logs["holder"].held, 45, "the holder to acquire records")
        workers.kill("holder")
        held = {(p, o) for p, o, _ in workers.log("holder").received}
        assert held
        for i in range(2):
            _start(workers, f"c{i}", client)
        workers.wait_until(lambda logs: accepted_total(logs) >= len(written), 45, "every record accepted",
                           expected=written)
        logs = workers.stop_all()
    counts = accepted_counts(logs.values())
    assert set(counts) == written and set(counts.values()) == {1}, \
        f"accepted: {len(counts)} of {len(written)}, more than once: {[tp for tp, n in counts.items() if n > 1][:5]}"
    # The holder's records came back to the others as redeliveries (delivery count >= 2).
    redelivered = {(p, o): dc for name, wl in logs.items() if name != "holder" for p, o, dc in wl.received
                   if (p, o) in held}
    assert set(redelivered) == held
    assert min(redelivered.values()) >= 2, f"held records redelivered with counts {Counter(redelivered.values())}"


EXPLICIT = [pytest.param("ck-explicit", id="ck-explicit"),
            pytest.param("java-explicit", id="java-explicit", marks=pytest.mark.reference)]


def _java_scripted(broker: Broker, tmp_path: Path, topic: str, group: str, script: str,
                   done: Callable[[WorkerLog], bool], what: str, sentinel: int) -> tuple[list[tuple[int, int]], list[TP]]:
    """Run one Java KafkaShareConsumer worker (explicit, ``--script``) until ``done``, then a
    sentinel record after the others until it is accepted; return (offset, delivery count) per
    delivery and the records it gave ACCEPT and the broker confirmed."""
    with ShareWorkers(tmp_path, broker.bootstrap, topic, group) as workers:
        workers.start("w", mode="explicit", command=java_command(), script=script)
        workers.wait_until(lambda logs: done(logs["w"]), 45, what)
        # A sentinel after them: a released record would come back before it, as the share
        # partition hands out its lowest available offsets first.
        produce(broker.bootstrap, topic, 1, 1)
        workers.wait_until(lambda logs: (0, sentinel) in logs["w"].accepted, 30, "the sentinel")
        logs = workers.stop_all()
    wl = logs["w"]
    assert not wl.refused, wl.refused
    confirmed = set(wl.accepted)  # A lines: every type the broker confirmed
    accepted = [(p, o) for p, o, kind in wl.acked if kind == "ACCEPT"]
    assert set(accepted) <= confirmed, f"unconfirmed: {set(accepted) - confirmed}"
    return [(o, dc) for _, o, dc in wl.received], accepted


@pytest.mark.parametrize("client", EXPLICIT)
def test_release_redelivers_and_reject_archives(share_broker: Broker, client: str, tmp_path: Path) -> None:
    topic, group = _names()
    create_topic(share_broker.bootstrap, topic, 1)
    set_group_config(share_broker.bootstrap, group, group_config())
    produce(share_broker.bootstrap, topic, 12, 1)
    want = {(0, o) for o in range(12) if o % 3 != 2}
    seen: list[tuple[int, int]] = []  # offset, delivery count
    if client == "java-explicit":
        # Same rule as handle() below, in ShareWorker.java.
        seen, accepted = _java_scripted(
            share_broker, tmp_path, topic, group, "release-reject",
            lambda wl: want <= {(p, o) for p, o, kind in wl.acked if kind == "ACCEPT"} and want <= set(wl.accepted),
            "accepted and released records", 12)
    else:
        consumer, acks = explicit_consumer(share_broker.bootstrap, group, topic)

        def handle(msg: Message) -> None:
            offset, count = coords(msg)[1], delivery_count(msg)
            seen.append((offset, count))
            if offset % 3 == 1 and count == 1:
                acks(msg, AcknowledgeType.RELEASE)
            elif offset % 3 == 2:
                acks(msg, AcknowledgeType.REJECT)
            else:
                acks(msg, AcknowledgeType.ACCEPT)

        try:
            poll_until(consumer, handle, lambda: want <= set(acks.accepted), 45, "accepted and released records")
            # A sentinel after them: a released or rejected record would come back before it, as the
            # share partition hands out its lowest available offsets first.
            produce(share_broker.bootstrap, topic, 1, 1)
            poll_until(consumer, handle, lambda: (0, 12) in acks.accepted, 30, "the sentinel")
        finally:
            consumer.close()
        assert not acks.refused
        accepted = acks.accepted
    deliveries: dict[int, list[int]] = {}
    for offset, count in seen:
        deliveries.setdefault(offset, []).append(count)
    assert deliveries == {o: [1, 2] if o % 3 == 1 else [1] for o in range(13)}
    assert Counter(accepted) == Counter(want | {(0, 12)}), accepted


@pytest.mark.parametrize("client", EXPLICIT)
def test_delivery_count_limit_archives_a_poison_record(share_broker: Broker, client: str, tmp_path: Path) -> None:
    topic, group = _names()
    create_topic(share_broker.bootstrap, topic, 1)
    set_group_config(share_broker.bootstrap, group, group_config(share_delivery_count_limit="3"))
    produce(share_broker.bootstrap, topic, 6, 1)
    poison = 2
    others = {(0, o) for o in range(6) if o != poison}
    seen: list[tuple[int, int]] = []
    if client == "java-explicit":
        seen, accepted = _java_scripted(
            share_broker, tmp_path, topic, group, f"poison={poison}",
            lambda wl: [dc for _, o, dc in wl.received if o == poison] == [1, 2, 3] and others <= set(wl.accepted),
            "three deliveries", 6)
    else:
        consumer, acks = explicit_consumer(share_broker.bootstrap, group, topic)

        def handle(msg: Message) -> None:
            seen.append((coords(msg)[1], delivery_count(msg)))
            # The poison job fails every time: released for another try.
            kind = AcknowledgeType.RELEASE if coords(msg)[1] == poison else AcknowledgeType.ACCEPT
            acks(msg, kind)

        try:
            poll_until(consumer, handle, lambda: [c for o, c in seen if o == poison] == [1, 2, 3]
                       and others <= set(acks.accepted), 45, "three deliveries")
            produce(share_broker.bootstrap, topic, 1, 1)
            poll_until(consumer, handle, lambda: (0, 6) in acks.accepted, 30, "the sentinel")
        finally:
            consumer.close()
        accepted = acks.accepted
    assert [c for o, c in seen if o == poison] == [1, 2, 3], seen
    assert sorted(o for o, _ in seen if o != poison) == [0, 1, 3, 4, 5, 6]
    assert (0, poison) not in accepted


@pytest.mark.parametrize("client", EXPLICIT)
def test_read_committed_skips_aborted_records(share_broker: Broker, client: str, tmp_path: Path) -> None:
    topic, group = _names()
    create_topic(share_broker.bootstrap, topic, 1)
    set_group_config(share_broker.bootstrap, group, group_config(share_isolation_level="read_committed"))
    producer = Producer({"bootstrap.servers": share_broker.bootstrap, "transactional.id": f"tx-{group}"})
    producer.init_transactions(30)
    for batch, commit in (("c0", True), ("a1", False), ("c2", True)):
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic, value=f"{batch}-{i}".encode(), partition=0)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)  # the records are in the log before the abort marker
            producer.abort_transaction(30)
    committed = {f"{b}-{i}" for b in ("c0", "c2") for i in range(10)}
    values: list[str] = []
    # The last committed transaction follows the aborted one in the log: once all of it is
    # here, any aborted record would have been handed out already.
    if client == "java-explicit":
        with ShareWorkers(tmp_path, share_broker.bootstrap, topic, group) as workers:
            workers.start("w", mode="explicit", command=java_command(), values=True)
            workers.wait_until(lambda logs: committed <= {v for _, _, v in logs["w"].values}, 45,
                               "the committed records")
            logs = workers.stop_all()
        values = [v for _, _, v in logs["w"].values]
    else:
        consumer, acks = explicit_consumer(share_broker.bootstrap, group, topic)

        def handle(msg: Message) -> None:
            values.append((msg.value() or b"").decode())
            acks(msg)

        try:
            poll_until(consumer, handle, lambda: committed <= set(values), 45, "the committed records")
        finally:
            consumer.close()
    assert sorted(values) == sorted(committed), f"aborted records delivered: {sorted(set(values) - committed)}"


@pytest.mark.slow
@pytest.mark.parametrize("client", EXPLICIT)
def test_broker_kill9_and_restart_in_the_middle(fresh_share_broker: Broker, client: str, tmp_path: Path) -> None:
    """Kafka's guarantee for a share group is at-least-once: an acknowledgement the broker
    confirmed is durable (written to ``__share_group_state`` before the answer), so a record
    whose ACCEPT was confirmed before the crash is never delivered again; records acquired but
    not confirmed may be delivered again (with any delivery count); none is lost."""
    broker = fresh_share_broker
    topic, group = _names()
    create_topic(broker.bootstrap, topic, 2)
    set_group_config(broker.bootstrap, group, group_config())
    total = 20_000
    written = produce(broker.bootstrap, topic, total, 2)
    if client == "java-explicit":
        with ShareWorkers(tmp_path, broker.bootstrap, topic, group) as workers:
            workers.start("w", mode="explicit", command=java_command())
            logs = workers.wait_until(lambda logs: len(set(logs["w"].accepted)) >= total // 3, 45, "a third accepted")
            confirmed = set(logs["w"].accepted)
            broker.kill()
            # Nothing is delivered while the broker is down; a record whose R line is written
            # after this read but was delivered before the kill is not in ``confirmed`` (its A
            # line comes after its R line), so it cannot count as a redelivery below.
            seen_before = len(workers.log("w").received)
            broker.start()
            workers.wait_until(lambda logs: written <= set(logs["w"].accepted), 60, "every record accepted",
                               expected=written)
            wl = workers.stop_all()["w"]
        # Acknowledgements in flight at the crash may be refused: at-least-once allows it.
        java_after = [(p, o) for p, o, _ in wl.received[seen_before:]]
        again = confirmed & set(java_after)
        assert not again, f"{len(again)} records confirmed accepted before the crash were delivered again: " \
                          f"{sorted(again)[:10]}"
        # The Java client fetches far ahead (all 20,000 records may be in hand before the kill), so
        # what must happen after the restart is the acknowledging, not necessarily a delivery.
        assert written - confirmed, "every record was confirmed before the kill: the crash tested nothing"
        return
    consumer, acks = explicit_consumer(broker.bootstrap, group, topic)
    confirmed_before: set[TP] = set()
    after_restart: list[TP] = []
    killed = False

    def handle(msg: Message) -> None:
        if killed:
            after_restart.append(coords(msg))
        acks(msg)

    try:
        poll_until(consumer, handle, lambda: len(set(acks.accepted)) >= total // 3, 45, "a third accepted")
        confirmed_before = set(acks.accepted)
        broker.kill()
        killed = True
        broker.start()
        poll_until(consumer, handle, lambda: written <= set(acks.accepted), 60, "every record accepted")
    finally:
        consumer.close()
    assert written <= set(acks.accepted), f"lost: {sorted(written - set(acks.accepted))[:10]}"
    again = confirmed_before & set(after_restart)
    assert not again, f"{len(again)} records confirmed accepted before the crash were delivered again: " \
                      f"{sorted(again)[:10]}"
    assert after_restart, "nothing was consumed after the restart"


def test_worker_log_reads_a_killed_workers_partial_line(tmp_path: Path) -> None:
    """A worker killed mid-write leaves a torn last line; the reader skips it."""
    out = tmp_path / "w.out"
    out.write_text("R 0 1 1\nA 0 1,2\nE 1 INVALID_RECORD_STATE 7\nH\nR 0 ")
    wl = WorkerLog.read(out)
    assert wl.received == [(0, 1, 1)] and wl.accepted == [(0, 1), (0, 2)]
    assert wl.refused == [(1, "INVALID_RECORD_STATE", 7)] and wl.held and not wl.closed
