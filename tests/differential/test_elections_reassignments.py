"""ElectLeaders (43), ListPartitionReassignments (46) and AlterPartitionReassignments (45): strom
against Apache Kafka 4.3.1.

Each test sends the same requests to both brokers (single nodes, topics with replication factor
1) and compares the answers field by field, by topic name. The last tests run Kafka's own
``kafka-leader-election.sh`` and ``kafka-reassign-partitions.sh`` classes against both brokers
and compare exit codes and printed results.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from diff_wire import WireClient, kio_schema
from kafka_ref import KafkaRef, classpath, ensure_jars
from kio.schema.errors import ErrorCode
from ref_fixtures import HasBootstrap, needs_tools

from strom.core.testing import BrokerProcess

RUN = uuid.uuid4().hex[:8]


def both(strom: HasBootstrap, kafka: KafkaRef) -> list[tuple[str, WireClient]]:
    return [("strom", WireClient(strom.bootstrap)), ("kafka", WireClient(kafka.bootstrap))]


def topics_on_both(clients: list[tuple[str, WireClient]], prefix: str) -> tuple[str, str]:
    """Two fresh topics (2 partitions and 1) on every broker."""
    t1, t2 = f"{prefix}-a-{RUN}", f"{prefix}-b-{RUN}"
    for _, c in clients:
        c.create_topic(t1, 2)
        c.create_topic(t2, 1)
    return t1, t2


# -- ElectLeaders ----------------------------------------------------------------------------------

def elect(c: WireClient, version: int, election_type: int | None,
          topics: list[tuple[str, list[int]]] | None) -> tuple[int | None, list[Any]]:
    """(top-level error or None for v0, [(topic, [(partition, error, message)])]) in answer order."""
    m = kio_schema("elect_leaders", version)
    kw = {} if election_type is None else {"election_type": election_type}
    tps = None if topics is None else tuple(m.TopicPartitions(topic=t, partitions=tuple(ps)) for t, ps in topics)
    resp = c.request(m.ElectLeadersRequest(topic_partitions=tps, **kw))
    top = int(resp.error_code) if hasattr(resp, "error_code") else None
    return top, [(r.topic, [(int(p.partition_id), int(p.error_code), p.error_message) for p in r.partition_result])
                 for r in resp.replica_election_results]


@pytest.mark.parametrize(("version", "election_type"), [(0, None), (1, 0), (1, 1), (2, 0), (2, 1)])
def test_elect_named_partitions(version: int, election_type: int | None,
                                strom: HasBootstrap, kafka: KafkaRef) -> None:
    """Named partitions answer in request order, duplicates included: ELECTION_NOT_NEEDED for a
    partition whose only replica leads (preferred and unclean alike), UNKNOWN_TOPIC_OR_PARTITION
    with Kafka's wording for an unknown topic or partition; a topic with no partitions listed
    answers an empty result."""
    clients = both(strom, kafka)
    t1, t2 = topics_on_both(clients, f"el{version}{election_type}")
    request = [(t1, [0, 1, 5]), (f"nope-{RUN}", [0]), (t2, [0, 0]), (t2, [])]
    answers = {kind: elect(c, version, election_type, request) for kind, c in clients}
    for _, c in clients:
        c.close()
    assert answers["strom"] == answers["kafka"]
    top, results = answers["strom"]
    assert top == (None if version == 0 else 0)
    assert [t for t, _ in results] == [t1, f"nope-{RUN}", t2, t2]
    assert [e for _, parts in results for _, e, _ in parts] == \
        [ErrorCode.election_not_needed] * 2 + [ErrorCode.unknown_topic_or_partition] * 2 + \
        [ErrorCode.election_not_needed] * 2


@pytest.mark.parametrize(("version", "election_type"), [(0, None), (2, 0), (2, 1)])
def test_elect_all_partitions(version: int, election_type: int | None,
                              strom: HasBootstrap, kafka: KafkaRef) -> None:
    """A null topic list means every partition: every topic is listed, but partitions whose
    election was not needed are left out, so each topic has an empty result. Other tests' topics
    live on the shared brokers too, so only this test's topics are compared (order is Kafka's hash
    order, so by name)."""
    clients = both(strom, kafka)
    t1, t2 = topics_on_both(clients, f"elall{version}{election_type}")
    answers = {}
    for kind, c in clients:
        top, results = elect(c, version, election_type, None)
        c.close()
        by_name = dict(results)
        assert len(by_name) == len(results)  # each topic once
        answers[kind] = (top, by_name[t1], by_name[t2], all(parts == [] for parts in by_name.values()))
    assert answers["strom"] == answers["kafka"] == (None if version == 0 else 0, [], [], True)


def test_elect_empty_list_and_unknown_election_type(strom: HasBootstrap, kafka: KafkaRef) -> None:
    """An empty topic list answers nothing; an unknown election type is INVALID_REQUEST at the top
    and on every named partition, with Kafka's message."""
    clients = both(strom, kafka)
    t1, _ = topics_on_both(clients, "elbad")
    answers = {kind: (elect(c, 2, 0, []), elect(c, 1, 0, []), elect(c, 2, 5, [(t1, [0, 1]), (f"nope-{RUN}", [0])]))
               for kind, c in clients}
    for _, c in clients:
        c.close()
    assert answers["strom"] == answers["kafka"]
    empty, _, bad = answers["strom"]
    assert empty == (0, [])
    assert bad == (ErrorCode.invalid_request,
                   [(t1, [(p, ErrorCode.invalid_request, "Unknown election type 5") for p in (0, 1)]),
                    (f"nope-{RUN}", [(0, ErrorCode.invalid_request, "Unknown election type 5")])])


