"""Stream-table enrichment join with strom.streams, runnable against ``strom dev``.

    strom dev                                  # in another terminal: the bundled broker
    python examples/enrichment_join.py [--bootstrap 127.0.0.1:9092] [--seconds 20]

Creates the topics ``user-profiles`` (a table: key user id, value a JSON profile), ``clicks``
(a stream: key user id, value the clicked page) and ``enriched-clicks`` if missing (all with
the same number of partitions: a stream-table join needs co-partitioned topics). It produces
the profiles, runs an application that joins every click with the clicking user's current
profile (a left join: clicks of unknown users are kept, with ``"unknown"`` fields), produces
clicks, then updates one profile and sends more clicks: later clicks see the new profile.

The profiles are a KTable backed by a RocksDB store, change-logged to
``enrichment-join-profiles-changelog``. Prints each enriched click (read with
``isolation.level=read_committed``). Stops after ``--seconds`` or on Ctrl-C, closing cleanly.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.tools.common import require_broker
from strom.streams import (
    Consumed,
    KafkaStreams,
    Materialized,
    Produced,
    ReadOnlyKeyValueStore,
    Serdes,
    StreamsBuilder,
)
from strom.streams.runtime import State

PROFILES = {
    "u1": {"name": "Ada", "country": "UK", "plan": "pro"},
    "u2": {"name": "Linus", "country": "FI", "plan": "free"},
    "u3": {"name": "Grace", "country": "US", "plan": "pro"},
    "u4": {"name": "Edsger", "country": "NL", "plan": "free"},
}
PAGES = ["/", "/docs", "/pricing", "/blog"]


def enrich(page: str, profile: dict[str, Any] | None) -> dict[str, Any]:
    """The joiner: the click's page with the user's profile (None when the user is unknown)."""
    profile = profile or {}
    return {"page": page, "name": profile.get("name", "unknown"),
            "country": profile.get("country", "unknown"), "plan": profile.get("plan", "unknown")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--guarantee", default="exactly_once_v2", choices=["at_least_once", "exactly_once_v2"])
    ap.add_argument("--state-dir", default=str(Path.cwd() / ".strom-examples" / "enrichment-state"),
                    help="RocksDB state of the application (default: ./.strom-examples/ under the working directory)")
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args()
    require_broker(args.bootstrap)  # no broker: say to start `strom dev`, no trace

    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    existing = admin.list_topics(timeout=10).topics
    new = [NewTopic(t, num_partitions=3, replication_factor=1)
           for t in ("user-profiles", "clicks", "enriched-clicks") if t not in existing]
    for fut in (admin.create_topics(new).values() if new else []):
        fut.result()

    # this run's output starts at the current end of enriched-clicks (earlier runs wrote before it)
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": f"enrichment-printer-{time.time_ns()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    parts = consumer.list_topics("enriched-clicks", timeout=10).topics["enriched-clicks"].partitions
    starts = [TopicPartition("enriched-clicks", p, consumer.get_watermark_offsets(
        TopicPartition("enriched-clicks", p), timeout=10)[1]) for p in parts]
    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5})

    def send(topic: str, key: str, value: Any) -> None:
        producer.produce(topic, json.dumps(value).encode() if topic == "user-profiles" else value.encode(),
                         key.encode())

    for user, profile in PROFILES.items():
        send("user-profiles", user, profile)
    producer.flush(10)

    S, J = Serdes.string(), Serdes.json()
    builder = StreamsBuilder()
    profiles = builder.table("user-profiles", Consumed.with_(S, J), Materialized.as_("profiles"))
    (builder.stream("clicks", Consumed.with_(S, S))
        .left_join(profiles, enrich)
        .to("enriched-clicks", Produced.with_(S, J)))
    app = KafkaStreams(builder.build(), {"application.id": "enrichment-join",
                                         "bootstrap.servers": args.bootstrap,
                                         "processing.guarantee": args.guarantee,
                                         "state.dir": args.state_dir})
    app.start()
    # the table must hold the profiles before clicks are joined: wait for the tasks, then a moment
    # for the profiles to be read (Kafka Streams orders records of both topics by timestamp)
    deadline = time.monotonic() + 30
    while app.state() is not State.RUNNING and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2)

    rng = random.Random()
    for _ in range(8):
        send("clicks", rng.choice([*PROFILES, "u9"]), rng.choice(PAGES))  # u9 has no profile
    producer.flush(10)
    time.sleep(2)
    print("-- u2 upgrades to the pro plan --")
    send("user-profiles", "u2", {**PROFILES["u2"], "plan": "pro"})
    producer.flush(10)
    time.sleep(2)
    for page in PAGES[:2]:
        send("clicks", "u2", page)
    producer.flush(10)

    consumer.assign(starts)
    end = time.monotonic() + args.seconds
    try:
        while time.monotonic() < end:
            for msg in consumer.consume(100, 0.5):
                if msg.error() is None:
                    print(f"{(msg.key() or b'').decode():>4} {J.deserialize('enriched-clicks', msg.value())}")
    except KeyboardInterrupt:
        pass
    finally:
        profile_store = app.store("profiles")  # a table's store is key-value
        if isinstance(profile_store, ReadOnlyKeyValueStore):
            print("table 'profiles', u2 ->", profile_store.get("u2"))
        consumer.close()
        app.close(30)


if __name__ == "__main__":
    main()
