"""Client quota accuracy: a greedy confluent-kafka producer against a producer_byte_rate quota,
on strom and on Apache Kafka 4.3.1, with the same windows.

For each broker (``--brokers strom,kafka``, each started fresh with ``quota.window.num`` and
``quota.window.size.seconds`` from ``--window-num`` / ``--window-size``) the quota
``producer_byte_rate=--rate`` is set on a client id (AlterClientQuotas), then a producer with
that client id sends ``--value``-byte records as fast as it is let for ``--seconds``. Printed
per broker: the rate over the run after ``--settle`` seconds, the lowest and highest rate of any
5 s stretch in it (Kafka's windowed rate holds the average over its window; a greedy client is
bursty within it), the throttle reports the client got, and the ratio of each to the quota.
``tests/security/test_quotas_rate.py`` asserts the ±20 % of the issue on a short run.

Run: ``python bench/quota_rate.py [--brokers strom,kafka] [--rate 200000] [--seconds 30]
[--window-num 11] [--window-size 1] [--value 4000] [--batch 1]``.
"""

from __future__ import annotations

import argparse
import io
import socket
import struct
import sys
import time
import uuid
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest, EntityData, EntryData, OpData
from kio.serial import entity_writer
from kio.static.primitive import f64
from peers import StromBroker, load_kafka_ref


def set_quota(bootstrap: str, client_id: str, rate: float) -> None:
    """AlterClientQuotas v1 (no admin client of confluent-kafka has it) on a raw socket."""
    req = AlterClientQuotasRequest(entries=(EntryData(
        entity=(EntityData(entity_type="client-id", entity_name=client_id),),
        ops=(OpData(key="producer_byte_rate", value=f64(rate), remove=False),)),), validate_only=False)
    body = io.BytesIO()
    entity_writer(AlterClientQuotasRequest)(body, req)
    cid = b"quota-bench"
    header = struct.pack(">hhih", 49, 1, 1, len(cid)) + cid + b"\x00"
    payload = header + body.getvalue()
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", _recv(sock, 4))
        answer = _recv(sock, size)
    # correlation id, header tags, throttle time, entries count (varint 2 = one), error code
    error = struct.unpack_from(">h", answer, 4 + 1 + 4 + 1)[0]
    if error:
        raise RuntimeError(f"AlterClientQuotas failed with error code {error}")


def _recv(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise RuntimeError("connection closed")
        out += chunk
    return out


def run(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    client = f"bench-{uuid.uuid4().hex[:6]}"
    topic = f"quota-bench-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    set_quota(bootstrap, client, args.rate)  # answered once committed; the settling covers the rest
    delivered: list[tuple[float, int]] = []
    throttles: list[float] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            delivered.append((time.monotonic(), args.value))

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client, "linger.ms": 1,
                         "batch.size": args.value * args.batch + 200, "queue.buffering.max.kbytes": 1024,
                         "acks": 1, "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    value = b"q" * args.value
    began = time.monotonic()
    end = began + args.seconds
    while time.monotonic() < end:
        try:
            producer.produce(topic, value, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.purge(in_queue=True, in_flight=False)
    producer.flush(60)
    start = began + args.settle
    total = sum(n for t, n in delivered if start <= t < end)
    stretches = [sum(n for t, n in delivered if a <= t < a + 5) / 5 for a in range(int(start), int(end) - 4)]
    return {"rate": total / (end - start), "min5": min(stretches, default=0.0), "max5": max(stretches, default=0.0),
            "throttles": len(throttles), "max_throttle_ms": max(throttles, default=0.0) * 1000}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default="strom,kafka")
    parser.add_argument("--rate", type=float, default=200_000.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--window-num", type=int, default=11)
    parser.add_argument("--window-size", type=int, default=1)
    parser.add_argument("--value", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=1, help="records a request at most")
    args = parser.parse_args(argv)
    config = {"quota.window.num": str(args.window_num), "quota.window.size.seconds": str(args.window_size)}
    results: dict[str, dict[str, Any]] = {}
    for name in args.brokers.split(","):
        if name == "strom":
            strom = StromBroker(config=config).start()
            try:
                results[name] = run(strom.bootstrap, args)
            finally:
                strom.stop()
        elif name == "kafka":
            with load_kafka_ref().KafkaRef(config=config) as ref:
                results[name] = run(ref.bootstrap, args)
        else:
            raise SystemExit(f"unknown broker {name!r} (strom, kafka)")
    print(f"producer_byte_rate={args.rate:.0f} B/s, {args.value} B records, <= {args.batch} a request, "
          f"{args.seconds:.0f} s ({args.settle:.0f} s settling), quota window {args.window_num} x "
          f"{args.window_size} s")
    print(f"{'broker':<8} {'rate B/s':>10} {'x quota':>8} {'min 5 s':>10} {'max 5 s':>10} {'throttles':>10} "
          f"{'max ms':>8}")
    for name, r in results.items():
        print(f"{name:<8} {r['rate']:10.0f} {r['rate'] / args.rate:8.3f} {r['min5']:10.0f} {r['max5']:10.0f} "
              f"{r['throttles']:10d} {r['max_throttle_ms']:8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
