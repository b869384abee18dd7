"""ACLs on a real broker with Kafka's StandardAuthorizer rules, through real clients.

The module's broker (tests/helpers/acl_broker.py) runs
``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`` with a
SASL_PLAINTEXT listener: ``User:admin`` (PLAIN) is a super user and manages the ACLs,
``User:alice`` has only the ACLs a test gives her. Each test uses its own topic, group and
prefix names.

confluent-kafka (librdkafka) produces, consumes and creates topics and manages ACLs;
kafka-python describes them; raw frames check what no client exposes.
"""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from acl_broker import USERS, AclBroker, sasl_wire_client
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from diff_wire import kio_schema
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KpResourceType
from kafka_wire import connect, roundtrip
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from strom.core.testing import BrokerProcess, wait_for

ME = "User:alice"
Config = dict[str, Any]


def acl_filter(rtype: ResourceType, name: str | None, pattern: ResourcePatternType, principal: str | None = None,
               host: str | None = None, op: AclOperation = AclOperation.ANY,
               permission: AclPermissionType = AclPermissionType.ANY) -> AclBindingFilter:
    """An AclBindingFilter; None matches anything (confluent-kafka's stubs type these as str only)."""
    return AclBindingFilter(rtype, name, pattern, principal, host, op, permission)  # type: ignore[arg-type]


def acl(rtype: ResourceType, name: str, op: AclOperation, *, principal: str = ME,
        pattern: ResourcePatternType = ResourcePatternType.LITERAL,
        permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, permission)


def create_acls(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings), request_timeout=30).values():
        assert future.result(timeout=30) is None


def delete_acls(admin: AdminClient, binding_filter: AclBindingFilter) -> list[AclBinding]:
    [future] = admin.delete_acls([binding_filter], request_timeout=30).values()
    deleted: list[AclBinding] = future.result(timeout=30)
    return deleted


def describe_acls(admin: AdminClient, binding_filter: AclBindingFilter) -> list[AclBinding]:
    found: list[AclBinding] = admin.describe_acls(binding_filter, request_timeout=30).result(timeout=30)
    return found


def create_topic_error(admin: AdminClient, name: str) -> KafkaError | None:
    """None when the topic was created, else the error CreateTopics answered."""
    future = admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name]
    try:
        future.result(timeout=30)
    except KafkaException as e:
        error: KafkaError = e.args[0]
        return error
    return None


