"""Word count with strom.streams (the example of issue 4), runnable against ``strom dev``.

    strom dev                                  # in another terminal: the bundled broker
    python examples/wordcount.py [--bootstrap 127.0.0.1:9092] [--guarantee exactly_once_v2]

Creates the topics ``text`` and ``counts`` if missing, produces some sample lines to ``text``,
runs the word count application and prints the counts as they arrive on ``counts`` (read with
``isolation.level=read_committed``). Stops after ``--seconds`` or on Ctrl-C, closing cleanly.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.tools.common import require_broker
from strom.streams import Consumed, KafkaStreams, Produced, ReadOnlyKeyValueStore, Serdes, StreamsBuilder

SAMPLE = [
    "the quick brown fox jumps over the lazy dog",
    "all streams lead to the log",
    "The log is the truth and the truth is in the log",
    "a fox a dog a log",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--guarantee", default="exactly_once_v2", choices=["at_least_once", "exactly_once_v2"])
    ap.add_argument("--state-dir", default=str(Path.cwd() / ".strom-examples" / "wordcount-state"),
                    help="RocksDB state of the application (default: ./.strom-examples/ under the working directory)")
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args()
    require_broker(args.bootstrap)  # no broker: say to start `strom dev`, no trace

    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    existing = admin.list_topics(timeout=10).topics
    new = [NewTopic(t, num_partitions=3, replication_factor=1) for t in ("text", "counts") if t not in existing]
    for fut in (admin.create_topics(new).values() if new else []):
        fut.result()

    producer = Producer({"bootstrap.servers": args.bootstrap})
    for line in SAMPLE:
        producer.produce("text", line.encode())
    producer.flush(10)

    builder = StreamsBuilder()
    (builder.stream("text", Consumed.with_(Serdes.string(), Serdes.string()))
        .flat_map_values(lambda line: line.lower().split())
        .group_by(lambda key, word: word)
        .count(materialized="word-counts")
        .to_stream()
        .to("counts", Produced.with_(Serdes.string(), Serdes.long())))
    app = KafkaStreams(builder.build(), {"application.id": "wordcount",
                                         "bootstrap.servers": args.bootstrap,
                                         "processing.guarantee": args.guarantee,
                                         "state.dir": args.state_dir})
    app.start()

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "wordcount-printer",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe(["counts"])
    long_serde = Serdes.long()
    deadline = time.monotonic() + args.seconds
    try:
        while time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                if msg.error() is None:
                    print(f"{(msg.key() or b'').decode():>10} {long_serde.deserialize('counts', msg.value())}")
    except KeyboardInterrupt:
        pass
    finally:
        # an interactive query against the running application's local store
        store = app.store("word-counts")  # a count() makes a key-value store
        if isinstance(store, ReadOnlyKeyValueStore):
            print("store 'word-counts': the ->", store.get("the"))
        consumer.close()
        app.close(30)


if __name__ == "__main__":
    main()
