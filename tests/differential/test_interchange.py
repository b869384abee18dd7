"""A data directory moves from strom to Apache Kafka 4.3.1 and back, and both serve everything.

The workload (tests/helpers/interchange.py) is written through confluent-kafka on one broker:
a plain topic (3 partitions, idempotent producer, keys, headers, timestamps), a compacted topic
compacted before the stop, a transactional topic with commit, abort, commit, the committed
offsets of a classic group and of a KIP-848 consumer group, and the finished transaction.
What a client sees of it is observed on the writer, the writer stops (SIGTERM, a clean
shutdown) or is killed (SIGKILL: no clean-shutdown marker, the other side recovers), and the
other broker starts on a copy of the directories:

* strom (``strom dev --data-dir D``: ``D/logs``, ``D/metadata``) -> Kafka
  (``log.dirs=K/kafka-logs``, ``metadata.log.dir=K/metadata``, ``node.id=1``, the same single
  controller voter): D/logs is copied to K/kafka-logs, D/metadata to K/metadata, and back.
* Kafka's side is formatted by Kafka (``kafka-storage format``, its default metadata version)
  when Kafka writes first; when strom wrote first Kafka takes strom's ``meta.properties``
  (cluster id, node id, directory ids) as they are.

The other broker must serve every record of every partition exactly (offsets, keys, values,
headers, timestamps; read_committed hides the aborted transaction), both groups' committed
offsets, and the transaction's state in DescribeTransactions and ListTransactions. After a
kill it must also go on from there: the next record lands at the next offset, and the
transactional id keeps its producer id.

docs/migration.md describes the same steps for an operator. Each scenario starts two or three
JVM/Python brokers, so each is marked slow (20-40 s here).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
from confluent_kafka import Producer
from interchange import (
    PLAIN,
    TOPICS,
    TRANSACTIONAL_ID,
    Observed,
    describe_transaction,
    dump_log,
    observe,
    wait_leaders,
    write_workload,
)
from kafka_ref import KafkaRef
from ref_fixtures import SHARED_BROKER_CONFIG, skip_without_java

from strom.core.testing import BrokerProcess, ManagedProcess

Stop = Literal["stop", "kill"]
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
KAFKA_LOGS = "kafka-logs"  # KafkaRef's log.dirs under its data directory

pytestmark = pytest.mark.slow


def strom_on(root: Path, config: dict[str, str] | None = None) -> BrokerProcess:
    """``strom dev --data-dir root``: logs in root/logs, the metadata log in root/metadata."""
    return BrokerProcess(root, config={**SHARED_BROKER_CONFIG, **(config or {})})


def kafka_on(root: Path) -> KafkaRef:
    """Kafka with strom dev's layout: log.dirs root/kafka-logs, metadata.log.dir root/metadata
    (formatted by Kafka only when root/kafka-logs has no meta.properties yet)."""
    return KafkaRef(root, config={**SHARED_BROKER_CONFIG, "metadata.log.dir": str(root / "metadata")})


def strom_to_kafka_copy(strom_root: Path, kafka_root: Path) -> None:
    shutil.copytree(strom_root / "logs", kafka_root / KAFKA_LOGS)
    shutil.copytree(strom_root / "metadata", kafka_root / "metadata")


def kafka_to_strom_copy(kafka_root: Path, strom_root: Path) -> None:
    shutil.copytree(kafka_root / KAFKA_LOGS, strom_root / "logs")
    shutil.copytree(kafka_root / "metadata", strom_root / "metadata")


def end(proc: ManagedProcess, how: Stop, log_dir: Path) -> None:
    """Stop cleanly or kill -9; the clean-shutdown marker says which happened."""
    if how == "kill":
        proc.kill()
        assert not (log_dir / CLEAN_SHUTDOWN).exists()
    else:
        proc.stop()
        assert (log_dir / CLEAN_SHUTDOWN).exists(), proc.log_tail(40)


def kafka_took_the_files(kafka: KafkaRef) -> None:
    """Kafka's start-up found nothing to complain about in strom's files: no index it had to
    rebuild (its sanity check on open), no ERROR line."""
    bad = [line for line in kafka.log_text().splitlines()
           if " ERROR " in line or "corrupted index" in line or "invalid bytes" in line]
    assert bad == [], bad[:5]


def write_and_observe(proc: BrokerProcess | KafkaRef) -> Observed:
    write_workload(proc.bootstrap)
    seen = observe(proc.bootstrap)
    # The workload is what it should be before anything moves.
    assert [len(seen.records[t]) for t in sorted(TOPICS)] == [41, 300, 30]
    assert len(seen.committed_reads["ix-txn"]) == 20
    assert seen.transaction[0] == "CompleteCommit" and seen.listed[2] == "CompleteCommit"
    return seen


def serve_and_compare(proc: BrokerProcess | KafkaRef, before: Observed) -> Observed:
    wait_leaders(proc.bootstrap, TOPICS)
    after = observe(proc.bootstrap)
    for topic in sorted(TOPICS):
        assert after.records[topic] == before.records[topic], topic
    assert after.committed_reads == before.committed_reads
    assert after.offsets == before.offsets
    assert after.transaction == before.transaction
    assert after.listed == before.listed
    return after


def goes_on(bootstrap: str, before: Observed) -> None:
    """New writes continue the log: the next record of ix-plain-0 gets the next offset, and the
    transactional id's next InitProducerId keeps its producer id with a newer epoch."""
    next_offset = max(r[1] for r in before.records[PLAIN] if r[0] == 0) + 1
    got: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    producer.produce(PLAIN, b"after the move", partition=0,
                     on_delivery=lambda err, msg: got.append(-1 if err else msg.offset() or 0))
    assert producer.flush(30) == 0
    assert got == [next_offset]
    tx = Producer({"bootstrap.servers": bootstrap, "transactional.id": TRANSACTIONAL_ID, "log_level": 0})
    tx.init_transactions(30)
    state, pid, epoch, _ = describe_transaction(bootstrap)
    assert pid == before.transaction[1] and epoch > before.transaction[2], (state, pid, epoch)


