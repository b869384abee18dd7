"""What TLS (and SASL_SSL) costs: produce and consume MiB/s over PLAINTEXT vs SSL on one broker.

One strom broker (a fresh data dir) with three listeners: PLAINTEXT, SSL (a throwaway CA and
server certificate, made here with ``cryptography``) and SASL_SSL (SCRAM-SHA-256; the user is
created with AlterUserScramCredentials). For each listener confluent-kafka produces ``--mib`` MiB
of ``--size``-byte records to its own topic (acks=1, linger.ms=5, batch.size=1 MiB, no
compression) and a consumer with assigned partitions reads them back. Listeners take turns in
ABBA order (plaintext, ssl, sasl_ssl, sasl_ssl, ssl, plaintext) so slow drift of the shared
machine hits each equally; each rate is total bytes / total time over its two runs. Printed: MiB/s
per listener and phase, and each secure listener's share of PLAINTEXT's rate.

Run: ``python bench/tls_throughput.py [--mib 256] [--size 10240] [--partitions 3]``.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from strom.core.testing import BrokerProcess, wait_for

MIB = 1 << 20
PRODUCER = {"acks": 1, "linger.ms": 5, "batch.size": 1048576, "compression.type": "none",
            "queue.buffering.max.kbytes": 1048576}


def make_certs(directory: Path) -> tuple[Path, Path]:
    """(CA certificate, server key store: key + chain) for 127.0.0.1."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False).sign(ca_key, hashes.SHA256()))
    ca_path, keystore = directory / "ca.pem", directory / "server.keystore.pem"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    keystore.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption())
                         + cert.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(serialization.Encoding.PEM))
    return ca_path, keystore


def produce(config: dict[str, Any], topic: str, records: int, size: int, partitions: int) -> float:
    """Seconds to produce and acknowledge ``records`` values of ``size`` bytes."""
    failures: list[str] = []
    producer = Producer({**config, **PRODUCER, "delivery.report.only.error": True,
                         "on_delivery": lambda err, _msg: failures.append(str(err))})
    producer.list_topics(topic, timeout=30)
    payload = os.urandom(size)
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, payload, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(300)
    elapsed = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{len(failures)} records failed: {failures[:3]}")
    return elapsed


def consume(config: dict[str, Any], topic: str, records: int, partitions: int) -> float:
    consumer = Consumer({**config, "group.id": f"bench-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    try:
        consumer.list_topics(topic, timeout=30)
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got = 0
        deadline = time.monotonic() + 600
        while got < records and time.monotonic() < deadline:
            got += sum(1 for m in consumer.consume(min(10_000, records - got), 0.5) if m.error() is None)
        if got < records:
            raise RuntimeError(f"consumed {got} of {records}")
        return time.perf_counter() - start
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mib", type=int, default=256, help="MiB produced per run (default 256)")
    p.add_argument("--size", type=int, default=10240, help="record value bytes (default 10240)")
    p.add_argument("--partitions", type=int, default=3)
    args = p.parse_args(argv)
    records = args.mib * MIB // args.size
    with tempfile.TemporaryDirectory(prefix="tls-bench-") as tmp:
        ca, keystore = make_certs(Path(tmp))
        config = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                  "ssl.keystore.location": str(keystore), "sasl.enabled.mechanisms": "SCRAM-SHA-256"}
        with BrokerProcess(config=config) as broker:
            ports = dict(wait_for(lambda: {m.group(1): int(m.group(2)) for m in re.finditer(
                r"listening on (\w+)://[^:]+:(\d+) ", broker.log_text())}, timeout=30, what="listener ports"))
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
            for future in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                    "bench", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bench-secret")]).values():
                future.result(30)
            clients: dict[str, dict[str, Any]] = {
                "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"},
                "SSL": {"bootstrap.servers": f"127.0.0.1:{ports['SSL']}", "security.protocol": "SSL",
                        "ssl.ca.location": str(ca)},
                "SASL_SSL": {"bootstrap.servers": f"127.0.0.1:{ports['SASL_SSL']}", "security.protocol": "SASL_SSL",
                             "ssl.ca.location": str(ca), "sasl.mechanism": "SCRAM-SHA-256",
                             "sasl.username": "bench", "sasl.password": "bench-secret"},
            }
            order = ["PLAINTEXT", "SSL", "SASL_SSL", "SASL_SSL", "SSL", "PLAINTEXT"]
            topics = [NewTopic(f"bench-{i}-{uuid.uuid4().hex[:6]}", args.partitions, 1) for i in range(len(order))]
            for future in admin.create_topics(topics).values():
                future.result(30)
            totals: dict[tuple[str, str], float] = {}
            for name, topic in zip(order, topics, strict=True):
                t_produce = produce(clients[name], topic.topic, records, args.size, args.partitions)
                t_consume = consume(clients[name], topic.topic, records, args.partitions)
                print(f"{name:<10} produce {args.mib / t_produce:8.1f} MiB/s   consume {args.mib / t_consume:8.1f} MiB/s",
                      file=sys.stderr, flush=True)
                totals[(name, "produce")] = totals.get((name, "produce"), 0.0) + t_produce
                totals[(name, "consume")] = totals.get((name, "consume"), 0.0) + t_consume
    print(f"{records} records x {args.size} B = {args.mib} MiB per run, {args.partitions} partitions, "
          "2 runs per listener (ABBA)")
    print(f"{'listener':<10} {'produce MiB/s':>14} {'consume MiB/s':>14} {'produce x':>10} {'consume x':>10}")
    for name in ("PLAINTEXT", "SSL", "SASL_SSL"):
        rates = {phase: 2 * args.mib / totals[(name, phase)] for phase in ("produce", "consume")}
        base = {phase: 2 * args.mib / totals[("PLAINTEXT", phase)] for phase in ("produce", "consume")}
        print(f"{name:<10} {rates['produce']:14.1f} {rates['consume']:14.1f} "
              f"{rates['produce'] / base['produce']:10.2f} {rates['consume'] / base['consume']:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
