"""Cluster feature flags (Kafka's ``MetadataVersion``, ``Feature`` / ``FeatureVersion``): names, levels, defaults.

A feature is finalized by a ``FeatureLevelRecord`` in the metadata log (level 0 means absent).
Formatting writes the defaults for the chosen ``metadata.version``, as ``kafka-storage format``
does; ``--feature NAME=LEVEL`` overrides one. ApiVersions v3+ advertises the supported ranges and
the finalized levels, and that is how clients decide what to use: the Java client uses
transactions version 2 (KIP-890: implicit partition registration, an epoch bump per
transaction) only when ``transaction.version`` is finalized at 2.

The tables are Kafka 4.3.1's (``server-common`` ``MetadataVersion`` and ``Feature``). The level
strom *supports* of each feature is the one whose behaviour it has: Kafka 4.3 defaults
``share.version`` and ``streams.version`` to 1; strom has share groups (KIP-932), so it supports
and finalizes ``share.version`` 1 as Kafka does, but no streams groups, so ``streams.version``
stays at level 0 and is never finalized by default; a log written by Kafka with that level still
loads (strom reports the finalized level it read).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from strom.core.exceptions import BrokerError

METADATA_VERSION_FEATURE = "metadata.version"
TRANSACTION_VERSION_FEATURE = "transaction.version"
GROUP_VERSION_FEATURE = "group.version"
KRAFT_VERSION_FEATURE = "kraft.version"
ELR_VERSION_FEATURE = "eligible.leader.replicas.version"
SHARE_VERSION_FEATURE = "share.version"
STREAMS_VERSION_FEATURE = "streams.version"

# Kafka 4.3.1's MetadataVersion enum: release name -> feature level, every level in order.
METADATA_VERSION_LEVELS: dict[str, int] = {
    "3.3-IV3": 7, "3.4-IV0": 8, "3.5-IV0": 9, "3.5-IV1": 10, "3.5-IV2": 11, "3.6-IV0": 12,
    "3.6-IV1": 13, "3.6-IV2": 14, "3.7-IV0": 15, "3.7-IV1": 16, "3.7-IV2": 17, "3.7-IV3": 18,
    "3.7-IV4": 19, "3.8-IV0": 20, "3.9-IV0": 21, "4.0-IV0": 22, "4.0-IV1": 23, "4.0-IV2": 24,
    "4.0-IV3": 25, "4.1-IV0": 26, "4.1-IV1": 27, "4.2-IV0": 28, "4.2-IV1": 29, "4.3-IV0": 30,
}
# Kafka 4.3.1 also has 4.4-IV0 (31), not production-ready there: strom does not offer it.
LATEST_PRODUCTION_METADATA_VERSION = 30  # IBP_4_3_IV0, Kafka 4.3.1's MetadataVersion.LATEST_PRODUCTION
MINIMUM_METADATA_VERSION = 7            # IBP_3_3_IV3, the oldest KRaft level

# Levels whose behaviour other modules test (MetadataVersion's is...Supported methods).
IBP_3_4_IV0 = 8    # RegisterBrokerRecord v2
IBP_3_7_IV0 = 15   # controller registration (RegisterControllerRecord)
IBP_3_7_IV2 = 17   # directory assignment: RegisterBrokerRecord v3, PartitionRecord v1 with directories
IBP_4_0_IV0 = 22
IBP_4_0_IV1 = 23   # ELR fields: PartitionRecord / PartitionChangeRecord v2
IBP_4_0_IV2 = 24
IBP_4_1_IV0 = 26
IBP_4_2_IV0 = 28
IBP_4_2_IV1 = 29
IBP_4_3_IV0 = 30   # cordoned log dirs: RegisterBrokerRecord v4, BrokerRegistrationChangeRecord v3


def metadata_version_name(level: int) -> str:
    """``4.3-IV0`` for 30; ``level N`` for a level Kafka 4.3.1 does not name."""
    return next((name for name, lvl in METADATA_VERSION_LEVELS.items() if lvl == level), f"level {level}")


class FeatureError(BrokerError, ValueError):
    """A feature name or level this broker does not support."""


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    """One feature: the levels strom supports, Kafka's defaults, and what each level needs.

    ``kafka_default_since`` is Kafka's ``FeatureVersion.bootstrapMetadataVersion`` per level;
    the default strom formats with is Kafka's, capped at ``max_level`` (what strom implements).
    ``requires`` maps a level to the ``metadata.version`` it needs (Kafka's ``dependencies``).
    """

    name: str
    min_level: int
    max_level: int
    kafka_default_since: dict[int, int]  # metadata.version -> Kafka's default level from that version on
    requires: dict[int, int] = field(default_factory=dict)  # level -> minimum metadata.version
    kafka_max_level: int = 0  # Kafka 4.3.1's latest production level (for messages)

    def default_level(self, metadata_version: int) -> int:
        level = 0
        for since, value in sorted(self.kafka_default_since.items()):
            if metadata_version >= since:
                level = value
        return min(level, self.max_level)


# metadata.version is handled apart (its range is MINIMUM..LATEST_PRODUCTION above).
FEATURES: dict[str, FeatureSpec] = {
    # TransactionVersion.java: TV_1 (flexible log values) and TV_2 (KIP-890) from 4.0-IV2.
    TRANSACTION_VERSION_FEATURE: FeatureSpec(TRANSACTION_VERSION_FEATURE, 0, 2, {IBP_4_0_IV2: 2}, kafka_max_level=2),
    # GroupVersion.java: GV_1 (the KIP-848 consumer rebalance protocol) from 4.0-IV0; strom's
    # group coordinator serves ConsumerGroupHeartbeat.
    GROUP_VERSION_FEATURE: FeatureSpec(GROUP_VERSION_FEATURE, 0, 1, {IBP_4_0_IV0: 1}, kafka_max_level=1),
    # EligibleLeaderReplicasVersion.java: ELRV_1 from 4.1-IV0, needs metadata.version 4.0-IV1 (the
    # record fields). strom's controller keeps and elects from the ELR.
    ELR_VERSION_FEATURE: FeatureSpec(ELR_VERSION_FEATURE, 0, 1, {IBP_4_1_IV0: 1}, {1: IBP_4_0_IV1},
                                     kafka_max_level=1),
    # KRaftVersion.java: level 1 is KIP-853's dynamic voter set (VotersRecord). strom runs static
    # voters (controller.quorum.voters) only; Kafka keeps this level in the raft log, not in a
    # FeatureLevelRecord, and so does `kafka-storage format` with static voters: level 0.
    KRAFT_VERSION_FEATURE: FeatureSpec(KRAFT_VERSION_FEATURE, 0, 0, {}, kafka_max_level=1),
    # ShareVersion.java / StreamsVersion.java: share groups (KIP-932), streams groups (KIP-1071).
    # ShareVersion.java: SV_1 (share groups GA) from 4.2-IV0, finalized by default there as here.
    SHARE_VERSION_FEATURE: FeatureSpec(SHARE_VERSION_FEATURE, 0, 1, {IBP_4_2_IV0: 1}, kafka_max_level=1),
    STREAMS_VERSION_FEATURE: FeatureSpec(STREAMS_VERSION_FEATURE, 0, 0, {IBP_4_2_IV1: 1}, kafka_max_level=1),
}

# Features whose level lives in FeatureLevelRecords (kraft.version is the raft layer's own).
RECORDED_FEATURES = tuple(name for name in FEATURES if name != KRAFT_VERSION_FEATURE)


def default_levels(metadata_version: int) -> dict[str, int]:
    """The non-zero feature levels a cluster formatted at ``metadata_version`` starts with."""
    levels = {name: FEATURES[name].default_level(metadata_version) for name in RECORDED_FEATURES}
    return {name: level for name, level in levels.items() if level > 0}


def dependency_problem(name: str, level: int, metadata_version: int) -> str | None:
    """Why ``name=level`` cannot be finalized with ``metadata_version`` (Kafka's words), or None."""
    spec = FEATURES.get(name)
    need = spec.requires.get(level) if spec is not None else None
    if need is not None and metadata_version < need:
        return (f"{name} level {level} requires metadata.version {need} ({metadata_version_name(need)}) "
                f"or above, but metadata.version is {metadata_version}")
    return None


def parse_feature_levels(items: list[str]) -> dict[str, int]:
    """``["transaction.version=1", ...]`` -> levels, checked against :data:`FEATURES`."""
    out: dict[str, int] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not text.strip().lstrip("-").isdigit():
            raise FeatureError(f"feature {item!r} is not NAME=LEVEL (e.g. transaction.version=2)")
        spec = FEATURES.get(name)
        if spec is None:
            known = ", ".join(sorted(FEATURES))
            raise FeatureError(f"unknown feature {name!r}; this broker supports: {known}")
        level = int(text)
        if not spec.min_level <= level <= spec.max_level:
            why = (f" (Kafka has level {spec.kafka_max_level}, whose behaviour strom does not implement)"
                   if level <= spec.kafka_max_level else "")
            raise FeatureError(f"feature {name}={level} is outside the supported levels "
                               f"{spec.min_level}..{spec.max_level}{why}")
        out[name] = level
    return out
