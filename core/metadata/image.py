"""MetadataImage: the immutable broker view of the committed metadata log.

An image is never changed in place: :class:`~strom.core.metadata.delta.MetadataDelta` builds
the next one, sharing every unchanged sub-structure (topic images, config maps, broker
registrations). Lookups the broker needs on request paths are dict hits: topic by name or id,
partition registration, configs of a resource, brokers with endpoints, the next producer-id
block, finalized features (``metadata.version``).

:meth:`MetadataImage.to_records` is the image as metadata records — the content of a snapshot.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from strom.core.metadata.features import (
    ELR_VERSION_FEATURE,
    METADATA_VERSION_FEATURE,
    TRANSACTION_VERSION_FEATURE,
)
from strom.core.metadata.records import (
    ZERO_UUID,
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerFeature,
    ClientQuotaRecord,
    ConfigRecord,
    ControllerEndpoint,
    ControllerFeature,
    EntityData,
    FeatureLevelRecord,
    Message,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    TopicRecord,
    UserScramCredentialRecord,
)

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

ConfigResource = tuple[int, str]
QuotaEntity = tuple[tuple[str, str | None], ...]
"""A client quota entity: its (entity type, name) pairs sorted by type; a None name is the default."""


def quota_entity_of(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    return tuple(sorted(pairs, key=lambda p: p[0]))


def quota_entity_sort_key(entity: QuotaEntity) -> tuple[tuple[str, bool, str], ...]:
    return tuple((t, n is not None, n or "") for t, n in entity)
_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """One partition's replica assignment and leadership (Kafka's PartitionRegistration)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    # The log directory (its meta.properties directory.id) of each replica, in replica order;
    # the zero uuid is Kafka's DirectoryId.UNASSIGNED, the empty tuple a record without the field.
    directories: tuple[uuid.UUID, ...] = ()
    # KIP-966: replicas that left the ISR below min.insync.replicas but hold every committed
    # record (eligible leader replicas), and the ELR last seen before ISR and ELR both emptied.
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    def directory_of(self, replica: int) -> uuid.UUID:
        """The directory id of ``replica`` (the zero uuid when unassigned or unknown)."""
        try:
            return self.directories[self.replicas.index(replica)]
        except (ValueError, IndexError):
            return ZERO_UUID


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration]


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    epoch: int
    incarnation_id: uuid.UUID
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool = False
    log_dirs: tuple[uuid.UUID, ...] = ()
    features: tuple[BrokerFeature, ...] = ()
    cordoned_log_dirs: tuple[uuid.UUID, ...] | None = None

    def endpoint(self, listener: str) -> Endpoint | None:
        return next((e for e in self.endpoints if e.name == listener), None)


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    """A controller's registration (Kafka's ControllerRegistration, from RegisterControllerRecord)."""

    controller_id: int
    incarnation_id: uuid.UUID
    zk_migration_ready: bool
    endpoints: tuple[Endpoint, ...]
    features: tuple[ControllerFeature, ...] = ()


@dataclass(frozen=True, slots=True)
class ProducerIdsImage:
    """The first producer id of the next block the controller will hand out."""

    next_producer_id: int = 0


