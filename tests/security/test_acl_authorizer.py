"""The built-in ``standard`` authorizer's rules, case by case (Kafka's StandardAuthorizerTest).

Unit tier: the authorizer is the plugin object itself, loaded through strom's plugin manager by
Kafka's class name, fed ACLs as the broker's metadata replay feeds them (the last test: real
AccessControlEntryRecords through MetadataDelta and the AclPublisher). The broker-level tests
(ACLs created through CreateAcls and enforced on real clients) are in test_acl_broker.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import pytest

from strom.core.errors import CorruptMessageError
from strom.core.metadata.delta import MetadataDelta
from strom.core.metadata.image import MetadataImage
from strom.core.metadata.records import Message, RemoveAccessControlEntryRecord, decode_record, encode_record
from strom.core.security.acl_control import record_of
from strom.core.security.acl_publisher import AclPublisher
from strom.plugins.hookspecs.authorizers import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    ClusterMetadataAuthorizer,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    authorize_by_resource_type,
)
from strom.plugins.manager import get_plugin_manager, load_authorizer

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED


def make(props: Mapping[str, str] | None = None) -> ClusterMetadataAuthorizer:
    config = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer", **(props or {})}
    authorizer = load_authorizer(get_plugin_manager(autoload=False), config)
    assert isinstance(authorizer, ClusterMetadataAuthorizer)
    authorizer.load_snapshot({})
    return authorizer


def acl(rtype: ResourceType, name: str, pattern: PatternType, principal: str, op: AclOperation,
        perm: AclPermissionType = ALLOW, host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, host, op, perm))


def check(authorizer: ClusterMetadataAuthorizer, principal: str, op: AclOperation, rtype: ResourceType,
          name: str, address: str = "10.0.0.1:5555") -> AuthorizationResult:
    ctx = RequestContext(principal=principal, client_address=address)
    return authorizer.authorize(ctx, [Action(op, ResourcePattern(rtype, name))])[0]


def test_no_acls_denies_unless_allow_everyone() -> None:
    assert check(make(), "User:alice", AclOperation.READ, TOPIC, "t") is DENIED
    everyone = make({"allow.everyone.if.no.acl.found": "true"})
    assert check(everyone, "User:alice", AclOperation.READ, TOPIC, "t") is ALLOWED
    # A resource with ACLs (for someone else) is no longer "no ACL found".
    everyone.add_acl("a", acl(TOPIC, "t", LITERAL, "User:bob", AclOperation.READ))
    assert check(everyone, "User:alice", AclOperation.READ, TOPIC, "t") is DENIED
    assert check(everyone, "User:bob", AclOperation.READ, TOPIC, "t") is ALLOWED
    assert check(everyone, "User:alice", AclOperation.READ, TOPIC, "other") is ALLOWED


def test_super_users_ignore_deny() -> None:
    a = make({"super.users": "User:admin;User:root"})
    a.add_acl("d", acl(TOPIC, "*", LITERAL, "User:*", AclOperation.ALL, DENY))
    assert check(a, "User:root", AclOperation.WRITE, TOPIC, "t") is ALLOWED
    assert check(a, "User:admin", AclOperation.ALTER, CLUSTER, "kafka-cluster") is ALLOWED
    assert check(a, "User:alice", AclOperation.WRITE, TOPIC, "t") is DENIED


def test_literal_prefixed_wildcard_and_deny_wins() -> None:
    a = make()
    a.add_acl("1", acl(TOPIC, "orders", LITERAL, "User:alice", AclOperation.WRITE))
    a.add_acl("2", acl(TOPIC, "pay-", PREFIXED, "User:alice", AclOperation.READ))
    a.add_acl("3", acl(GROUP, "*", LITERAL, "User:*", AclOperation.READ))
    assert check(a, "User:alice", AclOperation.WRITE, TOPIC, "orders") is ALLOWED
    assert check(a, "User:alice", AclOperation.WRITE, TOPIC, "orders2") is DENIED  # literal is exact
    assert check(a, "User:alice", AclOperation.READ, TOPIC, "pay-eu") is ALLOWED
    assert check(a, "User:alice", AclOperation.READ, TOPIC, "pay") is DENIED
    assert check(a, "User:bob", AclOperation.READ, GROUP, "any-group") is ALLOWED
    a.add_acl("4", acl(TOPIC, "pay-secret", LITERAL, "User:alice", AclOperation.READ, DENY))
    assert check(a, "User:alice", AclOperation.READ, TOPIC, "pay-secret") is DENIED
    assert check(a, "User:alice", AclOperation.READ, TOPIC, "pay-public") is ALLOWED
    a.add_acl("5", acl(TOPIC, "p", PREFIXED, "User:*", AclOperation.ALL, DENY))
    assert check(a, "User:alice", AclOperation.READ, TOPIC, "pay-public") is DENIED
    a.remove_acl("5")
    assert check(a, "User:alice", AclOperation.READ, TOPIC, "pay-public") is ALLOWED


def test_implied_operations_only_from_allow() -> None:
    a = make()
    a.add_acl("1", acl(TOPIC, "t", LITERAL, "User:alice", AclOperation.READ))
    a.add_acl("2", acl(TOPIC, "t", LITERAL, "User:alice", AclOperation.ALTER_CONFIGS))
    assert check(a, "User:alice", AclOperation.DESCRIBE, TOPIC, "t") is ALLOWED
    assert check(a, "User:alice", AclOperation.DESCRIBE_CONFIGS, TOPIC, "t") is ALLOWED
    assert check(a, "User:alice", AclOperation.WRITE, TOPIC, "t") is DENIED
    b = make()
    b.add_acl("1", acl(TOPIC, "t", LITERAL, "User:alice", AclOperation.DESCRIBE))
    b.add_acl("2", acl(TOPIC, "t", LITERAL, "User:alice", AclOperation.READ, DENY))
    assert check(b, "User:alice", AclOperation.DESCRIBE, TOPIC, "t") is ALLOWED  # a DENY READ implies nothing
    assert check(b, "User:alice", AclOperation.READ, TOPIC, "t") is DENIED


def test_host_matching() -> None:
    a = make()
    a.add_acl("1", acl(TOPIC, "t", LITERAL, "User:alice", AclOperation.READ, host="10.0.0.1"))
    assert check(a, "User:alice", AclOperation.READ, TOPIC, "t", "10.0.0.1:4000") is ALLOWED
    assert check(a, "User:alice", AclOperation.READ, TOPIC, "t", "10.0.0.2:4000") is DENIED


def test_filters_and_snapshot() -> None:
    a = make()
    bindings = {
        "1": acl(TOPIC, "orders", LITERAL, "User:alice", AclOperation.WRITE),
        "2": acl(TOPIC, "ord", PREFIXED, "User:bob", AclOperation.READ),
        "3": acl(TOPIC, "*", LITERAL, "User:carol", AclOperation.DESCRIBE),
        "4": acl(GROUP, "g", LITERAL, "User:alice", AclOperation.READ, DENY),
    }
    a.load_snapshot(bindings)
    assert len(a.acls(AclBindingFilter())) == 4
    match = AclBindingFilter(ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH))
    assert sorted(b.entry.principal for b in a.acls(match)) == ["User:alice", "User:bob", "User:carol"]
    exact_any = AclBindingFilter(ResourcePatternFilter(TOPIC, "orders", PatternType.ANY))
    assert [b.entry.principal for b in a.acls(exact_any)] == ["User:alice"]
    denies = AclBindingFilter(entry_filter=AccessControlEntryFilter(permission_type=DENY))
    assert [b.pattern.name for b in a.acls(denies)] == ["g"]
    a.load_snapshot({"9": bindings["4"]})
    assert a.acls(AclBindingFilter()) == [bindings["4"]]


@pytest.mark.parametrize(("acls", "expected"), [
    ([], DENIED),
    ([acl(TOPIC, "t", LITERAL, "User:alice", AclOperation.WRITE)], ALLOWED),
    ([acl(TOPIC, "t", PREFIXED, "User:alice", AclOperation.WRITE),
      acl(TOPIC, "t", PREFIXED, "User:alice", AclOperation.WRITE, DENY)], DENIED),
    ([acl(TOPIC, "abc", LITERAL, "User:alice", AclOperation.WRITE),
      acl(TOPIC, "a", PREFIXED, "User:alice", AclOperation.WRITE, DENY)], DENIED),
    ([acl(TOPIC, "*", LITERAL, "User:*", AclOperation.ALL)], ALLOWED),
])
def test_authorize_by_resource_type(acls: list[AclBinding], expected: AuthorizationResult) -> None:
    a = make()
    for i, b in enumerate(acls):
        a.add_acl(str(i), b)
    ctx = RequestContext(principal="User:alice", client_address="127.0.0.1:1")
    assert authorize_by_resource_type(a, ctx, AclOperation.WRITE, TOPIC) is expected


def _commit(image: MetadataImage, records: list[Message], publisher: AclPublisher) -> MetadataImage:
    """One committed batch as the metadata loader replays it (through the records' wire codec)."""
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(decode_record(encode_record(record)))
    new = delta.apply(image.offset + len(records), 1)
    publisher.on_metadata_update(delta, new)
    return new


def test_acl_records_replay_into_the_authorizer_and_survive_a_snapshot() -> None:
    authorizer = make()
    publisher = AclPublisher(authorizer)
    read = acl(TOPIC, "t", LITERAL, "User:alice", AclOperation.READ)
    write = acl(TOPIC, "t", LITERAL, "User:alice", AclOperation.WRITE)
    ids = [uuid.uuid4(), uuid.uuid4()]
    image = _commit(MetadataImage(), [record_of(ids[0], read), record_of(ids[1], write)], publisher)
    assert check(authorizer, "User:alice", AclOperation.WRITE, TOPIC, "t") is ALLOWED
    image = _commit(image, [RemoveAccessControlEntryRecord(id=ids[1])], publisher)
    assert check(authorizer, "User:alice", AclOperation.WRITE, TOPIC, "t") is DENIED
    assert check(authorizer, "User:alice", AclOperation.READ, TOPIC, "t") is ALLOWED
    # A snapshot is the image's records; loading it (a delta from the empty image) restores the ACLs.
    restored = MetadataDelta(MetadataImage())
    for record in image.to_records():
        restored.replay(decode_record(encode_record(record)))
    fresh = make()
    AclPublisher(fresh).on_metadata_update(restored, restored.apply(image.offset, 1))
    assert fresh.acls(AclBindingFilter()) == [read]
    # Removing an ACL the log never created is corrupt metadata, as in Kafka.
    with pytest.raises(CorruptMessageError):
        MetadataDelta(image).replay(RemoveAccessControlEntryRecord(id=ids[1]))