def produce_error(client: Config, topic: str, **extra: object) -> KafkaError | None:
    """Produce one record; the delivery report's error (None: delivered)."""
    outcome: list[KafkaError | None] = []
    producer = Producer({**client, "message.timeout.ms": 15000, **extra})
    producer.produce(topic, b"value", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(30)
    assert outcome, "no delivery report within 30 s"
    return outcome[0]


def consume(client: Config, topic: str, group: str, timeout: float = 30.0) -> KafkaError | int:
    """Read ``topic`` from the start in ``group``: the first error, or the number of records read
    once at least one arrived."""
    consumer = Consumer({**client, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        box: list[KafkaError | int] = []

        def poll() -> bool:
            msg = consumer.poll(0.5)
            if msg is None:
                return False
            error = msg.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                box.append(error)
                return True
            if error is None:
                box.append(1)
                return True
            return False

        wait_for(poll, timeout, f"a record or an error from {topic} in group {group}", interval=0)
        return box[0]
    finally:
        consumer.close()


def code_of(result: KafkaError | int | None) -> int | None:
    return result.code() if isinstance(result, KafkaError) else None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    with AclBroker(tmp_path_factory.mktemp("acl-broker") / "data") as broker:
        yield broker


@pytest.fixture
def admin(cluster: AclBroker) -> AdminClient:
    """The super user's admin client: it manages the ACLs."""
    return AdminClient(cluster.client("admin"))


@pytest.fixture
def alice(cluster: AclBroker) -> Config:
    """alice's client settings (SASL/PLAIN)."""
    return cluster.client("alice")


@pytest.fixture
def alice_admin(alice: Config) -> AdminClient:
    return AdminClient(alice)


@pytest.fixture
def suffix() -> str:
    return uuid.uuid4().hex[:8]


def test_acls_survive_a_restart(cluster: AclBroker, admin: AdminClient, alice: Config, suffix: str) -> None:
    topic = f"restart-{suffix}"
    granted = [acl(ResourceType.TOPIC, topic, AclOperation.WRITE),
               acl(ResourceType.TOPIC, f"restart-{suffix[:4]}", AclOperation.READ, pattern=ResourcePatternType.PREFIXED)]
    create_acls(admin, *granted)
    assert create_topic_error(admin, topic) is None
    cluster.restart()  # the ACLs come back from the metadata log
    found = describe_acls(admin, acl_filter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, ME))
    assert set(found) == set(granted)
    assert produce_error(alice, topic) is None


def test_user_without_acls_is_denied_until_granted(admin: AdminClient, alice: Config, alice_admin: AdminClient,
                                                   suffix: str) -> None:
    topic, group = f"acl-t-{suffix}", f"acl-g-{suffix}"
    # Topic creation: neither CREATE on the cluster nor on the topic.
    assert code_of(create_topic_error(alice_admin, topic)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    create_acls(admin, acl(ResourceType.TOPIC, topic, AclOperation.CREATE))
    assert create_topic_error(alice_admin, topic) is None
    # CREATE implies neither WRITE nor READ.
    assert code_of(produce_error(alice, topic)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    create_acls(admin, acl(ResourceType.TOPIC, topic, AclOperation.WRITE))
    assert produce_error(alice, topic) is None
    # The group first (FindCoordinator needs DESCRIBE on it, which READ implies) ...
    assert code_of(consume(alice, topic, group)) == KafkaError.GROUP_AUTHORIZATION_FAILED
    create_acls(admin, acl(ResourceType.GROUP, group, AclOperation.READ))
    # ... then the topic (WRITE implies DESCRIBE, so it is found, but READ is missing).
    assert code_of(consume(alice, topic, group)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    create_acls(admin, acl(ResourceType.TOPIC, topic, AclOperation.READ))
    assert consume(alice, topic, group) == 1
    # ACLs are per principal: bob has none of alice's.
    assert code_of(produce_error({**alice, "sasl.username": "bob", "sasl.password": USERS["bob"]}, topic)) == \
        KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_prefixed_acls(admin: AdminClient, alice: Config, alice_admin: AdminClient, suffix: str) -> None:
    prefix = f"pfx-{suffix}-"
    create_acls(admin, *(acl(ResourceType.TOPIC, prefix, op, pattern=ResourcePatternType.PREFIXED)
                         for op in (AclOperation.CREATE, AclOperation.WRITE)))
    assert create_topic_error(alice_admin, prefix + "orders") is None
    assert produce_error(alice, prefix + "orders") is None
    # A name that only shares part of the prefix, and the prefix without its dash, are not covered.
    assert code_of(create_topic_error(alice_admin, f"pfx-{suffix}")) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert code_of(create_topic_error(alice_admin, f"other-{suffix}")) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_deny_overrides_allow(admin: AdminClient, alice: Config, suffix: str) -> None:
    topic = f"deny-{suffix}"
    create_acls(admin, acl(ResourceType.TOPIC, topic, AclOperation.ALL))
    assert create_topic_error(admin, topic) is None
    assert produce_error(alice, topic) is None
    deny = acl(ResourceType.TOPIC, f"deny-{suffix[:4]}", AclOperation.WRITE, principal="User:*",
               pattern=ResourcePatternType.PREFIXED, permission=AclPermissionType.DENY)
    create_acls(admin, deny)
    try:
        assert code_of(produce_error(alice, topic)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        # A super user is above every ACL, DENY included.
        assert produce_error(admin_config(alice), topic) is None
    finally:
        removed = delete_acls(admin, acl_filter(ResourceType.TOPIC, None, ResourcePatternType.ANY,
                                                permission=AclPermissionType.DENY))
    assert removed == [deny]
    assert produce_error(alice, topic) is None


def admin_config(alice: Config) -> Config:
    return {**alice, "sasl.username": "admin", "sasl.password": USERS["admin"]}


def test_describe_and_delete_with_filters(cluster: AclBroker, admin: AdminClient, suffix: str) -> None:
    name = f"filters-{suffix}"
    alice = acl(ResourceType.TOPIC, name, AclOperation.READ, principal="User:alice")
    bob_prefixed = acl(ResourceType.TOPIC, name[:10], AclOperation.WRITE, principal="User:bob",
                       pattern=ResourcePatternType.PREFIXED)
    everyone_group = acl(ResourceType.GROUP, name, AclOperation.READ, principal="User:*",
                         permission=AclPermissionType.DENY)
    create_acls(admin, alice, bob_prefixed, everyone_group)
    create_acls(admin, alice)  # creating an existing ACL succeeds and adds nothing

    def matching(rtype: ResourceType, pattern: ResourcePatternType, principal: str | None = None,
                 resource: str | None = name) -> set[AclBinding]:
        return set(describe_acls(admin, acl_filter(rtype, resource, pattern, principal)))

    # MATCH: every pattern that applies to the topic name (the literal and the prefix).
    assert matching(ResourceType.TOPIC, ResourcePatternType.MATCH) == {alice, bob_prefixed}
    # ANY: patterns whose own name is exactly this one.
    assert matching(ResourceType.TOPIC, ResourcePatternType.ANY) == {alice}
    assert matching(ResourceType.TOPIC, ResourcePatternType.PREFIXED, resource=name[:10]) == {bob_prefixed}
    assert matching(ResourceType.ANY, ResourcePatternType.ANY, "User:*") == {everyone_group}
    # kafka-python reads the same ACLs.
    kp = KafkaAdminClient(bootstrap_servers=cluster.sasl, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                          sasl_plain_username="admin", sasl_plain_password=USERS["admin"])
    try:
        acls, error = kp.describe_acls(ACLFilter(principal="User:alice", host=None, operation=ACLOperation.ANY,
                                                 permission_type=ACLPermissionType.ANY,
                                                 resource_pattern=ResourcePatternFilter(
                                                     KpResourceType.TOPIC, name, ACLResourcePatternType.LITERAL)))
        assert error.errno == 0
        assert [(a.principal, a.operation, a.resource_pattern.resource_name) for a in acls] == [
            ("User:alice", ACLOperation.READ, name)]
    finally:
        kp.close()
    # Delete: each filter answers what it removed; afterwards nothing of this test is left.
    removed = delete_acls(admin, acl_filter(ResourceType.TOPIC, name, ResourcePatternType.MATCH))
    assert set(removed) == {alice, bob_prefixed}
    assert delete_acls(admin, acl_filter(ResourceType.GROUP, name, ResourcePatternType.LITERAL, "User:*", "*",
                                         AclOperation.READ, AclPermissionType.DENY)) == [everyone_group]
    assert matching(ResourceType.ANY, ResourcePatternType.MATCH) == set()


def test_managing_acls_needs_alter_and_describe_on_the_cluster(admin: AdminClient, alice_admin: AdminClient,
                                                               suffix: str) -> None:
    binding = acl(ResourceType.TOPIC, f"mine-{suffix}", AclOperation.READ)
    [future] = alice_admin.create_acls([binding], request_timeout=30).values()
    with pytest.raises(KafkaException) as err:
        future.result(timeout=30)
    assert err.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    create_acls(admin, acl(ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER),
                acl(ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE))
    try:
        create_acls(alice_admin, binding)
        assert describe_acls(alice_admin, acl_filter(ResourceType.TOPIC, f"mine-{suffix}",
                                                     ResourcePatternType.ANY)) == [binding]
    finally:
        delete_acls(admin, acl_filter(ResourceType.BROKER, None, ResourcePatternType.ANY, ME))


def test_invalid_acls_answer_invalid_request(admin: AdminClient) -> None:
    bad = [acl(ResourceType.BROKER, "not-the-cluster", AclOperation.ALTER),
           acl(ResourceType.TOPIC, "", AclOperation.READ)]
    futures = admin.create_acls(bad, request_timeout=30)
    for binding, future in futures.items():
        with pytest.raises(KafkaException) as err:
            future.result(timeout=30)
        assert err.value.args[0].code() == KafkaError.INVALID_REQUEST, binding


def test_without_an_acl_authorizer_the_acl_apis_are_security_disabled(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as proc:  # the default: allow-all, as Kafka without an authorizer
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        # librdkafka drops DescribeAcls' top-level error (an empty list), so ask on the wire.
        request = DescribeAclsRequest(resource_type_filter=i8(1), resource_name_filter=None, pattern_type_filter=i8(1),
                                      principal_filter=None, host_filter=None, operation=i8(1), permission_type=i8(1))
        with connect(proc.bootstrap) as sock:
            response = roundtrip(sock, request)
        assert (response.error_code, response.error_message) == (
            ErrorCode.security_disabled, "No Authorizer is configured on the broker")
        [future] = admin.create_acls([acl(ResourceType.TOPIC, "t", AclOperation.READ)], request_timeout=30).values()
        with pytest.raises(KafkaException) as err:
            future.result(timeout=30)
        assert err.value.args[0].code() == KafkaError.SECURITY_DISABLED
        # Everything else stays allowed.
        assert create_topic_error(admin, "open") is None
        assert produce_error({"bootstrap.servers": proc.bootstrap}, "open") is None


def test_idempotent_producer_with_write_on_its_topic(admin: AdminClient, alice: Config, suffix: str) -> None:
    """InitProducerId needs IDEMPOTENT_WRITE on the cluster or WRITE on any topic (Kafka's
    authorizeByResourceType): WRITE on the topic alone lets an idempotent producer in."""
    topic = f"idem-{suffix}"
    create_acls(admin, acl(ResourceType.TOPIC, topic, AclOperation.WRITE))
    assert create_topic_error(admin, topic) is None
    assert produce_error(alice, topic, **{"enable.idempotence": True}) is None


def test_a_follower_fetch_needs_cluster_action(cluster: AclBroker, admin: AdminClient, suffix: str) -> None:
    """Fetch with a replica id is a follower's: CLUSTER_ACTION on the cluster, not READ on the
    topic, decides (a client cannot read past the high watermark by posing as a replica)."""
    topic = f"follower-{suffix}"
    create_acls(admin, acl(ResourceType.TOPIC, topic, AclOperation.READ))
    assert create_topic_error(admin, topic) is None

    def fetch_error(replica_id: int) -> int:
        m = kio_schema("fetch", 12)
        with sasl_wire_client(cluster.sasl, "alice") as client:
            response = client.request(m.FetchRequest(
                replica_id=replica_id, max_wait=timedelta(0), min_bytes=0, isolation_level=0,
                topics=(m.FetchTopic(topic=topic, partitions=(m.FetchPartition(
                    partition=0, fetch_offset=0, partition_max_bytes=1 << 20),)),),
                forgotten_topics_data=()))
        return int(response.responses[0].partitions[0].error_code)

    assert fetch_error(-1) == 0
    assert fetch_error(1) == ErrorCode.topic_authorization_failed
    create_acls(admin, acl(ResourceType.BROKER, "kafka-cluster", AclOperation.CLUSTER_ACTION))
    try:
        assert fetch_error(1) == 0
    finally:
        delete_acls(admin, acl_filter(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, ME, "*",
                                      AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW))


def test_a_third_party_authorizer_still_decides(tmp_path: Path) -> None:
    """An entry-point authorizer that keeps no ACLs (tests/data/strom_test_plugin's DenyTopics)
    is still the one asked, and the ACL APIs answer SECURITY_DISABLED beside it."""
    if importlib.util.find_spec("strom_test_plugin") is None:
        pytest.skip("the test plugin is not installed (pip install --no-deps -e tests/data/strom_test_plugin, "
                    "as scripts/test.sh does)")
    with BrokerProcess(tmp_path / "data", config={"authorizer.class.name": "strom_test_plugin.DenyTopics"}) as proc:
        client: Config = {"bootstrap.servers": proc.bootstrap}
        admin = AdminClient(client)
        assert create_topic_error(admin, "denied-x") is None
        assert create_topic_error(admin, "open-x") is None
        assert code_of(produce_error(client, "denied-x")) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert produce_error(client, "open-x") is None
        assert produce_error(client, "open-x", **{"enable.idempotence": True}) is None
        [future] = admin.create_acls([acl(ResourceType.TOPIC, "t", AclOperation.READ)], request_timeout=30).values()
        with pytest.raises(KafkaException) as err:
            future.result(timeout=30)
        assert err.value.args[0].code() == KafkaError.SECURITY_DISABLED


def test_denials_are_audit_logged_but_not_filtered_listings(cluster: AclBroker, admin: AdminClient, alice: Config,
                                                            alice_admin: AdminClient, suffix: str) -> None:
    """A request refused is logged on kafka.authorizer.logger (Kafka's audit line); a topic left
    out of alice's full Metadata listing is not (Kafka's logIfDenied=false for filters)."""
    hidden, denied = f"hidden-{suffix}", f"audit-{suffix}"
    for name in (hidden, denied):
        assert create_topic_error(admin, name) is None
    create_acls(admin, acl(ResourceType.TOPIC, denied, AclOperation.DESCRIBE))
    assert hidden not in alice_admin.list_topics(timeout=10).topics
    assert code_of(produce_error(alice, denied)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    line = f"Principal = User:alice is Denied operation = WRITE from host = 127.0.0.1 on resource = Topic:LITERAL:{denied}"
    assert cluster.process.wait_for_log(line, timeout=10), cluster.process.log_tail()
    assert f"on resource = Topic:LITERAL:{hidden}" not in cluster.process.log_text()


def test_hosts_and_the_wildcard_principal(admin: AdminClient, alice: Config, suffix: str) -> None:
    topic = f"hosts-{suffix}"
    bob = {**alice, "sasl.username": "bob", "sasl.password": USERS["bob"]}
    assert create_topic_error(admin, topic) is None
    # User:* from another host: nobody here.
    create_acls(admin, AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:*", "10.9.9.9",
                                  AclOperation.WRITE, AclPermissionType.ALLOW))
    assert code_of(produce_error(alice, topic)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # User:* from this host: alice and bob.
    create_acls(admin, AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:*", "127.0.0.1",
                                  AclOperation.WRITE, AclPermissionType.ALLOW))
    assert produce_error(alice, topic) is None
    assert produce_error(bob, topic) is None


def test_allow_everyone_if_no_acl_found(tmp_path: Path) -> None:
    with AclBroker(tmp_path / "data", **{"allow.everyone.if.no.acl.found": "true"}) as broker:
        admin, alice = AdminClient(broker.client("admin")), broker.client("alice")
        assert create_topic_error(AdminClient(alice), "open") is None  # no ACL on the cluster or the topic
        assert produce_error(alice, "open") is None
        # One ACL on the topic, for someone else: now only ACLs decide, and alice has none.
        create_acls(admin, acl(ResourceType.TOPIC, "open", AclOperation.WRITE, principal="User:bob"))
        assert code_of(produce_error(alice, "open")) == KafkaError.TOPIC_AUTHORIZATION_FAILED
