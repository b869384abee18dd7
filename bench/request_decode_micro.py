"""Micro-benchmark of request decoding: header parse + schema check + kio decode, per frame.

The frames are what clients send most: a Produce (librdkafka's v9+ layout: one topic, one
partition, one 16 KiB batch of 100-byte records), a Fetch (one topic, one partition, as a
consumer's steady-state fetch) and a wide Fetch (10 topics x 10 partitions). Figures:
requests/s decoded as before the frame check existed (``codec.parse_header`` + kio's reader),
requests/s through ``codec.parse_header`` + ``codec.decode_request`` (which runs the check,
``strom.core.protocol.frame_check``, before kio), and the check alone in microseconds.

    python bench/request_decode_micro.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import datetime
import io
import struct
import time
import uuid
from collections.abc import Callable
from typing import Any

from kio.index import load_request_schema
from kio.serial import entity_reader, entity_writer

from strom.core.protocol import codec
from strom.core.protocol.frame_check import check_request
from strom.core.records.builder import SimpleRecord, build_batch


def _module(api_key: int, version: int) -> Any:
    import sys

    return sys.modules[load_request_schema(api_key, version).__module__]


def _frame(entity: Any) -> bytes:
    body = io.BytesIO()
    entity_writer(type(entity))(body, entity)
    cid = b"rdkafka"
    header = struct.pack(">hhih", int(entity.__api_key__), int(entity.__version__), 1, len(cid)) + cid
    return header + (b"\x00" if entity.__flexible__ else b"") + body.getvalue()


def produce_frame(version: int = 9) -> bytes:
    m = _module(0, version)
    batch = build_batch([SimpleRecord(b"key-%06d" % i, b"x" * 81) for i in range(160)])
    return _frame(m.ProduceRequest(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
        topic_data=(m.TopicProduceData(name="orders", partition_data=(
            m.PartitionProduceData(index=0, records=batch),)),)))


def fetch_frame(version: int = 12, topics: int = 1, partitions: int = 1) -> bytes:
    m = _module(1, version)
    kw: dict[str, Any] = {}
    fields = set(m.FetchTopic.__dataclass_fields__)
    parts = tuple(m.FetchPartition(partition=p, current_leader_epoch=0, fetch_offset=12345, last_fetched_epoch=-1,
                                   log_start_offset=-1, partition_max_bytes=1 << 20) for p in range(partitions))
    tops = []
    for t in range(topics):
        kw = {"topic_id": uuid.uuid4()} if "topic_id" in fields else {"topic": f"orders-{t}"}
        tops.append(m.FetchTopic(partitions=parts, **kw))
    return _frame(m.FetchRequest(
        max_wait=datetime.timedelta(milliseconds=500), min_bytes=1, max_bytes=50 << 20, isolation_level=1,
        session_id=0, session_epoch=-1, topics=tuple(tops), forgotten_topics_data=(), rack_id=""))


def rate(fn: Callable[[], object], seconds: float) -> float:
    fn()
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(100):
            fn()
        n += 100
        if time.perf_counter() >= deadline:
            break
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    args = parser.parse_args()
    cases = [
        ("Produce v9, 1 partition, 16 KiB batch", produce_frame(9)),
        ("Fetch v12, 1 partition", fetch_frame(12)),
        ("Fetch v15, 100 partitions (topic ids)", fetch_frame(15, topics=10, partitions=10)),
    ]
    print(f"{'frame':<40} {'bytes':>7} {'before/s':>10} {'after/s':>10} {'check us':>9}")
    for label, frame in cases:
        header, pos = codec.parse_header(frame)
        reader = entity_reader(load_request_schema(header.api_key, header.api_version))
        flexible = codec.is_flexible(header.api_key, header.api_version)

        def before(frame: bytes = frame, reader: Any = reader, flexible: bool = flexible) -> object:
            # What decode_request did before the check: header, header tags, kio.
            _h, p = codec.parse_header(frame)
            return reader(frame, p + 1 if flexible else p)

        def after(frame: bytes = frame) -> object:
            h, p = codec.parse_header(frame)
            return codec.decode_request(h, frame, p)

        def check_only(frame: bytes = frame, key: int = header.api_key, version: int = header.api_version,
                       pos: int = pos) -> object:
            return check_request(key, version, frame, pos)

        r_before = rate(before, args.seconds)
        r_after = rate(after, args.seconds)
        check_us = 1e6 / rate(check_only, args.seconds)
        print(f"{label:<40} {len(frame):>7} {r_before:>10,.0f} {r_after:>10,.0f} {check_us:>9.2f}")

if __name__ == "__main__":
    main()
