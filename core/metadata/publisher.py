"""The publisher protocol: components that react to each new committed MetadataImage."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from strom.core.metadata.delta import MetadataDelta
from strom.core.metadata.image import MetadataImage


@runtime_checkable
class MetadataPublisher(Protocol):
    """Called on the event loop, in commit order, after every committed batch of metadata
    records (and once after a snapshot load, with a delta from the empty image).

    ``delta`` tells what changed (``created_topics``, ``changed_partitions``,
    ``deleted_topics``, ``changed_configs``, ...); ``image`` is the new current image. A
    publisher must not block: long work goes to a thread or task.
    """

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None: ...
