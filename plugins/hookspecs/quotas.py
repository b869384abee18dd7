"""Extension point: client quotas (modelled on Kafka's ``ClientQuotaCallback`` + quota managers).

The broker records every request's usage with :meth:`QuotaManager.record` and gets back a
throttle time: 0 means "within quota"; a positive value is put in the response's
``throttle_time_ms`` and the connection is muted for that long (KIP-219), exactly like Kafka's
``ClientQuotaManager.maybeRecordAndGetThrottleTimeMs``.

Selection: plugins offer quota managers by name through :func:`strom_quota_managers`; the
broker config key ``client.quota.callback.class`` (Kafka's key for a custom quota callback)
picks one. Empty selects the built-in ``default`` (Kafka's ``ClientQuotaManager`` with its
``DefaultQuotaCallback``): as in Kafka, quotas are always on and cost nothing until a quota is
set; ``unlimited`` never throttles.

The quotas themselves are metadata (``ClientQuotaRecord``s written by AlterClientQuotas). A
manager that also implements :class:`ClientQuotaConsumer` is handed them as they commit; one
implementing :class:`ControllerMutationQuotas` gets KIP-599's strict check, and one implementing
:class:`ConnectionRateQuotas` is asked about each new connection (``connection_creation_rate``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from strom.plugins.markers import hookspec

CONFIG_KEY = "client.quota.callback.class"
DEFAULT_QUOTA_MANAGER = "default"
UNLIMITED_QUOTA_MANAGER = "unlimited"

# Kafka's ClientQuotaEntity types and QuotaConfig keys.
USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

QuotaEntity = tuple[tuple[str, str | None], ...]
"""A client quota entity: its (entity type, name) pairs sorted by type; a None name is the default."""


class QuotaType(enum.Enum):
    """Kafka's ``ClientQuotaType``: what a recorded value measures."""

    PRODUCE = "produce"  # bytes appended by a Produce request
    FETCH = "fetch"  # bytes returned by a Fetch response
    REQUEST = "request"  # request handling time, as a percentage of one I/O thread (Kafka's unit)
    CONTROLLER_MUTATION = "controller_mutation"  # partitions created/deleted (KIP-599)


@runtime_checkable
class QuotaManager(Protocol):
    """What a quota manager implements."""

    def record(self, principal: str, client_id: str, quota_type: QuotaType, value: float,
               now_ms: int) -> int:
        """Record ``value`` for (principal, client id) and return the throttle time in ms.

        ``0`` means no throttling. Called on the event loop for every request of the type, so it
        must be O(1) and must not block.
        """
        ...


@runtime_checkable
class ClientQuotaConsumer(Protocol):
    """A quota manager fed the committed client quotas (Kafka's ``ClientQuotaCallback.updateQuota``)."""

    def load_client_quotas(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """Replace every quota (at start-up, after the metadata log or a snapshot is replayed)."""
        ...

    def update_client_quota(self, entity: QuotaEntity, values: Mapping[str, float]) -> None:
        """The quotas of one entity after a committed change (empty: none left)."""
        ...


@runtime_checkable
class ControllerMutationQuotas(Protocol):
    """KIP-599's strict controller mutation quota (CreateTopics v6+, DeleteTopics v5+,
    CreatePartitions v3+): a mutation is refused while the client's token bucket is empty."""

    def mutation_throttle_ms(self, principal: str, client_id: str, now_ms: int) -> int:
        """The time until the client's bucket is positive again; 0 = the mutation may go ahead
        (and is then charged with :meth:`QuotaManager.record`)."""
        ...


@runtime_checkable
class ConnectionRateQuotas(Protocol):
    """Kafka's ``ConnectionQuotas`` IP rate (``connection_creation_rate``)."""

    def record_connection(self, ip: str, now_ms: int) -> int:
        """Record one new connection from ``ip``; the time (ms) to hold it before closing it, or 0
        to serve it."""
        ...


QuotaManagerFactory = Callable[[Mapping[str, Any]], QuotaManager]
"""Builds a quota manager from the broker's properties."""


@hookspec
def strom_quota_managers() -> Mapping[str, QuotaManagerFactory]:  # type: ignore[empty-body]
    """Offer quota managers by name.

    Return a mapping of names to factories taking the broker configuration (Kafka property
    names -> values). ``client.quota.callback.class`` selects one by name.
    """
