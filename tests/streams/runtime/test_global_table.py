"""GlobalKTable on the bundled broker: stream-global-table joins (inner, left), a global store
bootstrapped from every partition before processing, kept up to date, and restored from its
source topic with a checkpoint."""

from __future__ import annotations

import uuid
from pathlib import Path

from wordcount_app import create_topics, kv_store
from wordcount_app import read_records as _read

from strom.core.testing import BrokerProcess, wait_for
from strom.streams import Consumed, KafkaStreams, Produced, Serdes, StreamsBuilder, Topology
from strom.streams.runtime import State
from strom.streams.state.checkpoint import read_checkpoint

S = Serdes.string()


def _build(orders: str, customers: str, inner: str, left: str) -> Topology:
    b = StreamsBuilder()
    table = b.global_table(customers, Consumed.with_(S, S), materialized="customers-store")
    stream = b.stream(orders, Consumed.with_(S, S))
    (stream.join(table, lambda order, name: f"{order}|{name}", key_mapper=lambda k, v: v.split(":")[0])
     .to(inner, Produced.with_(S, S)))
    (stream.left_join(table, lambda order, name: f"{order}|{name}", key_mapper=lambda k, v: v.split(":")[0])
     .to(left, Produced.with_(S, S)))
    return b.build()


def _produce(bootstrap: str, topic: str, pairs: list[tuple[str, str | None]]) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    for k, v in pairs:
        p.produce(topic, v.encode() if v is not None else None, k.encode())
    assert p.flush(30) == 0


