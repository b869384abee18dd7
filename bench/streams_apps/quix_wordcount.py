"""The same word count written with Quix Streams, run from its own venv (.cache/quix-venv).

Usage: quix_wordcount.py BOOTSTRAP CONSUMER_GROUP GUARANTEE INPUT OUTPUT STATE_DIR
GUARANTEE is Kafka Streams' name (at_least_once, exactly_once_v2), mapped to Quix's. Quix has no
un-windowed count, so the count is a stateful apply, the way Quix's documentation counts words.
"""

from __future__ import annotations

import sys

from quixstreams import Application, State

GUARANTEES = {"at_least_once": "at-least-once", "exactly_once_v2": "exactly-once"}


def count(word: str, state: State) -> int:
    n = state.get("count", 0) + 1
    state.set("count", n)
    return n


def main(argv: list[str]) -> int:
    bootstrap, group, guarantee, input_topic, output_topic, state_dir = argv
    app = Application(broker_address=bootstrap, consumer_group=group, auto_offset_reset="earliest",
                      processing_guarantee=GUARANTEES[guarantee], state_dir=state_dir,
                      commit_interval=1.0,  # the same for every framework in the bench
                      loglevel="WARNING")
    source = app.topic(input_topic, key_deserializer="string", value_deserializer="string")
    sink = app.topic(output_topic, key_serializer="string", value_serializer="int")
    sdf = app.dataframe(source)
    sdf = sdf.apply(lambda line: line.lower().split(), expand=True)
    sdf = sdf.group_by(lambda word: word, name="word", key_serializer="string",
                       value_serializer="string", key_deserializer="string", value_deserializer="string")
    sdf = sdf.apply(count, stateful=True)
    sdf.to_topic(sink)
    print("started", flush=True)
    app.run()  # returns on SIGTERM after a clean shutdown
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
