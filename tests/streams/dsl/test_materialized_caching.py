"""``Materialized.with_caching_disabled()``: no record cache in front of one store.

With a large ``statestore.cache.max.bytes`` an aggregation coalesces the updates of one commit
into one net update per key; with caching disabled for its store every update is forwarded at
once (as Kafka's ``withCachingDisabled()``, i.e. as with a cache size of 0 for that store alone).
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.testing import BrokerProcess, wait_for
from strom.streams import (
    Consumed,
    Grouped,
    KafkaStreams,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    TimeWindows,
    Topology,
    TopologyTestDriver,
)
from strom.streams.runtime import State

S = Serdes.string()
L = Serdes.long()
BIG_CACHE = {"statestore.cache.max.bytes": 10 * 1024 * 1024}
# one input record per line key; each word of the line updates its key's count once
LINES = [("a", "w w w"), ("b", "w w"), ("a", "w w")]


def _count(lines: str, out: str, materialized: Materialized) -> Topology:
    b = StreamsBuilder()
    (b.stream(lines, Consumed.with_(S, S))
        .flat_map_values(str.split)
        .group_by_key(Grouped.with_(S, S))
        .count(materialized=materialized)
        .to_stream()
        .to(out, Produced.with_(S, L)))
    return b.build()


def _driver_counts(materialized: Materialized) -> list[tuple[str, int]]:
    with TopologyTestDriver(_count("lines", "out", materialized), BIG_CACHE) as driver:
        driver.create_input_topic("lines", S, S).pipe_key_value_list(LINES)
        return [(k, v) for k, v in driver.create_output_topic("out", S, L).read_key_values_to_list()]


def test_builder_is_immutable_and_default_enabled() -> None:
    m = Materialized.as_("s")
    off = m.with_caching_disabled()
    assert m.caching_enabled and not off.caching_enabled
    assert off.with_caching_enabled().caching_enabled and not off.caching_enabled
    assert off.store_name == "s"


def test_driver_caching_disabled_forwards_every_update() -> None:
    off = _driver_counts(Materialized.as_("counts").with_caching_disabled())
    assert off == [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), ("a", 4), ("a", 5)]
    # the same topology with the cache on: one net update per key per commit (per input record)
    on = _driver_counts(Materialized.as_("counts"))
    assert on == [("a", 3), ("b", 2), ("a", 5)]
    assert _driver_counts(Materialized.as_("counts").with_caching_disabled().with_caching_enabled()) == on


def test_driver_windowed_count_caching_disabled() -> None:
    def run(m: Materialized) -> list[int]:
        b = StreamsBuilder()
        (b.stream("lines", Consumed.with_(S, S))
            .flat_map_values(str.split)
            .group_by_key(Grouped.with_(S, S))
            .windowed_by(TimeWindows.of_size_with_no_grace(60_000))
            .count(materialized=m)
            .to_stream()
            .map(lambda k, v: (k.key, v))
            .to("out", Produced.with_(S, L)))
        with TopologyTestDriver(b.build(), BIG_CACHE) as driver:
            driver.create_input_topic("lines", S, S).pipe_key_value_list(LINES)
            return [v for k, v in driver.create_output_topic("out", S, L).read_key_values_to_list() if k == "a"]

    assert run(Materialized.as_("wc").with_caching_disabled()) == [1, 2, 3, 4, 5]
    assert run(Materialized.as_("wc")) == [3, 5]


def _read(bootstrap: str, topic: str, until: int, timeout: float = 60.0) -> list[tuple[str, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out: list[tuple[str, int]] = []
    try:
        def more() -> bool:
            for m in c.consume(100, 0.2):
                if m.error() is None:
                    key, count = m.key(), L.deserialize(topic, m.value())
                    assert key is not None and count is not None
                    out.append((key.decode(), count))
            return len(out) >= until
        wait_for(more, timeout, f"{until} records on {topic}")
        # anything more that is already there would show a wrong count
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            more()
    finally:
        c.close()
    return out


def test_broker_caching_disabled_vs_enabled(broker: BrokerProcess, tmp_path: Path) -> None:
    """Two counts of one input, one store without cache: it forwards every update while the
    cached one, with a long commit interval, holds its updates until the close flushes them."""
    tag = uuid.uuid4().hex[:8]
    lines, out_off, out_on = f"lines-{tag}", f"off-{tag}", f"on-{tag}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in (lines, out_off, out_on)]).values():
        f.result(30)
    b = StreamsBuilder()
    grouped = (b.stream(lines, Consumed.with_(S, S)).flat_map_values(str.split)
               .group_by_key(Grouped.with_(S, S)))
    grouped.count(materialized=Materialized.as_("off").with_caching_disabled()).to_stream().to(
        out_off, Produced.with_(S, L))
    grouped.count(materialized=Materialized.as_("on")).to_stream().to(out_on, Produced.with_(S, L))
    conf: dict[str, Any] = {"application.id": f"caching-{tag}", "bootstrap.servers": broker.bootstrap,
                            "state.dir": str(tmp_path), "commit.interval.ms": 600_000, **BIG_CACHE}
    app = KafkaStreams(b.build(), conf)
    app.start()
    closed = False
    try:
        wait_for(lambda: app.state() is State.RUNNING, 60, "the application to run")
        p = Producer({"bootstrap.servers": broker.bootstrap})
        for k, v in LINES:
            p.produce(lines, v.encode(), k.encode())
        assert p.flush(30) == 0
        want = [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), ("a", 4), ("a", 5)]
        assert _read(broker.bootstrap, out_off, len(want)) == want
        assert app.close(30)
        closed = True
        on = _read(broker.bootstrap, out_on, 2)
        per_key: dict[str, list[int]] = defaultdict(list)
        for key, count in on:
            per_key[key].append(count)
        # fewer updates than without the cache, ending at the same counts
        assert len(on) < len(want)
        assert {key: counts[-1] for key, counts in per_key.items()} == {"a": 5, "b": 2}
    finally:
        if not closed:
            app.close(30)
