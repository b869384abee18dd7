"""QuorumController: admin requests → validated metadata records → raft append → replay.

Every call runs on the broker's event loop and follows the same path: under the controller's
lock, validate each item against the latest committed :class:`MetadataImage`, turn the valid
items into records, append them as **one** batch (a request is atomic), await the raft commit
(fsync off the loop), by which time the loader has replayed the batch and published the new
image. Per-item failures are answered with Kafka's error codes and messages; they never fail
the whole request.

Entry points: :meth:`create_topics`, :meth:`delete_topics`, :meth:`create_partitions`,
:meth:`incremental_alter_configs`, :meth:`legacy_alter_configs`, :meth:`register_broker`,
:meth:`controlled_shutdown`, :meth:`allocate_producer_ids`, :meth:`update_features`. Single node
today: a partition's replicas are chosen round-robin from the registered brokers (so one broker
gives replicas=isr=[node], leader=node, epoch 0), each replica in the broker's log directory
(its ``directory.id``) when the broker has exactly one, as Kafka's ``ClusterControlManager.defaultDir``.

Broker lifecycle, as Kafka 4.3's controller writes it: a registration is a RegisterControllerRecord
for this node's controller (once per incarnation), a fenced RegisterBrokerRecord, then (Kafka's
first heartbeat) a batch that unfences it with a BrokerRegistrationChangeRecord and elects a
leader for every partition that has none and can get one (:mod:`.partition_change`: ISR first,
the ELR only when the ISR is empty (``eligible.leader.replicas.version``), unclean only if
configured). A controlled shutdown writes BrokerRegistrationChangeRecord(in controlled shutdown) with the
PartitionChangeRecords that take the broker out of ISR and leadership, then one that fences it.
Start-up (:meth:`activate`) also elects where a registered, unfenced replica can lead.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from strom.core.config import (
    TOPIC_CONFIGS,
    BrokerConfig,
    check_remote_storage_topic,
    format_config_value,
    parse_topic_config,
)
from strom.core.controller.broker_heartbeat_manager import BrokerControlState, BrokerHeartbeatManager
from strom.core.controller.partition_change import elect_leader, remove_from_isr, shutdown_change
from strom.core.dynamic_config import KAFKA_BROKER_KEYS, validate_client_metrics
from strom.core.errors import (
    BrokerIdNotRegisteredError,
    DuplicateBrokerRegistrationError,
    InconsistentClusterIdError,
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidRegistrationError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    InvalidUpdateVersionError,
    KafkaError,
    StaleBrokerEpochError,
    TopicDeletionDisabledError,
    TopicExistsError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from strom.core.exceptions import ConfigError
from strom.core.group_config import GROUP_RESOURCE, broker_value, validate_group_configs
from strom.core.log.checkpoint import read_meta_properties
from strom.core.metadata.bootstrap import LATEST_METADATA_VERSION, MINIMUM_METADATA_VERSION, uuid_from_str
from strom.core.metadata.features import (
    FEATURES,
    GROUP_VERSION_FEATURE,
    IBP_3_7_IV0,
    IBP_3_7_IV2,
    IBP_4_0_IV0,
    KRAFT_VERSION_FEATURE,
    METADATA_VERSION_FEATURE,
    RECORDED_FEATURES,
    dependency_problem,
)
from strom.core.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage, PartitionRegistration
from strom.core.metadata.loader import MetadataLoader
from strom.core.metadata.records import (
    CONTROLLED_SHUTDOWN_IN,
    FENCING_FENCE,
    FENCING_UNFENCE,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ClearElrRecord,
    ConfigRecord,
    ControllerEndpoint,
    ControllerFeature,
    FeatureLevelRecord,
    Message,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveTopicRecord,
    TopicRecord,
    encode_record,
)
from strom.core.raft.client import RaftClient
from strom.core.topic_names import unify_collision_chars, validate_topic_name

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000
# Uuid values Kafka never hands out: ZERO and the metadata topic's id (1).
ZERO_UUID = uuid.UUID(int=0)
_RESERVED_IDS = (ZERO_UUID, uuid.UUID(int=1))

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3

# FeatureUpdate.UpgradeType codes (UpdateFeatures v1+; v0 requests are taken as UPGRADE, as Kafka does).
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def new_topic_id() -> uuid.UUID:
    while True:
        tid = uuid.UUID(bytes=os.urandom(16))
        # Kafka's Uuid.randomUuid avoids ids whose string form starts with '-'.
        if tid not in _RESERVED_IDS and (tid.bytes[0] >> 2) != 62:
            return tid


# -- request / result shapes --------------------------------------------------------------------


@dataclass(slots=True)
class CreatableTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, Sequence[int]] = field(default_factory=dict)
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(slots=True)
class CreateTopicResult:
    name: str
    error_code: int = 0
    error_message: str | None = None
    topic_id: uuid.UUID = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)  # effective values (overrides + defaults)


@dataclass(slots=True)
class DeleteTopicResult:
    name: str | None
    topic_id: uuid.UUID
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class CreatePartitionsTopic:
    name: str
    count: int
    assignments: Sequence[Sequence[int]] | None = None  # replicas of each *new* partition


@dataclass(slots=True)
class ItemResult:
    """Result for one topic / resource of a request."""

    name: str
    error_code: int = 0
    error_message: str | None = None
    resource_type: int = TOPIC_RESOURCE


@dataclass(slots=True)
class AlterConfigsResource:
    resource_type: int
    resource_name: str
    # Incremental: (key, op, value) with op SET/DELETE/APPEND/SUBTRACT. Legacy: (key, OP_SET, value).
    ops: Sequence[tuple[str, int, str | None]]


@dataclass(frozen=True, slots=True)
class RemoteBrokerRegistration:
    """A BrokerRegistration request as the controller reads it (Kafka's BrokerRegistrationRequestData)."""

    broker_id: int
    cluster_id: str
    incarnation_id: uuid.UUID
    listeners: Sequence[tuple[str, str, int, int]]  # (name, host, port, security protocol id)
    features: Sequence[tuple[str, int, int]]  # (name, min supported, max supported)
    rack: str | None
    log_dirs: Sequence[uuid.UUID] = ()
    is_migrating_zk_broker: bool = False
    previous_broker_epoch: int = -1  # -1: unknown, an unclean shutdown (requests before v3)


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatReply:
    """Kafka's BrokerHeartbeatReply."""

    is_caught_up: bool
    is_fenced: bool
    in_controlled_shutdown: bool
    should_shut_down: bool


def _clear_elr_records(records: Sequence[Message]) -> list[Message]:
    """Kafka's ConfigurationControlManager.createClearElrRecordsAsNeeded (ELR on): a change of
    ``min.insync.replicas`` voids the ELRs it was computed with; a topic's clears that topic's,
    a broker's or the cluster's clears every topic's (a ClearElrRecord with no name)."""
    return [ClearElrRecord(topic_name=r.resource_name if r.resource_type == TOPIC_RESOURCE else "")
            for r in records if isinstance(r, ConfigRecord) and r.name == "min.insync.replicas"]


def _fail(result: CreateTopicResult | DeleteTopicResult | ItemResult, e: KafkaError) -> None:
    result.error_code = e.errno
    result.error_message = e.message or None


# -- the controller ----------------------------------------------------------------------------


class QuorumController:
    """The active controller of a single-voter quorum."""

    def __init__(self, config: BrokerConfig, raft: RaftClient, loader: MetadataLoader) -> None:
        self.config = config
        self.raft = raft
        self.loader = loader
        self._lock = asyncio.Lock()
        # Sessions of the brokers that register over the controller listener (KIP-631).
        self.heartbeats = BrokerHeartbeatManager(
            int(broker_value(config, "broker.session.timeout.ms") or 9000), config.node_id)
        self._session_timer: asyncio.Task[None] | None = None

    @property
    def image(self) -> MetadataImage:
        return self.loader.image

    async def _commit(self, records: Sequence[Message]) -> int:
        # Each record in the version Kafka writes at the finalized metadata.version; the bootstrap
        # batch (no level yet) takes the level it carries.
        mv = self.image.metadata_version or next(
            (r.feature_level for r in records
             if isinstance(r, FeatureLevelRecord) and r.name == METADATA_VERSION_FEATURE), LATEST_METADATA_VERSION)
        return await self.raft.append([encode_record(r, metadata_version=mv) for r in records])

    # -- brokers: acceptable leaders, directories -------------------------------------------------

    def _acceptable_leader(self, image: MetadataImage) -> Callable[[int], bool]:
        """Kafka's isAcceptableLeader: registered, unfenced, not in controlled shutdown."""
        def acceptable(broker_id: int) -> bool:
            reg = image.brokers.get(broker_id)
            return reg is not None and not reg.fenced and not reg.in_controlled_shutdown
        return acceptable

    def _topic_flag(self, image: MetadataImage, topic: str, key: str, default: str) -> str:
        """A topic config's value: its override, else the cluster-wide broker config, else ``default``."""
        return (image.topic_configs(topic).get(key) or image.resource_configs(BROKER_RESOURCE, "").get(key)
                or image.resource_configs(BROKER_RESOURCE, str(self.config.node_id)).get(key) or default)

    def _election_settings(self, image: MetadataImage, topic: str) -> tuple[int, bool]:
        """The topic's ``min.insync.replicas`` and ``unclean.leader.election.enable`` as elections read them."""
        min_isr = int(self._topic_flag(image, topic, "min.insync.replicas", str(self.config.min_insync_replicas)))
        unclean = self._topic_flag(image, topic, "unclean.leader.election.enable",
                                   str(self.config.unclean_leader_election_enable).lower()) == "true"
        return min_isr, unclean

    def _elections(self, image: MetadataImage) -> list[Message]:
        """A PartitionChangeRecord for every partition that lacks an acceptable leader and can get one."""
        acceptable = self._acceptable_leader(image)
        out: list[Message] = []
        for topic in sorted(image.topics.values(), key=lambda t: t.name):
            min_isr, unclean = self._election_settings(image, topic.name)
            for pid in sorted(topic.partitions):
                reg = topic.partitions[pid]
                # Kafka's handleBrokerUnfenced visits the partitions without a leader; strom also
                # takes one whose leader cannot lead (its broker re-registered without a fencing pass).
                if reg.leader != -1 and acceptable(reg.leader):
                    continue
                record = elect_leader(reg, topic.topic_id, pid, acceptable=acceptable,
                                      elr_enabled=image.elr_enabled, unclean=unclean, min_isr=min_isr)
                if record is not None:
                    out.append(record)
        return out

    def _local_log_dir_ids(self) -> list[uuid.UUID]:
        """The ``directory.id`` of each of this node's log dirs (meta.properties), in config order."""
        out = []
        for d in self.config.log_dir_list:
            props = read_meta_properties(d) or {}
            try:
                out.append(uuid_from_str(props["directory.id"]))
            except (KeyError, ValueError):
                continue
        return out

    def _default_dir(self, image: MetadataImage, broker_id: int) -> uuid.UUID:
        """Kafka's ClusterControlManager.defaultDir: a broker's only log dir, else UNASSIGNED (zero)."""
        reg = image.brokers.get(broker_id)
        return reg.log_dirs[0] if reg is not None and len(reg.log_dirs) == 1 else ZERO_UUID

    def _dir_assignments(self, image: MetadataImage, broker_id: int) -> list[Message]:
        """Replicas of ``broker_id`` with an unassigned directory get its only log dir (what Kafka's
        broker asks with AssignReplicasToDirs)."""
        target = self._default_dir(image, broker_id)
        if target == ZERO_UUID:
            return []
        out: list[Message] = []
        for topic in sorted(image.topics.values(), key=lambda t: t.name):
            for pid in sorted(topic.partitions):
                reg = topic.partitions[pid]
                if broker_id not in reg.replicas or reg.directory_of(broker_id) != ZERO_UUID:
                    continue
                dirs = [reg.directory_of(r) for r in reg.replicas]
                dirs[reg.replicas.index(broker_id)] = target
                out.append(PartitionChangeRecord(partition_id=pid, topic_id=topic.topic_id, directories=dirs))
        return out

    def supported_features(self) -> list[tuple[str, int, int]]:
        """(name, min, max) of every feature this node supports, as its registrations carry them."""
        return sorted([(METADATA_VERSION_FEATURE, MINIMUM_METADATA_VERSION, LATEST_METADATA_VERSION),
                       *((name, spec.min_level, spec.max_level) for name, spec in FEATURES.items())])

    async def activate(self, bootstrap: Sequence[Message]) -> None:
        """On becoming active with an empty log: write the bootstrap records (metadata.version).

        Like Kafka 4 (with eligible leader replicas), the cluster-wide ``min.insync.replicas``
        is also written as an explicit cluster-default broker config record.
        """
        async with self._lock:
            if self.image.metadata_version == 0 and bootstrap:
                min_isr = ConfigRecord(resource_type=BROKER_RESOURCE, resource_name="", name="min.insync.replicas",
                                       value=str(self.config.min_insync_replicas))
                await self._commit([*bootstrap, min_isr])
            elif self._written_before_features(self.image):
                # strom before Kafka 4.3 parity served the KIP-848 consumer protocol without
                # finalizing group.version; finalize it as Kafka formats 4.0+ clusters, so
                # those groups keep working (group.version 0 now turns the protocol off).
                log.info("finalizing group.version=1 in a metadata log written by an older strom")
                await self._commit([FeatureLevelRecord(GROUP_VERSION_FEATURE, 1)])
            # After the replay: a partition left without a leader whose ISR or ELR holds a
            # registered, unfenced broker gets one now (the broker's own registration follows).
            elections = self._elections(self.image)
            if elections:
                await self._commit(elections)

    @staticmethod
    def _written_before_features(image: MetadataImage) -> bool:
        """A log of an older strom: metadata.version 4.0+ but no group.version and no controller
        registration (Kafka registers its controllers from 3.7-IV0 on, and this strom does too)."""
        return (image.metadata_version >= IBP_4_0_IV0 and GROUP_VERSION_FEATURE not in image.features
                and not image.controllers)

    # -- topics --------------------------------------------------------------------------------

    def _assign(self, image: MetadataImage, num_partitions: int, rf: int,
                start: int = 0) -> list[list[int]]:
        brokers = sorted(b for b, reg in image.brokers.items() if not reg.fenced)
        if rf > len(brokers):
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {rf} time(s): The target replication factor of "
                f"{rf} cannot be reached because only {len(brokers)} broker(s) are registered.")
        return [[brokers[(p + i) % len(brokers)] for i in range(rf)]
                for p in range(start, start + num_partitions)]

    def _check_assignment(self, image: MetadataImage, replicas: Sequence[int], what: str) -> None:
        if not replicas:
            raise InvalidReplicaAssignmentError(f"{what} has an empty replica list.")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(f"{what} has duplicate replicas: {list(replicas)}.")
        for b in replicas:
            if b not in image.brokers:
                raise InvalidReplicaAssignmentError(
                    f"{what} contains broker {b}, which is not registered.")

    def _validate_topic_configs(self, configs: Mapping[str, str | None],
                                existing: Mapping[str, str] | None = None) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in configs.items():
            if value is None:
                raise InvalidConfigurationError(f"Null value not supported for topic configs: {key}")
            try:
                out[key] = format_config_value(parse_topic_config(key, value))
            except ConfigError as e:
                raise InvalidConfigurationError(str(e)) from None
        try:
            check_remote_storage_topic(self.config, out, existing)  # KIP-405/KIP-950 combinations
        except ConfigError as e:
            raise InvalidConfigurationError(str(e)) from None
        return out

    def _effective_configs(self, overrides: Mapping[str, str]) -> dict[str, str]:
        values = {**self.config.topic_defaults(), **overrides}
        return {k: format_config_value(v) for k, v in values.items()}

    async def create_topics(self, topics: Sequence[CreatableTopic], *,
                            validate_only: bool = False) -> list[CreateTopicResult]:
        async with self._lock:
            image = self.image
            results: list[CreateTopicResult] = []
            records: list[Message] = []
            counts: dict[str, int] = {}
            for t in topics:
                counts[t.name] = counts.get(t.name, 0) + 1
            seen_unified = {unify_collision_chars(n): n for n in image.topics}
            for t in topics:
                result = CreateTopicResult(t.name)
                results.append(result)
                try:
                    if counts[t.name] > 1:
                        raise InvalidRequestError("Duplicate topic name.")
                    records.extend(self._create_one(image, t, result, seen_unified))
                except KafkaError as e:
                    _fail(result, e)
            if records and not validate_only:
                await self._commit(records)
            if validate_only:
                for r in results:
                    r.topic_id = uuid.UUID(int=0)
            return results

    def _create_one(self, image: MetadataImage, t: CreatableTopic, result: CreateTopicResult,
                    seen_unified: dict[str, str]) -> list[Message]:
        validate_topic_name(t.name)
        if t.name in image.topics:
            raise TopicExistsError(f"Topic '{t.name}' already exists.")
        other = seen_unified.get(unify_collision_chars(t.name))
        if other is not None and other != t.name:
            raise InvalidTopicError(f"Topic '{t.name}' collides with existing topic: {other}")
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                raise InvalidRequestError("A manual partition assignment was specified, but "
                                          "numPartitions or replicationFactor was not set to -1.")
            ids = sorted(t.assignments)
            if ids != list(range(len(ids))):
                raise InvalidReplicaAssignmentError(
                    "partitions should be a consecutive 0-based integer sequence")
            assignment = [list(t.assignments[p]) for p in ids]
            for p, replicas in enumerate(assignment):
                self._check_assignment(image, replicas, f"The manual partition assignment for partition {p}")
            if len({len(r) for r in assignment}) != 1:
                raise InvalidReplicaAssignmentError(
                    "All partitions should have the same number of replicas.")
        else:
            n = self.config.num_partitions if t.num_partitions == -1 else t.num_partitions
            rf = self.config.default_replication_factor if t.replication_factor == -1 else t.replication_factor
            if n <= 0:
                raise InvalidPartitionsError(
                    "Number of partitions was set to an invalid non-positive value.")
            if rf <= 0:
                raise InvalidReplicationFactorError(
                    "Replication factor must be larger than 0, or -1 to use the default value.")
            assignment = self._assign(image, n, rf)
        overrides = self._validate_topic_configs(t.configs)
        topic_id = new_topic_id()
        seen_unified[unify_collision_chars(t.name)] = t.name
        result.topic_id = topic_id
        result.num_partitions = len(assignment)
        result.replication_factor = len(assignment[0])
        result.configs = self._effective_configs(overrides)
        out: list[Message] = [TopicRecord(t.name, topic_id)]
        for key, value in sorted(overrides.items()):
            out.append(ConfigRecord(TOPIC_RESOURCE, t.name, key, value))
        for p, replicas in enumerate(assignment):
            out.append(PartitionRecord(partition_id=p, topic_id=topic_id, replicas=replicas, isr=list(replicas),
                                       leader=replicas[0], leader_epoch=0, partition_epoch=0,
                                       directories=[self._default_dir(image, r) for r in replicas]))
        return out

    async def delete_topics(self, topics: Sequence[str | uuid.UUID]) -> list[DeleteTopicResult]:
        """Delete topics given by name or by topic id."""
        async with self._lock:
            image = self.image
            results: list[DeleteTopicResult] = []
            records: list[Message] = []
            removed: set[uuid.UUID] = set()
            for ref in topics:
                by_name = isinstance(ref, str)
                t = image.topic(ref) if isinstance(ref, str) else image.topic_by_id(ref)
                result = DeleteTopicResult(ref if isinstance(ref, str) else (t.name if t else None),
                                           t.topic_id if t else (ref if isinstance(ref, uuid.UUID)
                                                                 else uuid.UUID(int=0)))
                results.append(result)
                try:
                    if not self.config.delete_topic_enable:
                        raise TopicDeletionDisabledError("Topic deletion is disabled.")
                    if t is None:
                        if by_name:
                            raise UnknownTopicOrPartitionError(
                                "This server does not host this topic-partition.")
                        raise UnknownTopicIdError("This server does not host this topic ID.")
                    if t.topic_id not in removed:
                        removed.add(t.topic_id)
                        records.append(RemoveTopicRecord(t.topic_id))
                except KafkaError as e:
                    _fail(result, e)
            if records:
                await self._commit(records)
            return results

    async def create_partitions(self, topics: Sequence[CreatePartitionsTopic], *,
                                validate_only: bool = False) -> list[ItemResult]:
        async with self._lock:
            image = self.image
            results: list[ItemResult] = []
            records: list[Message] = []
            for req in topics:
                result = ItemResult(req.name)
                results.append(result)
                try:
                    records.extend(self._create_partitions_one(image, req))
                except KafkaError as e:
                    _fail(result, e)
            if records and not validate_only:
                await self._commit(records)
            return results

    def _create_partitions_one(self, image: MetadataImage, req: CreatePartitionsTopic) -> list[Message]:
        t = image.topic(req.name)
        if t is None:
            raise UnknownTopicOrPartitionError("This server does not host this topic-partition.")
        current = len(t.partitions)
        if req.count < current:
            raise InvalidPartitionsError(
                f"The topic {req.name} currently has {current} partition(s); {req.count} would not "
                "be an increase.")
        if req.count == current:
            raise InvalidPartitionsError(f"Topic already has {current} partition(s).")
        added = req.count - current
        rf = len(t.partitions[0].replicas) if t.partitions else 1
        if req.assignments is not None:
            if len(req.assignments) != added:
                raise InvalidReplicaAssignmentError(
                    f"Attempted to add {added} additional partition(s), but only "
                    f"{len(req.assignments)} assignment(s) were specified.")
            assignment = [list(a) for a in req.assignments]
            for i, replicas in enumerate(assignment):
                self._check_assignment(image, replicas, f"The manual partition assignment for partition "
                                                        f"{current + i}")
        else:
            assignment = self._assign(image, added, rf, start=current)
        return [PartitionRecord(partition_id=current + i, topic_id=t.topic_id, replicas=r, isr=list(r),
                                leader=r[0], leader_epoch=0, partition_epoch=0,
                                directories=[self._default_dir(image, b) for b in r])
                for i, r in enumerate(assignment)]

    # -- configs -------------------------------------------------------------------------------

    async def incremental_alter_configs(self, resources: Sequence[AlterConfigsResource], *,
                                        validate_only: bool = False) -> list[ItemResult]:
        return await self._alter_configs(resources, validate_only=validate_only, legacy=False)

    async def legacy_alter_configs(self, resources: Sequence[AlterConfigsResource], *,
                                   validate_only: bool = False) -> list[ItemResult]:
        """AlterConfigs: the given keys become the resource's whole configuration."""
        return await self._alter_configs(resources, validate_only=validate_only, legacy=True)

    async def _alter_configs(self, resources: Sequence[AlterConfigsResource], *, validate_only: bool,
                             legacy: bool) -> list[ItemResult]:
        async with self._lock:
            image = self.image
            results: list[ItemResult] = []
            records: list[Message] = []
            for res in resources:
                result = ItemResult(res.resource_name, resource_type=res.resource_type)
                results.append(result)
                try:
                    records.extend(self._alter_one(image, res, legacy))
                except KafkaError as e:
                    _fail(result, e)
            if records and not validate_only:
                if image.elr_enabled:
                    records.extend(_clear_elr_records(records))
                await self._commit(records)
            return results

    def _alter_one(self, image: MetadataImage, res: AlterConfigsResource, legacy: bool) -> list[Message]:
        rtype, name = res.resource_type, res.resource_name
        if rtype == TOPIC_RESOURCE:
            if image.topic(name) is None:
                raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        elif rtype == BROKER_RESOURCE:
            if name and not name.isdigit():
                raise InvalidRequestError(f"Illegal broker name {name!r}: not an integer.")
        elif rtype == GROUP_RESOURCE:
            if not name:
                raise InvalidRequestError("Default group resources are not allowed.")
        elif rtype == CLIENT_METRICS_RESOURCE:
            pass  # validate_client_metrics checks the name with the values
        else:
            raise InvalidRequestError(f"Unsupported resource type {rtype}.")
        current = dict(image.resource_configs(rtype, name))
        new = {} if legacy else dict(current)
        for key, op, value in res.ops:
            # Broker keys were checked by the broker that forwarded the request (Kafka's
            # ConfigAdminManager, strom.core.dynamic_config); like Kafka, unknown ones are kept.
            if rtype == TOPIC_RESOURCE and key not in TOPIC_CONFIGS:
                raise InvalidConfigurationError(str(ConfigError(key, value, "", unknown=True)))
            if op == OP_SET:
                if value is None:
                    raise InvalidRequestError(f"Null value not supported for : {key}")
                if key in REPLICATION_QUOTA_KEYS:
                    _check_quota_rate(key, value)
                new[key] = value
            elif op == OP_DELETE:
                new.pop(key, None)
            elif op in (OP_APPEND, OP_SUBTRACT):
                verb = "append" if op == OP_APPEND else "subtract"
                if rtype in (GROUP_RESOURCE, CLIENT_METRICS_RESOURCE):
                    raise InvalidConfigurationError(f"Can't {verb.upper()} to key {key} because its type is not LIST.")
                broker_key = KAFKA_BROKER_KEYS.get(key) if rtype == BROKER_RESOURCE else None
                list_type = TOPIC_CONFIGS[key].type if rtype == TOPIC_RESOURCE else getattr(broker_key, "type", None)
                if list_type != "LIST":
                    raise InvalidConfigurationError(f"Config value {verb} is not allowed for config key: {key}")
                base = new.get(key)
                if base is None and broker_key is not None:
                    base = broker_key.default or ""
                elif base is None:
                    base = format_config_value(self.config.topic_defaults()[key])
                items = [p for p in base.split(",") if p]
                given = [p.strip() for p in (value or "").split(",") if p.strip()]
                if op == OP_APPEND:
                    items += [g for g in given if g not in items]
                else:
                    items = [i for i in items if i not in given]
                new[key] = ",".join(items)
            else:
                raise InvalidRequestError(f"Unknown alter config operation {op}.")
        if rtype == TOPIC_RESOURCE:
            new = self._validate_topic_configs(new, current)
        elif rtype == GROUP_RESOURCE:
            validate_group_configs(self.config, new)
        elif rtype == CLIENT_METRICS_RESOURCE:
            validate_client_metrics(name, new)
        # Kafka's ConfigurationControlManager writes a broker key the request names even when its
        # value does not change (so re-setting the cluster's min.insync.replicas clears the ELRs).
        named = {key for key, _, _ in res.ops} if rtype == BROKER_RESOURCE else set()
        out: list[Message] = []
        for key in sorted(set(current) | set(new) | named):
            if key not in new:
                if key in current or key in named:
                    out.append(ConfigRecord(rtype, name, key, None))
            elif current.get(key) != new[key] or key in named:
                out.append(ConfigRecord(rtype, name, key, new[key]))
        return out

    # -- features ------------------------------------------------------------------------------

    def supported_feature_range(self, name: str) -> tuple[int, int]:
        """The levels this node supports for ``name`` (0-0: not supported), as ApiVersions shows them.

        ``metadata.version`` goes from the oldest KRaft level to 4.3-IV0: strom reads and writes
        every record version of those levels, so an upgrade only changes what it writes next.
        """
        if name == METADATA_VERSION_FEATURE:
            return MINIMUM_METADATA_VERSION, LATEST_METADATA_VERSION
        spec = FEATURES.get(name)
        return (spec.min_level, spec.max_level) if spec is not None else (0, 0)

    async def update_features(self, updates: Sequence[tuple[str, int, int]], *,
                              validate_only: bool = False) -> KafkaError | None:
        """UpdateFeatures: ``(feature, level, upgrade type)`` each; None on success, else the error.

        As Kafka's FeatureControlManager: every update is checked against the current levels and
        the first invalid one fails the whole request (no record is written); otherwise one
        FeatureLevelRecord per feature (level 0 removes it) is committed as one atomic batch.
        A later duplicate of a feature name replaces the earlier one.
        """
        async with self._lock:
            image = self.image
            wanted: dict[str, tuple[int, int]] = {}
            for name, level, upgrade_type in updates:
                wanted.pop(name, None)
                wanted[name] = (level, upgrade_type)
            records: list[Message] = []
            for name, (level, upgrade_type) in wanted.items():
                try:
                    records.append(self._update_feature(image, name, level, upgrade_type))
                except KafkaError as e:
                    return e
            # Kafka's QuorumFeatures dependency check, on the levels as they would be afterwards.
            after = dict(image.features)
            for r in records:
                if isinstance(r, FeatureLevelRecord):
                    after[r.name] = r.feature_level
            mv = after.get(METADATA_VERSION_FEATURE, 0)
            for name, (level, _) in wanted.items():
                problem = dependency_problem(name, level, mv)
                if problem is not None:
                    return InvalidUpdateVersionError(f"Invalid update version {level} for feature {name}. {problem}")
            if records and not validate_only:
                await self._commit(records)
            return None

    def _update_feature(self, image: MetadataImage, name: str, level: int, upgrade_type: int) -> Message:
        def invalid(reason: str) -> KafkaError:
            return InvalidUpdateVersionError(
                f"Invalid update version {level} for feature {name}. {reason}")

        if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            raise invalid("The controller does not support the given upgrade type.")
        current = image.metadata_version if name == METADATA_VERSION_FEATURE else image.features.get(name, 0)
        if level < 0:
            raise invalid("A feature version cannot be less than 0.")
        lo, hi = self.supported_feature_range(name)
        if not lo <= level <= hi:
            # Kafka's QuorumFeatures.reasonNotSupported: an unknown feature has the range 0-0.
            who = f"Local controller {self.config.node_id}"
            raise invalid(f"{who} does not support this feature." if hi == 0
                          else f"{who} only supports versions {lo}-{hi}")
        if level < current and upgrade_type == UPGRADE:
            raise invalid("Can't downgrade the version of this feature without setting the upgrade type to "
                          "either safe or unsafe downgrade.")
        if level > current and upgrade_type != UPGRADE:
            raise invalid("Can't downgrade to a newer version.")
        if name == METADATA_VERSION_FEATURE:
            if level < current:
                # strom keeps no per-version metadata layouts to downgrade to; Kafka answers these
                # words for every downgrade that would change the metadata.
                reason = ("Unsafe metadata downgrade is not supported in this version."
                          if upgrade_type == UNSAFE_DOWNGRADE else
                          "Refusing to perform the requested downgrade because it might delete "
                          "metadata information.")
                raise InvalidUpdateVersionError(
                    f"Unsupported metadata.version downgrade from {current} to {level}. {reason}")
        elif name not in FEATURES:
            # Level 0 of an unknown feature passes the range check; Kafka's Feature lookup fails next.
            raise invalid(f"Feature {name} not found.")
        elif name not in RECORDED_FEATURES:
            # kraft.version lives in the raft log (KIP-853), not in a FeatureLevelRecord.
            raise invalid(f"The feature {KRAFT_VERSION_FEATURE} is changed by the raft layer, not by UpdateFeatures.")
        return FeatureLevelRecord(name, level)

    # -- brokers and producer ids -------------------------------------------------------------

    async def register_broker(self, node_id: int, endpoints: Sequence[tuple[str, str, int, int]],
                              rack: str | None, incarnation_id: uuid.UUID,
                              previous_broker_epoch: int | None = None,
                              controller_endpoints: Sequence[tuple[str, str, int, int]] = ()) -> int:
        """Register (or re-register) a broker; returns its broker epoch (the offset of the
        registration batch's first record, Kafka's ``nextWriteOffset``).

        ``endpoints`` are (listener name, host, port, security protocol id). As in Kafka: this
        node's controller registers first (RegisterControllerRecord), the broker is registered
        fenced, then unfenced (strom has no heartbeats: at once) together with the leader
        elections its return allows and the directory assignments of its replicas.

        ``previous_broker_epoch`` is BrokerRegistrationRequest's PreviousBrokerEpoch: the epoch
        the broker's clean-shutdown marker holds, -1 after an unclean shutdown. Given, a new
        incarnation runs Kafka's ``handleBrokerShutdown`` in the registration batch (before the
        RegisterBrokerRecord): clean when it equals the stored registration's epoch (-1 when there
        is none), and with ELR on an unclean one removes the broker from the ISR and ELR of its
        partitions (KIP-966), so its unfencing may elect it only as the last known leader.
        None (the caller sends no previous epoch) skips that: Kafka would treat such a request
        (version < 3) as unclean, strom keeps the behaviour of callers that do not report it.
        ``controller_endpoints``: this node's bound controller listeners (RegisterControllerRecord's
        endpoints; none: from ``controller.quorum.voters`` or the broker listener).
        """
        async with self._lock:
            existing = self.image.broker(node_id)
            if existing is not None and existing.incarnation_id == incarnation_id and not existing.fenced:
                return existing.epoch
            local = node_id == self.config.node_id
            if local and self.image.metadata_version >= IBP_3_7_IV0:
                await self._register_controller(incarnation_id, endpoints, controller_endpoints)
            if existing is not None and existing.incarnation_id == incarnation_id:
                epoch = existing.epoch
            else:
                epoch = self.raft.end_offset
                features = [BrokerFeature(n, lo, hi) for n, lo, hi in self.supported_features()]
                shutdown: list[Message] = []
                if previous_broker_epoch is not None:
                    stored = existing.epoch if existing is not None else -1
                    shutdown = self._broker_shutdown(self.image, node_id, clean=stored == previous_broker_epoch)
                await self._commit([*shutdown, RegisterBrokerRecord(
                    broker_id=node_id, incarnation_id=incarnation_id, broker_epoch=epoch,
                    end_points=[BrokerEndpoint(n, h, p, sp) for n, h, p, sp in endpoints], features=features,
                    rack=rack, fenced=True, log_dirs=self._local_log_dir_ids() if local else [],
                    cordoned_log_dirs=[] if self.image.metadata_version >= 30 else None)])
            unfence = BrokerRegistrationChangeRecord(broker_id=node_id, broker_epoch=epoch, fenced=FENCING_UNFENCE)
            after = _with_broker(self.image, node_id, fenced=False, in_controlled_shutdown=False)
            await self._commit([unfence, *self._elections(after), *self._dir_assignments(after, node_id)])
            return epoch

    def _broker_shutdown(self, image: MetadataImage, node_id: int, *, clean: bool) -> list[Message]:
        """Kafka 4.3.1's ``ReplicationControlManager.handleBrokerShutdown(brokerId, isCleanShutdown)``:
        with ELR on and an unclean shutdown (``handleBrokerUncleanShutdown``), the partitions
        whose ISR holds the broker, then those whose ELR holds it, each lose it from both (no
        broker to remove, it is the ``brokerWithUncleanShutdown``); otherwise the partitions whose
        ISR holds it lose it from the ISR. The leader may be any other active broker (unclean
        when the topic allows). Kafka visits partitions in its BrokersToIsrs hash order; strom
        in topic-name, partition order (one record per partition either way)."""
        base = self._acceptable_leader(image)

        def acceptable(broker_id: int) -> bool:
            return broker_id != node_id and base(broker_id)

        unclean_shutdown = image.elr_enabled and not clean
        passes: list[Callable[[PartitionRegistration], bool]] = [lambda reg: node_id in reg.isr]
        if unclean_shutdown:
            passes.append(lambda reg: node_id in reg.elr)
        out: list[Message] = []
        for holds in passes:
            for topic in sorted(image.topics.values(), key=lambda t: t.name):
                min_isr, unclean = self._election_settings(image, topic.name)
                for pid in sorted(topic.partitions):
                    reg = topic.partitions[pid]
                    if not holds(reg):
                        continue
                    record = shutdown_change(reg, topic.topic_id, pid, node_id, acceptable=acceptable,
                                             elr_enabled=image.elr_enabled, min_isr=min_isr, unclean=unclean,
                                             unclean_shutdown=unclean_shutdown)
                    if record is not None:
                        out.append(record)
        return out

    async def _register_controller(self, incarnation_id: uuid.UUID, endpoints: Sequence[tuple[str, str, int, int]],
                                   controller_endpoints: Sequence[tuple[str, str, int, int]] = ()) -> None:
        """RegisterControllerRecord for this node's in-process controller (Kafka writes one per
        controller start). Its endpoint is the controller listener named by
        ``controller.quorum.voters`` when that has a real port; otherwise strom's controller is
        served on the broker's own listener, so that endpoint is the real one."""
        node = self.config.node_id
        name = (self.config.controller_listener_names.split(",")[0].strip() or "CONTROLLER")
        found = [ControllerEndpoint(n, h, p, sp) for n, h, p, sp in controller_endpoints]
        for entry in self.config.controller_quorum_voters.split(",") if not found else ():
            voter, _, address = entry.strip().partition("@")
            host, _, port = address.rpartition(":")
            if voter.strip() == str(node) and port.isdigit() and int(port) > 0:
                found.append(ControllerEndpoint(name, host.strip("[]"), int(port), 0))
        if not found and endpoints:
            _, broker_host, broker_port, protocol = endpoints[0]
            found.append(ControllerEndpoint(name, broker_host, broker_port, protocol))
        current = self.image.controllers.get(node)
        if current is not None and current.incarnation_id == incarnation_id:
            return
        features = [ControllerFeature(n, lo, hi) for n, lo, hi in self.supported_features()]
        await self._commit([RegisterControllerRecord(controller_id=node, incarnation_id=incarnation_id,
                                                     end_points=found, features=features)])

    async def controlled_shutdown(self, node_id: int) -> bool:
        """Kafka's controlled shutdown of a registered, unfenced broker: one batch marks it in
        controlled shutdown and moves every partition it leads or is in the ISR of (to another
        leader, or to none with the ELR keeping it as eligible); a second fences it. Returns
        whether anything was written."""
        async with self._lock:
            image = self.image
            reg = image.broker(node_id)
            if reg is None or reg.fenced:
                return False
            after = _with_broker(image, node_id, in_controlled_shutdown=True)
            acceptable = self._acceptable_leader(after)
            changes: list[Message] = []
            for topic in sorted(image.topics.values(), key=lambda t: t.name):
                min_isr, unclean = self._election_settings(image, topic.name)
                for pid in sorted(topic.partitions):
                    record = remove_from_isr(topic.partitions[pid], topic.topic_id, pid, node_id,
                                             acceptable=acceptable, elr_enabled=image.elr_enabled, min_isr=min_isr,
                                             unclean=unclean)
                    if record is not None:
                        changes.append(record)
            await self._commit([BrokerRegistrationChangeRecord(broker_id=node_id, broker_epoch=reg.epoch,
                                                               in_controlled_shutdown=CONTROLLED_SHUTDOWN_IN),
                                *changes])
            await self._commit([BrokerRegistrationChangeRecord(broker_id=node_id, broker_epoch=reg.epoch,
                                                               fenced=FENCING_FENCE)])
            return True

    # -- brokers registering over the controller listener (KIP-631) ------------------------------

    async def register_remote_broker(self, reg: RemoteBrokerRegistration, cluster_id: str) -> int:
        """Kafka 4.3.1's ``ClusterControlManager.registerBroker`` for a BrokerRegistration that
        came over the controller listener; returns the broker epoch. A new incarnation is written
        fenced at a new epoch (the offset of its batch); the same incarnation amends the
        registration (its epoch, fenced and controlled-shutdown flags stay). Raises Kafka's
        errors: INCONSISTENT_CLUSTER_ID, DUPLICATE_BROKER_REGISTRATION (another incarnation of
        the id has a live session), BROKER_ID_NOT_REGISTERED (a ZooKeeper broker),
        INVALID_REGISTRATION (log directories) and UNSUPPORTED_VERSION (a finalized feature level
        outside the broker's range)."""
        if reg.cluster_id != cluster_id:
            raise InconsistentClusterIdError(f"Expected cluster ID {cluster_id}, but got cluster ID {reg.cluster_id}")
        async with self._lock:
            image = self.image
            node = reg.broker_id
            existing = image.broker(node)
            if (existing is not None and reg.incarnation_id != existing.incarnation_id
                    and self.heartbeats.has_valid_session(node, existing.epoch)):
                raise DuplicateBrokerRegistrationError("Another broker is registered with that broker id.")
            if reg.is_migrating_zk_broker:
                raise BrokerIdNotRegisteredError("Controller does not support registering ZK brokers.")
            mv = image.metadata_version
            if mv >= IBP_3_7_IV2:
                self._check_log_dirs(image, node, reg.log_dirs)
            features = self._registration_features(image, reg.features)
            new_incarnation = existing is None or existing.incarnation_id != reg.incarnation_id
            shutdown: list[Message] = []
            if new_incarnation:
                epoch = self.raft.end_offset
                stored = existing.epoch if existing is not None else -1
                shutdown = self._broker_shutdown(image, node, clean=stored == reg.previous_broker_epoch)
                fenced, in_controlled_shutdown = True, False
            else:
                assert existing is not None
                epoch, fenced, in_controlled_shutdown = existing.epoch, existing.fenced, existing.in_controlled_shutdown
            record = RegisterBrokerRecord(
                broker_id=node, incarnation_id=reg.incarnation_id, broker_epoch=epoch,
                end_points=[BrokerEndpoint(n, h, p, sp) for n, h, p, sp in reg.listeners], features=features,
                rack=reg.rack, fenced=fenced, in_controlled_shutdown=in_controlled_shutdown,
                log_dirs=list(reg.log_dirs) if mv >= IBP_3_7_IV2 else [],
                cordoned_log_dirs=[] if mv >= 30 else None)
            # The RegisterBrokerRecord is the batch's last record: its offset is what a fenced
            # broker's metadata offset must reach to be unfenced.
            register_offset = await self._commit([*shutdown, record])
            self.heartbeats.register(node, fenced, register_offset, new_incarnation=new_incarnation)
            log.info("Registered broker %d (incarnation %s) with broker epoch %d%s", node, reg.incarnation_id, epoch,
                     "" if new_incarnation else " (amended)")
            return epoch

    @staticmethod
    def _check_log_dirs(image: MetadataImage, node: int, log_dirs: Sequence[uuid.UUID]) -> None:
        if not log_dirs:
            raise InvalidRegistrationError("No directories specified in request")
        # Kafka's DirectoryId.reserved: the ids below 100 (UNASSIGNED, LOST, MIGRATING...).
        if any(d.int < 100 for d in log_dirs):
            raise InvalidRegistrationError("Reserved directory ID in request")
        if len(set(log_dirs)) != len(log_dirs):
            raise InvalidRegistrationError("Duplicate directory ID in request")
        for other in image.brokers.values():
            if other.broker_id != node:
                for d in log_dirs:
                    if d in other.log_dirs:
                        raise InvalidRegistrationError(
                            f"Broker {other.broker_id} is already registered with directory {d}")

    def _registration_features(self, image: MetadataImage,
                               wanted: Sequence[tuple[str, int, int]]) -> list[BrokerFeature]:
        """Kafka's processRegistrationFeature over the request's features, then every feature
        finalized above 0 that the request leaves out (taken as supported at 0 only)."""
        finalized = {name: level for name, level in image.features.items()}
        finalized[METADATA_VERSION_FEATURE] = image.metadata_version
        finalized.setdefault(KRAFT_VERSION_FEATURE, 0)  # the raft layer's level (a static quorum: 0)

        def check(name: str, lo: int, hi: int) -> BrokerFeature:
            level = finalized.get(name, 1 if name == METADATA_VERSION_FEATURE else 0)
            if not lo <= level <= hi:
                raise UnsupportedVersionError(
                    f"Unable to register because the broker does not support finalized version {level} of {name}. "
                    f"The broker wants a version between {lo} and {hi}, inclusive.")
            return BrokerFeature(name, lo, hi)

        out = [check(name, lo, hi) for name, lo, hi in wanted]
        names = {name for name, _, _ in wanted}
        if METADATA_VERSION_FEATURE not in names:
            # A broker that sends no metadata.version range supports the first KRaft level only.
            out.append(check(METADATA_VERSION_FEATURE, MINIMUM_METADATA_VERSION, MINIMUM_METADATA_VERSION))
        for name, level in finalized.items():
            if level != 0 and name not in names and name != METADATA_VERSION_FEATURE:
                check(name, 0, 0)
        return out

    async def process_broker_heartbeat(self, broker_id: int, broker_epoch: int, current_metadata_offset: int,
                                       want_fence: bool, want_shut_down: bool) -> BrokerHeartbeatReply:
        """Kafka's ``QuorumController.processBrokerHeartbeat``: the session is renewed, the
        epoch checked (STALE_BROKER_EPOCH, also for a broker that never registered), then the
        broker moves as :meth:`BrokerHeartbeatManager.next_state` decides: unfenced (with the
        leader elections that allows), fenced (out of every ISR and leadership), or into
        controlled shutdown."""
        self.heartbeats.track(broker_id, broker_epoch)
        async with self._lock:
            image = self.image
            reg = image.broker(broker_id)
            register_offset = self.heartbeats.register_offset(broker_id)
            if register_offset is None:
                if reg is None:
                    raise StaleBrokerEpochError(f"Receive a heartbeat from broker {broker_id} before registration")
                # Registered before this controller started: its epoch is the offset of its
                # registration batch, at or before the record itself.
                register_offset = reg.epoch
            if reg is None:
                raise StaleBrokerEpochError(f"No broker registration found for broker id {broker_id}")
            if reg.epoch != broker_epoch:
                raise StaleBrokerEpochError(f"Expected broker epoch {reg.epoch}, but got broker epoch {broker_epoch}")
            current, nxt = self.heartbeats.next_state(
                broker_id, fenced=reg.fenced, want_fence=want_fence, want_shut_down=want_shut_down,
                current_metadata_offset=current_metadata_offset, register_offset=register_offset,
                has_leaderships=lambda: _has_leaderships(image, broker_id))
            records: list[Message] = []
            if current is not nxt:
                if nxt in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW):
                    records = self._fence_records(image, broker_id)
                    log.info("Fencing broker %d at epoch %d (its heartbeat asked %s)", broker_id, broker_epoch,
                             "to shut down" if nxt.should_shut_down else "to be fenced")
                elif nxt is BrokerControlState.UNFENCED:
                    after = _with_broker(image, broker_id, fenced=False, in_controlled_shutdown=False)
                    records = [BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                                              fenced=FENCING_UNFENCE), *self._elections(after)]
                    log.info("Unfencing broker %d at epoch %d: it has caught up with its registration at offset %d",
                             broker_id, broker_epoch, register_offset)
                else:
                    records = self._controlled_shutdown_records(image, broker_id)
            self.heartbeats.touch(broker_id, nxt.fenced, current_metadata_offset)
            if records:
                end = await self._commit(records)
                if nxt is BrokerControlState.CONTROLLED_SHUTDOWN:
                    self.heartbeats.enter_controlled_shutdown(broker_id, end)
            return BrokerHeartbeatReply(is_caught_up=current_metadata_offset >= register_offset,
                                        is_fenced=nxt.fenced, in_controlled_shutdown=nxt.in_controlled_shutdown,
                                        should_shut_down=nxt.should_shut_down)

    def _fence_records(self, image: MetadataImage, broker_id: int) -> list[Message]:
        """Kafka's ``handleBrokerFenced``: every partition whose ISR holds the broker loses it
        (and its leadership, to another acceptable replica or none), then the fence record."""
        reg = image.brokers[broker_id]
        acceptable = self._acceptable_leader(_with_broker(image, broker_id, fenced=True))
        out: list[Message] = list(self._isr_removals(image, broker_id, acceptable))
        out.append(BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=reg.epoch, fenced=FENCING_FENCE))
        return out

    def _controlled_shutdown_records(self, image: MetadataImage, broker_id: int) -> list[Message]:
        """Kafka's ``handleBrokerInControlledShutdown``: the in-controlled-shutdown mark, then the
        broker leaves every ISR and leadership."""
        reg = image.brokers[broker_id]
        out: list[Message] = []
        if not reg.in_controlled_shutdown:
            out.append(BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=reg.epoch,
                                                      in_controlled_shutdown=CONTROLLED_SHUTDOWN_IN))
        acceptable = self._acceptable_leader(_with_broker(image, broker_id, in_controlled_shutdown=True))
        out.extend(self._isr_removals(image, broker_id, acceptable))
        return out

    def _isr_removals(self, image: MetadataImage, broker_id: int,
                      acceptable: Callable[[int], bool]) -> list[Message]:
        """The PartitionChangeRecords that take ``broker_id`` out of every ISR and leadership."""
        out: list[Message] = []
        for topic in sorted(image.topics.values(), key=lambda t: t.name):
            min_isr, unclean = self._election_settings(image, topic.name)
            for pid in sorted(topic.partitions):
                record = remove_from_isr(topic.partitions[pid], topic.topic_id, pid, broker_id, acceptable=acceptable,
                                         elr_enabled=image.elr_enabled, min_isr=min_isr, unclean=unclean)
                if record is not None:
                    out.append(record)
        return out

    async def fence_stale_broker(self) -> bool:
        """Kafka's ``maybeFenceOneStaleBroker``: take one lapsed session; if it is the broker's
        current epoch, fence the broker. Returns whether a session was taken (call again)."""
        async with self._lock:
            expired = self.heartbeats.remove_expired()
            if expired is None:
                return False
            broker_id, epoch = expired
            reg = self.image.broker(broker_id)
            if reg is None or reg.epoch != epoch:
                return True  # an unknown broker's or an older incarnation's heartbeats: forgotten
            log.info("Fencing broker %d at epoch %d because its session has timed out.", broker_id, epoch)
            records = self._fence_records(self.image, broker_id)
            self.heartbeats.fenced_by_timer(broker_id)
            await self._commit(records)
            return True

    def start_session_timer(self) -> None:
        """Start expiring sessions (once this node is registered). Every unfenced broker other
        than this node gets a session from now, as Kafka's controller gives them on activation."""
        if self._session_timer is not None:
            return
        for reg in self.image.brokers.values():
            if not reg.fenced:
                self.heartbeats.seed(reg.broker_id, reg.epoch)
        self._session_timer = asyncio.create_task(self._run_session_timer(), name="broker-session-timer")

    async def stop_session_timer(self) -> None:
        task, self._session_timer = self._session_timer, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run_session_timer(self) -> None:
        while True:
            # A session renewed meanwhile lapses later than this wake-up, never earlier.
            await asyncio.sleep(self.heartbeats.next_check_delay() + 0.01)
            try:
                while await self.fence_stale_broker():
                    pass
            except Exception:
                log.exception("fencing a broker whose session timed out failed; retrying at the next check")

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int = -1) -> tuple[int, int]:
        """Hand out the next block of producer ids: (first id, block size)."""
        async with self._lock:
            broker = self.image.broker(broker_id)
            if broker is None:
                raise BrokerIdNotRegisteredError(f"Broker {broker_id} is not registered.")
            if broker_epoch != -1 and broker.epoch != broker_epoch:
                raise StaleBrokerEpochError(
                    f"Expected broker epoch {broker.epoch}, but got {broker_epoch}.")
            first = self.image.next_producer_id
            await self._commit([ProducerIdsRecord(broker_id, broker_epoch, first + PRODUCER_ID_BLOCK_SIZE)])
            return first, PRODUCER_ID_BLOCK_SIZE

    async def write(self, build: Callable[[MetadataImage], Sequence[Message]]) -> None:
        """Append what ``build`` derives from the latest image, as one batch under the lock, and
        await its commit: for control managers outside this class (ACLs,
        ``strom.core.security.acl_control``), which validate against the image themselves."""
        async with self._lock:
            records = build(self.image)
            if records:
                await self._commit(records)


