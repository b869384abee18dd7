"""``strom consume``: print a topic's records to stdout (Kafka's kafka-console-consumer.sh).

Without ``--group`` the tool reads by ``assign()`` over all partitions (or ``--partition``),
so it needs no group coordinator and commits nothing. With ``--group`` it subscribes and
commits like any group member. Output follows Kafka's ``DefaultMessageFormatter`` and its
``print.*`` properties. It stops after ``--max-messages``, after ``--timeout-ms`` without a
record, or on SIGINT/SIGTERM, and then prints ``Processed a total of N messages`` to stderr.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from strom.core.tools.common import (
    ClientConfig,
    ToolError,
    UsageError,
    add_client_args,
    bool_property,
    check_bootstrap,
    client_config,
    open_client,
    parse_kv_list,
    unreachable_hint,
)

# Timestamp types as confluent-kafka reports them (librdkafka's rd_kafka_timestamp_type_t).
_TS_NAMES = {1: b"CreateTime", 2: b"LogAppendTime"}
BATCH = 500


def _unescape(value: str) -> bytes:
    # Shells make a literal TAB or newline awkward to pass; accept \t, \n and \r escapes.
    return value.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r").encode()


@dataclass(frozen=True, slots=True)
class RecordFormat:
    """Kafka's DefaultMessageFormatter: optional columns joined by key.separator, then the value."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    PROPERTIES = ("print.timestamp", "print.partition", "print.offset", "print.headers", "print.key",
                  "print.value", "key.separator", "line.separator", "headers.separator", "null.literal")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> RecordFormat:
        unknown = sorted(set(props) - set(cls.PROPERTIES))
        if unknown:
            raise UsageError(f"--property {unknown[0]}: unknown property; known: {', '.join(cls.PROPERTIES)}")
        return cls(
            print_timestamp=bool_property(props, "print.timestamp", False),
            print_partition=bool_property(props, "print.partition", False),
            print_offset=bool_property(props, "print.offset", False),
            print_headers=bool_property(props, "print.headers", False),
            print_key=bool_property(props, "print.key", False),
            print_value=bool_property(props, "print.value", True),
            key_separator=_unescape(props.get("key.separator", "\t")),
            line_separator=_unescape(props.get("line.separator", "\n")),
            headers_separator=_unescape(props.get("headers.separator", ",")),
            null_literal=_unescape(props.get("null.literal", "null")),
        )

    def format(self, partition: int, offset: int, timestamp: tuple[int, int], key: bytes | None,
               value: bytes | None, headers: Sequence[tuple[str, bytes | None]] | None) -> bytes:
        """One record as Kafka prints it, line separator included."""
        cols: list[bytes] = []
        if self.print_timestamp:
            ts_type, ts = timestamp
            name = _TS_NAMES.get(ts_type)
            cols.append(b"NO_TIMESTAMP" if name is None else name + b":" + str(ts).encode())
        if self.print_partition:
            cols.append(b"Partition:" + str(partition).encode())
        if self.print_offset:
            cols.append(b"Offset:" + str(offset).encode())
        if self.print_headers:
            if headers:
                cols.append(self.headers_separator.join(
                    k.encode() + b":" + (self.null_literal if v is None else v) for k, v in headers))
            else:
                cols.append(b"NO_HEADERS")
        if self.print_key:
            cols.append(self.null_literal if key is None else key)
        if self.print_value:
            cols.append(self.null_literal if value is None else value)
        return self.key_separator.join(cols) + self.line_separator


def parse_offset(value: str) -> int | str:
    if value in ("earliest", "latest"):
        return value
    try:
        offset = int(value)
    except ValueError:
        offset = -1
    if offset < 0:
        raise UsageError(f"--offset expects a non-negative offset, 'earliest' or 'latest', got {value!r}")
    return offset


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "consume", help="print a topic's records to stdout",
        description="Print records of a topic, one a line (like Kafka's kafka-console-consumer.sh). "
                    "Format properties (--property): print.key, print.headers, print.timestamp, "
                    "print.offset, print.partition, print.value (true), key.separator (TAB), "
                    "line.separator, headers.separator (,), null.literal (null). Without --group "
                    "partitions are assigned directly and no offsets are committed. Stops after "
                    "--max-messages, --timeout-ms without records, or Ctrl-C.")
    p.add_argument("--topic", required=True, help="topic to read")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest offset (default: only new records)")
    p.add_argument("--group", metavar="G", help="consumer group to join and commit offsets in")
    p.add_argument("--partition", type=int, metavar="P", help="read only this partition")
    p.add_argument("--offset", metavar="O", help="with --partition: start offset, 'earliest' or 'latest'")
    p.add_argument("--max-messages", type=int, metavar="N", help="exit after N records")
    p.add_argument("--timeout-ms", type=int, metavar="MS", help="exit after MS milliseconds without a record")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="an output format property (see above); repeatable")
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                   default="read_uncommitted",
                   help="read_committed hides aborted and open transactions (default: read_uncommitted)")
    p.add_argument("--consumer-property", dest="client_props", action="append", default=[],
                   metavar="KEY=VALUE", help="same as -X (Kafka's name)")
    add_client_args(p)
    p.set_defaults(func=cmd_consume)


