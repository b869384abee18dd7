"""The windowed count of bench/streams_bench.py, written with strom.streams' DSL.

Usage: strom_windowed.py BOOTSTRAP APPLICATION_ID GUARANTEE INPUT OUTPUT STATE_DIR WINDOW_MS GRACE_MS
Counts the records of each key in tumbling event-time windows (the records' timestamps) and
writes the windowed counts with Kafka's time-windowed key format (key bytes + 8-byte start), as
``bench/kstreams/WindowedCount.java`` does. Runs until SIGTERM, then closes the application.
"""

from __future__ import annotations

import signal
import sys
import threading

from strom.streams import (
    Consumed,
    KafkaStreams,
    Produced,
    Serdes,
    StreamsBuilder,
    TimeWindows,
    WindowedSerdes,
)


def main(argv: list[str]) -> int:
    bootstrap, app_id, guarantee, input_topic, output_topic, state_dir, window, grace = argv
    window_ms, grace_ms = int(window), int(grace)
    builder = StreamsBuilder()
    (builder.stream(input_topic, Consumed.with_(Serdes.string(), Serdes.string()))
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(window_ms, grace_ms))
        .count(materialized="windowed-counts")
        .to_stream()
        .to(output_topic, Produced.with_(WindowedSerdes.time_windowed(Serdes.string(), window_ms),
                                         Serdes.long())))
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
