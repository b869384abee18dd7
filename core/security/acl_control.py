"""ACLs in the metadata log: CreateAcls / DeleteAcls as records, as Kafka's AclControlManager.

An ACL exists only as a committed ``AccessControlEntryRecord`` (with a random id) in
``__cluster_metadata``; deleting one writes ``RemoveAccessControlEntryRecord(id)``. The
metadata image keeps them (``MetadataImage.acls``, so snapshots and restarts keep them too) and
:class:`~strom.core.security.acl_publisher.AclPublisher` hands them to the authorizer.

Both calls validate as Kafka does, in two steps: the broker's checks (``AclApis``: the CLUSTER
resource is only ``kafka-cluster``, no empty name) and the controller's (``validateNewAcl``:
a concrete resource type, LITERAL or PREFIXED, a concrete operation, ALLOW or DENY). Creating
an ACL that already exists succeeds without a record; each request is one atomic batch.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from strom.core.controller.quorum_controller import QuorumController
from strom.core.errors import InvalidRequestError
from strom.core.exceptions import KafkaError
from strom.core.metadata.image import MetadataImage
from strom.core.metadata.records import AccessControlEntryRecord, Message, RemoveAccessControlEntryRecord
from strom.plugins.hookspecs.authorizers import (
    CLUSTER_RESOURCE_NAME,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

log = logging.getLogger(__name__)

# Kafka's MAX_RECORDS_PER_USER_OP: one request changes at most this many ACLs.
MAX_RECORDS_PER_USER_OP = 10000


_E = TypeVar("_E", ResourceType, PatternType, AclOperation, AclPermissionType)


def _enum_of(kind: type[_E], code: int) -> _E:
    """A wire code as Kafka's enum; a code Kafka does not know reads as UNKNOWN (``fromCode``)."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)


def binding_of(record: AccessControlEntryRecord) -> AclBinding:
    return AclBinding(
        ResourcePattern(_enum_of(ResourceType, record.resource_type), record.resource_name,
                        _enum_of(PatternType, record.pattern_type)),
        AccessControlEntry(record.principal, record.host, _enum_of(AclOperation, record.operation),
                           _enum_of(AclPermissionType, record.permission_type)))


def record_of(acl_id: uuid.UUID, binding: AclBinding) -> AccessControlEntryRecord:
    p, e = binding.pattern, binding.entry
    return AccessControlEntryRecord(id=acl_id, resource_type=int(p.resource_type), resource_name=p.name,
                                    pattern_type=int(p.pattern_type), principal=e.principal, host=e.host,
                                    operation=int(e.operation), permission_type=int(e.permission_type))


def validate_new_acl(binding: AclBinding) -> None:
    """The broker's and the controller's checks of one ACL to create, with Kafka's messages."""
    p, e = binding.pattern, binding.entry
    if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_RESOURCE_NAME:
        raise InvalidRequestError(f"The only valid name for the CLUSTER resource is {CLUSTER_RESOURCE_NAME}")
    if not p.name:
        raise InvalidRequestError("Invalid empty resource name")
    if p.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidRequestError(f"Invalid resourceType {p.resource_type.name}")
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidRequestError(f"Invalid patternType {p.pattern_type.name}")
    if e.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidRequestError(f"Invalid operation {e.operation.name}")
    if e.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidRequestError(f"Invalid permissionType {e.permission_type.name}")


def has_unknown_code(*codes: int) -> bool:
    """A code 0 (UNKNOWN) among a creation's or filter's resource type, pattern type, operation and
    permission type: Kafka refuses such a request when it parses it (``CreateAclsRequest.validate``,
    the same in DescribeAcls and DeleteAcls), closing the connection. Other codes it does not know
    read as UNKNOWN later and fail one ACL or match nothing."""
    return 0 in codes


