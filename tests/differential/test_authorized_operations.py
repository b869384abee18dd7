# mypy: disable-error-code="arg-type,union-attr"
# (kio types fields with phantom NewTypes - i32, TopicName, i32Timedelta - and loads response
# types as unions; plain ints/strs are what they are at run time, so only the checker objects.)
"""Differential: authorized operations (KIP-430) of strom against Apache Kafka 4.3.1.

A client may ask which operations it is allowed on what it describes: Metadata v8+
(``include_topic_authorized_operations``, and ``include_cluster_authorized_operations`` up to v10),
DescribeCluster, DescribeGroups v3+ and DescribeTopicPartitions (always). Kafka answers the bit
set of the operations the resource type supports (AclEntry.supportedOperations) that the
authorizer allows; a field not asked for, or about a topic refused for DESCRIBE, stays INT32_MIN;
the cluster's is 0 without DESCRIBE on it. The same raw requests (diff_wire's socket client)
go to both brokers and every answer is compared, in two configurations:

* no authorizer on Kafka, strom's allow-all built-in: every supported operation;
* Kafka's StandardAuthorizer (``allow.everyone.if.no.acl.found``) on both, with the same ACLs
  created through CreateAcls: everything allowed but WRITE on topics ``denied-*``, DESCRIBE on
  topics ``hidden-*``, DELETE on groups ``keep-*`` and ALTER_CONFIGS on the cluster; then
  DESCRIBE on the cluster denied too.

strom only: a third-party authorizer plugin (the test plugin's ``strom_test_plugin.DenyTopics``,
WRITE denied on ``denied-*`` topics) answers the same topic bit sets as Kafka's ACLs above.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from diff_wire import WireClient, build_batch, kio_schema, seconds
from kafka_ref import KafkaRef
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.errors import ErrorCode
from ref_fixtures import SHARED_BROKER_CONFIG, HasBootstrap, skip_without_java

from strom.core.testing import BrokerProcess

RUN = uuid.uuid4().hex[:8]
OMITTED = -(1 << 31)
TOPIC_OPS = {3, 4, 5, 6, 7, 8, 10, 11}  # READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
CLUSTER_OPS = {5, 7, 8, 9, 10, 11, 12}  # CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS ALTER_CONFIGS IDEMPOTENT_WRITE
GROUP_OPS = {3, 6, 8, 10, 11}  # READ DELETE DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
WRITE, DELETE, DESCRIBE, ALTER_CONFIGS = 4, 6, 8, 11

STANDARD = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true"}
# (resource type, name, pattern type, operation, permission) for User:* from any host: ALLOW ALL on
# every topic, group and the cluster (so no resource falls back to allow.everyone.if.no.acl.found),
# and the DENYs (DENY wins).
TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL, PREFIXED = 3, 4
ALL, DENY, ALLOW = 2, 2, 3
ACLS = [(TOPIC, "*", LITERAL, ALL, ALLOW), (TOPIC, "denied-", PREFIXED, WRITE, DENY),
        (TOPIC, "hidden-", PREFIXED, DESCRIBE, DENY), (GROUP, "*", LITERAL, ALL, ALLOW),
        (GROUP, "keep-", PREFIXED, DELETE, DENY), (CLUSTER, "kafka-cluster", LITERAL, ALL, ALLOW),
        (CLUSTER, "kafka-cluster", LITERAL, ALTER_CONFIGS, DENY)]
DESCRIBE_CLUSTER_DENIED = (CLUSTER, "kafka-cluster", LITERAL, DESCRIBE, DENY)

OPEN, DENIED, HIDDEN, MISSING = f"ops-{RUN}", f"denied-{RUN}", f"hidden-{RUN}", f"missing-{RUN}"
LIVE_GROUP, DEAD_GROUP = f"keep-live-{RUN}", f"dead-{RUN}"


def bits(value: int) -> list[int] | str:
    """An authorized-operations field, readable: the operation codes set, or OMITTED."""
    if value == OMITTED:
        return "OMITTED"
    return sorted(code for code in range(32) if value >> code & 1)


def create_topics(c: WireClient, names: list[str]) -> dict[str, uuid.UUID]:
    """Create the topics; their ids (a topic hidden from the caller has no other way to learn it)."""
    resp = c.request(CreateTopicsRequest(topics=tuple(CreatableTopic(
        name=n, num_partitions=1, replication_factor=1, assignments=(), configs=()) for n in names),
        timeout=seconds(30), validate_only=False))
    assert all(t.error_code == 0 for t in resp.topics), resp
    return {t.name: t.topic_id for t in resp.topics}


def create_acls(c: WireClient, acls: list[tuple[int, str, int, int, int]]) -> None:
    m = kio_schema("create_acls", 3)
    resp = c.request(m.CreateAclsRequest(creations=tuple(m.AclCreation(
        resource_type=t, resource_name=n, resource_pattern_type=p, principal="User:*", host="*",
        operation=o, permission_type=perm) for t, n, p, o, perm in acls)))
    assert all(r.error_code == 0 for r in resp.results), resp


def describe_cluster(c: WireClient, version: int, include: bool) -> Any:
    m = kio_schema("describe_cluster", version)
    kw: dict[str, Any] = {"include_cluster_authorized_operations": include}
    if version >= 1:
        kw["endpoint_type"] = 1
    if version >= 2:
        kw["include_fenced_brokers"] = False
    return c.request(m.DescribeClusterRequest(**kw))


def metadata(c: WireClient, version: int, topics: list[str] | None, include: bool, auto_create: bool = False) -> Any:
    m = kio_schema("metadata", version)
    kw: dict[str, Any] = {"allow_auto_topic_creation": auto_create, "include_topic_authorized_operations": include}
    if version <= 10:
        kw["include_cluster_authorized_operations"] = include
    id_field = {"topic_id": None} if version >= 10 else {}
    kw["topics"] = None if topics is None else tuple(m.MetadataRequestTopic(name=t, **id_field) for t in topics)
    return c.request(m.MetadataRequest(**kw))


def metadata_by_id(c: WireClient, topic_id: uuid.UUID) -> Any:
    m = kio_schema("metadata", 12)
    return c.request(m.MetadataRequest(topics=(m.MetadataRequestTopic(name=None, topic_id=topic_id),),
                                       allow_auto_topic_creation=False, include_topic_authorized_operations=True))


def observe(c: WireClient, ids: dict[str, uuid.UUID]) -> dict[str, Any]:
    """Every authorized-operations field the scenario's requests are answered with."""
    named = [OPEN, DENIED, HIDDEN, MISSING]
    seen: dict[str, Any] = {}
    for version in range(8, 14):
        for include in (True, False):
            resp = metadata(c, version, named, include)
            seen[f"metadata v{version} include={include}"] = {
                "topics": sorted((t.name, ErrorCode(int(t.error_code)).name, bits(t.topic_authorized_operations))
                                 for t in resp.topics),
                "cluster": bits(resp.cluster_authorized_operations) if version <= 10 else None}
    listed = metadata(c, 12, None, True)
    seen["metadata v12 all topics"] = sorted((t.name, bits(t.topic_authorized_operations)) for t in listed.topics
                                             if t.name in named)
    for topic in (OPEN, HIDDEN):
        by_id = metadata_by_id(c, ids[topic]).topics[0]
        seen[f"metadata v12 by id of {topic}"] = (by_id.name, by_id.topic_id == ids[topic],
                                                  ErrorCode(int(by_id.error_code)).name,
                                                  bits(by_id.topic_authorized_operations))
    for version in range(0, 3):
        for include in (True, False):
            resp = describe_cluster(c, version, include)
            seen[f"describe_cluster v{version} include={include}"] = (
                ErrorCode(int(resp.error_code)).name, bits(resp.cluster_authorized_operations))
    for version in range(0, 7):
        m = kio_schema("describe_groups", version)
        for include in (True, False) if version >= 3 else (False,):
            kw: dict[str, Any] = {"groups": (LIVE_GROUP, DEAD_GROUP)}
            if version >= 3:
                kw["include_authorized_operations"] = include
            resp = c.request(m.DescribeGroupsRequest(**kw))
            seen[f"describe_groups v{version} include={include}"] = sorted([
                (g.group_id, ErrorCode(int(g.error_code)).name, g.group_state,
                 bits(g.authorized_operations) if version >= 3 else None) for g in resp.groups], key=str)
    m = kio_schema("describe_topic_partitions", 0)
    resp = c.request(m.DescribeTopicPartitionsRequest(topics=tuple(m.TopicRequest(name=t) for t in named),
                                                      response_partition_limit=100, cursor=None))
    seen["describe_topic_partitions"] = sorted(
        (t.name, ErrorCode(int(t.error_code)).name, bits(t.topic_authorized_operations)) for t in resp.topics)
    return seen


