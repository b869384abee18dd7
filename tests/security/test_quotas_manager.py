"""The built-in quota manager without a broker: Kafka's DefaultQuotaCallback precedence, who
shares a sensor, the windowed rate's throttle time, the request quota's bound, KIP-599's token
bucket and the IP connection rate (numbers worked out from Kafka's formulas)."""

from __future__ import annotations

import pytest

from strom.plugins.builtin.client_quotas import ClientQuotaManager
from strom.plugins.hookspecs.quotas import QuotaType

P = "producer_byte_rate"


def manager(quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]], **config: str) -> ClientQuotaManager:
    m = ClientQuotaManager({"quota.window.num": "11", "quota.window.size.seconds": "1", **config})
    m.load_client_quotas(quotas)
    return m


LEVELS: list[tuple[tuple[str, str | None], ...]] = [
    (("client-id", "c"), ("user", "alice")),
    (("client-id", None), ("user", "alice")),
    (("user", "alice"),),
    (("client-id", "c"), ("user", None)),
    (("client-id", None), ("user", None)),
    (("user", None),),
    (("client-id", "c"),),
    (("client-id", None),),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_precedence_first_match_wins(level: int) -> None:
    # Every level from this one down has a quota; the first of them must be the one applied.
    m = manager({entity: {P: 100.0 + i} for i, entity in enumerate(LEVELS) if i >= level})
    found = m.quota_for("User:alice", "c", P)
    assert found is not None and found[0] == 100.0 + level


def test_sensor_sharing_follows_the_entity_that_matched() -> None:
    m = manager({(("user", "alice"),): {P: 1000.0}, (("client-id", None),): {P: 1000.0}})
    # /users/alice: every client of alice shares one rate.
    assert m.quota_for("User:alice", "a", P) == (1000.0, "alice", "")
    assert m.quota_for("User:alice", "b", P) == (1000.0, "alice", "")
    # /clients/<default>: one rate per client id.
    assert m.quota_for("User:bob", "a", P) == (1000.0, "", "a")
    assert m.record("User:alice", "a", QuotaType.PRODUCE, 20_000, 0) > 0
    assert m.record("User:alice", "b", QuotaType.PRODUCE, 1, 1) > 0  # alice's shared rate is over
    assert m.record("User:bob", "a", QuotaType.PRODUCE, 1, 1) == 0


def test_throttle_time_is_kafkas_formula() -> None:
    m = manager({(("client-id", "c"),): {P: 1000.0}})
    # A fresh rate counts samples-1 = 10 full windows: 21000 bytes at t=0 is 2100 B/s, and the
    # throttle is (2100 - 1000) / 1000 * 10000 ms.
    assert m.record("User:u", "c", QuotaType.PRODUCE, 21_000, 0) == 11_000
    # Nothing to do with other clients or types.
    assert m.record("User:u", "d", QuotaType.PRODUCE, 1e9, 0) == 0
    assert m.record("User:u", "c", QuotaType.FETCH, 1e9, 0) == 0


def test_request_quota_throttle_is_bounded_by_one_window() -> None:
    m = manager({(("client-id", None),): {"request_percentage": 1.0}})
    assert m.record("User:u", "c", QuotaType.REQUEST, 1000.0, 0) == 1000


def test_controller_mutation_token_bucket() -> None:
    m = manager({(("user", "alice"),): {"controller_mutation_rate": 2.0}})
    # Burst: 11 windows of 1 s at 2/s = 22 tokens; 30 leaves -8, 4 s to refill.
    assert m.mutation_throttle_ms("User:alice", "x", 1_000_000) == 0
    assert m.record("User:alice", "x", QuotaType.CONTROLLER_MUTATION, 30, 1_000_000) == 4000
    assert m.mutation_throttle_ms("User:alice", "x", 1_001_000) == 3000
    assert m.mutation_throttle_ms("User:alice", "x", 1_004_000) == 0


def test_connection_rate_per_ip_and_default() -> None:
    m = manager({(("ip", "10.0.0.1"),): {"connection_creation_rate": 1.0},
                 (("ip", None),): {"connection_creation_rate": 100.0}}, **{"quota.window.num": "2"})
    # One window of history: the first connection is within 1/s, the second is not.
    assert m.record_connection("10.0.0.1", 0) == 0
    held = m.record_connection("10.0.0.1", 10)
    assert held > 0
    # The refused one is not counted: the rate stays where it was.
    assert m.record_connection("10.0.0.1", 10) == held
    assert m.record_connection("10.0.0.2", 10) == 0  # the default entity's 100/s


def test_unset_quotas_stop_throttling() -> None:
    m = manager({(("client-id", "c"),): {P: 1.0}})
    assert m.record("User:u", "c", QuotaType.PRODUCE, 1e6, 0) > 0
    m.update_client_quota((("client-id", "c"),), {})
    assert m.record("User:u", "c", QuotaType.PRODUCE, 1e6, 1) == 0
