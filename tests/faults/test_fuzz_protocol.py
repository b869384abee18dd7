"""The protocol fuzzer's CI slice: tens of thousands of mutated requests to a real broker process.

Seeds are valid requests of every API and version the broker advertises in ApiVersions; each
frame is one seed with one mutation (strom.core.protocol.fuzz: bit flips, truncation, extreme
and negative lengths, nulls where not nullable, bad varints, unknown tagged fields, extreme
integers, wrong versions, corrupt headers), sent over 16 concurrent connections. The run is
bounded to ~45 s; bench/fuzz_protocol.py runs the full million.

After it: the broker is alive, answered and closed connections both happened, every answer
carried its request's correlation id, the broker logged no traceback and no ERROR (a handler
that raises on a decoded-but-odd value logs an ERROR), a confluent-kafka producer and consumer
still round-trip, and issue 20's 20-byte killers close only their own connection.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ck_helpers import make_producer, produce_all, read_partition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_wire import connect, roundtrip, wait_closed
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from strom.core.protocol import fuzz, fuzz_harness
from strom.core.protocol.fuzz_harness import LogTap
from strom.core.testing import BrokerProcess

TOPIC = "fuzz"
FRAMES = 40_000
MAX_SECONDS = 45.0
RUN_SEED = 20  # frame i of this run is always the same bytes: fuzz.Mutator(seeds, RUN_SEED, versions).frame(i)


@pytest.fixture
def fuzz_broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, LogTap]]:
    with fuzz_harness.fuzz_broker(tmp_path / "data") as started:
        yield started


def _api_versions_ok(sock: socket.socket, correlation_id: int) -> None:
    resp = roundtrip(sock, ApiVersionsRequest(client_software_name="strom-tests", client_software_version="1"),
                     correlation_id=correlation_id)
    assert int(resp.error_code) == 0


@pytest.mark.slow  # 19-31 s on the 2-CPU machine (40,000 frames, bounded to 45 s)
def test_fuzzed_requests_do_not_hurt_the_broker(fuzz_broker: tuple[BrokerProcess, LogTap]) -> None:
    broker, tap = fuzz_broker
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    versions, seeds = fuzz_harness.seeds_for(broker.bootstrap, TOPIC, b"fuzz-value-" * 8)
    assert {0, 1, 3, 18} <= set(versions)
    assert len(seeds) == 2 * sum(hi - lo + 1 for lo, hi in versions.values())
    assert fuzz.send_seeds(broker.bootstrap, seeds) > len(seeds) * 0.9, "valid seeds went unanswered"

    started = time.monotonic()
    stats = fuzz.run(broker.bootstrap, FRAMES, seeds=seeds, versions=versions, seed=RUN_SEED,
                     max_seconds=MAX_SECONDS, stop=lambda: not broker.alive)
    summary = (f"{stats.sent} frames in {time.monotonic() - started:.0f} s: {stats.answered} answered, "
               f"{stats.closed} closed, {stats.unanswered} unanswered; {stats.by_kind}")

    assert not (harm := fuzz_harness.harm(broker, tap, stats, summary)), "\n".join(harm)
    assert stats.sent >= 10_000, summary
    assert stats.answered > 1000 and stats.closed > 1000, summary

    # A real client is served as before, on a topic of its own (a fuzzed DeleteTopics or
    # DeleteRecords may have removed or emptied the seeds' topic, as it would on Kafka).
    admin.create_topics([NewTopic("after-the-fuzz", 1, 1)])["after-the-fuzz"].result(30)
    producer = make_producer(broker.bootstrap)
    [rec] = produce_all(producer, "after-the-fuzz", [{"value": b"after-the-fuzz"}])
    [msg] = read_partition(broker.bootstrap, "after-the-fuzz", 0, 1, rec.offset)
    assert msg.value() == b"after-the-fuzz"

    # Issue 20's killers: each closes its own connection, a bystander connection is still served.
    with connect(broker.bootstrap) as bystander:
        _api_versions_ok(bystander, 1)
        for n, (name, (api_key, version)) in enumerate(sorted(fuzz.KILLERS.items())):
            with connect(broker.bootstrap) as sock:
                sock.sendall(fuzz.killer_frame(api_key, version))
                assert wait_closed(sock), f"the {name} killer's connection stayed open"
            assert broker.alive, f"the {name} killer killed the broker"
            _api_versions_ok(bystander, 2 + n)
    assert not tap.bad, "\n".join(tap.bad[:30])
