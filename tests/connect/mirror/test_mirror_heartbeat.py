"""MirrorHeartbeatConnector: heartbeats (Kafka's format) in the target's ``heartbeats`` topic,
replicated back by the reverse flow (``B.heartbeats`` on A, even when ``topics`` names nothing
else), so RemoteClusterUtils on A sees B upstream, one hop away."""

from __future__ import annotations

import time

from strom.connect.mirror import RemoteClusterUtils
from strom.connect.mirror.records import Heartbeat
from strom.core.testing import wait_for

from .conftest import Mirror

SOURCE = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
HEARTBEAT = "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector"


def test_heartbeats_are_emitted_and_replicated_back(mirror: Mirror) -> None:
    started = int(time.time() * 1000)
    on_b = mirror.herder(mirror.b, "hb-b")
    on_b.put_connector_config("hb", mirror.connector(HEARTBEAT, "hb", ("A", mirror.a), ("B", mirror.b),
                                                     emit_heartbeats_interval_seconds="1"), False)

    def fresh_heartbeats() -> list[Heartbeat]:
        if not mirror.end_offsets(mirror.b, "heartbeats"):
            return []
        beats = [Heartbeat.deserialize(r[2], r[3]) for r in mirror.read_all(mirror.b, "heartbeats", 1)]
        return [h for h in beats if h.source_cluster_alias == "A" and h.target_cluster_alias == "B"
                and h.timestamp >= started]

    beats = wait_for(lambda: len(fresh_heartbeats()) >= 2 and fresh_heartbeats(), 30, "two heartbeats A->B on B")
    assert beats[1].timestamp > beats[0].timestamp
    # B -> A replicates B's heartbeats into A's B.heartbeats though `topics` matches nothing else
    on_a = mirror.herder(mirror.a, "hb-a")
    on_a.put_connector_config("back", mirror.connector(SOURCE, "back", ("B", mirror.b), ("A", mirror.a),
                                                       topics="nothing-else"), False)
    wait_for(lambda: mirror.end_offsets(mirror.a, "B.heartbeats").get(0, 0) > 0, 60, "B.heartbeats on A")
    props = {"bootstrap.servers": mirror.a}
    assert "B.heartbeats" in RemoteClusterUtils.heartbeat_topics(props)
    assert "B" in RemoteClusterUtils.upstream_clusters(props)
    assert RemoteClusterUtils.replication_hops(props, "B") == 1
    assert RemoteClusterUtils.replication_hops(props, "Z") == -1
    lag = RemoteClusterUtils.replication_lag(props, "B")
    assert lag is not None and 0.0 <= lag < 60.0  # B's copy on A is seconds behind, not unknown
    assert RemoteClusterUtils.replication_lag(props, "Z") is None