def test_stream_global_table_joins(broker: BrokerProcess, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    orders, customers, inner, left = f"orders-{tag}", f"customers-{tag}", f"inner-{tag}", f"left-{tag}"
    # the global topic has more partitions than the stream: no co-partitioning is needed
    create_topics(broker.bootstrap, (orders, 2), (customers, 3), (inner, 1), (left, 1))
    _produce(broker.bootstrap, customers, [(f"c{i}", f"name{i}") for i in range(50)])
    _produce(broker.bootstrap, customers, [("c3", "renamed3"), ("c4", None)])  # update, delete
    # orders for c0..c59: c50..c59 and the deleted c4 are not in the table
    _produce(broker.bootstrap, orders, [(f"o{i}", f"c{i % 60}:{i}") for i in range(120)])
    conf = {"application.id": f"gt-{tag}", "bootstrap.servers": broker.bootstrap,
            "commit.interval.ms": 100, "state.dir": str(tmp_path)}
    logs: list[str] = []
    app = KafkaStreams(_build(orders, customers, inner, left), conf, log=logs.append)
    app.start()
    try:
        def name(c: int) -> str | None:
            return None if c >= 50 or c == 4 else "renamed3" if c == 3 else f"name{c}"
        want_inner = {f"o{i}": f"c{i % 60}:{i}|{name(i % 60)}" for i in range(120) if name(i % 60)}
        want_left = {f"o{i}": f"c{i % 60}:{i}|{name(i % 60)}" for i in range(120)}
        got_inner = _read(broker.bootstrap, inner, lambda r: len(r) >= len(want_inner))
        got_left = _read(broker.bootstrap, left, lambda r: len(r) >= len(want_left))
        # the table was complete before the first order was joined: every lookup hit
        assert {(m.key() or b"").decode(): (m.value() or b"").decode() for m in got_inner} == want_inner
        assert len(got_inner) == len(want_inner)
        assert {(m.key() or b"").decode(): (m.value() or b"").decode() for m in got_left} == want_left
        assert app.global_thread is not None and app.global_thread.restored == 52
        # interactive query on the global store
        store = kv_store(app, "customers-store")
        assert store.get("c3") == "renamed3" and store.get("c4") is None
        # kept up to date: a new customer, then an order for it
        _produce(broker.bootstrap, customers, [("c55", "late55")])
        view = kv_store(app, "customers-store")
        wait_for(lambda: view.get("c55") is not None, 20, "the global store to get the new customer")
        _produce(broker.bootstrap, orders, [("o-late", "c55:x")])
        more = _read(broker.bootstrap, inner, lambda r: len(r) > len(want_inner))
        assert {(m.key() or b"").decode(): (m.value() or b"").decode() for m in more}["o-late"] == "c55:x|late55"
        assert app.state() is State.RUNNING, app.errors()
    finally:
        assert app.close(30)
    assert any("global store of" in line and "restoring partition" in line for line in logs), logs
    # the global checkpoint holds the next offset of every partition of the source topic
    cp = read_checkpoint(tmp_path / f"gt-{tag}" / "global")
    assert sorted(p for t, p in cp if t == customers) == [0, 1, 2]
    assert sum(cp.values()) == 53
    # restart on the same state dir: only records added since the checkpoint are read
    _produce(broker.bootstrap, customers, [("c56", "late56"), ("c57", "late57")])
    app2 = KafkaStreams(_build(orders, customers, inner, left), conf, log=lambda line: None)
    app2.start()
    try:
        assert app2.global_thread is not None and app2.global_thread.restored == 2
        assert kv_store(app2, "customers-store").get("c56") == "late56"
        assert kv_store(app2, "customers-store").get("c10") == "name10"
    finally:
        assert app2.close(30)


def test_missing_global_topic_is_an_error(broker: BrokerProcess, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    create_topics(broker.bootstrap, (f"orders-{tag}", 1))
    app = KafkaStreams(_build(f"orders-{tag}", f"nope-{tag}", "i", "l"), {
        "application.id": f"gm-{tag}", "bootstrap.servers": broker.bootstrap, "state.dir": str(tmp_path)})
    try:
        app.start()
        raise AssertionError("start() should fail")
    except Exception as exc:
        assert f"nope-{tag}" in str(exc)
    assert app.state() is State.ERROR


def test_poison_record_in_global_topic(broker: BrokerProcess, tmp_path: Path) -> None:
    """The deserialization handler covers global topics too: log-and-continue skips the record
    during bootstrap; log-and-fail makes start() fail naming topic, partition and offset."""
    from confluent_kafka import Producer

    from strom.streams.topology.errors import ErrorKind

    tag = uuid.uuid4().hex[:8]
    orders, customers = f"orders-{tag}", f"customers-{tag}"
    create_topics(broker.bootstrap, (orders, 1), (customers, 1))
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(customers, b"ok0", b"c0", partition=0)
    p.produce(customers, b"\xff\xfe not utf-8", b"c1", partition=0)
    p.produce(customers, b"ok2", b"c2", partition=0)
    assert p.flush(30) == 0
    conf = {"application.id": f"gp-{tag}", "bootstrap.servers": broker.bootstrap, "state.dir": str(tmp_path)}
    app = KafkaStreams(_build(orders, customers, "i", "l"),
                       {**conf, "default.deserialization.exception.handler": "log-and-continue"},
                       log=lambda line: None)
    app.start()
    try:
        assert app.global_thread is not None
        store = kv_store(app, "customers-store")
        assert store.get("c0") == "ok0" and store.get("c2") == "ok2" and store.get("c1") is None
        errors = app.global_thread.runtime.errors
        assert errors is not None and errors.skipped[ErrorKind.DESERIALIZATION] == 1
    finally:
        assert app.close(30)
    failing = KafkaStreams(_build(orders, customers, "i", "l"),
                           {**conf, "application.id": f"gf-{tag}", "state.dir": str(tmp_path / "f")},
                           log=lambda line: None)
    try:
        failing.start()
        raise AssertionError("start() should fail")
    except Exception as exc:
        assert f"topic={customers} partition=0 offset=1" in str(exc), exc
    assert failing.state() is State.ERROR
    assert failing.close(10)  # nothing was started: closing is immediate