def is_unbuildable(binding: AclBinding) -> bool:
    """A filter value where an ACL needs a definite one (resource type ANY, pattern type ANY or
    MATCH, operation or permission ANY): Kafka's ``ResourcePattern`` / ``AccessControlEntry``
    constructors throw, and the whole CreateAcls request answers UNKNOWN_SERVER_ERROR."""
    p, e = binding.pattern, binding.entry
    return p.resource_type == ResourceType.ANY or p.pattern_type in (PatternType.ANY, PatternType.MATCH) or \
        e.operation == AclOperation.ANY or e.permission_type == AclPermissionType.ANY


def validate_filter(acl_filter: AclBindingFilter) -> None:
    """Kafka's ``validateFilter``: a filter naming an UNKNOWN code matches nothing knowable."""
    pf, ef = acl_filter.pattern_filter, acl_filter.entry_filter
    if pf.resource_type == ResourceType.UNKNOWN or pf.pattern_type == PatternType.UNKNOWN:
        raise InvalidRequestError("Unknown patternFilter.")
    if ef.operation == AclOperation.UNKNOWN or ef.permission_type == AclPermissionType.UNKNOWN:
        raise InvalidRequestError("Unknown entryFilter.")


@dataclass(slots=True)
class DeleteResult:
    """One filter's answer: an error, or the ACLs it deleted."""

    error: KafkaError | None = None
    deleted: list[AclBinding] = field(default_factory=list)


async def create_acls(controller: QuorumController, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
    """Create each ACL (one result per binding, None = created or already there)."""
    results: list[KafkaError | None] = []

    def build(image: MetadataImage) -> list[Message]:
        existing = {binding_of(r) for r in image.acls.values()}
        records: list[Message] = []
        for binding in bindings:
            try:
                validate_new_acl(binding)
            except KafkaError as e:
                results.append(e)
                continue
            if binding not in existing:
                existing.add(binding)
                acl_id = uuid.uuid4()
                while acl_id in image.acls:
                    acl_id = uuid.uuid4()
                records.append(record_of(acl_id, binding))
            results.append(None)
        if len(records) > MAX_RECORDS_PER_USER_OP:
            raise InvalidRequestError(f"Cannot create more than {MAX_RECORDS_PER_USER_OP} acls in a single "
                                      "create operation.")
        return records

    await controller.write(build)
    return results


async def delete_acls(controller: QuorumController, filters: Sequence[AclBindingFilter]) -> list[DeleteResult]:
    """Delete the ACLs each filter matches (one result per filter, atomically for the request)."""
    results: list[DeleteResult] = []

    def build(image: MetadataImage) -> list[Message]:
        removed: set[uuid.UUID] = set()
        for acl_filter in filters:
            try:
                validate_filter(acl_filter)
            except KafkaError as e:
                results.append(DeleteResult(error=e))
                continue
            deleted = []
            for acl_id in sorted(image.acls):
                binding = binding_of(image.acls[acl_id])
                if acl_filter.matches(binding):
                    deleted.append(binding)
                    removed.add(acl_id)
            results.append(DeleteResult(deleted=deleted))
        if len(removed) > MAX_RECORDS_PER_USER_OP:
            raise InvalidRequestError(f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single "
                                      "delete operation.")
        return [RemoveAccessControlEntryRecord(id=acl_id) for acl_id in sorted(removed)]

    await controller.write(build)
    return results


def filter_of(resource_type: int, resource_name: str | None, pattern_type: int, principal: str | None,
              host: str | None, operation: int, permission_type: int) -> AclBindingFilter:
    """A DescribeAcls / DeleteAcls filter from its wire fields (unknown codes read as UNKNOWN)."""
    return AclBindingFilter(
        ResourcePatternFilter(_enum_of(ResourceType, resource_type), resource_name,
                              _enum_of(PatternType, pattern_type)),
        AccessControlEntryFilter(principal, host, _enum_of(AclOperation, operation),
                                 _enum_of(AclPermissionType, permission_type)))
