"""The stream-table join of bench/streams_bench.py, written with strom.streams' DSL.

Usage: strom_join.py BOOTSTRAP APPLICATION_ID GUARANTEE ORDERS OUTPUT STATE_DIR CUSTOMERS
Joins the stream of orders (keyed by customer id) with the customers table on the key (inner
join) and writes each order with its customer's value appended (``order|customer``), as
``bench/kstreams/StreamTableJoin.java`` does. Runs until SIGTERM, then closes the application.
"""

from __future__ import annotations

import signal
import sys
import threading

from strom.streams import Consumed, KafkaStreams, Produced, Serdes, StreamsBuilder


def enrich(order: str, customer: str) -> str:
    return f"{order}|{customer}"


def main(argv: list[str]) -> int:
    bootstrap, app_id, guarantee, orders_topic, output_topic, state_dir, customers_topic = argv
    builder = StreamsBuilder()
    customers = builder.table(customers_topic, Consumed.with_(Serdes.string(), Serdes.string()),
                              materialized="customers")
    (builder.stream(orders_topic, Consumed.with_(Serdes.string(), Serdes.string()))
        .join(customers, enrich)
        .to(output_topic, Produced.with_(Serdes.string(), Serdes.string())))
    app = KafkaStreams(builder.build(), {"application.id": app_id, "bootstrap.servers": bootstrap,
                                         "processing.guarantee": guarantee, "state.dir": state_dir,
                                         # the same for every framework in the bench
                                         "commit.interval.ms": 1000})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    app.start()
    print("started", flush=True)
    stop.wait()
    app.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
