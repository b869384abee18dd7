"""KIP-966's clean-shutdown broker epoch, end to end.

A clean stop writes ``{"version":0,"brokerEpoch":N}`` into ``.kafka_cleanshutdown`` of every log
dir, N the epoch of the broker's registration (Kafka's ``LogManager.shutdown(brokerEpoch)``).
The next start reads it back (Kafka's ``readBrokerEpochFromCleanShutdownFiles``: the epoch only
if every dir's marker holds the same readable one, else -1), deletes the marker before the logs
load (KAFKA-10471) and sends the epoch as the registration's PreviousBrokerEpoch. The
controller then runs ``handleBrokerShutdown``: clean (nothing to write, the controlled shutdown
already moved everything) or, after kill -9, unclean (with ELR on the broker leaves the ISR
and the ELR of its partitions, then is elected again as the last known leader).

Kafka 4.3.1 as the oracle (scripts/kafka_ref, one node, kafka-dump-log of its metadata log):
a clean stop writes ``{"version":0,"brokerEpoch":44}`` with 44 the RegisterBrokerRecord's
epoch; after kill -9 there is no marker, and the restart ends with both partitions of a topic
led by the node, ISR [1], leaderRecoveryState RECOVERING (1), ELR and LastKnownElr empty. With
``eligible.leader.replicas.version=0`` the partitions only lose their leader (ISR [1] kept) and
get it back at the unfencing, RECOVERED. A clean restart writes no shutdown record before the
RegisterBrokerRecord and elects the node from the ELR the controlled shutdown left.

The unit tests parse markers and run a LogManager on real dirs; the broker tests run ``strom
dev`` and read the metadata log it wrote.
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
from ck_helpers import create_topic, make_consumer, make_producer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from strom.core.config import BrokerConfig
from strom.core.errors import KafkaStorageError
from strom.core.log.manager import CLEAN_SHUTDOWN_FILE, LogManager, read_clean_shutdown_epoch
from strom.core.metadata.records import (
    BrokerRegistrationChangeRecord,
    Message,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    TopicRecord,
    decode_record,
)
from strom.core.raft.client import METADATA_PARTITION_DIR
from strom.core.records.builder import decode_records
from strom.core.testing import BrokerProcess, wait_for

ELR = "eligible.leader.replicas.version"
RECOVERING = 1
REGISTERED = "Successfully registered broker 1 with broker epoch "


# ----------------------------------------------------------------------------------------------
# the marker's content


@pytest.mark.parametrize(("text", "epoch"), [
    ('{"version":0,"brokerEpoch":44}', 44),  # what Kafka 4.3.1 wrote in the oracle run
    ('{"version": 0, "brokerEpoch": 8}', 8),  # what strom wrote before it matched Kafka's bytes
    ('{"version":0,"brokerEpoch":-1}', -1),  # a stop before any registration: clean, epoch unknown
    ('{"brokerEpoch":7,"version":3,"future":true}', 7),  # Kafka ignores version and unknown keys
    ('{"version":0,"brokerEpoch":9223372036854775807}', (1 << 63) - 1),
])
def test_a_marker_with_an_epoch_gives_it(tmp_path: Path, text: str, epoch: int) -> None:
    marker = tmp_path / CLEAN_SHUTDOWN_FILE
    marker.write_text(text)
    assert read_clean_shutdown_epoch(marker) == epoch


@pytest.mark.parametrize("text", ["", "\n", '{"version":0}', '{"version":0,"brokerEpoch":null}'])
def test_an_old_marker_has_no_epoch_and_is_no_warning(tmp_path: Path, text: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """Kafka < 3.6 (and strom before it wrote JSON) left an empty marker."""
    marker = tmp_path / CLEAN_SHUTDOWN_FILE
    marker.write_text(text)
    caplog.set_level(logging.INFO, logger="strom.core.log.manager")
    assert read_clean_shutdown_epoch(marker) is None
    assert [r.levelno for r in caplog.records] == [logging.INFO] and str(marker) in caplog.text


@pytest.mark.parametrize("text", ['{"version":0,"brokerEp', "garbage", "[44]", "null", '{"brokerEpoch":"44"}',
                                  '{"brokerEpoch":true}', '{"brokerEpoch":4.5}', '{"brokerEpoch":9223372036854775808}'])
def test_a_damaged_marker_is_a_warning_naming_the_file(tmp_path: Path, text: str,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    marker = tmp_path / CLEAN_SHUTDOWN_FILE
    marker.write_text(text)
    assert read_clean_shutdown_epoch(marker) is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(marker) in warnings[0], caplog.text


def test_undecodable_bytes_are_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    marker = tmp_path / CLEAN_SHUTDOWN_FILE
    marker.write_bytes(b'{"brokerEpoch":\xff\xfe}')
    assert read_clean_shutdown_epoch(marker) is None
    assert str(marker) in caplog.text and "WARNING" in [r.levelname for r in caplog.records]


def test_no_marker_is_no_epoch(tmp_path: Path) -> None:
    assert read_clean_shutdown_epoch(tmp_path / CLEAN_SHUTDOWN_FILE) is None


# ----------------------------------------------------------------------------------------------
# LogManager: the marker written, read back, deleted


def _config(dirs: list[Path]) -> BrokerConfig:
    return BrokerConfig.from_mapping({"log.dirs": ",".join(map(str, dirs)), "node.id": "1",
                                      "metadata.log.dir": str(dirs[0].parent / "meta")})


def _cycle(dirs: list[Path], epoch: int) -> None:
    """A life that ends in a clean shutdown with ``epoch``."""
    mgr = LogManager(dirs, _config(dirs))
    mgr.startup()
    mgr.get_or_create_log("t", 0)
    mgr.shutdown(epoch)


def _start(dirs: list[Path]) -> LogManager:
    mgr = LogManager(dirs, _config(dirs))
    mgr.startup()
    return mgr


def test_shutdown_writes_kafkas_bytes_and_the_next_start_reads_them(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    _cycle(dirs, 1234)
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).read_bytes() == b'{"version":0,"brokerEpoch":1234}'
    mgr = _start(dirs)
    try:
        assert mgr.previous_broker_epoch == 1234
        assert mgr.clean_shutdown_epochs == {d: 1234 for d in dirs}
        assert all(mgr.had_clean_shutdown.values())
        assert not [d for d in dirs if (d / CLEAN_SHUTDOWN_FILE).exists()]  # consumed
    finally:
        mgr.shutdown(5)
    # the markers were consumed: a life that ends without shutdown leaves none, whatever it held
    mgr = _start(dirs)
    assert mgr.previous_broker_epoch == 5
    mgr.release_locks()  # a crash: no shutdown, no marker
    mgr = _start(dirs)
    try:
        assert mgr.previous_broker_epoch == -1 and not any(mgr.had_clean_shutdown.values())
    finally:
        mgr.shutdown()


@pytest.mark.parametrize(("second", "why"), [
    (None, "Unable to read the broker epoch in"),  # this dir was not closed cleanly
    ("", "Unable to read the broker epoch in"),  # this dir's marker is from Kafka < 3.6
    ('{"version":0,"brokerEpoch":99}', "Found different broker epochs in"),
])
def test_every_dir_must_hold_the_same_epoch(tmp_path: Path, second: str | None, why: str,
                                            caplog: pytest.LogCaptureFixture) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    _cycle(dirs, 77)
    if second is None:
        (dirs[1] / CLEAN_SHUTDOWN_FILE).unlink()
    else:
        (dirs[1] / CLEAN_SHUTDOWN_FILE).write_text(second)
    caplog.set_level(logging.INFO, logger="strom.core.log.manager")
    mgr = _start(dirs)
    try:
        assert mgr.previous_broker_epoch == -1
        assert mgr.clean_shutdown_epochs[dirs[0]] == 77
        assert any(why in r.getMessage() and str(dirs[1]) in r.getMessage() for r in caplog.records), caplog.text
    finally:
        mgr.shutdown()


def test_a_damaged_marker_still_starts_without_an_epoch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dirs = [tmp_path / "d"]
    _cycle(dirs, 12)
    marker = dirs[0] / CLEAN_SHUTDOWN_FILE
    marker.write_bytes(b'{"version":0,"brokerEpo\x00\x00')
    mgr = _start(dirs)
    try:
        assert mgr.previous_broker_epoch == -1
        # The file exists, so Kafka counts the dir as cleanly shut down all the same.
        assert mgr.had_clean_shutdown[dirs[0]] and mgr.get_log("t", 0) is not None
        assert any(r.levelno == logging.WARNING and str(marker) in r.getMessage() for r in caplog.records)
        assert not marker.exists()
    finally:
        mgr.shutdown(13)
    assert json.loads(marker.read_text()) == {"version": 0, "brokerEpoch": 13}


def test_the_marker_is_gone_before_the_logs_load(tmp_path: Path) -> None:
    """KAFKA-10471: a start that dies while loading must not leave the marker for the next one,
    which would then skip recovery of files the failed load may have changed."""
    dirs = [tmp_path / "d"]
    _cycle(dirs, 3)
    # A segment that cannot be opened: loading t-0 fails with an OSError and the start is refused.
    segment = dirs[0] / "t-0" / "00000000000000000000.log"
    segment.unlink()
    segment.mkdir()
    mgr = LogManager(dirs, _config(dirs))
    with pytest.raises(KafkaStorageError):
        mgr.startup()
    mgr.release_locks()
    assert not (dirs[0] / CLEAN_SHUTDOWN_FILE).exists()


# ----------------------------------------------------------------------------------------------
# a real broker


def _metadata_records(data_dir: Path) -> list[Message]:
    """Every data record of the broker's metadata log, in order (read while it is stopped)."""
    out: list[Message] = []
    for path in sorted((data_dir / "metadata" / METADATA_PARTITION_DIR).glob("*.log")):
        for rec in decode_records(path.read_bytes()):
            if rec.value is not None and not rec.header.is_control:
                out.append(decode_record(rec.value))
    return out


