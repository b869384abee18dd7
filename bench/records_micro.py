"""Micro-benchmark of the produce hot path in strom.core.records.

Validates and assigns offsets to 1 MiB uncompressed batches of 100-byte records and compares
the throughput with plain ``crc32c`` over the same bytes, the floor any validation must pay.
Also shows LogAppendTime (a second CRC pass) and a zstd batch (decompress + walk records).

Every line also gives the cost per million records (seconds of one CPU): the record walk of
Kafka's LogValidator (issue 20) is per-record work, so this is the figure that matters for small
records. ``python walk`` is the reference walk alone (the Python transcription of Kafka's
DefaultRecord reader), what every record would cost without aiokafka's compiled reader.

    python bench/records_micro.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import crc32c

from strom.core.records.builder import SimpleRecord, build_batch, now_ms
from strom.core.records.validate import _walk_records, assign_offsets, validate_produce_batches

MIB = 1 << 20
HOUR = 3_600_000


def make_batch(target: int, record_size: int, compression: int = 0) -> bytes:
    ts = now_ms()
    # ~9 bytes of varints/attributes per record + a 10-byte key: the rest is value.
    value = b"x" * (record_size - 19)
    count = (target - 61) // record_size
    recs = [SimpleRecord(b"key-%06d" % i, value, (), ts) for i in range(count)]
    return build_batch(recs, compression=compression)


def run(label: str, nbytes: int, fn: Callable[[], object], seconds: float, records: int) -> float:
    fn()  # warm up
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        fn()
        n += 1
        if n % 8 == 0 and time.perf_counter() >= deadline:
            break
    elapsed = time.perf_counter() - start
    mbps = n * nbytes / elapsed / MIB
    per_million = elapsed / (n * records) * 1e6
    print(f"{label:<44} {mbps:>10.1f} MB/s {n / elapsed:>10.1f} batches/s {per_million:>8.3f} s/M records")
    return mbps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    args = parser.parse_args()

    raw = make_batch(MIB, 100)
    buf = bytearray(raw)
    now = now_ms()
    positions = validate_produce_batches(buf, max_batch_bytes=2 * MIB, compacted=False, now_ms=now)
    count = positions[0][1].records_count
    print(f"batch: {len(raw)} bytes, {count} records of ~100 bytes")

    view = memoryview(buf)
    floor = run("raw crc32c over the batch (the floor)", len(raw),
                lambda: crc32c.crc32c(view[21:]), args.seconds, count)

    zero = bytes(8)

    def validate_assign() -> None:
        buf[0:8] = zero  # a produce request brings base offset 0; assign_offsets overwrote it
        pos = validate_produce_batches(buf, max_batch_bytes=2 * MIB, compacted=False, now_ms=now)
        assign_offsets(buf, pos, 1000, 1, None)

    ours = run("validate + assign_offsets (CreateTime)", len(raw), validate_assign, args.seconds, count)

    def validate_assign_lat() -> None:
        buf[0:8] = zero
        pos = validate_produce_batches(buf, max_batch_bytes=2 * MIB, compacted=False, now_ms=now,
                                       log_append_time=True)
        assign_offsets(buf, pos, 1000, 1, now)

    run("validate + assign_offsets (LogAppendTime)", len(raw), validate_assign_lat, args.seconds, count)
    buf[:] = raw  # back to the client's bytes (CreateTime, base offset 0)

    def validate_compacted() -> None:
        validate_produce_batches(buf, max_batch_bytes=2 * MIB, compacted=True, now_ms=now)

    run("validate, compacted topic", len(raw), validate_compacted, args.seconds, count)

    base_ts = positions[0][1].base_timestamp

    def python_walk() -> None:
        _walk_records(buf, 61, len(buf), count, base_ts, True, now, now - HOUR, now + HOUR, False, "t-0")

    run("python walk alone (reference, no aiokafka)", len(raw), python_walk, args.seconds, count)

    zraw = make_batch(MIB, 100, compression=4)

    def validate_zstd() -> None:
        validate_produce_batches(zraw, max_batch_bytes=2 * MIB, compacted=False, now_ms=now)

    run(f"validate zstd batch ({len(zraw)} B on the wire)", len(raw), validate_zstd, args.seconds, count)
    print(f"ratio validate+assign / raw crc32c: {ours / floor:.2f}")


if __name__ == "__main__":
    main()
