"""Runs the word count as its own process (for kill -9 tests).

Args: bootstrap text counts app state_dir [num.standby.replicas].
"""

from __future__ import annotations

import logging
import sys
import time

from wordcount_app import build

from strom.streams import KafkaStreams

log = logging.getLogger("run_wordcount")


def main() -> None:
    # the runtime logs through logging; the tests read these lines from the process's output
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    bootstrap, text, counts, app_id, state_dir = sys.argv[1:6]
    standbys = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    app = KafkaStreams(build(text, counts), {
        "application.id": app_id, "bootstrap.servers": bootstrap, "processing.guarantee": "exactly_once_v2",
        "commit.interval.ms": 100, "state.dir": state_dir, "consumer.session.timeout.ms": 6000,
        "max.poll.records": 200, "num.standby.replicas": standbys,
        # no record cache: the kill tests check that every single update is committed once
        "statestore.cache.max.bytes": 0})
    app.start()
    log.info("started")
    while True:
        time.sleep(0.5)
        if app.state().value == "ERROR":
            log.error("ERROR %r", app.errors())
            sys.exit(1)


if __name__ == "__main__":
    main()
