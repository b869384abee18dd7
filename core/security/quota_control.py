"""Client quotas in the metadata log: AlterClientQuotas as records, DescribeClientQuotas from the image.

Kafka's ``ClientQuotaControlManager`` (alter) and ``ClientQuotasImage.describe`` (describe), with
their checks and messages. A quota exists only as a committed ``ClientQuotaRecord`` in
``__cluster_metadata``; the metadata image keeps them (``MetadataImage.client_quotas``, so
snapshots and restarts keep them too) and :class:`QuotaPublisher` hands them to a quota manager
that takes them (:class:`~strom.plugins.hookspecs.quotas.ClientQuotaConsumer`).

An entity is a set of (entity type, name) pairs: ``user``, ``client-id``, both, or ``ip``; a
``None`` name is the default entity (``<default>`` in Kafka's tools).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from strom.core.controller.quorum_controller import QuorumController
from strom.core.errors import InvalidRequestError, UnsupportedVersionError
from strom.core.exceptions import KafkaError
from strom.core.metadata.delta import MetadataDelta
from strom.core.metadata.image import MetadataImage, QuotaEntity, quota_entity_of
from strom.core.metadata.publisher import ImageMapPublisher
from strom.core.metadata.records import ClientQuotaRecord, EntityData, Message
from strom.plugins.hookspecs.quotas import (
    CLIENT_ID,
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    IP,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    ClientQuotaConsumer,
)

log = logging.getLogger(__name__)

# Kafka's MAX_RECORDS_PER_USER_OP.
MAX_RECORDS_PER_USER_OP = 10000

# QuotaConfig.userAndClientQuotaConfigs / ipConfigs: key -> ConfigDef type.
USER_CLIENT_KEYS: Mapping[str, str] = {PRODUCER_BYTE_RATE: "LONG", CONSUMER_BYTE_RATE: "LONG",
                                       REQUEST_PERCENTAGE: "DOUBLE", CONTROLLER_MUTATION_RATE: "DOUBLE"}
IP_KEYS: Mapping[str, str] = {CONNECTION_CREATION_RATE: "INT"}

MATCH_TYPE_EXACT, MATCH_TYPE_DEFAULT, MATCH_TYPE_SPECIFIED = 0, 1, 2

_SHORT_MAX, _INT_MAX, _LONG_MAX = 2**15 - 1, 2**31 - 1, 2**63 - 1


def entity_string(entity: Sequence[tuple[str, str | None]]) -> str:
    """Kafka's ``ClientQuotaEntity.toString`` (a Java map of type -> name)."""
    inner = ", ".join(f"{t}={n if n is not None else 'null'}" for t, n in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


@dataclass(frozen=True, slots=True)
class QuotaOp:
    key: str
    value: float
    remove: bool


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    """One entry of AlterClientQuotas: the entity as sent (types in request order) and its ops."""

    entity: tuple[tuple[str, str | None], ...]
    ops: tuple[QuotaOp, ...]


def _valid_ip_entity(ip: str | None) -> bool:
    """Kafka's ``isValidIpEntity``: null, an address, or a host name that resolves."""
    if ip is None:
        return True
    try:
        ipaddress.ip_address(ip)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(ip, None)
        return True
    except (OSError, UnicodeError):
        return False


def _validate_entity(entity: Sequence[tuple[str, str | None]]) -> dict[str, str | None]:
    if not entity:
        raise InvalidRequestError("Invalid empty client quota entity")
    validated: dict[str, str | None] = {}
    for entity_type, name in entity:
        if entity_type in validated:
            raise InvalidRequestError(f"Invalid client quota entity, duplicate entity entry {entity_type}")
        if entity_type not in (USER, CLIENT_ID, IP):
            raise InvalidRequestError(f"Unhandled client quota entity type: {entity_type}")
        validated[entity_type] = name
        if name is not None and not name:
            raise InvalidRequestError(f"Empty {entity_type} not supported")
    return validated


def _config_keys(entity: Mapping[str, str | None], resolvable: Mapping[str, bool]) -> Mapping[str, str]:
    has_user, has_client, has_ip = USER in entity, CLIENT_ID in entity, IP in entity
    if has_ip:
        if has_user or has_client:
            # Kafka's message, missing space included.
            raise InvalidRequestError("Invalid quota entity combination, IP entity shouldnot be combined with "
                                      "User or ClientId")
        name = entity[IP]
        if name is not None and not resolvable.get(name, False):
            raise InvalidRequestError(f"{entity[IP]} is not a valid IP or resolvable host.")
        return IP_KEYS
    if has_user or has_client:
        return USER_CLIENT_KEYS
    raise InvalidRequestError("Invalid empty client quota entity")


def _validate_value(keys: Mapping[str, str], key: str, value: float) -> None:
    kind = keys.get(key)
    if kind is None:
        raise InvalidRequestError(f"Invalid configuration key {key}")
    if value <= 0.0:
        raise InvalidRequestError(f"Quota {key} must be greater than 0")
    if kind == "DOUBLE":
        return
    limit, article = {"SHORT": (_SHORT_MAX, "a SHORT"), "INT": (_INT_MAX, "an INT"),
                      "LONG": (_LONG_MAX, "a LONG")}[kind]
    if value > limit:
        raise InvalidRequestError(f"Proposed value for {key} is too large for {article}.")
    if abs(math.fmod(value, 1.0)) > 1e-6:
        raise InvalidRequestError(f"{key} cannot be a fractional value.")


def _entity_records(entity: QuotaEntity, alterations: Mapping[str, float | None], current: Mapping[str, float],
                    validated: Mapping[str, str | None], resolvable: Mapping[str, bool]) -> list[Message]:
    keys = _config_keys(validated, resolvable)
    records: list[Message] = []
    for key, value in alterations.items():
        if value is None:
            if key in current:
                records.append(ClientQuotaRecord(entity=[EntityData(t, n) for t, n in entity], key=key,
                                                 remove=True))
            continue
        _validate_value(keys, key, value)
        if current.get(key) != value:  # only a change is recorded
            records.append(ClientQuotaRecord(entity=[EntityData(t, n) for t, n in entity], key=key, value=value))
    return records


async def alter_client_quotas(controller: QuorumController, alterations: Sequence[QuotaAlteration],
                              validate_only: bool) -> list[tuple[tuple[tuple[str, str | None], ...],
                                                                 KafkaError | None]]:
    """Apply the alterations as one atomic batch (none with ``validate_only``); one result per
    distinct entity, in request order: None = done, or the error it failed with."""
    results: dict[QuotaEntity, tuple[tuple[tuple[str, str | None], ...], KafkaError | None]] = {}
    # An ip entity may name a host (Kafka resolves it): looked up off the event loop, before the
    # controller's lock is taken.
    names = {n for a in alterations for t, n in a.entity if t == IP and n}
    resolvable = {n: await asyncio.to_thread(_valid_ip_entity, n) for n in names}

    def build(image: MetadataImage) -> list[Message]:
        results.clear()
        records: list[Message] = []
        for alteration in alterations:
            entity = quota_entity_of(alteration.entity)
            changes: dict[str, float | None] = {}
            error: KafkaError | None = None
            for op in alteration.ops:
                if op.key in changes:
                    error = InvalidRequestError(f"Duplicate quota key {op.key} not updating quota for this entity "
                                                f"{entity_string(alteration.entity)}")
                else:
                    changes[op.key] = None if op.remove else float(op.value)
            if error is not None:
                results[entity] = (alteration.entity, error)
            if entity in results:
                # Kafka's check reads its own result map: an entity whose ops repeat a key is
                # answered as a duplicate entity too (the duplicate-key message is overwritten).
                results[entity] = (alteration.entity, InvalidRequestError(
                    f"Ignoring duplicate entity {entity_string(alteration.entity)}"))
                continue
            try:
                validated = _validate_entity(alteration.entity)
                records += _entity_records(entity, changes, image.client_quotas.get(entity, {}), validated,
                                           resolvable)
            except KafkaError as e:
                results[entity] = (alteration.entity, e)
                continue
            results[entity] = (alteration.entity, None)
        if len(records) > MAX_RECORDS_PER_USER_OP:
            raise InvalidRequestError(f"Cannot alter more than {MAX_RECORDS_PER_USER_OP} quotas in a single "
                                      "operation.")
        return [] if validate_only else records

    await controller.write(build)
    return list(results.values())


@dataclass(frozen=True, slots=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None


def describe_client_quotas(image: MetadataImage, components: Sequence[FilterComponent],
                           strict: bool) -> list[tuple[QuotaEntity, Mapping[str, float]]]:
    """Kafka's ``ClientQuotasImage.describe``: the entities the filter matches, with their quotas.

    Raises InvalidRequestError / UnsupportedVersionError with Kafka's messages for a bad filter."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for c in components:
        if not c.entity_type:
            raise InvalidRequestError("Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in typed:
            raise InvalidRequestError(f"Entity type {c.entity_type} cannot appear more than once in the filter.")
        if c.entity_type not in (IP, USER, CLIENT_ID):
            raise UnsupportedVersionError(f"Unsupported entity type {c.entity_type}")
        if c.match_type == MATCH_TYPE_EXACT:
            if c.match is None:
                raise InvalidRequestError("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[c.entity_type] = c.match
        elif c.match_type == MATCH_TYPE_DEFAULT:
            if c.match is not None:
                raise InvalidRequestError("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[c.entity_type] = None
        elif c.match_type == MATCH_TYPE_SPECIFIED:
            if c.match is not None:
                raise InvalidRequestError("Request specified MATCH_TYPE_SPECIFIED, but also specified a match "
                                          "string.")
            typed.add(c.entity_type)
        else:
            raise InvalidRequestError(f"Unknown match type {c.match_type}")
    named = set(exact) | typed
    if IP in named and (USER in named or CLIENT_ID in named):
        raise InvalidRequestError("Invalid entity filter component combination. IP filter component should not "
                                  "be used with user or clientId filter component.")
    out: list[tuple[QuotaEntity, Mapping[str, float]]] = []
    for entity, values in image.client_quotas.items():
        entries = dict(entity)
        if strict and len(entries) != len(exact) + len(typed):
            continue
        if any(t not in entries or entries[t] != name for t, name in exact.items()):
            continue
        if any(t not in entries for t in typed):
            continue
        out.append((entity, values))
    return out


class QuotaPublisher(ImageMapPublisher[QuotaEntity, Mapping[str, float]]):
    """Feeds a quota manager the committed client quotas (Kafka's ``DynamicClientQuotaPublisher``)."""

    def __init__(self, consumer: ClientQuotaConsumer) -> None:
        super().__init__()
        self.consumer = consumer

    def image_map(self, image: MetadataImage) -> Mapping[QuotaEntity, Mapping[str, float]]:
        return image.client_quotas

    def load(self, entries: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        self.consumer.load_client_quotas({entity: dict(values) for entity, values in entries.items()})

    def apply_changes(self, delta: MetadataDelta, entries: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        for entity, values in delta.changed_client_quotas.items():
            self.consumer.update_client_quota(entity, dict(values))


def _java_hash(s: str) -> int:
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h


def java_key_order(values: Mapping[str, float]) -> list[str]:
    """The keys in the order a Java ``HashMap`` of default capacity iterates them (Kafka's
    ``ClientQuotaImage.toDescribeValues``): by bucket, ties in insertion order."""
    def bucket(key: str) -> int:
        h = _java_hash(key)
        return (h ^ (h >> 16)) & 15
    return sorted(values, key=bucket)
