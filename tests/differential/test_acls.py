# mypy: disable-error-code="arg-type,union-attr"
# (kio types fields with phantom NewTypes - i8, i32, TopicName, GroupId - that plain values are at
# run time; only the checker objects, as in tests/helpers/diff_wire.py.)
"""ACLs beside Apache Kafka 4.3.1 configured with its StandardAuthorizer.

Both brokers run ``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer``
with the same listeners and users (tests/helpers/acl_broker.py): ``User:ANONYMOUS`` on PLAINTEXT
is a super user (Kafka's own broker-to-controller traffic needs one) and sets things up; the
principal under test is ``User:alice`` over SASL_PLAINTEXT/PLAIN, holding only ALTER and
DESCRIBE on the cluster (what managing ACLs takes) plus the ACLs a step grants her.

Compared, request by request on the wire (tests/helpers/diff_wire.py, no client library in
between): CreateAcls results (codes and messages) for valid and invalid ACLs of every resource
type; DescribeAcls with ANY/MATCH/LITERAL/PREFIXED and entry filters (sorted, the user's own
principal name normalized); DeleteAcls per filter; and the error codes of ~40 requests of every
API family the user is denied (no ACLs), then granted (ALL on its topic, group and transactional
id): the authorization each API does and the code it answers with.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from acl_broker import AclBroker, sasl_wire_client, security_config
from diff_wire import WireClient, build_batch, kio_schema
from kafka_ref import KafkaRef, free_port
from ref_fixtures import skip_without_java

from strom.core.testing import wait_for

USER = "User:<user>"  # the user's principal, as compared (the same name on both brokers today)
TOPIC, GROUP, TXN = "acl-topic", "acl-group", "acl-txn"

# Kafka's codes (ResourceType, PatternType, AclOperation, AclPermissionType)
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
R_TOPIC, R_GROUP, R_CLUSTER, R_TXN, R_TOKEN, R_USER = 2, 3, 4, 5, 6, 7
OP_ALL, OP_READ, OP_WRITE, OP_CREATE, OP_DELETE, OP_ALTER, OP_DESCRIBE = 2, 3, 4, 5, 6, 7, 8
OP_IDEMPOTENT_WRITE, OP_CREATE_TOKENS = 12, 13
DENY, ALLOW = 2, 3


@dataclass
class Subject:
    """A broker under comparison and how to reach it as the user and as the super user."""

    name: str
    principal: str
    user_client: Callable[[], WireClient]


def _setup(admin: WireClient, principal: str) -> None:
    """As the super user: the topic (one partition, one record) and the user's cluster ACLs."""
    ct = kio_schema("create_topics", 7)
    resp = admin.request(ct.CreateTopicsRequest(topics=(ct.CreatableTopic(
        name=TOPIC, num_partitions=1, replication_factor=1, assignments=(), configs=()),),
        timeout=timedelta(seconds=30)))
    assert resp.topics[0].error_code == 0, resp
    pr = kio_schema("produce", 9)

    def produced() -> bool:  # the new partition may not have its leader yet (NOT_LEADER_OR_FOLLOWER)
        resp = admin.request(pr.ProduceRequest(acks=-1, timeout=timedelta(seconds=30), topic_data=(pr.TopicProduceData(
            name=TOPIC, partition_data=(pr.PartitionProduceData(index=0, records=build_batch([(None, b"v")])),)),)))
        return int(resp.responses[0].partition_responses[0].error_code) == 0

    wait_for(produced, 60, f"a record in {TOPIC}")
    # The coordinators' internal topics exist and are loaded before anything is compared (Kafka
    # creates them on the first FindCoordinator and answers COORDINATOR_NOT_AVAILABLE meanwhile).
    fc = kio_schema("find_coordinator", 4)
    ip = kio_schema("init_producer_id", 4)

    def coordinator_ready(key_type: int, key: str) -> bool:
        found = admin.request(fc.FindCoordinatorRequest(key_type=key_type, coordinator_keys=(key,)))
        return int(found.coordinators[0].error_code) == 0

    def transactions_ready() -> bool:
        init = admin.request(ip.InitProducerIdRequest(transactional_id=TXN, transaction_timeout=timedelta(seconds=60)))
        return int(init.error_code) == 0

    wait_for(partial(coordinator_ready, 0, GROUP), 60, "the group coordinator")
    wait_for(partial(coordinator_ready, 1, TXN), 60, "the transaction coordinator")
    wait_for(transactions_ready, 60, "the transaction coordinator's state")
    results = create_acls(admin, [(R_CLUSTER, "kafka-cluster", LITERAL, principal, "*", op, ALLOW)
                                  for op in (OP_ALTER, OP_DESCRIBE)])
    assert [code for code, _ in results] == [0, 0], results


