"""CreateAcls (key 30): add ACLs, as AccessControlEntryRecords in the metadata log.

As Kafka's AclApis: the caller needs ALTER on the CLUSTER (else every result is
CLUSTER_AUTHORIZATION_FAILED); without an ACL-keeping authorizer (the default allow-all, or a
plugin that is not a ClusterMetadataAuthorizer) every result is SECURITY_DISABLED. Each ACL
answers on its own: INVALID_REQUEST with Kafka's message for a bad one, success for a new or
an existing one (:mod:`strom.core.security.acl_control`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.metadata.records import AccessControlEntryRecord
from strom.core.protocol.exceptions import MalformedRequestError
from strom.core.protocol.messages import response_messages
from strom.core.security.acl_control import binding_of, create_acls, has_unknown_code, is_unbuildable
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, error_of, response_throttle
from strom.plugins.hookspecs.authorizers import ClusterMetadataAuthorizer

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import AclDeps
    from strom.core.server.handlers._kio_types import CreateAclsRequest, CreateAclsResponse

API_KEY = 30
VERSIONS = (1, 3)

CLUSTER_DENIED = "Cluster authorization failed."
NO_AUTHORIZER = "No Authorizer is configured."


async def handle(deps: AclDeps, ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    m = response_messages(API_KEY, ctx.api_version)
    throttle = response_throttle(deps, ctx)

    def results(outcomes: list[tuple[int, str | None]]) -> CreateAclsResponse:
        return m.make("CreateAclsResponse", throttle_time=throttle, results=tuple(
            m.make("AclCreationResult", error_code=code, error_message=message) for code, message in outcomes))

    if not authorize_cluster(deps, ctx, "ALTER"):
        return results([(int(ErrorCode.cluster_authorization_failed), CLUSTER_DENIED)] * len(request.creations))
    if not isinstance(deps.authorizer, ClusterMetadataAuthorizer):
        return results([(int(ErrorCode.security_disabled), NO_AUTHORIZER)] * len(request.creations))
    bindings = [binding_of(AccessControlEntryRecord(
        resource_type=c.resource_type, resource_name=c.resource_name, pattern_type=c.resource_pattern_type,
        principal=c.principal, host=c.host, operation=c.operation, permission_type=c.permission_type))
        for c in request.creations]
    # Kafka's answers to bindings it cannot build (checked with Kafka 4.3.1, tests/differential/test_acls.py).
    if any(has_unknown_code(c.resource_type, c.resource_pattern_type, c.operation, c.permission_type)
           for c in request.creations):
        raise MalformedRequestError("CreateAcls: the creations contain UNKNOWN elements")
    if any(is_unbuildable(b) for b in bindings):
        return results([(int(ErrorCode.unknown_server_error), None)] * len(bindings))
    try:
        errors = await create_acls(deps.controller, bindings)
    except Exception as e:
        return results([error_of(e)] * len(bindings))
    return results([(0, "") if e is None else error_of(e) for e in errors])  # Kafka's success message is ""