def _registrations(records: list[Message]) -> list[int]:
    return [r.broker_epoch for r in records if isinstance(r, RegisterBrokerRecord) and r.broker_id == 1]


def _life_of(records: list[Message], epoch: int, topic_id: uuid.UUID,
             ) -> tuple[list[PartitionChangeRecord], list[PartitionChangeRecord]]:
    """The topic's partition changes (in the registration batch with ``epoch``, before its
    RegisterBrokerRecord: the controller's handleBrokerShutdown; from that registration until
    the broker was fenced or stopped leading at the end of that life)."""
    at = next(i for i, r in enumerate(records) if isinstance(r, RegisterBrokerRecord) and r.broker_epoch == epoch)
    start = at
    while start > 0 and isinstance(records[start - 1], PartitionChangeRecord):
        start -= 1

    def ends_life(r: Message) -> bool:
        return isinstance(r, BrokerRegistrationChangeRecord) and (r.in_controlled_shutdown == 1 or r.fenced == 1)

    end = next((i for i in range(at + 1, len(records)) if ends_life(records[i])), len(records))

    def ours(rs: list[Message]) -> list[PartitionChangeRecord]:
        return [r for r in rs if isinstance(r, PartitionChangeRecord) and r.topic_id == topic_id]

    return ours(records[start:at]), ours(records[at:end])


