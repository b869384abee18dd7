# mypy: disable-error-code="arg-type,union-attr"
# (kio types fields with phantom NewTypes - i32, TopicName, BrokerId - and loads response types as
# unions; plain ints/strs are what they are at run time, so only the checker objects.)
"""Differential: DescribeQuorum (55) of strom against Apache Kafka 4.3.1, and Kafka's own
``kafka-metadata-quorum.sh`` (``org.apache.kafka.tools.MetadataQuorumCommand``) against strom.

Both brokers are one combined broker + controller node with static voters (``kraft.version`` 0).
The same raw request goes to both in each test. Exact values that differ by nature (log end
offsets, the epoch after a different number of restarts, ports, wall-clock times) are reduced
to what must agree: the leader is the node itself (Metadata's node id), the high watermark is the
leader's log end offset, the leader's timestamps are "now", the voter set is the node, there are
no observers, directory ids are the zero uuid. Error answers (a wrong topic or partition, more
than one partition, no topic) are deterministic and compared whole.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from diff_wire import WireClient, kio_schema
from kafka_ref import KafkaRef, classpath, ensure_jars, free_port
from kio.schema.errors import ErrorCode
from ref_fixtures import HasBootstrap, needs_tools, skip_without_java

from strom.core.testing import BrokerProcess

METADATA = "__cluster_metadata"


def describe_quorum(c: WireClient, version: int = 2, topics: dict[str, list[int]] | None = None) -> Any:
    """One DescribeQuorum request; by default for ``__cluster_metadata`` partition 0."""
    m = kio_schema("describe_quorum", version)
    topics = {METADATA: [0]} if topics is None else topics
    return c.request(m.DescribeQuorumRequest(topics=tuple(
        m.TopicData(topic_name=t, partitions=tuple(m.PartitionData(partition_index=p) for p in ps))
        for t, ps in topics.items())))


def node_id(c: WireClient) -> int:
    return int(c.metadata(None).brokers[0].node_id)


def reduce(resp: Any, node: int, before_ms: int, after_ms: int) -> dict[str, Any]:
    """What must agree between two single-node quorums, from a successful answer."""
    [topic] = resp.topics
    [p] = topic.partitions
    [leader] = [v for v in p.current_voters if v.replica_id == p.leader_id]

    def when(ts: int | None) -> str | int | None:
        if ts is None:
            return None  # the field does not exist in this version
        return "now" if before_ms <= ts <= after_ms else ts

    return {
        "error": (ErrorCode(resp.error_code).name, getattr(resp, "error_message", None)),
        "topic": topic.topic_name,
        "partition": (int(p.partition_index), ErrorCode(p.error_code).name, getattr(p, "error_message", None)),
        "leader is the node": int(p.leader_id) == node,
        "epoch >= 1": int(p.leader_epoch) >= 1,
        "high watermark = leader's log end offset": int(p.high_watermark) == int(leader.log_end_offset),
        "log end offset > 0": int(leader.log_end_offset) > 0,
        "voters": [(int(v.replica_id) == node, getattr(v, "replica_directory_id", "n/a"),
                    when(getattr(v, "last_fetch_timestamp", None)), when(getattr(v, "last_caught_up_timestamp", None)))
                   for v in p.current_voters],
        "observers": list(p.observers),
        "nodes": [(int(n.node_id) == node, [lst.name for lst in n.listeners]) for n in getattr(resp, "nodes", ())],
    }


def observe(bootstrap: str, version: int) -> dict[str, Any]:
    with WireClient(bootstrap) as c:
        node = node_id(c)
        before = int(time.time() * 1000)
        resp = describe_quorum(c, version)
        after = int(time.time() * 1000)
    return reduce(resp, node, before, after)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum_matches_kafka(version: int, strom: HasBootstrap, kafka: KafkaRef) -> None:
    ours, theirs = observe(strom.bootstrap, version), observe(kafka.bootstrap, version)
    assert ours == theirs
    # Kafka's answer itself, so a reduction that hides everything cannot pass.
    expected_voter = {0: (True, "n/a", None, None), 1: (True, "n/a", "now", "now"), 2: (True, None, "now", "now")}
    assert theirs["voters"] == [expected_voter[version]]
    assert theirs["leader is the node"] and theirs["high watermark = leader's log end offset"]
    assert theirs["nodes"] == ([(True, ["CONTROLLER"])] if version >= 2 else [])


@pytest.mark.parametrize("kind", ["strom", "kafka"])
def test_voter_endpoint_is_real(kind: str, strom: HasBootstrap, kafka: KafkaRef) -> None:
    """The v2 ``nodes`` endpoint of the voter is a socket that answers DescribeQuorum itself, on
    both brokers. ``strom dev`` (the ``strom`` fixture) configures controller.quorum.voters
    1@127.0.0.1:0 and serves its in-process controller on the broker listener: it reported port 0
    before issue 27."""
    bootstrap = strom.bootstrap if kind == "strom" else kafka.bootstrap
    with WireClient(bootstrap) as c:
        nodes = describe_quorum(c).nodes
    [(node, [listener])] = [(n.node_id, list(n.listeners)) for n in nodes]
    assert listener.name == "CONTROLLER" and listener.port > 0
    with WireClient(f"{listener.host}:{listener.port}") as c:
        again = describe_quorum(c)
    assert again.topics[0].partitions[0].leader_id == node
    assert [(n.node_id, [(lst.name, lst.host, lst.port) for lst in n.listeners]) for n in again.nodes] == \
        [(node, [(listener.name, listener.host, listener.port)])]


BAD_REQUESTS = {
    "unknown topic": {"foo": [0]},
    "partition 1": {METADATA: [1]},
    "negative partition": {METADATA: [-1]},
    "two partitions": {METADATA: [0, 1]},
    "partition 0 twice": {METADATA: [0, 0]},
    "two topics": {METADATA: [0], "other": [0]},
    "no partitions": {METADATA: []},
    "no topics": {},
}


@pytest.mark.parametrize("version", [0, 2])
@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_bad_topic_or_partition_matches_kafka(case: str, version: int, strom: HasBootstrap, kafka: KafkaRef) -> None:
    """Kafka answers only a request for exactly ``__cluster_metadata``-0; anything else gets
    UNKNOWN_TOPIC_OR_PARTITION on every partition it names (leader/epoch/HW 0, no voters,
    no nodes). The whole answer is deterministic, so it is compared whole."""
    with WireClient(strom.bootstrap) as s, WireClient(kafka.bootstrap) as k:
        ours, theirs = describe_quorum(s, version, BAD_REQUESTS[case]), describe_quorum(k, version, BAD_REQUESTS[case])
    assert ours == theirs
    codes = {ErrorCode(p.error_code) for t in theirs.topics for p in t.partitions}
    assert codes <= {ErrorCode.unknown_topic_or_partition}
    assert len(codes) == (0 if case in ("no topics", "no partitions") else 1)


def test_advertised_versions_match_kafka(strom: HasBootstrap, kafka: KafkaRef) -> None:
    with WireClient(strom.bootstrap) as s, WireClient(kafka.bootstrap) as k:
        assert s.api_versions()[55] == k.api_versions()[55] == (0, 2)


@pytest.mark.parametrize("kind", ["strom", "kafka"])
def test_metadata_log_growth_and_restart(kind: str, tmp_path: Path) -> None:
    """Epoch and high watermark relations on a node of its own: creating a topic appends
    metadata records (the high watermark moves past the old log end offset and stays equal to
    the new one); a restart is a new election (epoch + 1) that keeps the log. The voter's
    controller endpoint in ``nodes`` is the one ``controller.quorum.voters`` names."""
    skip_without_java()
    cport = free_port()
    broker: Any
    if kind == "strom":
        broker = BrokerProcess(tmp_path / "strom", config={
            "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{cport}",
            "controller.quorum.voters": f"1@127.0.0.1:{cport}"})
    else:
        broker = KafkaRef(tmp_path / "kafka")
    with broker:
        if kind == "kafka":
            cport = broker.controller_port
        with WireClient(broker.bootstrap) as c:
            first = describe_quorum(c).topics[0].partitions[0]
            c.create_topic("quorum-growth", 3)
            grown = describe_quorum(c)
        p = grown.topics[0].partitions[0]
        assert [(n.node_id, [(lst.name, lst.host, lst.port) for lst in n.listeners]) for n in grown.nodes] == \
            [(1, [("CONTROLLER", "127.0.0.1", cport)])]
        assert p.leader_epoch == first.leader_epoch
        assert p.high_watermark > first.current_voters[0].log_end_offset
        assert p.high_watermark == p.current_voters[0].log_end_offset
        broker.restart()
        with WireClient(broker.bootstrap) as c:
            restarted = describe_quorum(c).topics[0].partitions[0]
        assert restarted.leader_epoch == p.leader_epoch + 1
        assert restarted.high_watermark > p.high_watermark  # at least the new leader's LeaderChange
        assert restarted.high_watermark == restarted.current_voters[0].log_end_offset


# -- authorization (strom only: the reference runs without an authorizer) ------------------------

DENYING_AUTHORIZER = '''
from strom.plugins.hookspecs.authorizers import AclOperation, AuthorizationResult, ResourceType
from strom.plugins.markers import hookimpl


class DenyClusterDescribe:
    def __init__(self, config=None):
        pass

    def authorize(self, ctx, actions):
        return [AuthorizationResult.DENIED if ctx.client_id == "no-describe"
                and (a.operation, a.resource.resource_type) == (AclOperation.DESCRIBE, ResourceType.CLUSTER)
                else AuthorizationResult.ALLOWED for a in actions]


@hookimpl
def strom_authorizers():
    return {"deny-cluster-describe": DenyClusterDescribe}
'''


def test_cluster_describe_is_required(tmp_path: Path) -> None:
    """Kafka's ControllerApis checks DESCRIBE on the cluster first; the refusal is
    ``DescribeQuorumRequest.getErrorResponse``: top-level CLUSTER_AUTHORIZATION_FAILED with
    ``Errors.message()``, no topics, no nodes (read from kafka-clients 4.3.1)."""
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir()
    (plugin_dir / "quorum_authorizer.py").write_text(DENYING_AUTHORIZER)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(plugin_dir), os.environ.get("PYTHONPATH")])),
           "STROM_PLUGINS": "quorum_authorizer"}
    with BrokerProcess(tmp_path / "strom", config={"authorizer.class.name": "deny-cluster-describe"}, env=env) as b:
        with WireClient(b.bootstrap, client_id="no-describe") as c:
            denied = describe_quorum(c)
            assert (ErrorCode(denied.error_code), denied.error_message, denied.topics, denied.nodes) == \
                (ErrorCode.cluster_authorization_failed, "Cluster authorization failed.", (), ())
            old = describe_quorum(c, 0)
            assert (ErrorCode(old.error_code), old.topics) == (ErrorCode.cluster_authorization_failed, ())
        with WireClient(b.bootstrap, client_id="allowed") as c:
            allowed = describe_quorum(c)
            assert allowed.error_code == 0 and allowed.topics[0].partitions[0].error_code == 0


# -- Kafka's own tool: kafka-metadata-quorum.sh ----------------------------------------------------

def metadata_quorum(jar: Path, bootstrap: str, *args: str) -> str:
    cmd = ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp",
           f"{classpath(ensure_jars())}{os.pathsep}{jar}", "org.apache.kafka.tools.MetadataQuorumCommand",
           "--bootstrap-server", bootstrap, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return proc.stdout


def parse_status(text: str) -> dict[str, str]:
    """``describe --status``: one ``Key:   value`` line per field."""
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines() if ":" in line)}


def parse_table(text: str) -> list[dict[str, str]]:
    """``describe --replication``: a tab-separated table with a header row."""
    lines = [line for line in text.splitlines() if "\t" in line]
    header = [h.strip() for h in lines[0].split("\t") if h.strip()]
    return [dict(zip(header, (v.strip() for v in line.split("\t")), strict=False)) for line in lines[1:]]


@pytest.mark.parametrize("kind", ["strom", "kafka"])
def test_kafka_metadata_quorum_tool(kind: str, strom: HasBootstrap, kafka: KafkaRef) -> None:
    """``kafka-metadata-quorum.sh describe --status`` and ``--replication`` of Kafka 4.3.1 print
    what the broker answers to DescribeQuorum v2 (run against Kafka too, so the expectations are
    the tool's own reading of a real quorum)."""
    jar = needs_tools()
    bootstrap = strom.bootstrap if kind == "strom" else kafka.bootstrap
    with WireClient(bootstrap) as c:
        node = node_id(c)
        before = describe_quorum(c)
        status = parse_status(metadata_quorum(jar, bootstrap, "describe", "--status"))
        replication = parse_table(metadata_quorum(jar, bootstrap, "describe", "--replication"))
        after = describe_quorum(c)
    p0, p1 = before.topics[0].partitions[0], after.topics[0].partitions[0]
    assert (status["LeaderId"], status["LeaderEpoch"]) == (str(node), str(p1.leader_epoch))
    assert p0.leader_epoch == p1.leader_epoch
    # Kafka writes NoOp records while idle, so the high watermark may move between the calls.
    assert p0.high_watermark <= int(status["HighWatermark"]) <= p1.high_watermark
    assert (status["MaxFollowerLag"], status["MaxFollowerLagTimeMs"], status["CurrentObservers"]) == ("0", "0", "[]")
    voters = json.loads(status["CurrentVoters"])
    assert voters == [{"id": int(n.node_id), "endpoints": [f"{lst.name}://{lst.host}:{lst.port}" for lst in n.listeners]}
                      for n in after.nodes]
    assert [v["id"] for v in voters] == [node]
    [row] = replication
    assert (row["NodeId"], row["DirectoryId"], row["Lag"], row["Status"]) == \
        (str(node), "AAAAAAAAAAAAAAAAAAAAAA", "0", "Leader")
    assert p0.high_watermark <= int(row["LogEndOffset"]) <= p1.high_watermark
    assert int(row["LastFetchTimestamp"]) > 0 and int(row["LastCaughtUpTimestamp"]) > 0
