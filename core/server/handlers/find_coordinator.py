"""FindCoordinator (key 10): the coordinator of a group, a transactional id (v4+ batched keys) or
a share partition's state (key type 2, v6+).

Single node: every coordinator partition is led by this broker, so the answer is this broker's
endpoint on the listener the request came in on - once the coordinator has loaded its topic.
Share coordinator keys (``<groupId>:<topicId>:<partition>``) are what a share-partition leader
asks with (broker to broker, so CLUSTER_ACTION); the answer is the leader of the
``__share_group_state`` partition the key hashes to, as Kafka's ``KafkaApis.getCoordinator``.
Kafka 4.3.1 was probed for the answers (tests/differential/test_find_share_coordinator.py): a
malformed key or key type 2 before v6 is INVALID_REQUEST for that key with no message; an
unknown key type fails the whole request with INVALID_REQUEST's default text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group.api_support import coordinator_of
from strom.core.coordinator.share.state_records import SHARE_GROUP_STATE_TOPIC, parse_coordinator_key
from strom.core.errors import InvalidRequestError
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, error_of, response_throttle
from strom.core.server.handlers._deps import ClusterDeps, GroupDeps, ShareCoordinatorDeps

if TYPE_CHECKING:
    from strom.core.server.handlers._kio_types import FindCoordinatorRequest, FindCoordinatorResponse

API_KEY = 10
VERSIONS = (0, 6)
KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION, KEY_TYPE_SHARE = 0, 1, 2
SHARE_KEY_MIN_VERSION = 6  # FindCoordinator v6 added key type 2 (KIP-932)

Found = tuple[int, str | None, int, str, int]


class FindCoordinatorDeps(ClusterDeps, GroupDeps, ShareCoordinatorDeps, Protocol):
    """This broker's endpoints, the group coordinator (which answers for groups and transactional
    ids) and the share coordinator."""


async def _lookup_share(deps: FindCoordinatorDeps, ctx: RequestContext, key: str) -> Found:
    """Key type 2: the leader of the state partition of ``<groupId>:<topicId>:<partition>``."""
    if ctx.api_version < SHARE_KEY_MIN_VERSION:
        return int(ErrorCode.invalid_request), "", -1, "", -1
    if not authorize_cluster(deps, ctx, "CLUSTER_ACTION"):
        return int(ErrorCode.cluster_authorization_failed), None, -1, "", -1
    try:
        partition = await deps.share_coordinator.find_coordinator(*parse_coordinator_key(key))
    except InvalidRequestError:
        return int(ErrorCode.invalid_request), "", -1, "", -1
    except Exception as e:
        code, message = error_of(e)
        return code, message, -1, "", -1
    topic = deps.image.topics.get(SHARE_GROUP_STATE_TOPIC)
    registration = topic.partitions.get(partition) if topic is not None else None
    leader = registration.leader if registration is not None else -1
    for node_id, host, port, _rack, _fenced in deps.broker_endpoints(ctx.listener_name):
        if node_id == leader:
            return 0, None, node_id, host, port
    return int(ErrorCode.coordinator_not_available), None, -1, "", -1


async def _lookup(deps: FindCoordinatorDeps, ctx: RequestContext, key_type: int, key: str) -> Found:
    """(error, message, node id, host, port)."""
    if key_type == KEY_TYPE_SHARE:
        return await _lookup_share(deps, ctx, key)
    if key_type == KEY_TYPE_TRANSACTION:
        if not deps.authorize(ctx, "DESCRIBE", "TRANSACTIONAL_ID", [key])[0]:
            return int(ErrorCode.transactional_id_authorization_failed), None, -1, "", -1
    elif not deps.authorize(ctx, "DESCRIBE", "GROUP", [key])[0]:
        return int(ErrorCode.group_authorization_failed), None, -1, "", -1
    coordinator = coordinator_of(deps)
    if coordinator is None:
        return int(ErrorCode.coordinator_not_available), None, -1, "", -1
    try:
        await coordinator.find_coordinator(key_type, key)
    except Exception as e:
        code, message = error_of(e)
        return code, message, -1, "", -1
    for node_id, host, port, _rack, _fenced in deps.broker_endpoints(ctx.listener_name):
        if node_id == deps.node_id:
            return 0, None, node_id, host, port
    return int(ErrorCode.coordinator_not_available), "no endpoint on this listener", -1, "", -1


async def handle(deps: FindCoordinatorDeps, ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    v = ctx.api_version
    m = response_messages(API_KEY, v)
    key_type = int(getattr(request, "key_type", 0))
    by_version: Any = request  # mypy cannot narrow the Union by ctx.api_version
    unknown_type = key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION, KEY_TYPE_SHARE)
    if v >= 4:
        if unknown_type:
            # Kafka fails the whole request (CoordinatorType.forId throws): every key gets the
            # error with its default text.
            return m.make("FindCoordinatorResponse", throttle_time=response_throttle(deps, ctx), coordinators=tuple(
                m.make("Coordinator", key=key, node_id=-1, host="", port=-1, error_code=int(ErrorCode.invalid_request),
                       error_message=InvalidRequestError.description) for key in by_version.coordinator_keys))
        coordinators = []
        for key in by_version.coordinator_keys:
            code, message, node, host, port = await _lookup(deps, ctx, key_type, key)
            # A found coordinator keeps the schema default "" as its message, as Kafka's does.
            coordinators.append(m.make("Coordinator", key=key, node_id=node, host=host, port=port,
                                       error_code=code, error_message="" if code == 0 else message))
        return m.make("FindCoordinatorResponse", throttle_time=response_throttle(deps, ctx),
                      coordinators=tuple(coordinators))
    if unknown_type:
        code, message, node, host, port = int(ErrorCode.invalid_request), InvalidRequestError.description, -1, "", -1
    else:
        code, message, node, host, port = await _lookup(deps, ctx, key_type, by_version.key)
    if code == int(ErrorCode.invalid_request) and not message:
        message = InvalidRequestError.description  # v0-3 carry Errors.message(), never a key's detail
    # Kafka's pre-v4 answer carries Errors.message(), which is "NONE" on success.
    return m.make("FindCoordinatorResponse", throttle_time=response_throttle(deps, ctx), error_code=code,
                  error_message="NONE" if code == 0 else message, node_id=node, host=host, port=port)
