"""One module (or handler class) per Kafka API: ``API_KEY``, ``VERSIONS`` and ``async handle(broker, ctx, request)``.

:func:`registry` is the single list of implemented APIs; ApiVersions advertises exactly it.
"""

from __future__ import annotations

from typing import Any

from strom.core.server.handlers import (
    api_versions,
    configs,
    delete_records,
    describe_cluster,
    describe_log_dirs,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
    topics,
)

HANDLERS: tuple[Any, ...] = (
    produce,
    fetch,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    api_versions,
    topics.CreateTopics,
    topics.DeleteTopics,
    delete_records,
    configs,
    configs.AlterConfigs,
    describe_log_dirs,
    topics.CreatePartitions,
    configs.IncrementalAlterConfigs,
    describe_cluster,
    init_producer_id,
)


def registry() -> dict[int, Any]:
    return {h.API_KEY: h for h in HANDLERS}
