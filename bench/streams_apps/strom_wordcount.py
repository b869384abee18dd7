"""The word count of strom.streams' documentation, as bench/streams_wordcount.py runs it.

Usage: strom_wordcount.py BOOTSTRAP APPLICATION_ID GUARANTEE INPUT OUTPUT STATE_DIR
Runs until SIGTERM, then closes the application cleanly.
"""

from __future__ import annotations

import signal
import sys
import threading

from strom.streams import Consumed, KafkaStreams, Produced, Serdes, StreamsBuilder


def main(argv: list[str]) -> int:
    bootstrap, app_id, guarantee, input_topic, output_topic, state_dir = argv
    builder = StreamsBuilder()
    (builder.stream(input_topic, Consumed.with_(Serdes.string(), Serdes.string()))
        .flat_map_values(lambda line: line.lower().split())
        .group_by(lambda key, word: word)
        .count(materialized="word-counts")
        .to_stream()
        .to(output_topic, Produced.with_(Serdes.string(), Serdes.long())))
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
