"""Built-in remote storage manager ``s3`` (alias Aiven's ``io.aiven.kafka.tieredstorage.RemoteStorageManager``).

Selected by ``remote.log.storage.manager.class.name``; configured from the broker's
``rsm.config.`` keys (the prefix is ``remote.log.storage.manager.impl.prefix``, Kafka's default
``rsm.config.``): :class:`strom.tiered.chunked_rsm.ChunkedRemoteStorageManager`. boto3 is
imported only when a manager is built, so a broker without a remote tier never loads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strom.plugins.hookspecs.storage import (
    DEFAULT_RSM_CONFIG_PREFIX,
    RSM_CONFIG_PREFIX_KEY,
    S3_REMOTE_STORAGE_MANAGER,
    RemoteStorageManager,
    RemoteStorageManagerFactory,
    prefixed_configs,
)
from strom.plugins.markers import hookimpl


def build_s3_remote_storage_manager(config: Mapping[str, Any]) -> RemoteStorageManager:
    """The chunked manager over the broker config's ``rsm.config.`` keys."""
    from strom.tiered.chunked_rsm import ChunkedRemoteStorageManager

    prefix = str(config.get(RSM_CONFIG_PREFIX_KEY) or DEFAULT_RSM_CONFIG_PREFIX)
    return ChunkedRemoteStorageManager(prefixed_configs(config, prefix), config_prefix=prefix)


@hookimpl
def strom_remote_storage_managers() -> Mapping[str, RemoteStorageManagerFactory]:
    return {S3_REMOTE_STORAGE_MANAGER: build_s3_remote_storage_manager}
