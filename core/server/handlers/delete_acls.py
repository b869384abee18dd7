"""DeleteAcls (key 31): remove the ACLs each filter matches (RemoveAccessControlEntryRecords).

As Kafka's AclApis: ALTER on the CLUSTER or every filter answers CLUSTER_AUTHORIZATION_FAILED;
without an ACL-keeping authorizer SECURITY_DISABLED. Each filter answers the ACLs it matched
(and so deleted); a filter with UNKNOWN codes answers INVALID_REQUEST. The request is one
atomic batch of removals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.protocol.exceptions import MalformedRequestError
from strom.core.protocol.messages import response_messages
from strom.core.security.acl_control import delete_acls, filter_of, has_unknown_code
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, error_of, response_throttle
from strom.plugins.hookspecs.authorizers import ClusterMetadataAuthorizer

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import AclDeps
    from strom.core.server.handlers._kio_types import DeleteAclsRequest, DeleteAclsResponse

API_KEY = 31
VERSIONS = (1, 3)


async def handle(deps: AclDeps, ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    m = response_messages(API_KEY, ctx.api_version)
    throttle = response_throttle(deps, ctx)

    def result(code: int, message: str | None, matching: tuple[Any, ...] = ()) -> Any:
        return m.make("DeleteAclsFilterResult", error_code=code, error_message=message, matching_acls=matching)

    def respond(results: list[Any]) -> DeleteAclsResponse:
        return m.make("DeleteAclsResponse", throttle_time=throttle, filter_results=tuple(results))

    if not authorize_cluster(deps, ctx, "ALTER"):
        return respond([result(int(ErrorCode.cluster_authorization_failed), "Cluster authorization failed.")
                        for _ in request.filters])
    if not isinstance(deps.authorizer, ClusterMetadataAuthorizer):
        return respond([result(int(ErrorCode.security_disabled), "No Authorizer is configured.")
                        for _ in request.filters])
    filters = [filter_of(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                         f.host_filter, f.operation, f.permission_type) for f in request.filters]
    if any(has_unknown_code(f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type)
           for f in request.filters):  # Kafka refuses it when parsing (DeleteAclsRequest.validate)
        raise MalformedRequestError("DeleteAcls: the filters contain UNKNOWN elements")
    try:
        outcomes = await delete_acls(deps.controller, filters)
    except Exception as e:
        code, message = error_of(e)
        return respond([result(code, message) for _ in filters])
    out = []
    for outcome in outcomes:
        if outcome.error is not None:
            out.append(result(*error_of(outcome.error)))
            continue
        out.append(result(0, None, tuple(
            m.make("DeleteAclsMatchingAcl", error_code=0, error_message=None,
                   resource_type=int(b.pattern.resource_type), resource_name=b.pattern.name,
                   pattern_type=int(b.pattern.pattern_type), principal=b.entry.principal, host=b.entry.host,
                   operation=int(b.entry.operation), permission_type=int(b.entry.permission_type))
            for b in outcome.deleted)))
    return respond(out)