# Kafka's dynamic-only broker configs for replication quotas (DynamicConfig.Broker: LONG, >= 0).
# strom has no replica movement to throttle, so they are stored and shown but change nothing;
# they are accepted because Kafka's tools set and clear them (kafka-reassign-partitions.sh
# --verify clears the throttles at the end of every reassignment).
REPLICATION_QUOTA_KEYS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                                    "replica.alter.log.dirs.io.max.bytes.per.second"})
CLIENT_METRICS_RESOURCE = 16  # KIP-714 subscriptions (ConfigResource.Type.CLIENT_METRICS)


def _with_broker(image: MetadataImage, broker_id: int, *, fenced: bool | None = None,
                 in_controlled_shutdown: bool | None = None) -> MetadataImage:
    """``image`` as it will be once ``broker_id``'s registration has these flags (to plan the
    records of the same batch)."""
    reg = image.brokers.get(broker_id)
    if reg is None:
        return image
    brokers = dict(image.brokers)
    brokers[broker_id] = replace(reg, fenced=reg.fenced if fenced is None else fenced,
                                 in_controlled_shutdown=(reg.in_controlled_shutdown if in_controlled_shutdown is None
                                                         else in_controlled_shutdown))
    return replace(image, brokers=MappingProxyType(brokers))


def _has_leaderships(image: MetadataImage, broker_id: int) -> bool:
    """Does ``broker_id`` lead any partition (Kafka's BrokersToIsrs.hasLeaderships)?"""
    return any(reg.leader == broker_id for topic in image.topics.values() for reg in topic.partitions.values())


def _check_quota_rate(key: str, value: str) -> None:
    """A replication quota is a LONG >= 0; Kafka refuses anything else with INVALID_REQUEST."""
    try:
        rate = int(value.strip())
    except ValueError:
        raise InvalidRequestError(
            f"Invalid value {value} for configuration {key}: Not a number of type LONG") from None
    if rate < 0:
        raise InvalidRequestError(f"Invalid value {value} for configuration {key}: Value must be at least 0")
