"""DescribeAcls (key 29): the ACLs matching a filter, grouped by resource pattern.

As Kafka's AclApis: DESCRIBE on the CLUSTER or CLUSTER_AUTHORIZATION_FAILED; without an
ACL-keeping authorizer SECURITY_DISABLED ("No Authorizer is configured on the broker"). The
filter's pattern type may be ANY (any pattern with exactly this name) or MATCH (every pattern
that applies to a resource of this name: literal, wildcard, prefixes); None fields match all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.protocol.exceptions import MalformedRequestError
from strom.core.protocol.messages import response_messages
from strom.core.security.acl_control import filter_of, has_unknown_code
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, response_throttle
from strom.plugins.hookspecs.authorizers import (
    AccessControlEntry,
    ClusterMetadataAuthorizer,
    ResourcePattern,
)

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import AclDeps
    from strom.core.server.handlers._kio_types import DescribeAclsRequest, DescribeAclsResponse

API_KEY = 29
VERSIONS = (1, 3)


async def handle(deps: AclDeps, ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    m = response_messages(API_KEY, ctx.api_version)
    throttle = response_throttle(deps, ctx)

    def failed(code: int, message: str) -> DescribeAclsResponse:
        return m.make("DescribeAclsResponse", throttle_time=throttle, error_code=code, error_message=message,
                      resources=())

    if not authorize_cluster(deps, ctx, "DESCRIBE"):
        return failed(int(ErrorCode.cluster_authorization_failed), "Cluster authorization failed.")
    authorizer = deps.authorizer
    if not isinstance(authorizer, ClusterMetadataAuthorizer):
        return failed(int(ErrorCode.security_disabled), "No Authorizer is configured on the broker")
    acl_filter = filter_of(request.resource_type_filter, request.resource_name_filter, request.pattern_type_filter,
                           request.principal_filter, request.host_filter, request.operation,
                           request.permission_type)
    if has_unknown_code(request.resource_type_filter, request.pattern_type_filter, request.operation,
                        request.permission_type):  # Kafka refuses it when parsing (DescribeAclsRequest.validate)
        raise MalformedRequestError("DescribeAcls: the filter contains UNKNOWN elements")
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in authorizer.acls(acl_filter):
        grouped.setdefault(binding.pattern, []).append(binding.entry)
    resources: list[Any] = []
    for pattern, entries in grouped.items():
        acls = tuple(m.make("AclDescription", principal=e.principal, host=e.host, operation=int(e.operation),
                            permission_type=int(e.permission_type)) for e in entries)
        resources.append(m.make("DescribeAclsResource", resource_type=int(pattern.resource_type),
                                resource_name=pattern.name, pattern_type=int(pattern.pattern_type), acls=acls))
    return m.make("DescribeAclsResponse", throttle_time=throttle, error_code=0, error_message=None,
                  resources=tuple(resources))