def wait_until(check: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@contextmanager
def prepare(bootstrap: str, acls: list[tuple[int, str, int, int, int]] | None
            ) -> Iterator[tuple[WireClient, dict[str, uuid.UUID]]]:
    """The scenario's ACLs (if any) and topics on one broker, a live classic group with one
    confluent-kafka member for as long as the caller observes; a wire client to it and the
    topic ids."""
    with WireClient(bootstrap) as c:
        if acls:
            create_acls(c, acls)
            # Kafka's authorizer learns ACLs from the metadata log a moment after CreateAcls answers.
            wait_until(lambda: metadata(c, 12, [HIDDEN], False).topics[0].error_code
                       == ErrorCode.topic_authorization_failed, "the ACLs to apply")
        ids = create_topics(c, [OPEN, DENIED, HIDDEN])
        c.wait_for_leaders(OPEN, 1)
        c.wait_for_leaders(DENIED, 1)
        c.wait_for_coordinator(LIVE_GROUP)
        c.wait_for_coordinator(DEAD_GROUP)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": LIVE_GROUP, "log_level": 0,
                             "session.timeout.ms": 30000})
        try:
            consumer.subscribe([OPEN])

            def joined() -> bool:
                consumer.poll(0.2)
                return bool(consumer.assignment())

            wait_until(joined, f"{LIVE_GROUP} to be assigned {OPEN}")
            yield c, ids
        finally:
            consumer.close()


