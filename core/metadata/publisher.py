"""The publisher protocol: components that react to each new committed MetadataImage; and
:class:`ImageMapPublisher`, the shared shape of the publishers that follow one map of the image."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Generic, Protocol, TypeVar, runtime_checkable

from strom.core.metadata.delta import MetadataDelta
from strom.core.metadata.image import MetadataImage

K = TypeVar("K")
V = TypeVar("V")


@runtime_checkable
class MetadataPublisher(Protocol):
    """Called on the event loop, in commit order, after every committed batch of metadata
    records (and once after a snapshot load, with a delta from the empty image).

    ``delta`` tells what changed (``created_topics``, ``changed_partitions``,
    ``deleted_topics``, ``changed_configs``, ...); ``image`` is the new current image. A
    publisher must not block: long work goes to a thread or task.
    """

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None: ...


class ImageMapPublisher(ABC, Generic[K, V]):
    """The shape of a publisher that keeps one consumer equal to one map of the image (ACLs,
    SCRAM credentials, client quotas: Kafka's AclPublisher, ScramPublisher and
    DynamicClientQuotaPublisher).

    The image keeps a map object until one of its entries changes, so identity tells what is
    new: the same map as last published is nothing to do; a delta whose base holds the map
    last published is applied entry by entry (:meth:`apply_changes`); any other base (the first
    call, a snapshot load, the catch-up when the publisher is added) reloads the whole map
    (:meth:`load`), since a snapshot drops entries without a record naming them.
    """

    def __init__(self) -> None:
        self._published: Mapping[K, V] | None = None

    @abstractmethod
    def image_map(self, image: MetadataImage) -> Mapping[K, V]:
        """The map of ``image`` this publisher follows."""

    @abstractmethod
    def load(self, entries: Mapping[K, V]) -> None:
        """Hand the consumer the whole map, replacing what it held."""

    def apply_changes(self, delta: MetadataDelta, entries: Mapping[K, V]) -> None:
        """Hand the consumer what ``delta`` changed; ``entries`` is the new map. By default the
        whole map again, for a consumer without updates of single entries."""
        self.load(entries)

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        entries = self.image_map(image)
        if entries is self._published:
            return
        if self._published is None or self.image_map(delta.base) is not self._published:
            self.load(entries)
        else:
            self.apply_changes(delta, entries)
        self._published = entries
