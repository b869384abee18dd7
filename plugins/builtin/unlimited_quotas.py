"""Built-in quota manager ``unlimited``: never throttles (selected by ``client.quota.callback.class=unlimited``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strom.plugins.hookspecs.quotas import UNLIMITED_QUOTA_MANAGER, QuotaManagerFactory, QuotaType
from strom.plugins.markers import hookimpl


class UnlimitedQuotaManager:
    """Records nothing and always answers 0 ms."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        pass

    def record(self, principal: str, client_id: str, quota_type: QuotaType, value: float,
               now_ms: int) -> int:
        return 0


@hookimpl
def strom_quota_managers() -> Mapping[str, QuotaManagerFactory]:
    return {UNLIMITED_QUOTA_MANAGER: UnlimitedQuotaManager}