def _topic_id(records: list[Message], name: str) -> uuid.UUID:
    return next(r.topic_id for r in records if isinstance(r, TopicRecord) and r.name == name)


def _registered_epochs(proc: BrokerProcess) -> list[tuple[int, int]]:
    """(broker epoch, previous broker epoch) of every start, from the broker's own log line."""
    out = []
    for line in proc.log_text().splitlines():
        if REGISTERED in line:
            epoch, _, rest = line.split(REGISTERED, 1)[1].partition(" (previous broker epoch ")
            out.append((int(epoch), int(rest.rstrip(")"))))
    return out


def _create(bootstrap: str, topic: str) -> None:
    create_topic(AdminClient({"bootstrap.servers": bootstrap}), topic, partitions=2)


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p: pm.leader for p, pm in md.topics[topic].partitions.items()}


def _produce_and_read(bootstrap: str, topic: str, tag: str) -> None:
    """Every partition takes a record and gives it back: each is led and online."""
    producer = make_producer(bootstrap, acks="all")
    for p in range(2):
        producer.produce(topic, value=f"{tag}-{p}".encode(), partition=p)
    assert producer.flush(30) == 0
    consumer = make_consumer(bootstrap)
    try:
        for p in range(2):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            consumer.assign([TopicPartition(topic, p, high - 1)])
            msg = wait_for(lambda: consumer.poll(0.5), 30, f"the {tag} record of partition {p}")
            assert msg.error() is None and msg.value() == f"{tag}-{p}".encode()
    finally:
        consumer.close()