@pytest.fixture(scope="module")
def kafka_acl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Subject]:
    skip_without_java()
    plain, sasl, controller = free_port(), free_port(), free_port()
    ref = KafkaRef(tmp_path_factory.mktemp("kafka-acl"), port=plain, config={
        **security_config(),
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{controller},"
                     f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "controller.quorum.voters": f"1@127.0.0.1:{controller}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
    })
    ref.controller_port = controller
    with ref:
        with WireClient(ref.bootstrap) as admin:
            _setup(admin, "User:alice")
        yield Subject("kafka", "User:alice", partial(sasl_wire_client, f"127.0.0.1:{sasl}", "alice"))


@pytest.fixture(scope="module")
def strom_acl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Subject]:
    skip_without_java()  # nothing to compare with
    with AclBroker(tmp_path_factory.mktemp("strom-acl") / "data") as broker:
        with WireClient(broker.plain) as admin:
            _setup(admin, "User:alice")
        yield Subject("strom", "User:alice", partial(sasl_wire_client, broker.sasl, "alice"))


# -- the ACL APIs -------------------------------------------------------------------------------

Acl = tuple[int, str, int, str, str, int, int]  # resource type, name, pattern type, principal, host, op, permission


def create_acls(client: WireClient, acls: list[Acl]) -> list[tuple[int, str | None]]:
    m = kio_schema("create_acls", 3)
    resp = client.request(m.CreateAclsRequest(creations=tuple(m.AclCreation(
        resource_type=rt, resource_name=name, resource_pattern_type=pt, principal=principal, host=host,
        operation=op, permission_type=perm) for rt, name, pt, principal, host, op, perm in acls)))
    return [(int(r.error_code), r.error_message) for r in resp.results]


Filter = tuple[int, str | None, int, str | None, str | None, int, int]


def describe_acls(client: WireClient, f: Filter, principal: str) -> tuple[int, list[Acl]]:
    m = kio_schema("describe_acls", 3)
    rt, name, pt, who, host, op, perm = f
    resp = client.request(m.DescribeAclsRequest(resource_type_filter=rt, resource_name_filter=name,
                                                pattern_type_filter=pt, principal_filter=who, host_filter=host,
                                                operation=op, permission_type=perm))
    found = sorted((int(r.resource_type), r.resource_name, int(r.pattern_type), _norm(a.principal, principal),
                    a.host, int(a.operation), int(a.permission_type)) for r in resp.resources for a in r.acls)
    return int(resp.error_code), found


def delete_acls(client: WireClient, filters: list[Filter], principal: str) -> list[tuple[int, list[Acl]]]:
    m = kio_schema("delete_acls", 3)
    resp = client.request(m.DeleteAclsRequest(filters=tuple(m.DeleteAclsFilter(
        resource_type_filter=rt, resource_name_filter=name, pattern_type_filter=pt, principal_filter=who,
        host_filter=host, operation=op, permission_type=perm) for rt, name, pt, who, host, op, perm in filters)))
    return [(int(r.error_code), sorted((int(a.resource_type), a.resource_name, int(a.pattern_type),
                                        _norm(a.principal, principal), a.host, int(a.operation),
                                        int(a.permission_type)) for a in r.matching_acls))
            for r in resp.filter_results]


def _norm(value: str, principal: str) -> str:
    return USER if value == principal else value


