"""DescribeLogDirs (key 35): per log directory, the size of each hosted partition and disk space.

v5 (KIP-1066) adds ``is_cordoned``: strom cannot cordon a log directory, so it is always false,
which is also what Kafka answers for a directory not listed in ``cordoned.log.dirs``.

A tiered partition's size is its local size only, as Kafka reports it: its segments in remote
storage are not in the log directory (``strom topics describe`` shows the remote size).
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ReplicaDeps
    from strom.core.server.handlers._kio_types import DescribeLogDirsRequest, DescribeLogDirsResponse

API_KEY = 35
VERSIONS = (1, 5)


async def handle(deps: ReplicaDeps, ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    m = response_messages(API_KEY, ctx.api_version)
    if not authorize_cluster(deps, ctx, "DESCRIBE"):
        return m.make("DescribeLogDirsResponse", throttle_time=0,
                      error_code=int(ErrorCode.cluster_authorization_failed), results=())
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in request.topics}
    by_dir: dict[str, dict[str, list[Any]]] = {str(d): {} for d in deps.config.log_dir_list}
    for (topic, index), part in sorted(deps.replica_manager.partitions.items()):
        if wanted is not None and (topic not in wanted or index not in wanted[topic]):
            continue
        log_dir = part.log_dir
        by_dir.setdefault(log_dir, {}).setdefault(topic, []).append(m.make(
            "DescribeLogDirsPartition", partition_index=index, partition_size=part.size_in_bytes,
            offset_lag=0, is_future_key=False))
    results = []
    for log_dir, topics in by_dir.items():
        try:
            usage = shutil.disk_usage(log_dir)
            total, usable = usage.total, usage.free
        except OSError:
            total = usable = -1
        results.append(m.make(
            "DescribeLogDirsResult", error_code=0, log_dir=log_dir, total_bytes=total, usable_bytes=usable,
            is_cordoned=False,
            topics=tuple(m.make("DescribeLogDirsTopic", name=name, partitions=tuple(parts))
                         for name, parts in sorted(topics.items()))))
    return m.make("DescribeLogDirsResponse", throttle_time=response_throttle(deps, ctx), error_code=0,
                  results=tuple(results))