def _validate(args: argparse.Namespace) -> int | str | None:
    if args.max_messages is not None and args.max_messages < 1:
        raise UsageError(f"--max-messages expects a positive number, got {args.max_messages}")
    if args.timeout_ms is not None and args.timeout_ms < 0:
        raise UsageError(f"--timeout-ms expects a non-negative number, got {args.timeout_ms}")
    if args.partition is not None and args.partition < 0:
        raise UsageError(f"--partition expects a non-negative number, got {args.partition}")
    if args.offset is None:
        return None
    if args.partition is None:
        raise UsageError("--offset needs --partition (the offset of which partition?)")
    if args.from_beginning:
        raise UsageError("--offset and --from-beginning cannot be used together")
    return parse_offset(args.offset)


def cmd_consume(args: argparse.Namespace) -> int:
    offset = _validate(args)
    fmt = RecordFormat.from_properties(parse_kv_list(args.property, "--property"))
    check_bootstrap(args.bootstrap_server)
    base: ClientConfig = {
        # librdkafka needs a group.id even for assign(); without --group it is never joined.
        "group.id": args.group or f"console-consumer-{random.randrange(100000)}",
        "enable.auto.commit": args.group is not None,
        "auto.offset.reset": "earliest" if args.from_beginning else "latest",
        "isolation.level": args.isolation_level,
        "enable.partition.eof": False,
    }
    return Consume(args, fmt, client_config(args, base), offset).run()


class Consume:
    """One run of the console consumer."""

    def __init__(self, args: argparse.Namespace, fmt: RecordFormat, conf: ClientConfig,
                 offset: int | str | None) -> None:
        self.args = args
        self.fmt = fmt
        self.conf = conf
        self.offset = offset
        self.count = 0
        self.stopping = False

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    def run(self) -> int:
        from confluent_kafka import Consumer

        consumer = open_client(Consumer, self.conf, self.args.bootstrap_server)
        previous = {s: signal.signal(s, self._stop) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self._start(consumer)
            self._loop(consumer)
        except BrokenPipeError:
            # The reader went away (e.g. `| head`); point stdout at /dev/null so exit doesn't complain.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            consumer.close()
            print(f"Processed a total of {self.count} messages", file=sys.stderr)
        return 0

    def _start(self, consumer: Any) -> None:
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException, TopicPartition

        topic = self.args.topic
        if self.args.group is not None and self.args.partition is None:
            consumer.subscribe([topic])
            return
        # --timeout-ms bounds the wait for the cluster too, not only the wait for records.
        connect_s = 30.0 if self.args.timeout_ms is None else max(min(30.0, self.args.timeout_ms / 1000), 0.1)
        try:
            md = consumer.list_topics(topic, timeout=connect_s)
        except KafkaException as e:
            raise ToolError(f"cannot fetch metadata of topic {topic!r}: "
                            f"{unreachable_hint(self.args.bootstrap_server)} ({e})") from None
        tmd = md.topics.get(topic)
        if tmd is None or (tmd.error is not None and tmd.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise ToolError(f"topic {topic!r} does not exist (create it with `strom topics create --topic {topic}`)")
        if tmd.error is not None:
            raise ToolError(f"cannot read topic {topic!r}: {tmd.error.name()}: {tmd.error.str()}")
        partitions = sorted(tmd.partitions)
        if self.args.partition is not None:
            if self.args.partition not in tmd.partitions:
                raise ToolError(f"--partition {self.args.partition}: topic {topic!r} has partitions "
                                f"0..{len(partitions) - 1}")
            partitions = [self.args.partition]
        if isinstance(self.offset, int):
            start = self.offset
        elif self.offset == "earliest" or (self.offset is None and self.args.from_beginning):
            start = OFFSET_BEGINNING
        else:
            start = OFFSET_END
        consumer.assign([TopicPartition(topic, p, start) for p in partitions])

    def _loop(self, consumer: Any) -> None:
        from confluent_kafka import KafkaError

        out = sys.stdout.buffer
        limit = self.args.max_messages
        idle_s = None if self.args.timeout_ms is None else self.args.timeout_ms / 1000
        last_record = time.monotonic()
        while not self.stopping and (limit is None or self.count < limit):
            wait = 0.5
            if idle_s is not None:
                left = idle_s - (time.monotonic() - last_record)
                if left <= 0:
                    break
                wait = min(wait, left)
            want = BATCH if limit is None else min(BATCH, limit - self.count)
            chunks = []
            for msg in consumer.consume(want, wait):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    if err.fatal() or err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART,
                                                     KafkaError.TOPIC_AUTHORIZATION_FAILED):
                        raise ToolError(f"{err.name()}: {err.str()}")
                    print(f"warning: {err.name()}: {err.str()}", file=sys.stderr)
                    continue
                chunks.append(self.fmt.format(msg.partition(), msg.offset(), msg.timestamp(),
                                              msg.key(), msg.value(), msg.headers()))
            if chunks:
                self.count += len(chunks)
                out.write(b"".join(chunks))
                out.flush()
                last_record = time.monotonic()
