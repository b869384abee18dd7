"""Line formats of the console tools: Kafka's LineMessageReader and DefaultMessageFormatter rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

import pytest

from strom.core.tools.common import UsageError
from strom.core.tools.consume import RecordFormat, parse_offset
from strom.core.tools.produce import LineFormat, LineParseError
from strom.core.tools.topics import split_config_assignments


def test_plain_lines_are_values() -> None:
    fmt = LineFormat.from_properties({})
    assert fmt.parse(b"hello\tworld:x", 1) == (None, b"hello\tworld:x", [])
    assert fmt.parse(b"", 1) == (None, b"", [])


def test_key_separator_splits_at_the_first_occurrence() -> None:
    fmt = LineFormat.from_properties({"parse.key": "true", "key.separator": ":"})
    assert fmt.parse(b"k1:v:1", 1) == (b"k1", b"v:1", [])
    assert fmt.parse(b":v", 1) == (b"", b"v", [])
    with pytest.raises(LineParseError, match="line 7"):
        fmt.parse(b"no-separator", 7)


def test_ignore_error_sends_the_whole_line_as_value() -> None:
    fmt = LineFormat.from_properties({"parse.key": "true", "ignore.error": "true"})
    assert fmt.parse(b"just a value", 1) == (None, b"just a value", [])


def test_headers_then_key_then_value() -> None:
    fmt = LineFormat.from_properties({"parse.headers": "true", "parse.key": "true", "key.separator": "|"})
    key, value, headers = fmt.parse(b"h1:v1,h2:v2\tk|the value", 1)
    assert (key, value) == (b"k", b"the value")
    assert headers == [("h1", b"v1"), ("h2", b"v2")]


def test_custom_header_separators_and_null_marker() -> None:
    fmt = LineFormat.from_properties({
        "parse.headers": "true", "headers.delimiter": "#", "headers.separator": ";",
        "headers.key.separator": "=", "parse.key": "true", "key.separator": ",", "null.marker": "<null>"})
    key, value, headers = fmt.parse(b"a=1;b=<null>#<null>,v", 3)
    assert key is None and value == b"v"
    assert headers == [("a", b"1"), ("b", None)]
    _, value, _ = fmt.parse(b"a=1#k,<null>", 4)
    assert value is None
    with pytest.raises(LineParseError, match="null marker"):
        fmt.parse(b"<null>=x#k,v", 5)


def test_header_without_key_separator() -> None:
    fmt = LineFormat.from_properties({"parse.headers": "true"})
    with pytest.raises(LineParseError, match="line 2"):
        fmt.parse(b"lonely\tvalue", 2)
    lenient = LineFormat.from_properties({"parse.headers": "true", "ignore.error": "true"})
    assert lenient.parse(b"lonely\tvalue", 2) == (None, b"value", [("lonely", None)])


def test_empty_header_section_means_no_headers() -> None:
    fmt = LineFormat.from_properties({"parse.headers": "true"})
    assert fmt.parse(b"\tvalue", 1) == (None, b"value", [])


def test_bad_producer_properties() -> None:
    with pytest.raises(UsageError, match=r"parse\.keys"):
        LineFormat.from_properties({"parse.keys": "true"})
    with pytest.raises(UsageError, match=r"key\.separator"):
        LineFormat.from_properties({"key.separator": ""})


class Rec(TypedDict):
    """RecordFormat.format's arguments."""

    partition: int
    offset: int
    timestamp: tuple[int, int]
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] | None


REC: Rec = {"partition": 2, "offset": 41, "timestamp": (1, 1700000000123), "key": b"k", "value": b"v",
            "headers": [("h", b"1"), ("n", None)]}


def test_default_output_is_the_value() -> None:
    assert RecordFormat.from_properties({}).format(**REC) == b"v\n"


def test_all_columns_in_kafkas_order() -> None:
    fmt = RecordFormat.from_properties({p: "true" for p in (
        "print.timestamp", "print.partition", "print.offset", "print.headers", "print.key")})
    assert fmt.format(**REC) == (
        b"CreateTime:1700000000123\tPartition:2\tOffset:41\th:1,n:null\tk\tv\n")


def test_separators_null_literal_and_missing_parts() -> None:
    fmt = RecordFormat.from_properties({"print.key": "true", "print.headers": "true", "print.timestamp": "true",
                                        "key.separator": " | ", "null.literal": "NULL",
                                        "line.separator": "\\n--\\n"})
    out = fmt.format(partition=0, offset=0, timestamp=(0, -1), key=None, value=None, headers=None)
    assert out == b"NO_TIMESTAMP | NO_HEADERS | NULL | NULL\n--\n"
    out = fmt.format(partition=0, offset=0, timestamp=(2, 5), key=b"a", value=b"b", headers=[])
    assert out == b"LogAppendTime:5 | NO_HEADERS | a | b\n--\n"


def test_print_value_false() -> None:
    fmt = RecordFormat.from_properties({"print.key": "true", "print.value": "false"})
    assert fmt.format(**REC) == b"k\n"


def test_offsets() -> None:
    assert parse_offset("earliest") == "earliest"
    assert parse_offset("17") == 17
    for bad in ("-1", "first", ""):
        with pytest.raises(UsageError):
            parse_offset(bad)


def test_config_assignments_with_lists() -> None:
    assert split_config_assignments("a=1,b=[x,y],c=", "--add-config") == [("a", "1"), ("b", "x,y"), ("c", "")]
    with pytest.raises(UsageError, match="--add-config"):
        split_config_assignments("a=[1,2", "--add-config")
    with pytest.raises(UsageError, match="key=value"):
        split_config_assignments("novalue", "--add-config")


def test_topic_ids_print_in_kafkas_url_safe_base64() -> None:
    from confluent_kafka import Uuid

    from strom.core.tools.topics import kafka_uuid

    # librdkafka's str() would give '//////////9//////////w'.
    assert kafka_uuid(Uuid(-1, 0x7FFFFFFFFFFFFFFF)) == "__________9__________w"
    assert kafka_uuid(Uuid(123, 456)) == "AAAAAAAAAHsAAAAAAAAByA"
