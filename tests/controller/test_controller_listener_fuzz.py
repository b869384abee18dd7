"""A bounded fuzz slice on the controller listener (20,000 frames, ~3 s): mutated frames of every API and version it
advertises (BrokerRegistration, BrokerHeartbeat, ApiVersions and the admin APIs Kafka's
controller serves too; strom.core.protocol.fuzz's mutations of valid seeds), plus issue 20's
20-byte killers and broker-listener APIs, which the controller listener refuses by closing the
connection. After it the node is alive, logged no
ERROR or traceback, every answer carried its correlation id, and both listeners still answer
ApiVersions (tests/faults/test_fuzz_protocol.py is the broker listener's slice).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_lifecycle_kit import controller_bootstrap
from kafka_wire import connect, wait_closed

from strom.core.protocol import fuzz, fuzz_harness
from strom.core.protocol.fuzz_harness import LogTap
from strom.core.testing import BrokerProcess

FRAMES = 20_000
MAX_SECONDS = 15.0
RUN_SEED = 62


@pytest.fixture
def fuzz_node(tmp_path: Path) -> Iterator[tuple[BrokerProcess, LogTap]]:
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "broker.session.timeout.ms": "2000"}
    with fuzz_harness.fuzz_broker(tmp_path / "data", config) as started:
        yield started


def test_fuzzed_controller_requests_do_not_hurt_the_node(fuzz_node: tuple[BrokerProcess, LogTap]) -> None:
    broker, tap = fuzz_node
    controller = controller_bootstrap(broker)
    versions, seeds = fuzz_harness.seeds_for(controller, "fuzz", b"fuzz-value")
    assert {18, 55, 62, 63} <= set(versions) and 3 not in versions
    # Seeds of APIs the controller listener does not serve (Metadata, Produce, Fetch, group
    # APIs...): each closes its connection.
    _, broker_seeds = fuzz_harness.seeds_for(broker.bootstrap, "fuzz", b"fuzz-value")
    refused = [s for s in broker_seeds if s.api_key not in versions][::8]
    # The minimal BrokerRegistration v2-v4 seeds carry a null LogDirs, which is not nullable:
    # the connection is closed, as Kafka's reader refuses it.
    assert fuzz.send_seeds(controller, seeds) >= len(seeds) * 0.9, "valid seeds went unanswered"

    started = time.monotonic()
    stats = fuzz.run(controller, FRAMES, seeds=[*seeds, *refused], versions=versions, seed=RUN_SEED,
                     max_seconds=MAX_SECONDS, concurrency=8, stop=lambda: not broker.alive)
    summary = (f"{stats.sent} frames in {time.monotonic() - started:.0f} s: {stats.answered} answered, "
               f"{stats.closed} closed, {stats.unanswered} unanswered; {stats.by_kind}")
    assert not (harm := fuzz_harness.harm(broker, tap, stats, summary)), "\n".join(harm)
    assert stats.sent >= 2_000, summary
    assert stats.answered > 200 and stats.closed > 200, summary

    for name, (api_key, version) in sorted(fuzz.KILLERS.items()):
        with connect(controller) as sock:
            sock.sendall(fuzz.killer_frame(api_key, version))
            assert wait_closed(sock), f"the {name} killer's connection stayed open"
        assert broker.alive, f"the {name} killer killed the node"
    assert fuzz.api_versions(controller) == versions
    assert 3 in fuzz.api_versions(broker.bootstrap) and 62 not in fuzz.api_versions(broker.bootstrap)
    assert not tap.bad, "\n".join(tap.bad[:30])
