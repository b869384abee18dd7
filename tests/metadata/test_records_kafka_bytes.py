"""Every metadata record type Kafka 4.3 writes: strom's bytes equal Kafka 4.3.1's own
(``MetadataRecordSerde``, run from KafkaRecordBytes.java beside this file), and strom decodes
Kafka's bytes back to the same record."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from kafka_ref import classpath, jars_present

from strom.core.metadata.records import (
    AbortTransactionRecord,
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ClearElrRecord,
    ClientQuotaRecord,
    ControllerEndpoint,
    ControllerFeature,
    DelegationTokenRecord,
    EntityData,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveDelegationTokenRecord,
    RemoveUserScramCredentialRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    ZkMigrationStateRecord,
    decode_record,
    encode_record,
)
from strom.core.protocol.message_codec import Message
from strom.core.testing import java_problem

pytestmark = pytest.mark.reference  # one JVM run (~1.5 s)

JAVA_PROGRAM = Path(__file__).with_name("KafkaRecordBytes.java")
U1 = uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10")
U2 = uuid.UUID("11121314-1516-1718-191a-1b1c1d1e1f20")

# label -> (strom's record, the version Kafka wrote); the same values as KafkaRecordBytes.java.
EXPECTED: dict[str, tuple[Message, int]] = {
    "register_broker_v4": (RegisterBrokerRecord(
        broker_id=1, incarnation_id=U1, broker_epoch=42,
        end_points=[BrokerEndpoint("PLAINTEXT", "localhost", 9092, 0)],
        features=[BrokerFeature("metadata.version", 7, 30)], rack=None, fenced=True,
        in_controlled_shutdown=False, log_dirs=[U2], cordoned_log_dirs=[U1]), 4),
    "unregister_broker": (UnregisterBrokerRecord(3, 99), 0),
    "fence_broker": (FenceBrokerRecord(1, 7), 0),
    "unfence_broker": (UnfenceBrokerRecord(1, 7), 0),
    "broker_registration_change_v3": (BrokerRegistrationChangeRecord(
        broker_id=1, broker_epoch=42, fenced=1, in_controlled_shutdown=1, log_dirs=[U1]), 3),
    "broker_registration_change_v1": (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=42, fenced=-1), 1),
    "partition_change_elr": (PartitionChangeRecord(partition_id=0, topic_id=U1, leader=-1, isr=[],
                                                   eligible_leader_replicas=[1], last_known_elr=[]), 2),
    "partition_v2": (PartitionRecord(partition_id=2, topic_id=U1, replicas=[1], isr=[], leader=-1, leader_epoch=5,
                                     partition_epoch=9, directories=[U2], eligible_leader_replicas=[1],
                                     last_known_elr=[]), 2),
    "scram": (UserScramCredentialRecord("alice", 1, b"\x01\x02\x03", b"\x04\x05", b"\x06", 4096), 0),
    "remove_scram": (RemoveUserScramCredentialRecord("alice", 2), 0),
    "acl": (AccessControlEntryRecord(U1, 2, "t", 3, "User:bob", "*", 3, 3), 0),
    "remove_acl": (RemoveAccessControlEntryRecord(U2), 0),
    "client_quota": (ClientQuotaRecord([EntityData("user", "bob"), EntityData("client-id", None)],
                                       "producer_byte_rate", 1024.5, False), 0),
    "delegation_token": (DelegationTokenRecord("User:a", "User:b", ["User:c", "User:d"], 1, 2, 3, "tok"), 0),
    "remove_delegation_token": (RemoveDelegationTokenRecord("tok"), 0),
    "zk_migration_state": (ZkMigrationStateRecord(0), 0),
    "register_controller": (RegisterControllerRecord(
        1, U2, False, [ControllerEndpoint("CONTROLLER", "localhost", 9093, 0)],
        [ControllerFeature("kraft.version", 0, 1)]), 0),
    "abort_transaction": (AbortTransactionRecord("controller failover"), 0),
    "clear_elr": (ClearElrRecord("t"), 0),
}


@pytest.fixture(scope="module")
def kafka_bytes() -> dict[str, bytes]:
    problem = java_problem()
    if problem is not None:
        pytest.skip(f"Kafka's record classes need Java: {problem}")
    if not jars_present():
        pytest.skip("Kafka 4.3.1's jars are not in .cache/kafka-ref (scripts/kafka_ref/fetch.sh)")
    done = subprocess.run(["java", "-Xmx128m", "-cp", classpath(), str(JAVA_PROGRAM)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"KafkaRecordBytes.java failed: {done.stderr[-3000:]}"
    return {label: bytes.fromhex(hexed) for label, hexed in (line.split() for line in done.stdout.splitlines())}


def test_kafka_wrote_every_expected_record(kafka_bytes: dict[str, bytes]) -> None:
    assert set(kafka_bytes) == set(EXPECTED)


@pytest.mark.parametrize("label", sorted(EXPECTED))
def test_strom_bytes_equal_kafkas(kafka_bytes: dict[str, bytes], label: str) -> None:
    record, version = EXPECTED[label]
    assert encode_record(record, version).hex() == kafka_bytes[label].hex()
    assert decode_record(kafka_bytes[label]) == record
