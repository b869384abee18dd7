"""One share consumer (confluent-kafka's ``ShareConsumer``) as its own process, for tests/share.

The tests run several of these at once (five consumers sharing a topic), kill one with
SIGKILL while it holds record locks, and read back what each one saw. Output goes to ``--out``,
one line per event, flushed as it happens so a killed worker's file is complete up to the kill:

- ``R <partition> <offset> <delivery count>``: a record returned by ``poll``;
- ``A <partition> <offset>,<offset>,...``: acknowledgements the broker confirmed (the
  acknowledgement commit callback with no error);
- ``E <partition> <error> <offset>,...``: acknowledgements the broker refused;
- ``H``: (``--hold``) the first records were received and will never be acknowledged;
- ``C``: closed cleanly.

The worker stops when the file ``--stop`` exists (checked after every poll) and then closes,
which sends its pending acknowledgements.

Run: ``python tests/share/share_worker.py --bootstrap B --topic T --group G --out F --stop S``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import TextIO

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer, TopicPartition

log = logging.getLogger(__name__)


def _on_commit(out: TextIO) -> Callable[[dict[TopicPartition, set[int]], KafkaException | None], None]:
    def callback(offsets: dict[TopicPartition, set[int]], exc: KafkaException | None) -> None:
        for tp, done in offsets.items():
            if not done:
                continue
            listed = ",".join(str(o) for o in sorted(done))
            if exc is None:
                out.write(f"A {tp.partition} {listed}\n")
            else:
                out.write(f"E {tp.partition} {exc.args[0].name() if exc.args else exc} {listed}\n")
        out.flush()
    return callback


def run(args: argparse.Namespace) -> int:
    config = {"bootstrap.servers": args.bootstrap, "group.id": args.group,
              "share.acknowledgement.mode": "explicit" if args.hold else args.mode}
    consumer = ShareConsumer(config)
    with open(args.out, "a", buffering=1 << 16) as out:
        consumer.set_acknowledgement_commit_callback(_on_commit(out))
        consumer.subscribe([args.topic])
        while not os.path.exists(args.stop):
            msgs = consumer.poll(0.5)
            received = 0
            for msg in msgs:
                if msg.error() is not None:
                    log.warning("poll error: %s", msg.error())
                    continue
                out.write(f"R {msg.partition()} {msg.offset()} {msg.delivery_count()}\n")
                received += 1
                if args.mode == "explicit" and not args.hold:
                    consumer.acknowledge(msg, AcknowledgeType.ACCEPT)
            out.flush()
            if args.hold and received:
                # Keep the locks: never acknowledge, never poll again, until SIGKILL.
                out.write("H\n")
                out.flush()
                while True:
                    time.sleep(3600)
            if args.mode == "explicit" and received:
                consumer.commit_async()
        consumer.close()
        out.write("C\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--mode", choices=("implicit", "explicit"), default="implicit")
    ap.add_argument("--hold", action="store_true", help="take the first records and never acknowledge them")
    ap.add_argument("--out", required=True)
    ap.add_argument("--stop", required=True)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
