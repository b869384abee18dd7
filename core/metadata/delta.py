"""MetadataDelta: records applied on top of a MetadataImage, producing the next image.

Replay rules are Kafka's (``MetadataDelta.replay``): a TopicRecord adds a topic, PartitionRecord
a partition, PartitionChangeRecord changes the fields it sets (-2 leader / null lists mean
"unchanged"), RemoveTopicRecord removes the topic *and its topic configs*, ConfigRecord with a
null value deletes the key, FeatureLevelRecord level 0 removes the feature,
RegisterBrokerRecord replaces a broker's registration, ProducerIdsRecord moves the next block.

Besides the new image, a delta tells publishers what changed: ``created_topics``,
``changed_partitions`` (topic id -> partition ids, including new ones), ``deleted_topics``
(the removed :class:`TopicImage`), ``changed_configs``, ``changed_brokers``,
``features_changed``, ``producer_ids_changed``.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from types import MappingProxyType

from strom.core.errors import CorruptMessageError
from strom.core.metadata.image import (
    TOPIC_RESOURCE,
    BrokerRegistration,
    ConfigResource,
    ControllerRegistration,
    Endpoint,
    MetadataImage,
    PartitionRegistration,
    ProducerIdsImage,
    QuotaEntity,
    TopicImage,
    quota_entity_of,
)
from strom.core.metadata.records import (
    FENCING_FENCE,
    FENCING_UNFENCE,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClearElrRecord,
    ClientQuotaRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    Message,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)

log = logging.getLogger(__name__)


class MetadataDelta:
    """Changes accumulated since ``base``; :meth:`apply` returns the resulting image."""

    def __init__(self, base: MetadataImage) -> None:
        self.base = base
        self._features: dict[str, int] | None = None
        self._brokers: dict[int, BrokerRegistration] | None = None
        self._controllers: dict[int, ControllerRegistration] | None = None
        # Topic id -> (name, partitions) for topics touched by this delta.
        self._topics: dict[uuid.UUID, tuple[str, dict[int, PartitionRegistration]]] = {}
        self._configs: dict[ConfigResource, dict[str, str] | None] = {}
        self._next_producer_id: int | None = None
        # ACL id -> its record, or None when removed (Kafka's AclsDelta).
        self.changed_acls: dict[uuid.UUID, AccessControlEntryRecord | None] = {}
        # (user, mechanism type) -> its credential, or None when removed (Kafka's ScramDelta).
        self.changed_scram: dict[tuple[str, int], UserScramCredentialRecord | None] = {}
        # Quota entity -> its quotas after this delta (empty: none left), Kafka's ClientQuotasDelta.
        self.changed_client_quotas: dict[QuotaEntity, dict[str, float]] = {}
        self.created_topics: set[uuid.UUID] = set()
        self.changed_partitions: dict[uuid.UUID, set[int]] = {}
        self.deleted_topics: dict[uuid.UUID, TopicImage] = {}
        self.changed_brokers: set[int] = set()
        self.features_changed = False

    # -- helpers -------------------------------------------------------------------------------

    @property
    def changed_configs(self) -> set[ConfigResource]:
        return set(self._configs)

    @property
    def producer_ids_changed(self) -> bool:
        return self._next_producer_id is not None

    def _topic(self, topic_id: uuid.UUID, what: str) -> tuple[str, dict[int, PartitionRegistration]]:
        entry = self._topics.get(topic_id)
        if entry is None:
            if topic_id in self.deleted_topics:
                raise CorruptMessageError(f"{what} for topic {topic_id} after its removal")
            existing = self.base.topics_by_id.get(topic_id)
            if existing is None:
                raise CorruptMessageError(f"{what} for unknown topic id {topic_id}")
            entry = (existing.name, dict(existing.partitions))
            self._topics[topic_id] = entry
        return entry

    def _config_map(self, resource: ConfigResource) -> dict[str, str]:
        current = self._configs.get(resource)
        if current is None:
            current = dict(self.base.configs.get(resource, {}))
            self._configs[resource] = current
        return current

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        entry = self._topics.get(topic_id)
        if entry is not None:
            return entry[0]
        t = self.base.topics_by_id.get(topic_id)
        return None if t is None or topic_id in self.deleted_topics else t.name

    # -- replay --------------------------------------------------------------------------------

    def _broker_map(self) -> dict[int, BrokerRegistration]:
        if self._brokers is None:
            self._brokers = dict(self.base.brokers)
        return self._brokers

    def _change_broker(self, broker_id: int, epoch: int, what: str, **changes: object) -> None:
        """Kafka's ClusterControlManager.replay of a registration change: the broker must be
        registered with that epoch (a stale change is corrupt metadata)."""
        brokers = self._broker_map()
        current = brokers.get(broker_id)
        if current is None:
            raise CorruptMessageError(f"{what} for unknown broker {broker_id}")
        if current.epoch != epoch:
            raise CorruptMessageError(f"{what} for broker {broker_id} with epoch {epoch}, but its registration "
                                      f"has epoch {current.epoch}")
        brokers[broker_id] = replace(current, **changes)  # type: ignore[arg-type]
        self.changed_brokers.add(broker_id)

    def replay(self, record: Message) -> None:
        if isinstance(record, TopicRecord):
            self._topics[record.topic_id] = (record.name, {})
            self.created_topics.add(record.topic_id)
            self.deleted_topics.pop(record.topic_id, None)
            self.changed_partitions.setdefault(record.topic_id, set())
        elif isinstance(record, PartitionRecord):
            _, parts = self._topic(record.topic_id, "PartitionRecord")
            parts[record.partition_id] = PartitionRegistration(
                tuple(record.replicas), tuple(record.isr), record.leader, record.leader_epoch,
                record.partition_epoch, tuple(record.removing_replicas), tuple(record.adding_replicas),
                record.leader_recovery_state, tuple(record.directories),
                tuple(record.eligible_leader_replicas or ()), tuple(record.last_known_elr or ()))
            self.changed_partitions.setdefault(record.topic_id, set()).add(record.partition_id)
        elif isinstance(record, PartitionChangeRecord):
            self._replay_partition_change(record)
        elif isinstance(record, RemoveTopicRecord):
            name, parts = self._topic(record.topic_id, "RemoveTopicRecord")
            del self._topics[record.topic_id]
            self.created_topics.discard(record.topic_id)
            self.changed_partitions.pop(record.topic_id, None)
            self.deleted_topics[record.topic_id] = TopicImage(name, record.topic_id, MappingProxyType(parts))
            # Kafka drops the topic's configs with the topic.
            if (TOPIC_RESOURCE, name) in self.base.configs or (TOPIC_RESOURCE, name) in self._configs:
                self._configs[(TOPIC_RESOURCE, name)] = {}
        elif isinstance(record, ConfigRecord):
            values = self._config_map((record.resource_type, record.resource_name))
            if record.value is None:
                values.pop(record.name, None)
            else:
                values[record.name] = record.value
        elif isinstance(record, RegisterBrokerRecord):
            self._broker_map()[record.broker_id] = BrokerRegistration(
                record.broker_id, record.broker_epoch, record.incarnation_id,
                tuple(Endpoint(e.name, e.host, e.port, e.security_protocol) for e in record.end_points),
                record.rack, record.fenced, record.in_controlled_shutdown, tuple(record.log_dirs),
                tuple(record.features),
                None if record.cordoned_log_dirs is None else tuple(record.cordoned_log_dirs))
            self.changed_brokers.add(record.broker_id)
        elif isinstance(record, BrokerRegistrationChangeRecord):
            changes: dict[str, object] = {}
            if record.fenced == FENCING_FENCE:
                changes["fenced"] = True
            elif record.fenced == FENCING_UNFENCE:
                changes["fenced"] = False
            elif record.fenced != 0:
                raise CorruptMessageError(f"BrokerRegistrationChangeRecord with unknown fencing change {record.fenced}")
            if record.in_controlled_shutdown == 1:
                changes["in_controlled_shutdown"] = True
            elif record.in_controlled_shutdown != 0:
                raise CorruptMessageError("BrokerRegistrationChangeRecord with unknown controlled shutdown change "
                                          f"{record.in_controlled_shutdown}")
            if record.log_dirs:
                changes["log_dirs"] = tuple(record.log_dirs)
            if record.cordoned_log_dirs is not None:
                changes["cordoned_log_dirs"] = tuple(record.cordoned_log_dirs)
            self._change_broker(record.broker_id, record.broker_epoch, "BrokerRegistrationChangeRecord", **changes)
        elif isinstance(record, FenceBrokerRecord):
            self._change_broker(record.id, record.epoch, "FenceBrokerRecord", fenced=True)
        elif isinstance(record, UnfenceBrokerRecord):
            self._change_broker(record.id, record.epoch, "UnfenceBrokerRecord", fenced=False)
        elif isinstance(record, UnregisterBrokerRecord):
            brokers = self._broker_map()
            current = brokers.get(record.broker_id)
            if current is None or current.epoch != record.broker_epoch:
                raise CorruptMessageError(f"UnregisterBrokerRecord for broker {record.broker_id} epoch "
                                          f"{record.broker_epoch}, which is not registered")
            del brokers[record.broker_id]
            self.changed_brokers.add(record.broker_id)
        elif isinstance(record, RegisterControllerRecord):
            if self._controllers is None:
                self._controllers = dict(self.base.controllers)
            self._controllers[record.controller_id] = ControllerRegistration(
                record.controller_id, record.incarnation_id, record.zk_migration_ready,
                tuple(Endpoint(e.name, e.host, e.port, e.security_protocol) for e in record.end_points),
                tuple(record.features))
        elif isinstance(record, ClearElrRecord):
            self._clear_elr(record.topic_name)
        elif isinstance(record, FeatureLevelRecord):
            if self._features is None:
                self._features = dict(self.base.features)
            if record.feature_level == 0:
                self._features.pop(record.name, None)
            else:
                self._features[record.name] = record.feature_level
            self.features_changed = True
        elif isinstance(record, ProducerIdsRecord):
            self._next_producer_id = record.next_producer_id
        elif isinstance(record, AccessControlEntryRecord):
            self.changed_acls[record.id] = record
        elif isinstance(record, RemoveAccessControlEntryRecord):
            if record.id not in self.base.acls and self.changed_acls.get(record.id) is None:
                raise CorruptMessageError(f"RemoveAccessControlEntryRecord for unknown ACL id {record.id}")
            self.changed_acls[record.id] = None
        elif isinstance(record, UserScramCredentialRecord):
            self.changed_scram[(record.name, record.mechanism)] = record
        elif isinstance(record, RemoveUserScramCredentialRecord):
            self.changed_scram[(record.name, record.mechanism)] = None
        elif isinstance(record, ClientQuotaRecord):
            entity = quota_entity_of((e.entity_type, e.entity_name) for e in record.entity)
            quotas = self.changed_client_quotas.get(entity)
            if quotas is None:
                quotas = self.changed_client_quotas[entity] = dict(self.base.client_quotas.get(entity, {}))
            if record.remove:
                quotas.pop(record.key, None)
            else:
                quotas[record.key] = record.value
        # NoOpRecord, Begin/End/AbortTransactionRecord and ZkMigrationStateRecord change nothing
        # (strom writes one request per batch; Kafka 4 replays a migration state as nothing).

    def _replay_partition_change(self, record: PartitionChangeRecord) -> None:
        _, parts = self._topic(record.topic_id, "PartitionChangeRecord")
        old = parts.get(record.partition_id)
        if old is None:
            raise CorruptMessageError(f"PartitionChangeRecord for unknown partition "
                                      f"{record.topic_id}:{record.partition_id}")
        new = old
        if record.replicas is not None:
            new = replace(new, replicas=tuple(record.replicas))
        if record.isr is not None:
            new = replace(new, isr=tuple(record.isr))
        if record.removing_replicas is not None:
            new = replace(new, removing_replicas=tuple(record.removing_replicas))
        if record.adding_replicas is not None:
            new = replace(new, adding_replicas=tuple(record.adding_replicas))
        if record.leader_recovery_state != -1:
            new = replace(new, leader_recovery_state=record.leader_recovery_state)
        if record.leader != -2:
            # A leader change bumps the leader epoch, as in Kafka's PartitionRegistration.merge.
            new = replace(new, leader=record.leader, leader_epoch=old.leader_epoch + 1)
        if record.directories is not None:
            new = replace(new, directories=tuple(record.directories))
        elif record.replicas is not None and old.directories:
            # New replicas without directories: each kept replica keeps its directory.
            new = replace(new, directories=tuple(old.directory_of(r) for r in new.replicas))
        if record.eligible_leader_replicas is not None:
            new = replace(new, elr=tuple(record.eligible_leader_replicas))
        if record.last_known_elr is not None:
            new = replace(new, last_known_elr=tuple(record.last_known_elr))
        parts[record.partition_id] = replace(new, partition_epoch=old.partition_epoch + 1)
        self.changed_partitions.setdefault(record.topic_id, set()).add(record.partition_id)

    def _clear_elr(self, topic_name: str) -> None:
        """ClearElrRecord: empty ELR and last known ELR of a topic's partitions (every topic when
        the name is empty), bumping the partition epoch of those that change (Kafka's replay)."""
        if topic_name:
            found = self.base.topics.get(topic_name)
            ids = [tid for tid, (name, _) in self._topics.items() if name == topic_name]
            if not ids and found is not None:
                ids = [found.topic_id]
            if not ids:
                raise CorruptMessageError(f"ClearElrRecord for unknown topic {topic_name!r}")
        else:
            ids = list({*self.base.topics_by_id, *self._topics} - set(self.deleted_topics))
        for tid in ids:
            _, parts = self._topic(tid, "ClearElrRecord")
            for pid, reg in list(parts.items()):
                if reg.elr or reg.last_known_elr:
                    parts[pid] = replace(reg, elr=(), last_known_elr=(), partition_epoch=reg.partition_epoch + 1)
                    self.changed_partitions.setdefault(tid, set()).add(pid)

    # -- result --------------------------------------------------------------------------------

    def apply(self, offset: int, epoch: int) -> MetadataImage:
        b = self.base
        topics = b.topics
        topics_by_id = b.topics_by_id
        if self._topics or self.deleted_topics:
            by_id = dict(b.topics_by_id)
            by_name = dict(b.topics)
            for tid, old in self.deleted_topics.items():
                by_id.pop(tid, None)
                if by_name.get(old.name) is not None and by_name[old.name].topic_id == tid:
                    del by_name[old.name]
            for tid, (name, parts) in self._topics.items():
                t = TopicImage(name, tid, MappingProxyType(parts))
                by_id[tid] = t
                by_name[name] = t
            topics, topics_by_id = MappingProxyType(by_name), MappingProxyType(by_id)
        configs = b.configs
        if self._configs:
            merged = dict(b.configs)
            for resource, values in self._configs.items():
                if values:
                    merged[resource] = MappingProxyType(values)
                else:
                    merged.pop(resource, None)
            configs = MappingProxyType(merged)
        acls = b.acls
        if self.changed_acls:
            merged_acls = dict(b.acls)
            for acl_id, acl in self.changed_acls.items():
                if acl is None:
                    merged_acls.pop(acl_id, None)
                else:
                    merged_acls[acl_id] = acl
            acls = MappingProxyType(merged_acls)
        scram = b.scram
        if self.changed_scram:
            merged_scram = dict(b.scram)
            for key, credential in self.changed_scram.items():
                if credential is None:
                    merged_scram.pop(key, None)
                else:
                    merged_scram[key] = credential
            scram = MappingProxyType(merged_scram)
        client_quotas = b.client_quotas
        if self.changed_client_quotas:
            merged_quotas = dict(b.client_quotas)
            for entity, quota_values in self.changed_client_quotas.items():
                if quota_values:
                    merged_quotas[entity] = MappingProxyType(dict(quota_values))
                else:
                    merged_quotas.pop(entity, None)
            client_quotas = MappingProxyType(merged_quotas)
        return MetadataImage(
            features=MappingProxyType(self._features) if self._features is not None else b.features,
            cluster_id=b.cluster_id,
            brokers=MappingProxyType(self._brokers) if self._brokers is not None else b.brokers,
            controllers=MappingProxyType(self._controllers) if self._controllers is not None else b.controllers,
            topics=topics,
            topics_by_id=topics_by_id,
            configs=configs,
            producer_ids=(ProducerIdsImage(self._next_producer_id) if self._next_producer_id is not None
                          else b.producer_ids),
            acls=acls,
            scram=scram,
            client_quotas=client_quotas,
            offset=offset,
            epoch=epoch,
        )