@pytest.fixture(scope="module")
def java() -> None:
    skip_without_java()


@pytest.fixture(scope="module")
def strom_then_kafka(tmp_path_factory: pytest.TempPathFactory, java: None) -> Iterator[tuple[Observed, Observed, Path]]:
    """strom writes and stops cleanly; Kafka serves a copy and stops cleanly. Yields what strom
    served, what Kafka served and Kafka's directory (for the way back)."""
    root = tmp_path_factory.mktemp("interchange-a")
    strom = strom_on(root / "strom")
    try:
        strom.start()
        before = write_and_observe(strom)
        end(strom, "stop", root / "strom" / "logs")
    finally:
        strom.close()
    strom_to_kafka_copy(root / "strom", root / "kafka")
    kafka = kafka_on(root / "kafka")
    try:
        kafka.start()
        after = serve_and_compare(kafka, before)
        kafka_took_the_files(kafka)
        end(kafka, "stop", root / "kafka" / KAFKA_LOGS)
    finally:
        kafka.close()
    yield before, after, root / "kafka"


def test_strom_to_kafka_after_a_clean_stop(strom_then_kafka: tuple[Observed, Observed, Path]) -> None:
    before, after, _ = strom_then_kafka
    assert after == before


def test_strom_to_kafka_after_kill_9(tmp_path: Path, java: None) -> None:
    with strom_on(tmp_path / "strom") as strom:
        before = write_and_observe(strom)
        end(strom, "kill", tmp_path / "strom" / "logs")
    strom_to_kafka_copy(tmp_path / "strom", tmp_path / "kafka")
    with kafka_on(tmp_path / "kafka") as kafka:
        assert "since no clean shutdown file was found" in kafka.log_text()  # Kafka recovered strom's logs
        serve_and_compare(kafka, before)
        goes_on(kafka.bootstrap, before)
        kafka_took_the_files(kafka)


def test_round_trip_strom_kafka_strom(strom_then_kafka: tuple[Observed, Observed, Path], tmp_path: Path) -> None:
    before, _, kafka_root = strom_then_kafka
    kafka_to_strom_copy(kafka_root, tmp_path / "strom")
    with strom_on(tmp_path / "strom") as strom:
        serve_and_compare(strom, before)
        goes_on(strom.bootstrap, before)


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_kafka_to_strom(tmp_path: Path, how: Stop, java: None) -> None:
    kafka = kafka_on(tmp_path / "kafka")
    try:
        kafka.start()
        before = write_and_observe(kafka)
        end(kafka, how, tmp_path / "kafka" / KAFKA_LOGS)
    finally:
        kafka.close()
    if how == "stop":
        # Kafka's controlled shutdown left the partitions without a leader (ISR empty, the broker
        # an eligible leader replica): strom has to elect them to serve anything.
        changes = dump_log(sorted((tmp_path / "kafka" / "metadata" / "__cluster_metadata-0").glob("*.log")),
                           "--cluster-metadata-decoder").stdout
        assert '"type":"PARTITION_CHANGE_RECORD"' in changes and '"isr":[],"leader":-1' in changes
    kafka_to_strom_copy(tmp_path / "kafka", tmp_path / "strom")
    with strom_on(tmp_path / "strom") as strom:
        # After a kill strom recovers Kafka's logs (no clean-shutdown marker), else it trusts them.
        assert ("No clean shutdown marker in" in strom.log_text()) == (how == "kill"), strom.log_tail(40)
        serve_and_compare(strom, before)
        goes_on(strom.bootstrap, before)