@dataclass(frozen=True, slots=True)
class MetadataImage:
    features: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    cluster_id: str = ""
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: MappingProxyType({}))
    controllers: Mapping[int, ControllerRegistration] = field(default_factory=lambda: MappingProxyType({}))
    topics: Mapping[str, TopicImage] = field(default_factory=lambda: MappingProxyType({}))
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=lambda: MappingProxyType({}))
    configs: Mapping[ConfigResource, Mapping[str, str]] = field(default_factory=lambda: MappingProxyType({}))
    producer_ids: ProducerIdsImage = ProducerIdsImage()
    # Kafka's AclsImage: every ACL by its id, as its AccessControlEntryRecord.
    acls: Mapping[uuid.UUID, AccessControlEntryRecord] = field(default_factory=lambda: MappingProxyType({}))
    # Kafka's ScramImage: every SCRAM credential by (user name, mechanism type).
    scram: Mapping[tuple[str, int], UserScramCredentialRecord] = field(default_factory=lambda: MappingProxyType({}))
    # Kafka's ClientQuotasImage: entity -> quota key -> value. An entity is its (entity type, name)
    # pairs sorted by type; a None name is the default entity (<default>).
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=lambda: MappingProxyType({}))
    offset: int = -1   # offset of the last record applied (-1: none)
    epoch: int = -1    # leader epoch of that record

    # -- lookups -------------------------------------------------------------------------------

    def topic(self, name: str) -> TopicImage | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        return self.topics_by_id.get(topic_id)

    def topic_name(self, topic_id: uuid.UUID | None) -> str | None:
        """The name of the topic with ``topic_id``; None when unknown (the zero id included)."""
        found = self.topics_by_id.get(topic_id) if topic_id is not None else None
        return None if found is None else found.name

    def topic_id(self, name: str) -> uuid.UUID:
        """The id of topic ``name``; the zero id when there is no such topic (any more)."""
        found = self.topics.get(name)
        return ZERO_UUID if found is None else found.topic_id

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        t = self.topics.get(topic)
        return None if t is None else t.partitions.get(partition)

    def resource_configs(self, resource_type: int, name: str) -> Mapping[str, str]:
        return self.configs.get((resource_type, name), _EMPTY)

    def topic_configs(self, topic: str) -> Mapping[str, str]:
        return self.configs.get((TOPIC_RESOURCE, topic), _EMPTY)

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self.brokers.get(broker_id)

    @property
    def metadata_version(self) -> int:
        return self.features.get(METADATA_VERSION_FEATURE, 0)

    @property
    def transaction_version(self) -> int:
        """The finalized ``transaction.version`` (2: KIP-890 transactions; 0 when not finalized)."""
        return self.features.get(TRANSACTION_VERSION_FEATURE, 0)

    @property
    def elr_enabled(self) -> bool:
        """``eligible.leader.replicas.version`` >= 1: the controller keeps and elects from the ELR."""
        return self.features.get(ELR_VERSION_FEATURE, 0) >= 1

    @property
    def next_producer_id(self) -> int:
        return self.producer_ids.next_producer_id

    def is_empty(self) -> bool:
        return not (self.features or self.brokers or self.controllers or self.topics or self.configs
                    or self.producer_ids.next_producer_id or self.acls or self.scram
                    or self.client_quotas)

    def same_content(self, other: MetadataImage) -> bool:
        """Equal metadata, ignoring provenance (offset / epoch)."""
        return list(self.to_records()) == list(other.to_records()) and self.cluster_id == other.cluster_id

    # -- as records ----------------------------------------------------------------------------

    def to_records(self) -> Iterator[Message]:
        """The records that rebuild this image from nothing (features first, as Kafka orders them)."""
        for name in sorted(self.features):
            yield FeatureLevelRecord(name, self.features[name])
        for b in sorted(self.brokers.values(), key=lambda b: b.broker_id):
            yield RegisterBrokerRecord(
                broker_id=b.broker_id, incarnation_id=b.incarnation_id, broker_epoch=b.epoch,
                end_points=[BrokerEndpoint(e.name, e.host, e.port, e.security_protocol) for e in b.endpoints],
                features=list(b.features), rack=b.rack, fenced=b.fenced,
                in_controlled_shutdown=b.in_controlled_shutdown, log_dirs=list(b.log_dirs),
                cordoned_log_dirs=None if b.cordoned_log_dirs is None else list(b.cordoned_log_dirs))
        for c in sorted(self.controllers.values(), key=lambda c: c.controller_id):
            yield RegisterControllerRecord(
                controller_id=c.controller_id, incarnation_id=c.incarnation_id,
                zk_migration_ready=c.zk_migration_ready,
                end_points=[ControllerEndpoint(e.name, e.host, e.port, e.security_protocol) for e in c.endpoints],
                features=list(c.features))
        for t in sorted(self.topics.values(), key=lambda t: t.name):
            yield TopicRecord(t.name, t.topic_id)
            for pid in sorted(t.partitions):
                p = t.partitions[pid]
                yield PartitionRecord(
                    partition_id=pid, topic_id=t.topic_id, replicas=list(p.replicas), isr=list(p.isr),
                    removing_replicas=list(p.removing_replicas), adding_replicas=list(p.adding_replicas),
                    leader=p.leader, leader_recovery_state=p.leader_recovery_state,
                    leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
                    directories=list(p.directories) or [ZERO_UUID] * len(p.replicas),
                    eligible_leader_replicas=list(p.elr) if p.elr else None,
                    last_known_elr=list(p.last_known_elr) if p.last_known_elr else None)
        for (rtype, rname) in sorted(self.configs):
            values = self.configs[(rtype, rname)]
            for key in sorted(values):
                yield ConfigRecord(rtype, rname, key, values[key])
        if self.producer_ids.next_producer_id:
            yield ProducerIdsRecord(-1, -1, self.producer_ids.next_producer_id)
        for acl_id in sorted(self.acls):
            yield self.acls[acl_id]
        for scram_key in sorted(self.scram):
            yield self.scram[scram_key]
        for entity in sorted(self.client_quotas, key=quota_entity_sort_key):
            quota_values = self.client_quotas[entity]
            for key in sorted(quota_values):
                yield ClientQuotaRecord(entity=[EntityData(t, n) for t, n in entity], key=key,
                                        value=quota_values[key])


EMPTY_IMAGE = MetadataImage()