def _partition_state(records: list[PartitionChangeRecord]) -> dict[int, dict[str, Any]]:
    """Leader, ISR and recovery state of partitions 0 and 1 as ``records`` change them (only
    the fields they set)."""
    state: dict[int, dict[str, Any]] = {0: {}, 1: {}}
    for r in records:
        if r.partition_id in state:
            s = state[r.partition_id]
            if r.leader != -2:  # -2: unchanged
                s["leader"] = r.leader
            if r.isr is not None:
                s["isr"] = list(r.isr)
            if r.leader_recovery_state != -1:
                s["recovery"] = r.leader_recovery_state
    return state


def _start_again(node: BrokerProcess) -> None:
    """Start a stopped or killed broker again on a new port (on its old, fixed port ``strom dev``
    also starts the web console; both now print each line in one write, so the console's line
    no longer splits the ready line, but a new port keeps these tests apart from the console)."""
    node.port = 0
    node.start()


@pytest.fixture
def node(fresh_broker: BrokerProcess) -> BrokerProcess:
    """A broker of the test's own, not started (tests/conftest.py kills it at the end)."""
    return fresh_broker


def test_clean_stop_writes_the_registered_epoch_and_the_restart_sends_it(node: BrokerProcess,
                                                                         topic_name: str) -> None:
    node.start()
    _create(node.bootstrap, topic_name)
    _produce_and_read(node.bootstrap, topic_name, "first")
    node.stop()
    marker = node.data_dir / "logs" / CLEAN_SHUTDOWN_FILE
    content = json.loads(marker.read_text())
    first = _registrations(_metadata_records(node.data_dir))
    assert content == {"version": 0, "brokerEpoch": first[-1]} and first[-1] > 0
    assert _registered_epochs(node) == [(first[-1], -1)]  # a new data dir: no marker yet

    _start_again(node)
    assert _registered_epochs(node)[-1][1] == first[-1]  # PreviousBrokerEpoch = the marker's
    assert not marker.exists()
    assert _leaders(node.bootstrap, topic_name) == {0: 1, 1: 1}
    _produce_and_read(node.bootstrap, topic_name, "second")
    node.stop()
    records = _metadata_records(node.data_dir)
    second = _registrations(records)[-1]
    assert _registered_epochs(node)[-1] == (second, first[-1])
    assert json.loads(marker.read_text()) == {"version": 0, "brokerEpoch": second}
    # A clean shutdown: the registration batch holds no shutdown records (the controlled
    # shutdown had moved everything), and the unfencing elects this node from the ELR.
    before, life = _life_of(records, second, _topic_id(records, topic_name))
    assert before == []
    state = _partition_state(life)
    assert [state[p].get("leader") for p in (0, 1)] == [1, 1]
    assert [state[p].get("recovery") for p in (0, 1)] == [None, None]  # a clean election