CREATIONS: list[Acl] = [
    (R_TOPIC, "orders", LITERAL, "User:bob", "*", OP_READ, ALLOW),
    (R_TOPIC, "orders", LITERAL, "User:bob", "*", OP_READ, ALLOW),  # the same ACL twice
    (R_TOPIC, "pay-", PREFIXED, "User:bob", "*", OP_WRITE, DENY),
    (R_TOPIC, "*", LITERAL, "User:*", "10.0.0.1", OP_DESCRIBE, ALLOW),
    (R_GROUP, "*", LITERAL, "User:*", "*", OP_ALL, ALLOW),
    (R_CLUSTER, "kafka-cluster", LITERAL, "User:carol", "*", OP_IDEMPOTENT_WRITE, ALLOW),
    (R_TXN, "tx-", PREFIXED, "User:carol", "*", OP_WRITE, ALLOW),
    (R_TOKEN, "token", LITERAL, "User:carol", "*", OP_DESCRIBE, ALLOW),
    (R_USER, "User:dave", LITERAL, "User:carol", "*", OP_CREATE_TOKENS, ALLOW),
]
# Each sent beside a valid ACL: some fail alone (INVALID_REQUEST), some fail the whole request
# (a pattern or entry Kafka cannot even build: ANY, MATCH).
INVALID_CREATIONS: list[Acl] = [
    (R_CLUSTER, "not-the-cluster", LITERAL, "User:bob", "*", OP_ALTER, ALLOW),
    (R_TOPIC, "", LITERAL, "User:bob", "*", OP_READ, ALLOW),
    (ANY, "x", LITERAL, "User:bob", "*", OP_READ, ALLOW),
    (R_TOPIC, "x", MATCH, "User:bob", "*", OP_READ, ALLOW),
    (R_TOPIC, "x", ANY, "User:bob", "*", OP_READ, ALLOW),
    (R_TOPIC, "x", LITERAL, "User:bob", "*", ANY, ALLOW),
    (R_TOPIC, "x", LITERAL, "User:bob", "*", OP_READ, ANY),
]
# A request naming an UNKNOWN code (0, or one Kafka does not know) is refused as a whole when
# parsed (Kafka's CreateAclsRequest.validate: "Contain UNKNOWN elements"): each alone, beside a
# valid ACL.
UNKNOWN_CREATIONS: list[Acl] = [
    (0, "x", LITERAL, "User:bob", "*", OP_READ, ALLOW),
    (99, "x", LITERAL, "User:bob", "*", OP_READ, ALLOW),
    (R_TOPIC, "x", 0, "User:bob", "*", OP_READ, ALLOW),
    (R_TOPIC, "x", LITERAL, "User:bob", "*", 0, ALLOW),
    (R_TOPIC, "x", LITERAL, "User:bob", "*", OP_READ, 0),
]
UNKNOWN_FILTERS: list[Filter] = [
    (0, None, ANY, None, None, ANY, ANY),
    (R_TOPIC, None, 0, None, None, ANY, ANY),
    (R_TOPIC, None, ANY, None, None, 0, ANY),
    (R_TOPIC, None, ANY, None, None, ANY, 0),
    (R_TOPIC, None, 77, None, None, ANY, ANY),
]

FILTERS: list[Filter] = [
    (ANY, None, ANY, None, None, ANY, ANY),
    (R_TOPIC, "orders", MATCH, None, None, ANY, ANY),
    (R_TOPIC, "pay-eu", MATCH, None, None, ANY, ANY),
    (R_TOPIC, "orders", ANY, None, None, ANY, ANY),
    (R_TOPIC, "pay-", LITERAL, None, None, ANY, ANY),
    (R_TOPIC, "pay-", PREFIXED, None, None, ANY, ANY),
    (ANY, None, ANY, "User:carol", None, ANY, ANY),
    (ANY, None, ANY, None, "10.0.0.1", ANY, ANY),
    (ANY, None, ANY, None, None, OP_WRITE, ANY),
    (ANY, None, ANY, None, None, ANY, DENY),
    (R_CLUSTER, None, ANY, None, None, ANY, ALLOW),
    (R_GROUP, "any-group", MATCH, "User:*", "*", OP_ALL, ALLOW),
]


def test_create_describe_delete_match_kafka(kafka_acl: Subject, strom_acl: Subject) -> None:
    seen: dict[str, dict[str, Any]] = {}
    for subject in (kafka_acl, strom_acl):
        with subject.user_client() as client:
            out: dict[str, Any] = {"create": create_acls(client, CREATIONS)}
            companion: Acl = (R_TOPIC, "companion", LITERAL, "User:bob", "*", OP_READ, ALLOW)
            out["invalid"] = [create_acls(client, [companion, bad]) for bad in INVALID_CREATIONS]
            out["describe"] = [describe_acls(client, f, subject.principal) for f in FILTERS]
            out["delete"] = delete_acls(client, [
                (R_TOPIC, "orders", LITERAL, "User:bob", "*", OP_READ, ALLOW),
                (R_TOPIC, "nothing-here", ANY, None, None, ANY, ANY),
                (R_TOPIC, None, PREFIXED, None, None, ANY, DENY),
                (R_TOPIC, "pay-", PREFIXED, None, None, ANY, ANY),  # already deleted by the third
            ], subject.principal)
            out["after"] = describe_acls(client, FILTERS[0], subject.principal)
            # Clean up for the next test (the user's own cluster ACLs stay).
            delete_acls(client, [(ANY, None, ANY, f"User:{who}", None, ANY, ANY) for who in ("*", "bob", "carol")],
                        subject.principal)
        seen[subject.name] = out
    for key in seen["kafka"]:
        assert seen["strom"][key] == seen["kafka"][key], f"{key}:\nkafka {seen['kafka'][key]}\nstrom {seen['strom'][key]}"