# -- ListPartitionReassignments ------------------------------------------------------------------

def list_reassignments(c: WireClient, topics: list[tuple[str, list[int]]] | None) -> tuple[int, Any, list[Any]]:
    m = kio_schema("list_partition_reassignments", 0)
    req = m.ListPartitionReassignmentsRequest(topics=None if topics is None else tuple(
        m.ListPartitionReassignmentsTopics(name=t, partition_indexes=tuple(ps)) for t, ps in topics))
    resp = c.request(req)
    return int(resp.error_code), resp.error_message, [
        (t.name, [(int(p.partition_index), p.replicas, p.adding_replicas, p.removing_replicas) for p in t.partitions])
        for t in resp.topics]


def test_list_reassignments(strom: HasBootstrap, kafka: KafkaRef) -> None:
    """Nothing is being reassigned: null, empty and named lists (known and unknown topics and
    partitions) all answer no topics and no error."""
    clients = both(strom, kafka)
    t1, t2 = topics_on_both(clients, "lpr")
    answers = {kind: [list_reassignments(c, q) for q in
                      (None, [], [(t1, [0, 1, 9]), (t2, []), (f"nope-{RUN}", [0])])]
               for kind, c in clients}
    for _, c in clients:
        c.close()
    assert answers["strom"] == answers["kafka"] == [(0, None, [])] * 3


# -- AlterPartitionReassignments -----------------------------------------------------------------

def alter(c: WireClient, version: int, topics: list[tuple[str, list[tuple[int, list[int] | None]]]],
          allow_rf_change: bool = True) -> tuple[Any, ...]:
    m = kio_schema("alter_partition_reassignments", version)
    kw = {"allow_replication_factor_change": allow_rf_change} if version >= 1 else {}
    resp = c.request(m.AlterPartitionReassignmentsRequest(topics=tuple(
        m.ReassignableTopic(name=t, partitions=tuple(
            m.ReassignablePartition(partition_index=p, replicas=None if r is None else tuple(r)) for p, r in ps))
        for t, ps in topics), **kw))
    return (int(resp.error_code), resp.error_message, getattr(resp, "allow_replication_factor_change", None),
            [(t.name, [(int(p.partition_index), int(p.error_code), p.error_message) for p in t.partitions])
             for t in resp.responses])


