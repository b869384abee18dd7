"""Every join type on the bundled broker under exactly_once_v2: stream-stream windowed
(inner/left/outer), stream-table (inner/left), stream-globaltable (inner/left, when the runtime
runs GlobalKTables) and table-table (inner/left/outer); exact results, no duplicates."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from strom.streams import (
    Consumed,
    KafkaStreams,
    KStream,
    Materialized,
    Produced,
    ReadOnlyKeyValueStore,
    Serdes,
    StreamsBuilder,
    Topology,
)
from strom.streams.dsl.windows import JoinWindows

if TYPE_CHECKING:
    from tests.streams.e2e.conftest import Rec, StreamsE2E

S = Serdes.string()
T = int(time.time() * 1000) - 3600 * 1000  # an hour ago: within topic retention


def joiner(left: Any, right: Any) -> str:
    return f"{left}+{right}"


def part(key: str | None) -> int:
    """Keys u0, u1, ... go to partition n % 2 in every topic: co-partitioned by construction."""
    return 0 if key is None or not key[1:].isdigit() else int(key[1:]) % 2


def _pairs(records: list[Rec]) -> Counter[tuple[str, str]]:
    return Counter(((k or b"").decode(), (v or b"").decode()) for k, v, _ in records)


class App:
    """Topics named after the test, an application started on them, closed at the end."""

    def __init__(self, e2e: StreamsE2E, tmp: Path, *inputs: str) -> None:
        tag = uuid.uuid4().hex[:8]
        self.e2e = e2e
        self.tmp = tmp
        self.app_id = f"join-{tag}"
        self.t = {name: f"{name}-{tag}" for name in (*inputs, "out")}
        e2e.create_topics(*((t, 2) for t in self.t.values()))
        self.app: KafkaStreams | None = None

    def start(self, build: Callable[[dict[str, str]], Topology]) -> KafkaStreams:
        self.app = self.e2e.start(build(self.t), self.app_id, self.tmp)
        return self.app

    def produce(self, name: str, records: list[tuple[Any, ...]]) -> None:
        self.e2e.produce(self.t[name], records, part)

    def consumed(self, *names: str) -> None:
        self.e2e.wait_consumed(self.app_id, [self.t[n] for n in names])

    def read(self, until: Callable[[list[Rec]], bool]) -> list[Rec]:
        return self.e2e.read_committed(self.t["out"], until, settle=2.0)

    def close(self) -> None:
        if self.app is not None:
            app, self.app = self.app, None
            assert app.close(30)


# -- stream-stream --------------------------------------------------------------------------

CLICKS = [(f"u{i}", f"c{i}", T + i * 100) for i in range(8)] + [("u3", "c3b", T + 310)]
VIEWS = [(f"u{i}", f"v{i}", T + i * 100 + 50) for i in range(2, 10)]
INNER = [("u2", "c2+v2"), ("u3", "c3+v3"), ("u3", "c3b+v3"), ("u4", "c4+v4"), ("u5", "c5+v5"),
         ("u6", "c6+v6"), ("u7", "c7+v7")]
LEFT_ONLY = [("u0", "c0+None"), ("u1", "c1+None")]
RIGHT_ONLY = [("u8", "None+v8"), ("u9", "None+v9")]


@pytest.mark.parametrize("mode,want", [("inner", INNER), ("left", INNER + LEFT_ONLY),
                                       ("outer", INNER + LEFT_ONLY + RIGHT_ONLY)])
def test_stream_stream_join(streams_e2e: StreamsE2E, tmp_path: Path, mode: str, want: list[tuple[str, str]]) -> None:
    app = App(streams_e2e, tmp_path, "clicks", "views")

    def build(t: dict[str, str]) -> Topology:
        b = StreamsBuilder()
        clicks = b.stream(t["clicks"], Consumed.with_(S, S))
        views = b.stream(t["views"], Consumed.with_(S, S))
        # matches are 50 ms apart; the large grace keeps every record in the window whatever the
        # order in which the two topics are consumed
        windows = JoinWindows.of_time_difference_and_grace(1000, 60_000)
        joins: dict[str, Callable[..., KStream]] = {"inner": clicks.join, "left": clicks.left_join,
                                                    "outer": clicks.outer_join}
        joins[mode](views, joiner, windows).to(t["out"], Produced.with_(S, S))
        return b.build()

    try:
        app.start(build)
        app.produce("clicks", CLICKS)
        app.produce("views", VIEWS)
        app.consumed("clicks", "views")
        # unmatched records are emitted once stream time passes their window end + grace
        app.produce("clicks", [("~flush", "f", T + 200_000, p) for p in (0, 1)])
        got = _pairs(app.read(lambda r: len(r) >= len(want)))
        assert got == Counter(want)
    finally:
        app.close()


# -- stream-table ---------------------------------------------------------------------------

USERS = [(f"u{i}", f"name{i}", T + i) for i in range(6)] + [("u1", "name1b", T + 10), ("u5", None, T + 11)]
ORDERS = [(f"u{i}", f"order{i}", T + 100 + i) for i in range(8)]
ST_INNER = [("u0", "order0+name0"), ("u1", "order1+name1b"), ("u2", "order2+name2"), ("u3", "order3+name3"),
            ("u4", "order4+name4")]
ST_LEFT = [*ST_INNER, ("u5", "order5+None"), ("u6", "order6+None"), ("u7", "order7+None")]


@pytest.mark.parametrize("mode,want", [("inner", ST_INNER), ("left", ST_LEFT)])
def test_stream_table_join(streams_e2e: StreamsE2E, tmp_path: Path, mode: str, want: list[tuple[str, str]]) -> None:
    app = App(streams_e2e, tmp_path, "orders", "users")

    def build(t: dict[str, str]) -> Topology:
        b = StreamsBuilder()
        users = b.table(t["users"], Consumed.with_(S, S))
        orders = b.stream(t["orders"], Consumed.with_(S, S))
        (orders.join(users, joiner) if mode == "inner" else orders.left_join(users, joiner)) \
            .to(t["out"], Produced.with_(S, S))
        return b.build()

    try:
        app.start(build)
        app.produce("users", USERS)
        app.consumed("users")  # the table is loaded (with its update and delete) before the stream
        app.produce("orders", ORDERS)
        assert _pairs(app.read(lambda r: len(r) >= len(want))) == Counter(want)
    finally:
        app.close()


# -- stream-globaltable ---------------------------------------------------------------------

PRODUCTS = [(f"p{i}", f"product{i}", T + i) for i in range(3)]
PURCHASES = [(f"u{i}", f"p{i % 4}", T + 100 + i) for i in range(6)]  # p3 is unknown
SG_INNER = [(f"u{i}", f"p{i % 4}+product{i % 4}") for i in range(6) if i % 4 != 3]
SG_LEFT = [*SG_INNER, ("u3", "p3+None")]


@pytest.mark.parametrize("mode,want", [("inner", SG_INNER), ("left", SG_LEFT)])
def test_stream_global_table_join(streams_e2e: StreamsE2E, tmp_path: Path, mode: str,
                                  want: list[tuple[str, str]]) -> None:
    app = App(streams_e2e, tmp_path, "purchases", "products")

    def build(t: dict[str, str]) -> Topology:
        b = StreamsBuilder()
        products = b.global_table(t["products"], Consumed.with_(S, S), Materialized.as_("products-store"))
        purchases = b.stream(t["purchases"], Consumed.with_(S, S))
        by_product = lambda key, value: value  # noqa: E731  # the purchase's value is the product id
        (purchases.join(products, joiner, by_product) if mode == "inner"
         else purchases.left_join(products, joiner, by_product)).to(t["out"], Produced.with_(S, S))
        return b.build()

    app.produce("products", PRODUCTS)
    try:
        running = app.start(build)
        # the global table holds every product before the purchases go in
        store = running.store("products-store")
        assert isinstance(store, ReadOnlyKeyValueStore)
        streams_e2e.wait_for(lambda: store.get("p2") == "product2", 30, "the global table to load")
        app.produce("purchases", PURCHASES)
        assert _pairs(app.read(lambda r: len(r) >= len(want))) == Counter(want)
    finally:
        app.close()


# -- table-table ----------------------------------------------------------------------------

LEFT_T = [(f"u{i}", f"a{i}", T + i) for i in range(6)]
RIGHT_T = [(f"u{i}", f"b{i}", T + i) for i in range(3, 9)]
LEFT_UPDATES = [("u4", None, T + 20)]  # delete
RIGHT_UPDATES = [("u3", "b3x", T + 21)]  # update
TT = {
    "inner": {"u3": "a3+b3x", "u5": "a5+b5"},
    "left": {"u0": "a0+None", "u1": "a1+None", "u2": "a2+None", "u3": "a3+b3x", "u5": "a5+b5"},
    "outer": {"u0": "a0+None", "u1": "a1+None", "u2": "a2+None", "u3": "a3+b3x", "u4": "None+b4",
              "u5": "a5+b5", "u6": "None+b6", "u7": "None+b7", "u8": "None+b8"},
}


@pytest.mark.parametrize("mode", ["inner", "left", "outer"])
def test_table_table_join(streams_e2e: StreamsE2E, tmp_path: Path, mode: str) -> None:
    app = App(streams_e2e, tmp_path, "ta", "tb")
    want = {k.encode(): v.encode() for k, v in TT[mode].items()}

    def build(t: dict[str, str]) -> Topology:
        b = StreamsBuilder()
        a = b.table(t["ta"], Consumed.with_(S, S))
        bt = b.table(t["tb"], Consumed.with_(S, S))
        {"inner": a.join, "left": a.left_join, "outer": a.outer_join}[mode](bt, joiner) \
            .to_stream().to(t["out"], Produced.with_(S, S))
        return b.build()

    try:
        app.start(build)
        app.produce("ta", LEFT_T)
        app.produce("tb", RIGHT_T)
        app.consumed("ta", "tb")
        app.produce("ta", LEFT_UPDATES)
        app.produce("tb", RIGHT_UPDATES)
        got = app.read(lambda r: streams_e2e.latest_per_key(r) == want)
        assert streams_e2e.latest_per_key(got) == want
        # each key's output is a valid sequence of join results: never a value from nowhere
        valid = {f"{x}+{y}".encode() for x in ("None", *(f"a{i}" for i in range(6)))
                 for y in ("None", "b3x", *(f"b{i}" for i in range(3, 9)))}
        assert all(v is None or v in valid for _, v, _ in got)
    finally:
        app.close()


def test_stream_stream_left_join_buffers_restored(streams_e2e: StreamsE2E, tmp_path: Path) -> None:
    """The join's window stores and its store of unmatched records are change-logged: an
    instance started on an empty state directory restores them, so a click from before the
    restart still matches a view sent after it, and the clicks left unmatched are emitted
    (with None) exactly once when their windows close."""
    app = App(streams_e2e, tmp_path, "clicks", "views")

    def build(t: dict[str, str]) -> Topology:
        b = StreamsBuilder()
        clicks = b.stream(t["clicks"], Consumed.with_(S, S))
        views = b.stream(t["views"], Consumed.with_(S, S))
        clicks.left_join(views, joiner, JoinWindows.of_time_difference_and_grace(1000, 60_000)) \
            .to(t["out"], Produced.with_(S, S))
        return b.build()

    try:
        app.start(build)
        app.produce("clicks", CLICKS)
        app.produce("views", VIEWS)
        app.consumed("clicks", "views")
        assert _pairs(app.read(lambda r: len(r) >= len(INNER))) == Counter(INNER)
        app.close()
        app.tmp = tmp_path / "fresh"  # nothing local: everything comes back from the changelogs
        app.start(build)
        app.produce("views", [("u1", "v1b", T + 150)])  # matches the click u1 from before the restart
        app.consumed("views")
        app.produce("clicks", [("~flush", "f", T + 200_000, p) for p in (0, 1)])
        want = [*INNER, ("u1", "c1+v1b"), ("u0", "c0+None")]
        assert _pairs(app.read(lambda r: len(r) >= len(want))) == Counter(want)
    finally:
        app.close()
