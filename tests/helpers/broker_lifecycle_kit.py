# mypy: disable-error-code="arg-type,union-attr"
# (kio types fields with phantom NewTypes - i16, i32, i64, u16 - that plain ints are at run time.)
"""A raw-wire "other broker" for the controller listener (KIP-631): BrokerRegistration and
BrokerHeartbeat built from kio's schemas and sent with diff_wire's WireClient, and the views of
the broker listener the tests check (DescribeCluster, Metadata). Used by tests/controller against
strom and against Apache Kafka 4.3.1 alike.
"""

from __future__ import annotations

import re
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from diff_wire import WireClient
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.broker_heartbeat.v1.request import BrokerHeartbeatRequest
from kio.schema.broker_registration.v4.request import BrokerRegistrationRequest, Feature, Listener
from kio.schema.describe_cluster.v2.request import DescribeClusterRequest
from kio.static.primitive import i16, i32, i64, u16

from strom.core.testing import BrokerProcess, wait_for

_LISTENING = re.compile(r"listening on (\w+)://[^:]+:(\d+) ")


def controller_bootstrap(broker: BrokerProcess, name: str = "CONTROLLER") -> str:
    """host:port of a strom broker's controller listener, from its "listening on" log line."""
    port = wait_for(lambda: dict(_LISTENING.findall(broker.log_text())).get(name), timeout=30,
                    what=f"the {name} listener's 'listening on' line")
    return f"127.0.0.1:{port}"


def registration_features(bootstrap: str) -> dict[str, tuple[int, int]]:
    """A feature range for each level the cluster finalized (what a broker of the same version
    supports): metadata.version from the node's supported range, the others 0..finalized level."""
    with WireClient(bootstrap) as c:
        r = c.request(ApiVersionsRequest(client_software_name="strom-test", client_software_version="1"))
    features = {f.name: (0, int(f.max_version_level)) for f in r.finalized_features}
    mv = next(f for f in r.supported_features if f.name == "metadata.version")
    features["metadata.version"] = (int(mv.min_version), int(mv.max_version))
    return features


def describe_cluster(bootstrap: str, *, include_fenced: bool = True) -> tuple[str, dict[int, bool]]:
    """(cluster id, {broker id: fenced}) as DescribeCluster v2 answers on a broker listener."""
    with WireClient(bootstrap) as c:
        r = c.request(DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=i16(1),
                                             include_fenced_brokers=include_fenced))
    assert r.error_code == 0, r
    return r.cluster_id, {int(b.broker_id): bool(b.is_fenced) for b in r.brokers}


@dataclass
class RemoteBroker:
    """One broker id talking to a controller listener over the wire."""

    controller: str
    broker_id: int
    cluster_id: str
    features: dict[str, tuple[int, int]]
    incarnation_id: uuid.UUID = field(default_factory=uuid.uuid4)
    log_dirs: list[uuid.UUID] = field(default_factory=lambda: [uuid.uuid4()])
    port: int = 9
    epoch: int = -1

    def register(self, **overrides: Any) -> Any:
        values: dict[str, Any] = {
            "broker_id": i32(self.broker_id), "cluster_id": self.cluster_id, "incarnation_id": self.incarnation_id,
            "listeners": (Listener(name="PLAINTEXT", host="127.0.0.1", port=u16(self.port), security_protocol=i16(0)),),
            "features": tuple(Feature(name=n, min_supported_version=i16(lo), max_supported_version=i16(hi))
                              for n, (lo, hi) in self.features.items()),
            "rack": None, "log_dirs": tuple(self.log_dirs), "previous_broker_epoch": i64(-1)}
        values.update(overrides)
        with WireClient(self.controller) as c:
            r = c.request(BrokerRegistrationRequest(**values))
        if r.error_code == 0 and not overrides:
            self.epoch = int(r.broker_epoch)
        return r

    def heartbeat(self, offset: int, *, epoch: int | None = None, want_fence: bool = False,
                  want_shut_down: bool = False) -> Any:
        with WireClient(self.controller) as c:
            return c.request(BrokerHeartbeatRequest(
                broker_id=i32(self.broker_id), broker_epoch=i64(self.epoch if epoch is None else epoch),
                current_metadata_offset=i64(offset), want_fence=want_fence, want_shut_down=want_shut_down))


class Heartbeater:
    """Heartbeats every ``interval`` seconds in a thread until :meth:`stop` (a live session)."""

    def __init__(self, broker: RemoteBroker, offset: int, interval: float = 0.25) -> None:
        self._broker, self._offset, self._interval = broker, offset, interval
        self._stop = threading.Event()
        self.errors: list[int] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            r = self._broker.heartbeat(self._offset)
            if r.error_code != 0:
                self.errors.append(int(r.error_code))
            self._stop.wait(self._interval)

    def __enter__(self) -> Heartbeater:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def outcome(r: Any) -> tuple[Any, ...]:
    """What a test compares of a response: the code and the flags (epochs differ by log)."""
    if hasattr(r, "is_fenced"):
        return (int(r.error_code), bool(r.is_caught_up), bool(r.is_fenced), bool(r.should_shut_down))
    return (int(r.error_code), int(r.broker_epoch) >= 0)