@pytest.mark.parametrize("version", [0, 1])
def test_alter_reassignments(version: int, strom: HasBootstrap, kafka: KafkaRef) -> None:
    """The current replica list is accepted (and changes nothing); an empty list, an unregistered
    broker (checked in ascending order), a broker named twice, a cancellation with nothing in
    progress, unknown partitions and topics are refused with Kafka's codes and messages; no topics
    answers an empty (not null) message."""
    clients = both(strom, kafka)
    t1, _ = topics_on_both(clients, f"apr{version}")
    answers = {}
    for kind, c in clients:
        node = int(c.metadata(None).brokers[0].node_id)
        # Both brokers are node 1 in these configs; the messages name brokers, so check.
        assert node == 1
        before = c.metadata([t1]).topics[0]
        answers[kind] = [
            alter(c, version, [(t1, [(0, [node]), (1, [node + 6]), (0, [node, node + 6])])]),
            alter(c, version, [(t1, [(0, []), (1, [node, node]), (0, [-1]), (1, None), (9, [node])])]),
            alter(c, version, [(f"nope-{RUN}", [(0, [node]), (1, None)])]),
            alter(c, version, []),
            list_reassignments(c, None),
        ]
        after = c.metadata([t1]).topics[0]
        assert [(p.leader_id, p.leader_epoch, p.replica_nodes) for p in after.partitions] == \
            [(p.leader_id, p.leader_epoch, p.replica_nodes) for p in before.partitions]
        c.close()
    assert answers["strom"] == answers["kafka"]
    same, refused, unknown, empty, listed = answers["strom"]
    assert same[:2] == (0, None) and same[3][0][1][0] == (0, 0, None)
    assert [e for _, e, _ in refused[3][0][1]] == [ErrorCode.invalid_replica_assignment] * 3 + \
        [ErrorCode.no_reassignment_in_progress, ErrorCode.unknown_topic_or_partition]
    assert {e for _, e, _ in unknown[3][0][1]} == {ErrorCode.unknown_topic_or_partition}
    assert empty == (0, "", None if version == 0 else True, [])
    assert listed == (0, None, [])


def test_alter_reassignments_without_rf_change(strom: HasBootstrap, kafka: KafkaRef) -> None:
    """v1 echoes ``allow_replication_factor_change=false``; the broker check still comes first."""
    clients = both(strom, kafka)
    t1, _ = topics_on_both(clients, "aprrf")
    answers = {kind: alter(c, 1, [(t1, [(0, [1, 7]), (1, [1])])], allow_rf_change=False) for kind, c in clients}
    for _, c in clients:
        c.close()
    assert answers["strom"] == answers["kafka"]
    assert answers["strom"][2] is False


# -- authorization (strom only: the reference runs without an authorizer) -------------------------

DENYING_AUTHORIZER = '''
from strom.plugins.hookspecs.authorizers import AuthorizationResult, ResourceType
from strom.plugins.markers import hookimpl


class DenyCluster:
    def __init__(self, config=None):
        pass

    def authorize(self, ctx, actions):
        return [AuthorizationResult.DENIED if ctx.client_id == "no-cluster"
                and a.resource.resource_type == ResourceType.CLUSTER
                else AuthorizationResult.ALLOWED for a in actions]


@hookimpl
def strom_authorizers():
    return {"deny-cluster": DenyCluster}
'''


def test_cluster_authorization(tmp_path: Path) -> None:
    """ALTER on the cluster for ElectLeaders and AlterPartitionReassignments, DESCRIBE for
    ListPartitionReassignments (Kafka's ControllerApis); a refusal is the requests'
    ``getErrorResponse``: the error at the top (where the version has one) and on every named
    partition."""
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir()
    (plugin_dir / "cluster_authorizer.py").write_text(DENYING_AUTHORIZER)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(plugin_dir), os.environ.get("PYTHONPATH")])),
           "STROM_PLUGINS": "cluster_authorizer"}
    denied = int(ErrorCode.cluster_authorization_failed)
    with BrokerProcess(tmp_path / "strom", config={"authorizer.class.name": "deny-cluster"}, env=env) as b:
        with WireClient(b.bootstrap, client_id="allowed") as c:
            c.create_topic("t", 1)
            assert elect(c, 2, 0, [("t", [0])])[1][0][1][0][1] == ErrorCode.election_not_needed
        with WireClient(b.bootstrap, client_id="no-cluster") as c:
            msg = "Cluster authorization failed."
            assert elect(c, 2, 0, [("t", [0]), ("u", [1, 2])]) == \
                (denied, [("t", [(0, denied, msg)]), ("u", [(1, denied, msg), (2, denied, msg)])])
            assert elect(c, 0, None, [("t", [0])]) == (None, [("t", [(0, denied, msg)])])
            assert elect(c, 2, 1, None) == (denied, [])
            assert list_reassignments(c, None) == (denied, msg, [])
            assert alter(c, 1, [("t", [(0, [1]), (1, None)])]) == \
                (denied, msg, True, [("t", [(0, denied, msg), (1, denied, msg)])])


