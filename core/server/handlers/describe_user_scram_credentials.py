"""DescribeUserScramCredentials (key 50, v0): the SCRAM mechanisms and iterations of users.

As Kafka (KafkaApis + ScramImage.describe): DESCRIBE on the CLUSTER is required (else the
top-level CLUSTER_AUTHORIZATION_FAILED); no users (null or empty) means every user with a
credential; a user named twice is DUPLICATE_RESOURCE, one without credentials
RESOURCE_NOT_FOUND, each with Kafka's message. Salts and keys never leave the broker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ImageDeps
    from strom.core.server.handlers._kio_types import (
        DescribeUserScramCredentialsRequest,
        DescribeUserScramCredentialsResponse,
    )

API_KEY = 50
VERSIONS = (0, 0)


async def handle(deps: ImageDeps, ctx: RequestContext,
                 request: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
    m = response_messages(API_KEY, ctx.api_version)
    throttle = response_throttle(deps, ctx)
    if not authorize_cluster(deps, ctx, "DESCRIBE"):
        return m.make("DescribeUserScramCredentialsResponse", throttle_time=throttle,
                      error_code=ErrorCode.cluster_authorization_failed, error_message=None, results=())
    by_user: dict[str, list[tuple[int, int]]] = {}
    for (name, mechanism), record in sorted(deps.image.scram.items()):
        by_user.setdefault(name, []).append((mechanism, record.iterations))
    duplicates: dict[str, bool] = {}
    if request.users:
        for user in request.users:
            duplicates[user.name] = user.name in duplicates
    else:
        duplicates = dict.fromkeys(by_user, False)
    results = []
    for name, duplicate in duplicates.items():
        if duplicate:
            results.append(m.make("DescribeUserScramCredentialsResult", user=name,
                                  error_code=ErrorCode.duplicate_resource, credential_infos=(),
                                  error_message=f"Cannot describe SCRAM credentials for the same user twice in a "
                                                f"single request: {name}"))
        elif name not in by_user:
            results.append(m.make("DescribeUserScramCredentialsResult", user=name,
                                  error_code=ErrorCode.resource_not_found, credential_infos=(),
                                  error_message=f"Attempt to describe a user credential that does not exist: {name}"))
        else:
            infos = tuple(m.make("CredentialInfo", mechanism=mech, iterations=iterations)
                          for mech, iterations in by_user[name])
            results.append(m.make("DescribeUserScramCredentialsResult", user=name, error_code=ErrorCode.none,
                                  error_message=None, credential_infos=infos))
    return m.make("DescribeUserScramCredentialsResponse", throttle_time=throttle, error_code=ErrorCode.none,
                  error_message=None, results=tuple(results))