def compare(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    differences = [f"{k}:\n  strom {ours.get(k)}\n  Kafka {theirs[k]}" for k in theirs if ours.get(k) != theirs[k]]
    assert not differences, "\n".join(differences)


def test_without_an_authorizer(strom: HasBootstrap, kafka: KafkaRef) -> None:
    observed = {}
    for who, broker in (("kafka", kafka), ("strom", strom)):
        with prepare(broker.bootstrap, None) as (c, ids):
            observed[who] = observe(c, ids)
    theirs = observed["kafka"]
    # Kafka without an authorizer: every supported operation where asked for, INT32_MIN elsewhere.
    assert theirs["metadata v8 include=True"] == {
        "topics": sorted((t, "none" if t != MISSING else "unknown_topic_or_partition", sorted(TOPIC_OPS))
                         for t in (OPEN, DENIED, HIDDEN, MISSING)), "cluster": sorted(CLUSTER_OPS)}
    assert theirs["metadata v8 include=False"]["cluster"] == "OMITTED"
    assert theirs["describe_cluster v2 include=True"] == ("none", sorted(CLUSTER_OPS))
    assert theirs["describe_groups v5 include=True"] == [(DEAD_GROUP, "none", "Dead", sorted(GROUP_OPS)),
                                                         (LIVE_GROUP, "none", "Stable", sorted(GROUP_OPS))]
    compare(observed["strom"], theirs)


@pytest.fixture(scope="module")
def standard_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaRef, BrokerProcess]]:
    """Kafka and strom, each with the StandardAuthorizer and no ACLs yet."""
    skip_without_java()
    config = {**SHARED_BROKER_CONFIG, **STANDARD}
    with KafkaRef(tmp_path_factory.mktemp("kafka-acl"), config=config) as kafka, \
            BrokerProcess(tmp_path_factory.mktemp("strom-acl"), config=config) as strom:
        yield kafka, strom