def _closed_or(call: Callable[[WireClient], Any], subject: Subject) -> Any:
    with subject.user_client() as client:
        try:
            return call(client)
        except ConnectionError:
            return "connection closed"


def test_unknown_codes_are_refused_like_kafka(kafka_acl: Subject, strom_acl: Subject) -> None:
    valid: Acl = (R_TOPIC, "unknown-codes", LITERAL, "User:bob", "*", OP_READ, ALLOW)
    seen: dict[str, list[Any]] = {}
    exact: Filter = (R_TOPIC, "unknown-codes", LITERAL, None, None, ANY, ANY)
    for subject in (kafka_acl, strom_acl):
        calls: list[Callable[[WireClient], Any]] = [partial(create_acls, acls=[valid, bad]) for bad in UNKNOWN_CREATIONS]
        calls += [partial(describe_acls, f=f, principal=subject.principal) for f in UNKNOWN_FILTERS]
        calls += [partial(delete_acls, filters=[exact, f], principal=subject.principal) for f in UNKNOWN_FILTERS]
        seen[subject.name] = [_closed_or(call, subject) for call in calls]
    mismatches = [f"case {i}: kafka {theirs} strom {ours}"
                  for i, (theirs, ours) in enumerate(zip(seen["kafka"], seen["strom"], strict=True)) if ours != theirs]
    assert not mismatches, "\n".join(mismatches)


# -- what each API authorizes -------------------------------------------------------------------

Probe = Callable[[WireClient], Any]


