"""Windowed page-view counts with strom.streams, runnable against ``strom dev``.

    strom dev                                  # in another terminal: the bundled broker
    python examples/pageviews_windowed.py [--bootstrap 127.0.0.1:9092] [--seconds 30]

Creates the topics ``pageviews`` (key: page, value: user) and ``pageview-counts`` if missing,
produces a minute of simulated page views (timestamps spread over the last 60 s), and runs an
application that counts views per page in 10-second tumbling windows. ``suppress`` holds each
window back until it closes, so exactly one final count per page and window is written to
``pageview-counts``; with ``wall_clock=True`` (a strom extension) the last windows close on
wall-clock time too, although no later view arrives. The counts are kept in a RocksDB window
store, change-logged to ``pageviews-windowed-pageview-counts-changelog``.

Prints each final result as it arrives (read with ``isolation.level=read_committed``), then
queries the running application's window store for one page. Stops after ``--seconds`` or on
Ctrl-C, closing cleanly.
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.tools.common import require_broker
from strom.streams import (
    Consumed,
    KafkaStreams,
    Materialized,
    Produced,
    ReadOnlyWindowStore,
    Serdes,
    StreamsBuilder,
)
from strom.streams.dsl.suppress import BufferConfig, Suppressed
from strom.streams.dsl.windows import TimeWindows, WindowedSerdes

WINDOW_MS = 10_000
PAGES = ["/", "/docs", "/pricing", "/blog", "/about"]


def _hms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--guarantee", default="exactly_once_v2", choices=["at_least_once", "exactly_once_v2"])
    ap.add_argument("--state-dir", default=str(Path.cwd() / ".strom-examples" / "pageviews-state"),
                    help="RocksDB state of the application (default: ./.strom-examples/ under the working directory)")
    ap.add_argument("--views", type=int, default=600)
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args()
    require_broker(args.bootstrap)  # no broker: say to start `strom dev`, no trace

    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    existing = admin.list_topics(timeout=10).topics
    new = [NewTopic(t, num_partitions=2, replication_factor=1)
           for t in ("pageviews", "pageview-counts") if t not in existing]
    for fut in (admin.create_topics(new).values() if new else []):
        fut.result()

    # a minute of page views, in timestamp order, ending now
    now = int(time.time() * 1000)
    first_ts = now - 60_000
    rng = random.Random()
    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5})
    for i in range(args.views):
        ts = first_ts + i * 60_000 // args.views
        producer.produce("pageviews", f"user{rng.randint(1, 40)}".encode(), rng.choice(PAGES).encode(),
                         timestamp=ts)
    producer.flush(10)
    print(f"produced {args.views} page views from {_hms(first_ts)} to {_hms(now)}")

    windowed = WindowedSerdes.time_windowed(Serdes.string(), WINDOW_MS)
    builder = StreamsBuilder()
    (builder.stream("pageviews", Consumed.with_(Serdes.string(), Serdes.string()))
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_MS))
        .count(materialized=Materialized.as_("pageview-counts").with_retention(3_600_000))  # queryable 1 h
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded(), wall_clock=True))
        .to_stream()
        .to("pageview-counts", Produced.with_(windowed, Serdes.long())))
    app = KafkaStreams(builder.build(), {"application.id": "pageviews-windowed",
                                         "bootstrap.servers": args.bootstrap,
                                         "processing.guarantee": args.guarantee,
                                         "state.dir": args.state_dir})
    app.start()

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": f"pageviews-printer-{now}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe(["pageview-counts"])
    long_serde = Serdes.long()
    deadline = time.monotonic() + args.seconds
    try:
        while time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                if msg.error() is not None:
                    continue
                w = windowed.deserialize("pageview-counts", msg.key())
                if w is None or w.start < first_ts - WINDOW_MS:
                    continue  # a result of an earlier run of the example
                count = long_serde.deserialize("pageview-counts", msg.value())
                print(f"[{_hms(w.start)}, {_hms(w.end)})  {w.key:<10} {count:>4} views  (final)")
    except KeyboardInterrupt:
        pass
    finally:
        # an interactive query: the page's windows of this run in the local window store
        store = app.store("pageview-counts")  # a windowed count makes a window store
        if isinstance(store, ReadOnlyWindowStore):
            print("window store 'pageview-counts', page '/docs':",
                  [(_hms(start), n) for start, n in store.fetch("/docs", first_ts - WINDOW_MS, now)])
        consumer.close()
        app.close(30)


if __name__ == "__main__":
    main()
