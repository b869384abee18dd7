"""Errors of strom.tiered, under the plugin system's :class:`~strom.plugins.exceptions.RemoteStorageError`
(Kafka's ``RemoteStorageException``), since the tier's managers are plugins.

Bad configuration is :class:`strom.core.exceptions.ConfigError` (it names the key), as for the
rest of the broker.
"""

from __future__ import annotations

from strom.plugins.exceptions import RemoteResourceNotFoundError, RemoteStorageError


class RemoteStateTransitionError(RemoteStorageError):
    """A remote segment or partition was asked to move to a state its current one does not allow
    (Kafka raises ``IllegalStateException`` from ``RemoteLogMetadataCache``)."""


class RemoteSegmentUnknownError(RemoteResourceNotFoundError):
    """An update names a remote segment the metadata manager never recorded (Kafka's
    ``RemoteResourceNotFoundException`` from ``RemoteLogMetadataCache.updateRemoteLogSegmentMetadata``)."""


__all__ = ["RemoteResourceNotFoundError", "RemoteSegmentUnknownError", "RemoteStateTransitionError",
           "RemoteStorageError"]