def _codes(*values: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def probes() -> dict[str, Probe]:
    """One request per API family, each answering the codes it carries (in request order)."""
    s = kio_schema

    def metadata(c: WireClient, name: str, auto: bool) -> Any:
        m = s("metadata", 12)
        r = c.request(m.MetadataRequest(topics=(m.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=name),),
                                        allow_auto_topic_creation=auto, include_topic_authorized_operations=False))
        return _codes(*(t.error_code for t in r.topics))

    def produce(c: WireClient, txn: str | None = None) -> Any:
        m = s("produce", 9)
        r = c.request(m.ProduceRequest(transactional_id=txn, acks=1, timeout=timedelta(seconds=10),
                                       topic_data=(m.TopicProduceData(name=TOPIC, partition_data=(
                                           m.PartitionProduceData(index=0, records=build_batch([(None, b"x")])),)),)))
        return _codes(*(p.error_code for t in r.responses for p in t.partition_responses))

    def fetch(c: WireClient) -> Any:
        m = s("fetch", 12)
        r = c.request(m.FetchRequest(max_wait=timedelta(0), min_bytes=0, topics=(m.FetchTopic(
            topic=TOPIC, partitions=(m.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024),)),),
            forgotten_topics_data=()))
        return _codes(r.error_code, *(p.error_code for t in r.responses for p in t.partitions))

    def list_offsets(c: WireClient) -> Any:
        m = s("list_offsets", 7)
        r = c.request(m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(m.ListOffsetsTopic(
            name=TOPIC, partitions=(m.ListOffsetsPartition(partition_index=0, timestamp=-1),)),)))
        return _codes(*(p.error_code for t in r.topics for p in t.partitions))

    def epoch(c: WireClient) -> Any:
        m = s("offset_for_leader_epoch", 4)
        r = c.request(m.OffsetForLeaderEpochRequest(topics=(m.OffsetForLeaderTopic(
            topic=TOPIC, partitions=(m.OffsetForLeaderPartition(partition=0, leader_epoch=0),)),)))
        return _codes(*(p.error_code for t in r.topics for p in t.partitions))

    def find(c: WireClient, key_type: int, key: str) -> Any:
        m = s("find_coordinator", 4)
        r = c.request(m.FindCoordinatorRequest(key_type=key_type, coordinator_keys=(key,)))
        return _codes(*(x.error_code for x in r.coordinators))

    def join(c: WireClient) -> Any:
        m = s("join_group", 9)
        # A group of its own: its pending member (MEMBER_ID_REQUIRED) makes strom's group non-empty
        # for DeleteGroups (NON_EMPTY_GROUP) where Kafka's stays Empty - a group coordinator
        # difference, not an authorization one.
        r = c.request(m.JoinGroupRequest(group_id=GROUP + "-join", session_timeout=timedelta(seconds=10),
                                         rebalance_timeout=timedelta(seconds=10), member_id="", protocol_type="consumer",
                                         protocols=(m.JoinGroupRequestProtocol(name="range", metadata=b""),)))
        return _codes(r.error_code)

    def sync(c: WireClient) -> Any:
        m = s("sync_group", 5)
        return _codes(c.request(m.SyncGroupRequest(group_id=GROUP, generation_id=1, member_id="m",
                                                   protocol_type="consumer", protocol_name="range",
                                                   assignments=())).error_code)

    def heartbeat(c: WireClient) -> Any:
        m = s("heartbeat", 4)
        return _codes(c.request(m.HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="m")).error_code)

    def leave(c: WireClient) -> Any:
        m = s("leave_group", 5)
        r = c.request(m.LeaveGroupRequest(group_id=GROUP, members=(m.MemberIdentity(member_id="m"),)))
        # The error the client acts on: Kafka answers an unknown member in the member's entry,
        # strom at the top level (a group coordinator difference, not an authorization one).
        return next((code for code in _codes(r.error_code, *(x.error_code for x in r.members)) if code), 0)

    def offset_commit(c: WireClient) -> Any:
        m = s("offset_commit", 8)
        r = c.request(m.OffsetCommitRequest(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
                                            topics=(m.OffsetCommitRequestTopic(name=TOPIC, partitions=(
                                                m.OffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                                                               committed_metadata=""),)),)))
        return _codes(*(p.error_code for t in r.topics for p in t.partitions))

    def offset_fetch(c: WireClient) -> Any:
        m = s("offset_fetch", 8)
        r = c.request(m.OffsetFetchRequest(groups=(m.OffsetFetchRequestGroup(group_id=GROUP, topics=(
            m.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=(0,)),)),)))
        return _codes(*(g.error_code for g in r.groups),
                      *(p.error_code for g in r.groups for t in g.topics for p in t.partitions))

    def describe_groups(c: WireClient) -> Any:
        m = s("describe_groups", 5)
        r = c.request(m.DescribeGroupsRequest(groups=(GROUP,), include_authorized_operations=False))
        return _codes(*(g.error_code for g in r.groups))

    def list_groups(c: WireClient) -> Any:
        r = c.request(s("list_groups", 4).ListGroupsRequest())
        return (int(r.error_code), sorted(g.group_id for g in r.groups if g.group_id == GROUP))

    def delete_groups(c: WireClient) -> Any:
        r = c.request(s("delete_groups", 2).DeleteGroupsRequest(groups_names=(GROUP,)))
        return _codes(*(g.error_code for g in r.results))

    def create_topics(c: WireClient, name: str) -> Any:
        m = s("create_topics", 7)
        r = c.request(m.CreateTopicsRequest(topics=(m.CreatableTopic(
            name=name, num_partitions=1, replication_factor=1, assignments=(), configs=()),),
            timeout=timedelta(seconds=30), validate_only=True))
        return _codes(*(t.error_code for t in r.topics))

    def delete_topics(c: WireClient) -> Any:
        m = s("delete_topics", 6)
        r = c.request(m.DeleteTopicsRequest(topics=(m.DeleteTopicState(name="no-such-topic-x", topic_id=uuid.UUID(int=0)),),
                                            timeout=timedelta(seconds=30)))
        return _codes(*(t.error_code for t in r.responses))

    def create_partitions(c: WireClient) -> Any:
        m = s("create_partitions", 3)
        r = c.request(m.CreatePartitionsRequest(topics=(m.CreatePartitionsTopic(name=TOPIC, count=1, assignments=None),),
                                                timeout=timedelta(seconds=30), validate_only=True))
        return _codes(*(t.error_code for t in r.results))

    def delete_records(c: WireClient) -> Any:
        m = s("delete_records", 2)
        r = c.request(m.DeleteRecordsRequest(topics=(m.DeleteRecordsTopic(name=TOPIC, partitions=(
            m.DeleteRecordsPartition(partition_index=0, offset=0),)),), timeout=timedelta(seconds=30)))
        return _codes(*(p.error_code for t in r.topics for p in t.partitions))

    def describe_configs(c: WireClient) -> Any:
        m = s("describe_configs", 4)
        r = c.request(m.DescribeConfigsRequest(resources=(
            m.DescribeConfigsResource(resource_type=2, resource_name=TOPIC, configuration_keys=("cleanup.policy",)),
            m.DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=("log.retention.ms",)))))
        return _codes(*(x.error_code for x in r.results))

    def alter_configs(c: WireClient) -> Any:
        m = s("incremental_alter_configs", 1)
        r = c.request(m.IncrementalAlterConfigsRequest(resources=(
            m.AlterConfigsResource(resource_type=2, resource_name=TOPIC, configs=(
                m.AlterableConfig(name="retention.ms", config_operation=0, value="100000"),)),
            m.AlterConfigsResource(resource_type=4, resource_name="1", configs=(
                m.AlterableConfig(name="log.cleaner.backoff.ms", config_operation=0, value="500"),))),
            validate_only=True))
        return _codes(*(x.error_code for x in r.responses))

    def init_pid(c: WireClient, txn: str | None) -> Any:
        m = s("init_producer_id", 4)
        return _codes(c.request(m.InitProducerIdRequest(transactional_id=txn,
                                                        transaction_timeout=timedelta(seconds=60))).error_code)

    def add_partitions(c: WireClient) -> Any:
        m = s("add_partitions_to_txn", 3)
        r = c.request(m.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=TXN, v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
            v3_and_below_topics=(m.AddPartitionsToTxnTopic(name=TOPIC, partitions=(0,)),)))
        return _codes(*(p.partition_error_code for t in r.results_by_topic_v3_and_below
                        for p in t.results_by_partition))

    def add_offsets(c: WireClient) -> Any:
        m = s("add_offsets_to_txn", 3)
        return _codes(c.request(m.AddOffsetsToTxnRequest(transactional_id=TXN, producer_id=1, producer_epoch=0,
                                                         group_id=GROUP)).error_code)

    def end_txn(c: WireClient) -> Any:
        m = s("end_txn", 3)
        return _codes(c.request(m.EndTxnRequest(transactional_id=TXN, producer_id=1, producer_epoch=0,
                                                committed=False)).error_code)

    def txn_offset_commit(c: WireClient) -> Any:
        m = s("txn_offset_commit", 3)
        r = c.request(m.TxnOffsetCommitRequest(
            transactional_id=TXN, group_id=GROUP, producer_id=1, producer_epoch=0,
            topics=(m.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=(m.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=0, committed_metadata=""),)),)))
        return _codes(*(p.error_code for t in r.topics for p in t.partitions))

    def describe_producers(c: WireClient) -> Any:
        m = s("describe_producers", 0)
        r = c.request(m.DescribeProducersRequest(topics=(m.TopicRequest(name=TOPIC, partition_indexes=(0,)),)))
        return _codes(*(p.error_code for t in r.topics for p in t.partitions))

    def describe_transactions(c: WireClient) -> Any:
        # Read by hand: kio refuses the -1 start time of a transaction that has none.
        body = struct.pack(">ih", 1, len(TXN)) + TXN.encode()  # v0: [transactional id]
        frame = c.send_raw(65, 0, body, flexible=False)
        (count,) = struct.unpack_from(">i", frame, 4)  # after throttle_time_ms
        assert count == 1, frame
        return _codes(struct.unpack_from(">h", frame, 8)[0])

    def list_transactions(c: WireClient) -> Any:
        r = c.request(s("list_transactions", 0).ListTransactionsRequest(state_filters=(), producer_id_filters=()))
        return (int(r.error_code), sorted(x.transactional_id for x in r.transaction_states
                                          if x.transactional_id == TXN))

    def describe_log_dirs(c: WireClient) -> Any:
        m = s("describe_log_dirs", 4)
        r = c.request(m.DescribeLogDirsRequest(topics=(m.DescribableLogDirTopic(topic=TOPIC, partitions=(0,)),)))
        return _codes(r.error_code)

    def elect(c: WireClient) -> Any:
        m = s("elect_leaders", 2)
        r = c.request(m.ElectLeadersRequest(election_type=0, topic_partitions=(
            m.TopicPartitions(topic=TOPIC, partitions=(0,)),), timeout=timedelta(seconds=30)))
        return _codes(r.error_code)

    def alter_reassignments(c: WireClient) -> Any:
        m = s("alter_partition_reassignments", 0)
        r = c.request(m.AlterPartitionReassignmentsRequest(timeout=timedelta(seconds=30), topics=()))
        return _codes(r.error_code)

    def list_reassignments(c: WireClient) -> Any:
        m = s("list_partition_reassignments", 0)
        return _codes(c.request(m.ListPartitionReassignmentsRequest(timeout=timedelta(seconds=30),
                                                                    topics=None)).error_code)

    def describe_quorum(c: WireClient) -> Any:
        m = s("describe_quorum", 2)
        r = c.request(m.DescribeQuorumRequest(topics=(m.TopicData(topic_name="__cluster_metadata", partitions=(
            m.PartitionData(partition_index=0),)),)))
        return _codes(r.error_code)

    def describe_cluster(c: WireClient) -> Any:
        r = c.request(s("describe_cluster", 1).DescribeClusterRequest(include_cluster_authorized_operations=False))
        return _codes(r.error_code)

    def group_heartbeat(c: WireClient) -> Any:
        m = s("consumer_group_heartbeat", 0)
        r = c.request(m.ConsumerGroupHeartbeatRequest(
            group_id=GROUP + "-848", member_id=str(uuid.uuid4()), member_epoch=0, rebalance_timeout=timedelta(seconds=10),
            subscribed_topic_names=(TOPIC,), topic_partitions=()))
        return _codes(r.error_code)

    def group_describe(c: WireClient) -> Any:
        m = s("consumer_group_describe", 0)
        r = c.request(m.ConsumerGroupDescribeRequest(group_ids=(GROUP,), include_authorized_operations=False))
        return _codes(*(g.error_code for g in r.groups))

    def describe_topic_partitions(c: WireClient) -> Any:
        m = s("describe_topic_partitions", 0)
        r = c.request(m.DescribeTopicPartitionsRequest(topics=(m.TopicRequest(name=TOPIC),), response_partition_limit=10))
        return _codes(*(t.error_code for t in r.topics))

    def update_features(c: WireClient) -> Any:
        m = s("update_features", 1)
        r = c.request(m.UpdateFeaturesRequest(timeout=timedelta(seconds=30), feature_updates=(), validate_only=True))
        return _codes(r.error_code)

    def offset_delete(c: WireClient) -> Any:
        m = s("offset_delete", 0)
        r = c.request(m.OffsetDeleteRequest(group_id=GROUP, topics=(m.OffsetDeleteRequestTopic(
            name=TOPIC, partitions=(m.OffsetDeleteRequestPartition(partition_index=0),)),)))
        return _codes(r.error_code, *(p.error_code for t in r.topics for p in t.partitions))

    def describe_scram(c: WireClient) -> Any:
        m = s("describe_user_scram_credentials", 0)
        return _codes(c.request(m.DescribeUserScramCredentialsRequest(users=(m.UserName(name="bob"),))).error_code)

    def alter_scram(c: WireClient) -> Any:
        m = s("alter_user_scram_credentials", 0)
        r = c.request(m.AlterUserScramCredentialsRequest(deletions=(m.ScramCredentialDeletion(name="bob", mechanism=1),),
                                                         upsertions=()))
        return _codes(*(x.error_code for x in r.results))

    def list_config_resources(c: WireClient) -> Any:
        return _codes(c.request(s("list_config_resources", 0).ListConfigResourcesRequest()).error_code)

    def write_markers(c: WireClient) -> Any:
        m = s("write_txn_markers", 1)
        r = c.request(m.WriteTxnMarkersRequest(markers=(m.WritableTxnMarker(
            producer_id=999999, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
            topics=(m.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=(0,)),)),)))
        return _codes(*(p.error_code for x in r.markers for t in x.topics for p in t.partitions))

    def legacy_alter_configs(c: WireClient) -> Any:
        m = s("alter_configs", 2)
        r = c.request(m.AlterConfigsRequest(resources=(
            m.AlterConfigsResource(resource_type=2, resource_name=TOPIC, configs=(
                m.AlterableConfig(name="retention.ms", value="100000"),)),
            m.AlterConfigsResource(resource_type=4, resource_name="1", configs=())), validate_only=True))
        return _codes(*(x.error_code for x in r.responses))

    def describe_quotas(c: WireClient) -> Any:
        m = s("describe_client_quotas", 1)
        r = c.request(m.DescribeClientQuotasRequest(components=(), strict=False))
        return _codes(r.error_code)

    def alter_quotas(c: WireClient) -> Any:
        m = s("alter_client_quotas", 1)
        r = c.request(m.AlterClientQuotasRequest(entries=(m.EntryData(
            entity=(m.EntityData(entity_type="user", entity_name="bob"),),
            ops=(m.OpData(key="producer_byte_rate", value=1024.0, remove=False),)),), validate_only=True))
        return _codes(*(x.error_code for x in r.entries))

    return {
        "WriteTxnMarkers": write_markers,
        "AlterConfigs": legacy_alter_configs,
        "DescribeClientQuotas": describe_quotas,
        "AlterClientQuotas": alter_quotas,
        "DescribeUserScramCredentials": describe_scram,
        "AlterUserScramCredentials": alter_scram,
        "ListConfigResources": list_config_resources,
        "Metadata": lambda c: metadata(c, TOPIC, False),
        "Metadata auto-create": lambda c: metadata(c, "acl-auto-created", True),
        "Produce": produce,
        "Produce transactional": lambda c: produce(c, TXN),
        "Fetch": fetch,
        "ListOffsets": list_offsets,
        "OffsetForLeaderEpoch": epoch,
        "FindCoordinator group": lambda c: find(c, 0, GROUP),
        "FindCoordinator transaction": lambda c: find(c, 1, TXN),
        "JoinGroup": join,
        "SyncGroup": sync,
        "Heartbeat": heartbeat,
        "LeaveGroup": leave,
        "OffsetCommit": offset_commit,
        "OffsetFetch": offset_fetch,
        "DescribeGroups": describe_groups,
        "ListGroups": list_groups,
        "DeleteGroups": delete_groups,
        "CreateTopics": lambda c: create_topics(c, "acl-new-topic"),
        "DeleteTopics": delete_topics,
        "CreatePartitions": create_partitions,
        "DeleteRecords": delete_records,
        "DescribeConfigs": describe_configs,
        "IncrementalAlterConfigs": alter_configs,
        "InitProducerId": lambda c: init_pid(c, None),
        "InitProducerId transactional": lambda c: init_pid(c, TXN),
        "AddPartitionsToTxn": add_partitions,
        "AddOffsetsToTxn": add_offsets,
        "EndTxn": end_txn,
        "TxnOffsetCommit": txn_offset_commit,
        "DescribeProducers": describe_producers,
        "DescribeTransactions": describe_transactions,
        "ListTransactions": list_transactions,
        "DescribeLogDirs": describe_log_dirs,
        "ElectLeaders": elect,
        "AlterPartitionReassignments": alter_reassignments,
        "ListPartitionReassignments": list_reassignments,
        "DescribeQuorum": describe_quorum,
        "DescribeCluster": describe_cluster,
        "ConsumerGroupHeartbeat": group_heartbeat,
        "ConsumerGroupDescribe": group_describe,
        "DescribeTopicPartitions": describe_topic_partitions,
        "UpdateFeatures": update_features,
        "OffsetDelete": offset_delete,
    }


