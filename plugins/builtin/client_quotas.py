"""Built-in quota manager ``default``: Kafka's client quotas (``ClientQuotaManager`` with its
``DefaultQuotaCallback``, ``ClientRequestQuotaManager``, ``ControllerMutationQuotaManager`` and
the IP rate of ``ConnectionQuotas``).

Quotas come from the metadata log (``ClientQuotaRecord``s, handed over by the broker's quota
publisher through :class:`~strom.plugins.hookspecs.quotas.ClientQuotaConsumer`). For each
request the client's quota is resolved in Kafka's order of precedence, first match wins::

    /users/<user>/clients/<client-id>      /users/<default>/clients/<client-id>
    /users/<user>/clients/<default>        /users/<default>/clients/<default>
    /users/<user>                          /users/<default>
    /clients/<client-id>                   /clients/<default>

(left column first, top to bottom, then the right). The entity that supplied the quota decides
who shares a sensor: a quota on ``/users/alice`` is shared by all of alice's clients, one on
``/clients/<default>`` is per client id (Kafka's quota metric tags).

Rates are Kafka's windowed ``Rate`` over ``quota.window.num`` samples of
``quota.window.size.seconds`` each; the throttle time of a violation is Kafka's
``(rate - bound) / bound * windowSize``. Controller mutations use Kafka's ``TokenBucket``
(burst = samples x window x rate, ``controller.quota.window.*``); throttle = -tokens / rate.
Without any quota of a type a record is one dict lookup and answers 0 (quotas are always on in
Kafka and cost nothing until one is set).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from strom.plugins.hookspecs.quotas import (
    CLIENT_ID,
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    DEFAULT_QUOTA_MANAGER,
    IP,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    QuotaEntity,
    QuotaManagerFactory,
    QuotaType,
)
from strom.plugins.markers import hookimpl

log = logging.getLogger(__name__)

QUOTA_KEYS: Mapping[QuotaType, str] = {
    QuotaType.PRODUCE: PRODUCER_BYTE_RATE,
    QuotaType.FETCH: CONSUMER_BYTE_RATE,
    QuotaType.REQUEST: REQUEST_PERCENTAGE,
    QuotaType.CONTROLLER_MUTATION: CONTROLLER_MUTATION_RATE,
}
_PRINCIPAL_PREFIX = "User:"


def _int(config: Mapping[str, Any], key: str, default: int) -> int:
    value = config.get(key)
    if value is None or value == "":
        return default
    result = int(value)
    if result < 1:
        raise ValueError(f"Invalid value {value} for configuration {key}: Value must be at least 1")
    return result


@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_ms: int
    value: float = 0.0


@dataclass(slots=True)
class WindowedRate:
    """Kafka's ``Rate`` over a ``SampledStat`` of ``samples`` windows of ``window_ms`` each."""

    samples: int
    window_ms: int
    _samples: list[_Sample] = field(default_factory=list)

    def _purge(self, now_ms: int) -> None:
        # Kafka's purgeObsoleteSamples: a sample whose last event is older than the whole window
        # is dropped; one that started before the window but overlaps it is kept.
        expire = self.samples * self.window_ms
        self._samples = [s for s in self._samples if now_ms - s.last_ms < expire]

    def record(self, value: float, now_ms: int) -> None:
        current = self._samples[-1] if self._samples else None
        if current is None or now_ms >= current.start_ms + self.window_ms:
            self._purge(now_ms)
            current = _Sample(now_ms, now_ms)
            self._samples.append(current)
            # Kafka keeps one sample more than quota.window.num: the overlapping one.
            if len(self._samples) > self.samples + 1:
                del self._samples[0]
        current.value += value
        current.last_ms = now_ms

    def window_size_ms(self, now_ms: int) -> int:
        """Kafka's ``Rate.windowSize``: at least samples-1 full windows plus the current one's part."""
        self._purge(now_ms)
        oldest = self._samples[0].start_ms if self._samples else now_ms
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Per second."""
        size = self.window_size_ms(now_ms)
        return sum(s.value for s in self._samples) / (size / 1000.0)


@dataclass(slots=True)
class TokenBucket:
    """Kafka's ``TokenBucket`` (KIP-599): ``rate`` tokens a second up to a burst of
    samples x window x rate; recording takes tokens and may leave the bucket negative."""

    burst_s: float
    tokens: float = 0.0
    last_ms: int = 0

    def _refill(self, rate: float, now_ms: int) -> None:
        self.tokens = min(self.burst_s * rate, self.tokens + rate * (now_ms - self.last_ms) / 1000.0)
        self.last_ms = now_ms

    def measure(self, rate: float, now_ms: int) -> float:
        self._refill(rate, now_ms)
        return self.tokens

    def record(self, rate: float, value: float, now_ms: int) -> None:
        self._refill(rate, now_ms)
        self.tokens = min(self.burst_s * rate, self.tokens - value)


def _user_of(principal: str) -> str:
    return principal[len(_PRINCIPAL_PREFIX):] if principal.startswith(_PRINCIPAL_PREFIX) else principal


class ClientQuotaManager:
    """Kafka's client quota managers behind strom's quota hook (see the module doc)."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        props = dict(config or {})
        self.samples = _int(props, "quota.window.num", 11)
        self.window_ms = _int(props, "quota.window.size.seconds", 1) * 1000
        self.controller_samples = _int(props, "controller.quota.window.num", 11)
        self.controller_window_ms = _int(props, "controller.quota.window.size.seconds", 1) * 1000
        # Kafka's ClientRequestQuotaManager bounds its throttle time to one window.
        self.max_request_throttle_ms = self.window_ms
        self._quotas: dict[QuotaEntity, dict[str, float]] = {}
        # Quota key -> how many entities set it: a type nobody limits is skipped at once.
        self._key_counts: dict[str, int] = {}
        self._rates: dict[tuple[QuotaType, str, str], WindowedRate] = {}
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        self._ip_rates: dict[str, WindowedRate] = {}

    # -- quotas from the metadata log (ClientQuotaConsumer) ---------------------------------------

    def load_client_quotas(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        self._quotas = {entity: dict(values) for entity, values in quotas.items() if values}
        self._recount()

    def update_client_quota(self, entity: QuotaEntity, values: Mapping[str, float]) -> None:
        if values:
            self._quotas[entity] = dict(values)
        else:
            self._quotas.pop(entity, None)
        self._recount()
        log.info("client quotas of %s are now %s", dict(entity), dict(values) or "unset")

    def _recount(self) -> None:
        counts: dict[str, int] = {}
        for values in self._quotas.values():
            for key in values:
                counts[key] = counts.get(key, 0) + 1
        self._key_counts = counts

    # -- resolution (DefaultQuotaCallback) ------------------------------------------------------

    def quota_for(self, principal: str, client_id: str, key: str) -> tuple[float, str, str] | None:
        """The client's quota for ``key`` and the (user, client id) tags of the sensor it is
        charged to; None when no entity sets it."""
        if not self._key_counts.get(key):
            return None
        user = _user_of(principal)
        q = self._quotas
        candidates: tuple[tuple[QuotaEntity, str, str], ...] = (
            (((CLIENT_ID, client_id), (USER, user)), user, client_id),
            (((CLIENT_ID, None), (USER, user)), user, client_id),
            (((USER, user),), user, ""),
            (((CLIENT_ID, client_id), (USER, None)), user, client_id),
            (((CLIENT_ID, None), (USER, None)), user, client_id),
            (((USER, None),), user, ""),
            (((CLIENT_ID, client_id),), "", client_id),
            (((CLIENT_ID, None),), "", client_id),
        )
        for entity, tag_user, tag_client in candidates:
            values = q.get(entity)
            if values is not None and key in values:
                return values[key], tag_user, tag_client
        return None

    # -- recording (QuotaManager) ---------------------------------------------------------------

    def record(self, principal: str, client_id: str, quota_type: QuotaType, value: float, now_ms: int) -> int:
        found = self.quota_for(principal, client_id, QUOTA_KEYS[quota_type])
        if found is None:
            return 0
        bound, tag_user, tag_client = found
        if quota_type is QuotaType.CONTROLLER_MUTATION:
            bucket = self._bucket(tag_user, tag_client)
            bucket.record(bound, value, now_ms)
            return max(0, round(-bucket.tokens / bound * 1000)) if bucket.tokens < 0 else 0
        rate = self._rates.get((quota_type, tag_user, tag_client))
        if rate is None:
            rate = self._rates[(quota_type, tag_user, tag_client)] = WindowedRate(self.samples, self.window_ms)
        rate.record(value, now_ms)
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        throttle = round((measured - bound) / bound * rate.window_size_ms(now_ms))
        if quota_type is QuotaType.REQUEST:
            throttle = min(throttle, self.max_request_throttle_ms)
        return int(throttle)

    def _bucket(self, user: str, client_id: str) -> TokenBucket:
        bucket = self._buckets.get((user, client_id))
        if bucket is None:
            burst_s = self.controller_samples * self.controller_window_ms / 1000.0
            # Kafka's bucket starts at lastUpdate 0: the first refill fills it.
            bucket = self._buckets[(user, client_id)] = TokenBucket(burst_s)
        return bucket

    # -- KIP-599 strict check (ControllerMutationQuotas) ----------------------------------------

    def mutation_throttle_ms(self, principal: str, client_id: str, now_ms: int) -> int:
        found = self.quota_for(principal, client_id, CONTROLLER_MUTATION_RATE)
        if found is None:
            return 0
        bound, tag_user, tag_client = found
        tokens = self._bucket(tag_user, tag_client).measure(bound, now_ms)
        return round(-tokens / bound * 1000) if tokens < 0 else 0

    # -- connection_creation_rate (ConnectionRateQuotas) ----------------------------------------

    def record_connection(self, ip: str, now_ms: int) -> int:
        if not self._key_counts.get(CONNECTION_CREATION_RATE):
            return 0
        values = self._quotas.get(((IP, _normalize_ip(ip)),)) or self._quotas.get(((IP, None),))
        if values is None or CONNECTION_CREATION_RATE not in values:
            return 0
        bound = values[CONNECTION_CREATION_RATE]
        rate = self._ip_rates.get(ip)
        if rate is None:
            rate = self._ip_rates[ip] = WindowedRate(self.samples, self.window_ms)
        rate.record(1.0, now_ms)
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        # Kafka's ConnectionQuotas: a refused connection is not counted (it unrecords it) and is
        # held until the rate is back under the bound, then closed.
        held = round((measured - bound) / bound * rate.window_size_ms(now_ms))
        rate.record(-1.0, now_ms)
        return held


def _normalize_ip(ip: str) -> str:
    try:
        return str(ipaddress.ip_address(ip))
    except ValueError:
        return ip


@hookimpl
def strom_quota_managers() -> Mapping[str, QuotaManagerFactory]:
    return {DEFAULT_QUOTA_MANAGER: ClientQuotaManager}
