# mypy: disable-error-code="arg-type,union-attr"
# (kio types fields with phantom NewTypes - i32, TopicName - and loads response types as unions;
# plain ints/strs are what they are at run time, so only the checker objects.)
"""Differential: DescribeTopicPartitions (75, KIP-966) of strom against Apache Kafka 4.3.1.

The same topics are created on both brokers (``dtp-<run>-a`` 3 partitions, ``-b`` 1, ``-c`` 4,
``-d`` 2) and the same raw requests sent to both; answers are compared field by field, with
topic ids replaced by the name Metadata gives for that id on the same broker (so an id is right
only if it is the topic's own), error codes by name. Cases: named topics out of order and
duplicated, paging with a small ``response_partition_limit`` across topic boundaries (walking the
``next_cursor`` chain to the end), a cursor in the middle of a topic, past its last partition,
on a topic that does not exist or is not named, a negative cursor partition, unknown and
illegal topic names, empty names, limits of 0 and below, and "all topics" (an empty list).

"All topics" includes whatever else the session's tests created and the internal topics, which
legitimately differ: strom creates ``__consumer_offsets``/``__transaction_state`` when it starts,
Kafka on first use (and partition counts may differ). Those answers are therefore compared only
for this module's topics - a listing that starts at a cursor on this module's prefix is compared
page by page while the pages stay inside the prefix - and internal topics are checked to be
flagged ``is_internal`` on each broker.

The last tests run Kafka's own ``kafka-topics.sh --describe`` (``org.apache.kafka.tools.
TopicCommand``) against strom: its log must show it used DescribeTopicPartitions (not the
Metadata fallback) and its output list every partition with Leader/Replicas/Isr as strom's
Metadata reports them, also when forced to page one partition per response.
"""

from __future__ import annotations

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
from ref_fixtures import HasBootstrap, needs_tools, skip_without_java

from strom.core.testing import BrokerProcess

RUN = uuid.uuid4().hex[:8]
PREFIX = f"dtp-{RUN}-"
TOPICS = {f"{PREFIX}a": 3, f"{PREFIX}b": 1, f"{PREFIX}c": 4, f"{PREFIX}d": 2}
A, B, C, D = TOPICS
ZERO_UUID = uuid.UUID(int=0)
ALL_TOPIC_OPERATIONS = 3576  # READ..ALTER_CONFIGS: every topic operation, no authorizer
M = kio_schema("describe_topic_partitions", 0)


def describe(c: WireClient, topics: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None) -> Any:
    return c.request(M.DescribeTopicPartitionsRequest(
        topics=tuple(M.TopicRequest(name=t) for t in topics), response_partition_limit=limit,
        cursor=None if cursor is None else M.Cursor(topic_name=cursor[0], partition_index=cursor[1])))


def id_names(c: WireClient) -> dict[Any, str]:
    """Topic id -> name, from the same broker's Metadata."""
    return {t.topic_id: t.name for t in c.metadata(None).topics}


def normalize(c: WireClient, resp: Any, keep: Any = lambda name: True) -> dict[str, Any]:
    """The answer with ids as names (``zero`` for the zero id, which kio reads as None), errors
    as names; only topics ``keep`` accepts."""
    ids = id_names(c)

    def tid(value: Any) -> str:
        return "zero" if value in (None, ZERO_UUID) else f"id-of:{ids.get(value, f'unknown {value}')}"

    topics = [{
        "error": ErrorCode(int(t.error_code)).name, "name": t.name, "topic_id": tid(t.topic_id),
        "is_internal": t.is_internal, "authorized_operations": int(t.topic_authorized_operations),
        "partitions": [{
            "error": ErrorCode(int(p.error_code)).name, "index": int(p.partition_index),
            "leader": int(p.leader_id), "leader_epoch": int(p.leader_epoch),
            "replicas": list(p.replica_nodes), "isr": list(p.isr_nodes),
            "elr": None if p.eligible_leader_replicas is None else list(p.eligible_leader_replicas),
            "last_known_elr": None if p.last_known_elr is None else list(p.last_known_elr),
            "offline": list(p.offline_replicas)} for p in t.partitions]}
        for t in resp.topics if keep(t.name)]
    cursor = resp.next_cursor
    return {"throttle": resp.throttle_time.total_seconds(), "topics": topics,
            "next_cursor": None if cursor is None else (cursor.topic_name, int(cursor.partition_index))}


def ours_mine(name: str | None) -> bool:
    return bool(name and name.startswith(PREFIX))