@pytest.mark.parametrize("elr", [1, 0])
def test_kill9_sends_no_epoch_and_the_node_leads_again(tmp_path: Path, topic_name: str, elr: int) -> None:
    node = BrokerProcess(tmp_path / "data", features={ELR: elr})
    try:
        node.start()
        _create(node.bootstrap, topic_name)
        _produce_and_read(node.bootstrap, topic_name, "before")
        node.kill()
        assert not (node.data_dir / "logs" / CLEAN_SHUTDOWN_FILE).exists()
        _start_again(node)
        (epoch, previous), = _registered_epochs(node)[-1:]
        assert previous == -1
        # Every partition is led by this node again and serves (Kafka's end state too).
        assert _leaders(node.bootstrap, topic_name) == {0: 1, 1: 1}
        _produce_and_read(node.bootstrap, topic_name, "after")
        node.stop()
    finally:
        if node.alive:
            node.kill()
    records = _metadata_records(node.data_dir)
    before, life = _life_of(records, epoch, _topic_id(records, topic_name))
    state = _partition_state(before)
    if elr:
        # handleBrokerUncleanShutdown: out of the ISR (and the ELR), leaderless until unfenced
        assert [state[p] for p in (0, 1)] == [{"leader": -1, "isr": []}] * 2
    else:
        # handleBrokerFenced with ELR off: the last ISR member stays in the ISR, stops leading
        assert [state[p] for p in (0, 1)] == [{"leader": -1}] * 2
    after = _partition_state(life)
    # elected again at the unfencing: as the last known leader (RECOVERING) with ELR on, as Kafka
    assert [after[p].get("leader") for p in (0, 1)] == [1, 1]
    assert [after[p].get("recovery") for p in (0, 1)] == ([RECOVERING] * 2 if elr else [None, None])
    marker = json.loads((node.data_dir / "logs" / CLEAN_SHUTDOWN_FILE).read_text())
    assert marker == {"version": 0, "brokerEpoch": epoch}


def test_a_corrupted_marker_is_tolerated(node: BrokerProcess, topic_name: str) -> None:
    node.start()
    _create(node.bootstrap, topic_name)
    _produce_and_read(node.bootstrap, topic_name, "before")
    node.stop()
    marker = node.data_dir / "logs" / CLEAN_SHUTDOWN_FILE
    marker.write_text('{"version":0,"brokerEpoch":')  # torn
    _start_again(node)
    warnings = [line for line in node.log_text().splitlines() if " WARNING " in line and str(marker) in line]
    assert warnings, node.log_tail(40)
    assert _registered_epochs(node)[-1][1] == -1
    assert _leaders(node.bootstrap, topic_name) == {0: 1, 1: 1}
    _produce_and_read(node.bootstrap, topic_name, "after")
    node.stop()


def test_a_stop_before_registration_writes_minus_one(tmp_path: Path) -> None:
    """A stop before the broker registered (its start failed after the logs loaded) writes -1,
    as Kafka's BrokerLifecycleManager.brokerEpoch is -1 until registered; the next start sends -1."""
    dirs = [tmp_path / "d"]
    mgr = _start(dirs)
    mgr.get_or_create_log("t", 0)
    mgr.shutdown()
    assert (dirs[0] / CLEAN_SHUTDOWN_FILE).read_bytes() == b'{"version":0,"brokerEpoch":-1}'
    mgr = _start(dirs)
    try:
        assert mgr.previous_broker_epoch == -1 and mgr.had_clean_shutdown[dirs[0]]
    finally:
        mgr.shutdown()
