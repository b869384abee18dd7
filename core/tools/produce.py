"""``strom produce``: send stdin lines as records (Kafka's kafka-console-producer.sh).

Each line is one record. With ``--property parse.key=true`` a line is ``key<key.separator>value``;
with ``parse.headers=true`` it starts with ``h1:v1,h2:v2<headers.delimiter>`` — the same
properties and defaults as Kafka's ``LineMessageReader``. Lines stay bytes end to end, so any
encoding passes through unchanged. Delivery errors name the record's line number; the exit
code is 1 if any record failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, BinaryIO

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

Header = tuple[str, bytes | None]

# Kafka's console producer waits up to delivery.timeout.ms (2 minutes) for a record.
DELIVERY_TIMEOUT_MS = 120_000
# But when no broker has answered at all for this long, waiting the rest of those 2 minutes
# only hides the problem: the tool gives up with the hint to start one.
UNREACHABLE_AFTER_S = 6.0


class LineParseError(ToolError):
    """A line does not match the configured format (Kafka aborts the producer on it, so do we)."""


def _sep_prop(props: Mapping[str, str], key: str, default: str) -> bytes:
    value = props.get(key, default)
    if not value:
        raise UsageError(f"--property {key}: the separator must not be empty")
    return value.encode()


@dataclass(frozen=True, slots=True)
class LineFormat:
    """How a line splits into headers, key and value (Kafka's LineMessageReader properties)."""

    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    ignore_error: bool = False
    null_marker: bytes | None = None

    PROPERTIES = ("parse.key", "key.separator", "parse.headers", "headers.delimiter",
                  "headers.separator", "headers.key.separator", "ignore.error", "null.marker")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> LineFormat:
        unknown = sorted(set(props) - set(cls.PROPERTIES))
        if unknown:
            raise UsageError(f"--property {unknown[0]}: unknown property; known: {', '.join(cls.PROPERTIES)}")
        null_marker = props.get("null.marker")
        return cls(
            parse_key=bool_property(props, "parse.key", False),
            key_separator=_sep_prop(props, "key.separator", "\t"),
            parse_headers=bool_property(props, "parse.headers", False),
            headers_delimiter=_sep_prop(props, "headers.delimiter", "\t"),
            headers_separator=_sep_prop(props, "headers.separator", ","),
            headers_key_separator=_sep_prop(props, "headers.key.separator", ":"),
            ignore_error=bool_property(props, "ignore.error", False),
            null_marker=null_marker.encode() if null_marker else None,
        )

    def _cut(self, line: bytes, start: int, sep: bytes, what: str, lineno: int) -> bytes | None:
        index = line.find(sep, start)
        if index < 0:
            if self.ignore_error:
                return None
            raise LineParseError(f"no {what} {sep.decode(errors='replace')!r} found on line {lineno}")
        return line[start:index]

    def _null(self, value: bytes) -> bytes | None:
        return None if self.null_marker is not None and value == self.null_marker else value

    def parse(self, line: bytes, lineno: int) -> tuple[bytes | None, bytes | None, list[Header]]:
        """``(key, value, headers)`` of one line (without its line ending)."""
        pos = 0
        headers: list[Header] = []
        if self.parse_headers:
            section = self._cut(line, 0, self.headers_delimiter, "headers delimiter", lineno)
            if section is not None:
                pos = len(section) + len(self.headers_delimiter)
                if section and self._null(section) is not None:
                    headers = self._split_headers(section, lineno)
        key: bytes | None = None
        if self.parse_key:
            raw_key = self._cut(line, pos, self.key_separator, "key separator", lineno)
            if raw_key is not None:
                pos += len(raw_key) + len(self.key_separator)
                key = self._null(raw_key)
        return key, self._null(line[pos:]), headers

    def _split_headers(self, section: bytes, lineno: int) -> list[Header]:
        out: list[Header] = []
        for pair in section.split(self.headers_separator):
            index = pair.find(self.headers_key_separator)
            if index < 0:
                if not self.ignore_error:
                    sep = self.headers_key_separator.decode(errors="replace")
                    raise LineParseError(f"no header key separator {sep!r} in {pair!r} on line {lineno}")
                raw_key, value = pair, None
            else:
                raw_key = pair[:index]
                value = self._null(pair[index + len(self.headers_key_separator):])
            if self.null_marker is not None and raw_key == self.null_marker:
                raise LineParseError(f"header key on line {lineno} equals the null marker; header keys can't be null")
            try:
                out.append((raw_key.decode("utf-8"), value))
            except UnicodeDecodeError:
                raise LineParseError(f"header key {raw_key!r} on line {lineno} is not UTF-8") from None
        return out


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "produce", help="send lines from stdin as records",
        description="Read lines from stdin and send each as a record to a topic (like Kafka's "
                    "kafka-console-producer.sh). Line format properties (--property): "
                    "parse.key (false), key.separator (TAB), parse.headers (false), "
                    "headers.delimiter (TAB), headers.separator (,), headers.key.separator (:), "
                    "null.marker (unset), ignore.error (false). "
                    "Example: printf 'k1:v1\\n' | strom produce --topic t --property parse.key=true "
                    "--property key.separator=:",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topic", required=True, help="topic to send to")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="a line format property (see above); repeatable")
    p.add_argument("--headers-separator", metavar="SEP",
                   help="shorthand for --property headers.separator=SEP")
    p.add_argument("--compression-type", choices=("none", "gzip", "snappy", "lz4", "zstd"), default="none",
                   help="batch compression (default: none)")
    p.add_argument("--acks", choices=("all", "-1", "0", "1"), default="all",
                   help="acknowledgements to wait for (default: all)")
    p.add_argument("--sync", action="store_true",
                   help="wait for each record's acknowledgement before sending the next")
    p.add_argument("--producer-property", dest="client_props", action="append", default=[],
                   metavar="KEY=VALUE", help="same as -X (Kafka's name)")
    p.add_argument("--progress-interval", type=float, default=5.0, metavar="SECONDS",
                   help="print a status line to stderr this often while reading piped input "
                        "(default: 5; 0 turns it off)")
    add_client_args(p)
    p.set_defaults(func=cmd_produce)


@dataclass
class _Counts:
    sent: int = 0
    delivered: int = 0
    failed: int = 0
    aborted: bool = False  # given up on an unreachable cluster: purged records are not reported


def _on_delivery(counts: _Counts, lineno: int, err: Any, msg: Any) -> None:
    if err is None:
        counts.delivered += 1
    else:
        counts.failed += 1
        if not counts.aborted:
            print(f"error: line {lineno}: delivery failed: {err.name()}: {err.str()}", file=sys.stderr)


class _Reachability:
    """Gives up when no broker has answered ``UNREACHABLE_AFTER_S`` after the first record was
    queued: one metadata request a second (cheap, and only while nothing was delivered)."""

    def __init__(self, producer: Any, counts: _Counts, bootstrap: str) -> None:
        self.producer = producer
        self.counts = counts
        self.bootstrap = bootstrap
        self.first_send: float | None = None
        self.reached = False
        self.last_probe = 0.0

    def check(self) -> None:
        if self.reached or self.first_send is None or self.counts.delivered or self.counts.failed:
            return
        now = time.monotonic()
        if now - self.first_send < UNREACHABLE_AFTER_S or now - self.last_probe < 1.0:
            return
        from confluent_kafka import KafkaException

        self.last_probe = now
        try:
            self.producer.list_topics(timeout=1.0)
            self.reached = True
            return
        except KafkaException:
            pass
        self.counts.aborted = True
        self.producer.purge()
        self.producer.flush(0)
        raise ToolError(f"{unreachable_hint(self.bootstrap)}; {self.counts.sent} record(s) not sent")


def cmd_produce(args: argparse.Namespace) -> int:
    props = parse_kv_list(args.property, "--property")
    if args.headers_separator is not None:
        props["headers.separator"] = args.headers_separator
    fmt = LineFormat.from_properties(props)
    check_bootstrap(args.bootstrap_server)
    conf = client_config(args, base={"acks": args.acks, "compression.type": args.compression_type,
                                     "message.timeout.ms": DELIVERY_TIMEOUT_MS})
    return produce_lines(args, fmt, conf, sys.stdin.buffer)


def produce_lines(args: argparse.Namespace, fmt: LineFormat, conf: ClientConfig, stdin: BinaryIO) -> int:
    from confluent_kafka import Producer

    producer = open_client(Producer, conf, args.bootstrap_server)
    counts = _Counts()
    reach = _Reachability(producer, counts, args.bootstrap_server)
    show_progress = args.progress_interval > 0 and not stdin.isatty()
    started = last_status = time.monotonic()
    parse_error: str | None = None
    try:
        for lineno, raw in enumerate(stdin, 1):
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if line.endswith(b"\r"):
                line = line[:-1]
            try:
                key, value, headers = fmt.parse(line, lineno)
            except LineParseError as e:
                parse_error = str(e)
                break
            if reach.first_send is None:
                reach.first_send = time.monotonic()
            _send(producer, args.topic, key, value, headers, partial(_on_delivery, counts, lineno), counts, lineno,
                  reach)
            if args.sync:
                while producer.flush(1.0) > 0:
                    reach.check()
            if show_progress and time.monotonic() - last_status >= args.progress_interval:
                last_status = time.monotonic()
                _status(counts, started)
        while producer.flush(1.0) > 0:
            reach.check()
            if show_progress and time.monotonic() - last_status >= args.progress_interval:
                last_status = time.monotonic()
                _status(counts, started)
    except KeyboardInterrupt:
        left = producer.flush(5.0)
        print(f"interrupted: {counts.delivered} records delivered, {left} not confirmed", file=sys.stderr)
        return 130
    if show_progress and time.monotonic() - started >= args.progress_interval:
        _status(counts, started)
    if parse_error is not None:
        raise ToolError(f"{parse_error} (records before it were sent; "
                        "--property ignore.error=true sends such lines with what could be parsed)")
    if counts.failed:
        raise ToolError(f"{counts.failed} of {counts.sent} records failed")
    return 0


def _send(producer: Any, topic: str, key: bytes | None, value: bytes | None, headers: list[Header],
          callback: Any, counts: _Counts, lineno: int, reach: _Reachability) -> None:
    from confluent_kafka import KafkaException

    while True:
        try:
            producer.produce(topic, value, key, headers=headers or None, on_delivery=callback)
        except BufferError:
            # The local queue is full: serve delivery reports until there is room.
            producer.poll(0.1)
            reach.check()
            continue
        except KafkaException as e:
            counts.sent += 1
            counts.failed += 1
            err = e.args[0]
            print(f"error: line {lineno}: {err.name()}: {err.str()}", file=sys.stderr)
            return
        counts.sent += 1
        producer.poll(0)
        return


def _status(counts: _Counts, started: float) -> None:
    elapsed = max(time.monotonic() - started, 1e-9)
    print(f"produce: {counts.sent} sent, {counts.delivered} delivered, {counts.failed} failed "
          f"({counts.delivered / elapsed:.0f} records/s)", file=sys.stderr, flush=True)
