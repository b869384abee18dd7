"""Cluster feature flags (Kafka's ``Features`` / ``FeatureVersion``): names, supported levels, defaults.

A feature is finalized by a ``FeatureLevelRecord`` in the metadata log (level 0 means absent).
Formatting writes the defaults for the chosen ``metadata.version``, as ``kafka-storage format``
does; ``--feature NAME=LEVEL`` overrides one. ApiVersions v3+ advertises the supported ranges and
the finalized levels, and that is how clients decide what to use: the Java client uses
transactions version 2 (KIP-890: implicit partition registration, an epoch bump per
transaction) only when ``transaction.version`` is finalized at 2.
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.core.exceptions import BrokerError

METADATA_VERSION_FEATURE = "metadata.version"
TRANSACTION_VERSION_FEATURE = "transaction.version"

# MetadataVersion levels (server-common MetadataVersion.java) the defaults depend on.
IBP_4_0_IV2 = 24


class FeatureError(BrokerError, ValueError):
    """A feature name or level this broker does not support."""


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    """One feature this broker implements: its supported level range and default level."""

    name: str
    min_level: int
    max_level: int
    default_since: dict[int, int]  # metadata.version -> default level from that version on

    def default_level(self, metadata_version: int) -> int:
        level = 0
        for since, value in sorted(self.default_since.items()):
            if metadata_version >= since:
                level = value
        return level


# metadata.version is handled apart (its range comes from the bootstrap module's table).
FEATURES: dict[str, FeatureSpec] = {
    # TransactionVersion.java: TV_1 (flexible log values) and TV_2 (KIP-890) from 4.0-IV2.
    TRANSACTION_VERSION_FEATURE: FeatureSpec(TRANSACTION_VERSION_FEATURE, 0, 2, {IBP_4_0_IV2: 2}),
}


def default_levels(metadata_version: int) -> dict[str, int]:
    """The non-zero feature levels a cluster formatted at ``metadata_version`` starts with."""
    levels = {name: spec.default_level(metadata_version) for name, spec in FEATURES.items()}
    return {name: level for name, level in levels.items() if level > 0}


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
            raise FeatureError(f"feature {name}={level} is outside the supported levels "
                                      f"{spec.min_level}..{spec.max_level}")
        out[name] = level
    return out