@pytest.mark.slow
def test_with_kafka_acls(standard_pair: tuple[KafkaRef, BrokerProcess]) -> None:
    observed: dict[str, dict[str, Any]] = {}
    cluster_denied: dict[str, dict[str, Any]] = {}
    kafka, strom = standard_pair
    brokers: tuple[tuple[str, HasBootstrap], ...] = (("kafka", kafka), ("strom", strom))
    for who, broker in brokers:
        with prepare(broker.bootstrap, ACLS) as (c, ids):
            observed[who] = observe(c, ids)
            # A topic the caller may not DESCRIBE is not auto-created either (Kafka authorizes
            # DESCRIBE before it looks topics up): a validate-only CreateTopics shows it is absent.
            auto = f"hidden-auto-{RUN}"
            answer = metadata(c, 12, [auto], True, auto_create=True).topics[0]
            check = c.request(CreateTopicsRequest(topics=(CreatableTopic(
                name=auto, num_partitions=1, replication_factor=1, assignments=(), configs=()),),
                timeout=seconds(30), validate_only=True)).topics[0]
            observed[who]["auto-create hidden"] = (ErrorCode(int(answer.error_code)).name,
                                                   bits(answer.topic_authorized_operations),
                                                   ErrorCode(int(check.error_code)).name)
            create_acls(c, [DESCRIBE_CLUSTER_DENIED])
            wait_until(lambda: describe_cluster(c, 0, True).cluster_authorized_operations == 0,
                       "DESCRIBE on the cluster to be denied")
            cluster_denied[who] = {f"v{v}": bits(describe_cluster(c, v, True).cluster_authorized_operations)
                                   for v in range(3)}
            cluster_denied[who]["metadata"] = bits(metadata(c, 10, [OPEN], True).cluster_authorized_operations)
    theirs = observed["kafka"]
    assert theirs["describe_topic_partitions"] == sorted([
        (OPEN, "none", sorted(TOPIC_OPS)), (DENIED, "none", sorted(TOPIC_OPS - {WRITE})),
        (HIDDEN, "topic_authorization_failed", "OMITTED"), (MISSING, "unknown_topic_or_partition", sorted(TOPIC_OPS))])
    assert theirs["metadata v10 include=True"]["cluster"] == sorted(CLUSTER_OPS - {ALTER_CONFIGS})
    assert theirs["auto-create hidden"] == ("topic_authorization_failed", "OMITTED", "none")
    # Asked for by id, a topic the caller may not describe is named by its id only.
    assert theirs[f"metadata v12 by id of {HIDDEN}"] == (None, True, "topic_authorization_failed", "OMITTED")
    assert theirs["describe_groups v5 include=True"][1][3] == sorted(GROUP_OPS - {DELETE})  # keep-live-*
    compare(observed["strom"], theirs)
    assert cluster_denied["kafka"] == {"v0": [], "v1": [], "v2": [], "metadata": []}
    assert cluster_denied["strom"] == cluster_denied["kafka"]

    # The authorizer calls behind authorized operations are probes, not audit-logged (Kafka's
    # logIfAllowed/logIfDenied false): strom's log shows a real refusal, a Produce to the
    # denied-* topic, and none of the probes' refusals (WRITE there, DELETE on the keep-* group,
    # ALTER_CONFIGS on the cluster).
    with WireClient(strom.bootstrap) as c:
        assert c.produce_batches({(DENIED, 0): build_batch([(b"k", b"v")])}, version=9) == {
            (DENIED, 0): ErrorCode.topic_authorization_failed}
    refusal = f"Denied operation = WRITE from host = 127.0.0.1 on resource = Topic:LITERAL:{DENIED} for request = PRODUCE "
    assert strom.wait_for_log(refusal, 30), strom.log_tail()
    probes = [line for line in strom.log_text().splitlines() if "is Denied operation = " in line and (
        ("operation = WRITE" in line and "for request = PRODUCE " not in line)
        or "operation = DELETE" in line or "operation = ALTER_CONFIGS" in line)]
    assert not probes, "\n".join(probes[:5])


def test_an_authorizer_plugin(tmp_path: Path) -> None:
    """The test plugin's DenyTopics (WRITE refused on ``denied-*`` topics, all else allowed)
    answers the topic bit sets Kafka's ACLs give above, and every cluster and group operation."""
    config = {"authorizer.class.name": "strom_test_plugin.DenyTopics"}
    with BrokerProcess(tmp_path / "strom", config=config) as broker, prepare(broker.bootstrap, None) as (c, ids):
        seen = observe(c, ids)
    assert seen["describe_topic_partitions"] == sorted([
        (OPEN, "none", sorted(TOPIC_OPS)), (DENIED, "none", sorted(TOPIC_OPS - {WRITE})),
        (HIDDEN, "none", sorted(TOPIC_OPS)), (MISSING, "unknown_topic_or_partition", sorted(TOPIC_OPS))])
    assert seen["metadata v9 include=True"] == {"topics": seen["describe_topic_partitions"], "cluster": sorted(CLUSTER_OPS)}
    assert seen["metadata v12 all topics"] == sorted((t, ops) for t, _, ops in seen["describe_topic_partitions"]
                                                     if t != MISSING)
    assert seen["describe_cluster v1 include=True"] == ("none", sorted(CLUSTER_OPS))
    assert seen["describe_groups v4 include=True"][1] == (LIVE_GROUP, "none", "Stable", sorted(GROUP_OPS))
