"""Extension point: client quotas (modelled on Kafka's ``ClientQuotaCallback`` + quota managers).

The broker records every request's usage with :meth:`QuotaManager.record` and gets back a
throttle time: 0 means "within quota"; a positive value is put in the response's
``throttle_time_ms`` and the connection is muted for that long (KIP-219), exactly like Kafka's
``ClientQuotaManager.maybeRecordAndGetThrottleTimeMs``.

Selection: plugins offer quota managers by name through :func:`strom_quota_managers`; the
broker config key ``client.quota.callback.class`` (Kafka's key for a custom quota callback)
picks one (empty = the built-in ``unlimited``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from strom.plugins.markers import hookspec

CONFIG_KEY = "client.quota.callback.class"
DEFAULT_QUOTA_MANAGER = "unlimited"


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


QuotaManagerFactory = Callable[[Mapping[str, Any]], QuotaManager]
"""Builds a quota manager from the broker's properties."""


@hookspec
def strom_quota_managers() -> Mapping[str, QuotaManagerFactory]:  # type: ignore[empty-body]
    """Offer quota managers by name.

    Return a mapping of names to factories taking the broker configuration (Kafka property
    names -> values). ``client.quota.callback.class`` selects one by name.
    """
