"""ElectLeaders (key 43, KIP-183/KIP-460): preferred or unclean leader election, answered from the image.

strom is a single-node cluster, so every partition's only replica is this broker and it already
leads: as Kafka's ``ReplicationControlManager.electLeader`` answers then, a preferred election
(``leader == replicas[0]``) or an unclean one (a leader exists) is ELECTION_NOT_NEEDED with
``Errors.message()``. strom never moves leadership on request: a partition that would need a new
leader answers what Kafka answers when no change can be built (PREFERRED_LEADER_NOT_AVAILABLE,
ELIGIBLE_LEADERS_NOT_AVAILABLE), so no controller record is ever written here.

Shape of the answer, as Kafka 4.3.1 answers (checked against the reference broker):

* named partitions answer in request order, duplicates included; an unknown topic answers
  ``No such topic as T``, an unknown partition ``No such partition as T-P``;
* a null topic list means every partition: each topic appears, but partitions whose election
  was not needed are left out (so on strom every topic has an empty result list);
* an unknown election type, or a principal without ALTER on the cluster, is Kafka's
  ``ElectLeadersRequest.getErrorResponse``: the top-level error (v1+) and that error on every
  named partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.metadata.image import MetadataImage
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, find_partition, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ImageDeps
    from strom.core.server.handlers._kio_types import ElectLeadersRequest, ElectLeadersResponse

API_KEY = 43
VERSIONS = (0, 2)

PREFERRED, UNCLEAN = 0, 1

# Kafka's ``Errors.X.message()``, which ``new ApiError(Errors.X)`` sends as the message.
_MESSAGES = {
    ErrorCode.election_not_needed: "Leader election not needed for topic partition.",
    ErrorCode.preferred_leader_not_available: "The preferred leader was not available.",
    ErrorCode.eligible_leaders_not_available: "Eligible topic partition leaders are not available.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
}

Result = tuple[int, str | None]


def elect(image: MetadataImage, topic: str, index: int, election_type: int) -> Result:
    """The outcome of electing ``topic``-``index``'s leader (Kafka's ``electLeader``)."""
    part = find_partition(image, topic, index, f"No such topic as {topic}", f"No such partition as {topic}-{index}")
    if isinstance(part, tuple):
        return part
    preferred = part.replicas[0] if part.replicas else -1
    code: ErrorCode
    if (election_type == PREFERRED and part.leader >= 0 and part.leader == preferred) or\
            (election_type == UNCLEAN and part.leader >= 0):
        code = ErrorCode.election_not_needed
    elif election_type == PREFERRED:
        # A leader other than the first replica, or none: moving leadership is not implemented
        # (on one node it never arises), so answer as Kafka does when no change can be made.
        code = ErrorCode.preferred_leader_not_available
    else:
        code = ErrorCode.eligible_leaders_not_available
    return int(code), _MESSAGES[code]


def _error_response(m: Any, throttle: int, request: ElectLeadersRequest, code: int, message: str | None) -> Any:
    """Kafka's ``ElectLeadersRequest.getErrorResponse``: the error on every named partition."""
    results = tuple(
        m.make("ReplicaElectionResult", topic=t.topic, partition_result=tuple(
            m.make("PartitionResult", partition_id=p, error_code=code, error_message=message)
            for p in t.partitions))
        for t in request.topic_partitions or ())
    return m.make("ElectLeadersResponse", throttle_time=throttle, error_code=code,
                  replica_election_results=results)


async def handle(deps: ImageDeps, ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    m = response_messages(API_KEY, ctx.api_version)
    throttle = response_throttle(deps, ctx)
    if not authorize_cluster(deps, ctx, "ALTER"):
        code = ErrorCode.cluster_authorization_failed
        return _error_response(m, throttle, request, int(code), _MESSAGES[code])
    election_type = int(getattr(request, "election_type", PREFERRED))  # v0 has only preferred elections
    if election_type not in (PREFERRED, UNCLEAN):
        return _error_response(m, throttle, request, int(ErrorCode.invalid_request),
                               f"Unknown election type {election_type}")
    image = deps.image
    results = []
    if request.topic_partitions is None:
        for name, topic_image in image.topics.items():
            outcomes = ((index, elect(image, name, index, election_type)) for index in topic_image.partitions)
            results.append(m.make("ReplicaElectionResult", topic=name, partition_result=tuple(
                m.make("PartitionResult", partition_id=index, error_code=code, error_message=message)
                for index, (code, message) in outcomes if code != ErrorCode.election_not_needed)))
    else:
        for t in request.topic_partitions:
            parts = []
            for index in t.partitions:
                outcome = elect(image, str(t.topic), int(index), election_type)
                parts.append(m.make("PartitionResult", partition_id=index, error_code=outcome[0],
                                    error_message=outcome[1]))
            results.append(m.make("ReplicaElectionResult", topic=t.topic, partition_result=tuple(parts)))
    return m.make("ElectLeadersResponse", throttle_time=throttle, error_code=0,
                  replica_election_results=tuple(results))