# -- Kafka's own tools: kafka-leader-election.sh, kafka-reassign-partitions.sh --------------------

def run_tool(jar: Path, cls: str, bootstrap: str, *args: str) -> tuple[int, str]:
    cmd = ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp",
           f"{classpath(ensure_jars())}{os.pathsep}{jar}", cls, "--bootstrap-server", bootstrap, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    return proc.returncode, proc.stdout


LEADER_ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


def tool_outputs(jar: Path, bootstrap: str, topic: str, workdir: Path) -> list[tuple[int, str]]:
    """Exit code and printed result of each command; log directories (paths of each broker's own
    data dir) are masked."""
    workdir.mkdir()
    same = workdir / "same.json"
    same.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1]}]}))
    elsewhere = workdir / "elsewhere.json"
    elsewhere.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [6]}]}))
    runs = [
        run_tool(jar, LEADER_ELECTION, bootstrap, "--election-type", "preferred", "--all-topic-partitions"),
        run_tool(jar, LEADER_ELECTION, bootstrap, "--election-type", "unclean", "--all-topic-partitions"),
        run_tool(jar, LEADER_ELECTION, bootstrap, "--election-type", "preferred", "--topic", topic,
                 "--partition", "1"),
        run_tool(jar, LEADER_ELECTION, bootstrap, "--election-type", "unclean", "--topic", topic,
                 "--partition", "0"),
        run_tool(jar, LEADER_ELECTION, bootstrap, "--election-type", "preferred", "--topic", f"nope-{RUN}",
                 "--partition", "0"),
        run_tool(jar, REASSIGN, bootstrap, "--list"),
        run_tool(jar, REASSIGN, bootstrap, "--execute", "--reassignment-json-file", str(same)),
        run_tool(jar, REASSIGN, bootstrap, "--execute", "--reassignment-json-file", str(elsewhere)),
    ]
    return [(rc, re.sub(r'"log_dirs":\["[^"]*"\]', '"log_dirs":[<dir>]', out)) for rc, out in runs]


@pytest.mark.slow  # 21 s on the 2-CPU machine: one JVM per Kafka tool run, on both brokers
def test_kafka_tools(strom: HasBootstrap, kafka: KafkaRef, tmp_path: Path) -> None:
    """kafka-leader-election.sh (preferred and unclean, all partitions and one) and
    kafka-reassign-partitions.sh (--list, --execute with the current and with an unknown broker)
    of Kafka 4.3.1 print the same against strom as against Kafka."""
    jar = needs_tools()
    topic = f"tools-{RUN}"
    outputs = {}
    for kind, b in (("strom", strom), ("kafka", kafka)):
        with WireClient(b.bootstrap) as c:
            c.create_topic(topic, 2)
        outputs[kind] = tool_outputs(jar, b.bootstrap, topic, tmp_path / kind)
    assert outputs["strom"] == outputs["kafka"]
    (all_pref, all_unclean, one_pref, one_unclean, unknown, listed, same, elsewhere) = outputs["strom"]
    assert all_pref == (0, "") and all_unclean == (0, "")
    assert one_pref == (0, f"Valid replica already elected for partitions {topic}-1\n")
    assert one_unclean == (0, f"Valid replica already elected for partitions {topic}-0\n")
    assert unknown[0] == 1 and f"No such topic as nope-{RUN}" in unknown[1]
    assert listed == (0, "No partition reassignments found.\n")
    assert same[0] == 0 and f"Successfully started partition reassignment for {topic}-0" in same[1]
    assert elsewhere[0] == 1 and "Error: Unknown broker id 6" in elsewhere[1]


@pytest.mark.parametrize("kind", ["strom", "kafka"])
def test_reassign_verify(kind: str, strom: HasBootstrap, kafka: KafkaRef, tmp_path: Path) -> None:
    """``kafka-reassign-partitions.sh --verify`` reports the reassignment complete, then clears the
    replication throttles."""
    jar = needs_tools()
    b = strom if kind == "strom" else kafka
    topic = f"verify-{RUN}"
    with WireClient(b.bootstrap) as c:
        c.create_topic(topic, 1)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1]}]}))
    rc, out = run_tool(jar, REASSIGN, b.bootstrap, "--verify", "--reassignment-json-file", str(plan))
    assert f"Reassignment of partition {topic}-0 is completed." in out
    assert rc == 0, out
