"""DescribeQuorum (key 55): the state of the KRaft metadata quorum (``kafka-metadata-quorum.sh``).

Answers as Kafka's ``KafkaRaftClient.handleDescribeQuorumRequest`` does for a combined
broker + controller node, checked against Kafka 4.3.1 (tests/differential/test_describe_quorum.py):

* DESCRIBE on the cluster is required; without it the whole answer is the top-level error
  CLUSTER_AUTHORIZATION_FAILED with no topics and no nodes.
* The request must name exactly one topic, ``__cluster_metadata``, with exactly one partition, 0.
  Anything else (another name or index, a second partition or topic, no topic at all) gets
  UNKNOWN_TOPIC_OR_PARTITION for every partition it lists, with leader, epoch and high watermark
  left at 0 and no voters and no nodes (Kafka's ``getPartitionLevelErrorResponse``).
* A node that is not the leader answers NOT_LEADER_OR_FOLLOWER the same way.
* The leader lists each voter with its log end offset. For itself both timestamps are the
  current time (Kafka's ``LeaderState`` reports "now" for the local replica). The directory id
  is the zero uuid: with static voters (``kraft.version`` 0, the only mode strom runs) voters
  carry none. Observers are replicas that fetch without voting; a single combined node has none.
* v2 adds ``nodes``: each voter's controller endpoints. Kafka takes them from
  ``controller.quorum.voters`` (``id@host:port``, named by the first of
  ``controller.listener.names``); strom does the same and, when that setting is empty, uses this
  node's own controller listeners from ``listeners``, if any. Where that leaves no endpoint or
  port 0 (``strom dev`` names ``1@127.0.0.1:0``), the voter's RegisterControllerRecord gives the
  real one: strom's in-process controller is served on the broker listener.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.config import split_csv
from strom.core.protocol.messages import Messages, response_messages
from strom.core.raft.client import METADATA_TOPIC
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster

if TYPE_CHECKING:
    from strom.core.raft.client import RaftClient
    from strom.core.server.handlers._deps import QuorumDeps
    from strom.core.server.handlers._kio_types import DescribeQuorumRequest, DescribeQuorumResponse

API_KEY = 55
VERSIONS = (0, 2)

METADATA_PARTITION = 0
# Errors.message() of the Java client: the text Kafka puts beside each code.
MESSAGES = {
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
    ErrorCode.not_leader_or_follower: "For requests intended only for the leader, this error indicates that the "
                                      "broker is not the current leader. For requests intended for any replica, "
                                      "this error indicates that the broker is not a replica of the topic partition.",
}


def voter_endpoints(deps: QuorumDeps) -> dict[int, list[tuple[str, str, int]]]:
    """Voter id -> [(listener name, host, port)], as the v2 ``nodes`` list shows them."""
    controller_names = [n.strip() for n in split_csv(deps.config.controller_listener_names)]
    out: dict[int, list[tuple[str, str, int]]] = {v: [] for v in deps.raft.voters}
    for entry in split_csv(deps.config.controller_quorum_voters):
        node, _, address = entry.partition("@")
        host, _, port = address.rpartition(":")
        if controller_names and int(node) in out:
            out[int(node)].append((controller_names[0], host.strip("[]"), int(port)))
    if not split_csv(deps.config.controller_quorum_voters) and deps.node_id in out:
        out[deps.node_id] = [(name, host, port) for name, host, port in deps.config.listener_list()
                               if name in controller_names]
    # A configured port 0 (``strom dev``: 1@127.0.0.1:0) names no socket: the voter's real endpoint
    # is the one its RegisterControllerRecord carries (for strom's in-process controller, the
    # broker listener that serves the controller's APIs).
    for voter, endpoints in out.items():
        registered = deps.image.controllers.get(voter)
        if registered is not None and (not endpoints or any(p == 0 for _, _, p in endpoints)):
            out[voter] = [(e.name, e.host, e.port) for e in registered.endpoints]
    return out


def _wants_metadata_partition(request: DescribeQuorumRequest) -> bool:
    """Kafka's ``hasValidTopicPartition``: one topic, one partition, and it is ours."""
    topics = request.topics
    return (len(topics) == 1 and topics[0].topic_name == METADATA_TOPIC
            and len(topics[0].partitions) == 1 and int(topics[0].partitions[0].partition_index) == METADATA_PARTITION)


def _partition_errors(m: Messages, request: DescribeQuorumRequest, code: ErrorCode) -> Any:
    """Every requested partition with ``code`` (Kafka's ``getPartitionLevelErrorResponse``)."""
    topics = tuple(
        m.make("TopicData", topic_name=t.topic_name, partitions=tuple(
            m.make("PartitionData", partition_index=p.partition_index, error_code=code,
                   error_message=MESSAGES[code], leader_id=0, leader_epoch=0, high_watermark=0,
                   current_voters=(), observers=())
            for p in t.partitions))
        for t in request.topics)
    return m.make("DescribeQuorumResponse", error_code=0, error_message="", topics=topics, nodes=())


def _describe(m: Messages, deps: QuorumDeps, raft: RaftClient) -> Any:
    now = int(time.time() * 1000)
    end_offset = raft.end_offset
    voters = tuple(
        # Only the leader's own state is known: strom has no follower voters (no Fetch RPC).
        m.make("ReplicaState", replica_id=v, replica_directory_id=None,
               log_end_offset=end_offset if v == raft.node_id else -1,
               last_fetch_timestamp=now if v == raft.node_id else -1,
               last_caught_up_timestamp=now if v == raft.node_id else -1)
        for v in raft.voters)
    partition = m.make("PartitionData", partition_index=METADATA_PARTITION, error_code=0, error_message="",
                       leader_id=raft.node_id, leader_epoch=raft.epoch, high_watermark=raft.high_watermark,
                       current_voters=voters, observers=())
    # ``nodes`` exists from v2 on; ``make`` drops it from older versions.
    nodes = () if not m.has("DescribeQuorumResponse", "nodes") else tuple(
        m.make("Node", node_id=node, listeners=tuple(m.make("Listener", name=name, host=host, port=port)
                                                      for name, host, port in endpoints))
        for node, endpoints in sorted(voter_endpoints(deps).items()))
    return m.make("DescribeQuorumResponse", error_code=0, error_message="",
                  topics=(m.make("TopicData", topic_name=METADATA_TOPIC, partitions=(partition,)),), nodes=nodes)


async def handle(deps: QuorumDeps, ctx: RequestContext, request: DescribeQuorumRequest) -> DescribeQuorumResponse:
    m = response_messages(API_KEY, ctx.api_version)
    if not authorize_cluster(deps, ctx, "DESCRIBE"):
        code = ErrorCode.cluster_authorization_failed
        return m.make("DescribeQuorumResponse", error_code=code, error_message=MESSAGES[code], topics=(), nodes=())
    if not _wants_metadata_partition(request):
        return _partition_errors(m, request, ErrorCode.unknown_topic_or_partition)
    raft = deps.raft
    if not raft.is_leader:
        return _partition_errors(m, request, ErrorCode.not_leader_or_follower)
    return _describe(m, deps, raft)