@pytest.fixture(scope="module")
def clients(strom: HasBootstrap, kafka: KafkaRef) -> Any:
    with WireClient(strom.bootstrap) as s, WireClient(kafka.bootstrap) as k:
        for c in (s, k):
            for name, partitions in TOPICS.items():
                c.create_topic(name, partitions)
        yield s, k


def both(clients: Any, topics: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None,
         keep: Any = lambda name: True) -> tuple[dict[str, Any], dict[str, Any]]:
    s, k = clients
    return (normalize(s, describe(s, topics, limit, cursor), keep),
            normalize(k, describe(k, topics, limit, cursor), keep))


# (case, topics, limit, cursor, what Kafka answered: topic names/errors and the next cursor)
CASES: list[tuple[str, list[str], int, tuple[str, int] | None, list[tuple[str, str]], tuple[str, int] | None]] = [
    ("named_out_of_order", [D, A, C, B], 2000, None,
     [(A, "none"), (B, "none"), (C, "none"), (D, "none")], None),
    ("duplicates", [B, A, B], 2000, None, [(A, "none"), (B, "none")], None),
    ("limit_cuts_first_topic", [A, B, C], 2, None, [(A, "none")], (A, 2)),
    ("limit_ends_on_topic_boundary", [A, B, C], 3, None, [(A, "none")], (B, 0)),
    ("limit_cuts_second_topic", [A, B, C], 6, None, [(A, "none"), (B, "none"), (C, "none")], (C, 2)),
    ("limit_zero_is_one", [A, B], 0, None, [(A, "none")], (A, 1)),
    ("limit_negative_is_one", [A, B], -7, None, [(A, "none")], (A, 1)),
    ("cursor_mid_topic", [A, B, C], 2, (A, 1), [(A, "none")], (B, 0)),
    ("cursor_mid_topic_big_limit", [C, D, A], 2000, (C, 3), [(C, "none"), (D, "none")], None),
    ("cursor_past_last_partition", [A, B], 2000, (A, 9), [(A, "none"), (B, "none")], None),
    ("cursor_topic_not_named", [A, C], 2000, (B, 0), [(A, "invalid_request"), (C, "invalid_request")], None),
    ("cursor_negative_partition", [B, A], 2000, (A, -1), [(B, "invalid_request"), (A, "invalid_request")], None),
    ("cursor_unknown_topic_named", [A, f"{PREFIX}zz", D], 2000, (f"{PREFIX}zz", 0),
     [(f"{PREFIX}zz", "unknown_topic_or_partition")], None),
    ("unknown_and_illegal", [f"{PREFIX}nope", B, "bad/name", "..", "x" * 300, "__consumer_offsets_not"], 2000, None,
     [("..", "invalid_topic_exception"), ("__consumer_offsets_not", "unknown_topic_or_partition"),
      ("bad/name", "invalid_topic_exception"), (B, "none"), (f"{PREFIX}nope", "unknown_topic_or_partition"),
      ("x" * 300, "invalid_topic_exception")], None),
    ("unknown_costs_no_budget", [A, f"{PREFIX}aa", B, C], 4, None,
     [(A, "none"), (f"{PREFIX}aa", "unknown_topic_or_partition"), (B, "none")], (C, 0)),
    ("budget_ends_before_unknown", [A, f"{PREFIX}aa"], 3, None, [(A, "none")], (f"{PREFIX}aa", 0)),
    ("empty_name", [A, ""], 2000, None, [(A, "unknown_server_error"), ("", "unknown_server_error")], None),
    ("empty_name_before_cursor", [A, ""], 2000, (A, 2), [(A, "none")], None),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_kafka(case: Any, clients: Any) -> None:
    _, topics, limit, cursor, kafka_topics, kafka_cursor = case
    ours, theirs = both(clients, topics, limit, cursor)
    # Kafka answered as observed when this test was written (so no case is vacuous) ...
    assert [(t["name"], t["error"]) for t in theirs["topics"]] == kafka_topics
    assert theirs["next_cursor"] == kafka_cursor
    # ... and strom as Kafka, field by field.
    assert ours == theirs


def test_no_elr_is_empty_not_null(clients: Any) -> None:
    """Kafka answers a partition without eligible leader replicas with empty ELR lists."""
    ours, theirs = both(clients, [B])
    for answer in (ours, theirs):
        [p] = answer["topics"][0]["partitions"]
        assert (p["elr"], p["last_known_elr"], p["leader"], p["replicas"], p["isr"]) == ([], [], 1, [1], [1])
        assert answer["topics"][0]["authorized_operations"] == ALL_TOPIC_OPERATIONS


def walk(c: WireClient, topics: list[str], limit: int, cursor: tuple[str, int] | None,
         stop: Any = lambda cursor: False) -> list[dict[str, Any]]:
    """Follow ``next_cursor`` until the end (or ``stop(cursor)``); every page, normalized."""
    pages = []
    for _ in range(100):
        page = normalize(c, describe(c, topics, limit, cursor), ours_mine if not topics else lambda n: True)
        pages.append(page)
        cursor = page["next_cursor"]
        if cursor is None or stop(cursor):
            return pages
    raise AssertionError(f"no end of paging after 100 pages: {pages[-3:]}")


@pytest.mark.parametrize("limit", [1, 2, 3, 5])
def test_paging_named_topics(limit: int, clients: Any) -> None:
    s, k = clients
    names = [D, C, B, A]
    theirs, ours = walk(k, names, limit, None), walk(s, names, limit, None)
    covered = [(t["name"], p["index"]) for page in theirs for t in page["topics"] for p in t["partitions"]]
    assert covered == [(n, i) for n in sorted(TOPICS) for i in range(TOPICS[n])]  # Kafka pages it all, once
    assert all(sum(len(t["partitions"]) for t in page["topics"]) <= limit for page in theirs)
    assert ours == theirs


def test_all_topics_paging_from_a_cursor(clients: Any) -> None:
    """An empty topic list from a cursor on this module's prefix (no such topic: the listing
    starts at the next name): pages compared while they stay inside the prefix."""
    s, k = clients

    def outside(cursor: tuple[str, int]) -> bool:
        return not cursor[0].startswith(PREFIX)

    def past_mine(pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # Other modules' topics on the shared brokers (which differ between them) may follow this
        # module's: a cursor past our prefix, or none, both mean "the listing went past ours".
        for page in pages:
            if page["next_cursor"] is None or outside(page["next_cursor"]):
                page["next_cursor"] = "past this module's topics"
        return pages

    theirs = past_mine(walk(k, [], 2, (PREFIX, 0), stop=outside))
    ours = past_mine(walk(s, [], 2, (PREFIX, 0), stop=outside))
    covered = [(t["name"], p["index"]) for page in theirs for t in page["topics"] for p in t["partitions"]]
    assert covered == [(n, i) for n in sorted(TOPICS) for i in range(TOPICS[n])]
    assert ours == theirs


def test_all_topics(clients: Any) -> None:
    """Every topic, sorted by name; this module's topics compared, internal ones flagged."""
    s, k = clients
    ours, theirs = both(clients, [], keep=ours_mine)
    assert [t["name"] for t in theirs["topics"]] == sorted(TOPICS)
    assert ours == theirs
    for c in (s, k):
        resp = describe(c, [])
        names = [t.name for t in resp.topics]
        assert names == sorted(names)
        assert {t.name for t in resp.topics if t.is_internal} == {n for n in names if n.startswith("__")}
        assert all(int(t.error_code) == 0 for t in resp.topics)


def test_internal_topic_by_name(clients: Any) -> None:
    """``__consumer_offsets`` named: both flag it internal. strom has it from the start, Kafka
    only once a group coordinator was looked up, so the answer is either the topic or
    UNKNOWN_TOPIC_OR_PARTITION - both still flagged internal - and is not compared further."""
    s, k = clients
    for c in (s, k):
        [t] = describe(c, ["__consumer_offsets"], limit=1).topics
        assert t.is_internal and t.name == "__consumer_offsets"
        assert int(t.error_code) in (0, int(ErrorCode.unknown_topic_or_partition))


# -- Kafka's own tool: kafka-topics.sh --describe ------------------------------------------------

def kafka_topics_describe(bootstrap: str, *args: str) -> tuple[str, str]:
    jar = needs_tools()
    cmd = ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
           "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.admin.KafkaAdminClient=debug",
           "-cp", f"{classpath(ensure_jars())}{os.pathsep}{jar}", "org.apache.kafka.tools.TopicCommand",
           "--bootstrap-server", bootstrap, "--describe", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return proc.stdout, proc.stderr


PARTITION_LINE = re.compile(r"^\s+Topic: (\S+)\s+Partition: (\d+)\s+Leader: (\S+)\s+Replicas: (\S*)\s+Isr: (\S*)"
                            r"\s+Elr: (\S*)\s+LastKnownElr: (\S*)\s*$")


@pytest.mark.parametrize("page", [None, 1])
def test_kafka_topics_describe_against_strom(page: int | None, strom: HasBootstrap, tmp_path: Path) -> None:
    """``kafka-topics.sh --describe --topic 'dtp-<run>-.*'`` against strom lists every partition
    as strom's Metadata reports it; with ``--partition-size-limit-per-response 1`` the Admin
    client has to follow strom's cursors across every partition and topic."""
    skip_without_java()
    with WireClient(strom.bootstrap) as c:
        for name, partitions in TOPICS.items():
            if c.metadata([name]).topics[0].error_code != 0:
                c.create_topic(name, partitions)
        meta = {(t.name, int(p.partition_index)): (p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
                for t in c.metadata(list(TOPICS)).topics for p in t.partitions}
    extra = ["--partition-size-limit-per-response", str(page)] if page else []
    out, err = kafka_topics_describe(strom.bootstrap, "--topic", f"{PREFIX}.*", *extra)
    assert "Sending DescribeTopicPartitionsRequestData(" in err, "the Admin client fell back to Metadata"
    if page:
        assert f"cursor=Cursor(topicName='{C}', partitionIndex=3)" in err  # it did follow strom's cursors
    listed = {}
    for line in out.splitlines():
        if match := PARTITION_LINE.match(line):
            topic, index, leader, replicas, isr, elr, last_elr = match.groups()
            listed[(topic, int(index))] = (int(leader), [int(r) for r in replicas.split(",")],
                                           [int(r) for r in isr.split(",")])
            assert (elr, last_elr) == ("", "")
    assert listed == meta, out
    headers = {m.group(1): int(m.group(2)) for m in re.finditer(r"^Topic: (\S+)\s+TopicId: \S+\s+PartitionCount: (\d+)",
                                                                 out, re.MULTILINE)}
    assert headers == TOPICS


# -- authorization (strom only: the reference runs without an authorizer) -----------------------

DENYING_AUTHORIZER = '''
from strom.plugins.hookspecs.authorizers import AclOperation, AuthorizationResult, ResourceType
from strom.plugins.markers import hookimpl


class DenySecretTopics:
    """Client "limited" may not touch topics whose name contains "secret", and may not WRITE any."""

    def __init__(self, config=None):
        pass

    def authorize(self, ctx, actions):
        out = []
        for a in actions:
            denied = ctx.client_id == "limited" and a.resource.resource_type == ResourceType.TOPIC and (
                "secret" in a.resource.name or a.operation == AclOperation.WRITE)
            out.append(AuthorizationResult.DENIED if denied else AuthorizationResult.ALLOWED)
        return out


@hookimpl
def strom_authorizers():
    return {"deny-secret-topics": DenySecretTopics}
'''


def test_authorization(tmp_path: Path) -> None:
    """Kafka's handler: a named topic the caller may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED
    with the zero id and no authorized operations, after the described topics (whether it exists
    or not is not disclosed); listing all topics leaves it out; topic_authorized_operations
    lacks the denied operations."""
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir()
    (plugin_dir / "dtp_authorizer.py").write_text(DENYING_AUTHORIZER)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(plugin_dir), os.environ.get("PYTHONPATH")])),
           "STROM_PLUGINS": "dtp_authorizer"}
    with BrokerProcess(tmp_path / "strom", config={"authorizer.class.name": "deny-secret-topics"}, env=env) as broker:
        with WireClient(broker.bootstrap) as c:
            c.create_topic("a-secret", 1)
            c.create_topic("b-open", 2)
        with WireClient(broker.bootstrap, client_id="limited") as c:
            resp = describe(c, ["z-secret-missing", "b-open", "a-secret"])
            assert [(t.name, ErrorCode(int(t.error_code)).name, t.topic_id in (None, ZERO_UUID),
                     int(t.topic_authorized_operations), len(t.partitions)) for t in resp.topics] == [
                ("b-open", "none", False, ALL_TOPIC_OPERATIONS - (1 << 4), 2),
                ("a-secret", "topic_authorization_failed", True, -(1 << 31), 0),
                ("z-secret-missing", "topic_authorization_failed", True, -(1 << 31), 0)]
            listed = [t.name for t in describe(c, []).topics]
            assert "b-open" in listed and not any("secret" in n for n in listed)
