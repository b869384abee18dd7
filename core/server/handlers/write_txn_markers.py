"""WriteTxnMarkers (key 27): write COMMIT/ABORT control batches to the partitions led here.

Sent by a transaction coordinator to partition leaders, and by ``Admin.abortTransaction``
(``kafka-transactions.sh abort``, KIP-664) to end a hanging transaction. Kafka 4.x serves
v1-v2; v2 adds the marker's transaction version (KIP-890: a TV2 marker carries the bumped
epoch, so a marker at the producer's current epoch is stale unless it is a retry).

The markers are written by :meth:`CoordinatorRuntime.write_txn_markers`, the path strom's own
transaction coordinator uses, so both write identical batches with identical checks. As in
Kafka's ``KafkaApis.handleWriteTxnMarkersRequest``:

* the principal needs ALTER or CLUSTER_ACTION on the cluster, else every partition answers
  CLUSTER_AUTHORIZATION_FAILED (Kafka's error response, built from the request);
* a partition this broker does not host answers UNKNOWN_TOPIC_OR_PARTITION, a follower
  NOT_LEADER_OR_FOLLOWER, a stale producer epoch INVALID_PRODUCER_EPOCH, a stale coordinator
  epoch TRANSACTION_COORDINATOR_FENCED;
* results are keyed by producer id: markers with the same producer id share one result entry,
  and a marker listing no partitions has none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import CoordinatorRuntimeDeps
    from strom.core.server.handlers._kio_types import WriteTxnMarkersRequest, WriteTxnMarkersResponse

API_KEY = 27
VERSIONS = (1, 2)


def _partitions(marker: Any) -> list[tuple[str, int]]:
    return [(str(t.name), int(p)) for t in marker.topics for p in t.partition_indexes]


async def handle(deps: CoordinatorRuntimeDeps, ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    m = response_messages(API_KEY, ctx.api_version)
    # Kafka asks for ALTER first (without logging a denial), then CLUSTER_ACTION.
    allowed = authorize_cluster(deps, ctx, "ALTER") or authorize_cluster(deps, ctx, "CLUSTER_ACTION")
    # producer id -> (topic, partition) -> error, in the order first seen.
    results: dict[int, dict[tuple[str, int], int]] = {}
    runtime = deps.coordinator_runtime
    for marker in request.markers:
        pid = int(marker.producer_id)
        partitions = _partitions(marker)
        if not allowed:
            # Kafka's error response (WriteTxnMarkersRequest.getErrorResponse): one entry per
            # producer id, even without partitions, a later marker replacing an earlier one.
            results[pid] = {tp: int(ErrorCode.cluster_authorization_failed) for tp in partitions}
            continue
        if not partitions:
            continue
        errors = await runtime.write_txn_markers(
            pid, int(marker.producer_epoch), int(marker.coordinator_epoch), bool(marker.transaction_result),
            partitions, transaction_version=int(getattr(marker, "transaction_version", 0)))
        results.setdefault(pid, {}).update(errors)

    out = []
    for pid, errors in results.items():
        by_topic: dict[str, list[Any]] = {}
        for (topic, index), code in errors.items():
            by_topic.setdefault(topic, []).append(
                m.make("WritableTxnMarkerPartitionResult", partition_index=index, error_code=code))
        out.append(m.make("WritableTxnMarkerResult", producer_id=pid, topics=tuple(
            m.make("WritableTxnMarkerTopicResult", name=t, partitions=tuple(ps)) for t, ps in by_topic.items())))
    return m.make("WriteTxnMarkersResponse", markers=tuple(out))