def run_probes(subject: Subject) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, probe in probes().items():
        with subject.user_client() as client:  # one connection each: a failure cannot leak into the next
            try:
                out[name] = probe(client)
            except ConnectionError as e:
                out[name] = f"connection closed: {e}"
    return out


def grant_all(subject: Subject, permission: int = ALLOW) -> list[tuple[int, str | None]]:
    with subject.user_client() as client:
        return create_acls(client, [(rt, name, PREFIXED if rt == R_GROUP else LITERAL, subject.principal, "*", OP_ALL,
                                     permission) for rt, name in ((R_TOPIC, TOPIC), (R_GROUP, GROUP), (R_TXN, TXN))])


def test_denied_and_granted_codes_match_kafka(kafka_acl: Subject, strom_acl: Subject) -> None:
    denied = {s.name: run_probes(s) for s in (kafka_acl, strom_acl)}
    for subject in (kafka_acl, strom_acl):
        assert [code for code, _ in grant_all(subject)] == [0, 0, 0]
    granted = {s.name: run_probes(s) for s in (kafka_acl, strom_acl)}
    mismatches = [f"{phase} {api}: kafka {seen['kafka'][api]} strom {seen['strom'][api]}"
                  for phase, seen in (("denied", denied), ("granted", granted))
                  for api in seen["kafka"] if seen["kafka"][api] != seen["strom"][api]]
    assert not mismatches, "\n".join(mismatches)
