"""``strom consumer-groups`` end to end: list, describe with lag, members and state, offset
resets (dry run, execute, clamping, by duration), Kafka's refusals on an active group, delete.

The flow runs against strom's broker and against Apache Kafka 4.3.1 (``any_broker``); one
test runs Kafka's own kafka-consumer-groups.sh (ConsumerGroupCommand) against strom's broker and
compares its table with strom's, byte for byte.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_ref import classpath, ensure_jars
from ref_fixtures import needs_tools

from strom.core.testing import wait_for

Run = Callable[..., subprocess.CompletedProcess[str]]
OFFSET_COLUMNS = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                  "HOST", "CLIENT-ID"]


def make_topic_with_offsets(bootstrap: str, topic: str, group: str) -> None:
    """``topic`` with 10 records in partition 0 and 6 in partition 1; ``group`` committed 4 and 6."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in ((0, 10), (1, 6)):
        for i in range(count):
            producer.produce(topic, f"v{i}".encode(), partition=partition)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 6)], asynchronous=False)
    finally:
        consumer.close()


def offset_rows(stdout: str) -> list[list[str]]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert lines[0].split() == OFFSET_COLUMNS, stdout
    return [line.split() for line in lines[1:]]


@pytest.fixture
def active_member(any_broker: Any) -> Iterator[Callable[[str, str], Consumer]]:
    """Start a subscribed consumer of a group and wait until it owns its partitions."""
    consumers: list[Consumer] = []

    def start(group: str, topic: str) -> Consumer:
        c = Consumer({"bootstrap.servers": any_broker.bootstrap, "group.id": group, "client.id": "cg-test-client",
                      "enable.auto.commit": False, "session.timeout.ms": 10_000})
        consumers.append(c)
        c.subscribe([topic])

        def assigned() -> bool:
            c.poll(0.2)
            return len(c.assignment()) == 2

        wait_for(assigned, timeout=30, what="the member's assignment")
        return c

    yield start
    for c in consumers:
        c.close()


def test_describe_reset_and_delete(any_broker: Any, strom: Run, active_member: Callable[[str, str], Consumer]) -> None:
    run = uuid.uuid4().hex[:8]
    topic, group = f"cg-{run}", f"cg-group-{run}"
    bs = ("--bootstrap-server", any_broker.bootstrap)
    make_topic_with_offsets(any_broker.bootstrap, topic, group)

    res = strom("consumer-groups", "--list", *bs)
    assert res.returncode == 0, res.stderr
    assert group in res.stdout.splitlines()

    res = strom("consumer-groups", "--describe", "--group", group, *bs)
    assert res.returncode == 0, res.stderr
    assert f"Consumer group '{group}' has no active members." in res.stderr
    assert res.stdout.startswith("\nGROUP ")
    assert offset_rows(res.stdout) == [[group, topic, "0", "4", "10", "6", "-", "-", "-"],
                                       [group, topic, "1", "6", "6", "0", "-", "-", "-"]]

    # A dry run prints the plan and changes nothing.
    res = strom("consumer-groups", "--reset-offsets", "--to-earliest", "--all-topics", "--dry-run", "--group", group, *bs)
    assert res.returncode == 0, res.stderr
    lines = [line.split() for line in res.stdout.splitlines() if line.strip()]
    assert lines == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [group, topic, "0", "0"], [group, topic, "1", "0"]]
    res = strom("consumer-groups", "--describe", "--group", group, *bs)
    assert [r[3] for r in offset_rows(res.stdout)] == ["4", "6"]

    # --execute commits; an offset past the log end is clamped to it, as Kafka does.
    res = strom("consumer-groups", "--reset-offsets", "--shift-by", "-3", "--topic", f"{topic}:0", "--execute",
                "--group", group, *bs)
    assert res.returncode == 0, res.stderr
    res = strom("consumer-groups", "--reset-offsets", "--to-offset", "100", "--topic", f"{topic}:1", "--execute",
                "--group", group, *bs)
    assert res.returncode == 0, res.stderr
    assert "is higher than latest offset" in res.stderr
    res = strom("consumer-groups", "--describe", "--group", group, *bs)
    assert [(r[3], r[5]) for r in offset_rows(res.stdout)] == [("1", "9"), ("6", "0")]

    # Every record is younger than a day: by duration lands on the log start.
    res = strom("consumer-groups", "--reset-offsets", "--by-duration", "P1D", "--topic", topic, "--execute",
                "--group", group, *bs)
    assert res.returncode == 0, res.stderr
    res = strom("consumer-groups", "--describe", "--group", group, *bs)
    assert [(r[3], r[5]) for r in offset_rows(res.stdout)] == [("0", "10"), ("0", "6")]

    # With an active member: its id and client id in the table; resets and deletion refused.
    member = active_member(group, topic)
    member_id = member.memberid()
    res = strom("consumer-groups", "--describe", "--group", group, *bs)
    assert res.returncode == 0, res.stderr
    rows = offset_rows(res.stdout)
    assert {(r[1], r[2], r[6], r[8]) for r in rows} == {(topic, "0", member_id, "cg-test-client"),
                                                        (topic, "1", member_id, "cg-test-client")}
    res = strom("consumer-groups", "--describe", "--group", group, "--members", *bs)
    assert res.returncode == 0, res.stderr
    lines = [line.split() for line in res.stdout.splitlines() if line.strip()]
    assert lines[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    assert lines[1][0:2] == [group, member_id] and lines[1][3:] == ["cg-test-client", "2"]
    res = strom("consumer-groups", "--describe", "--group", group, "--state", *bs)
    assert res.returncode == 0, res.stderr
    state_lines = [line.split() for line in res.stdout.splitlines() if line.strip()]
    assert state_lines[0] == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    assert state_lines[1][0] == group and state_lines[1][-2:] == ["Stable", "1"]

    res = strom("consumer-groups", "--reset-offsets", "--to-latest", "--all-topics", "--execute", "--group", group, *bs)
    assert res.returncode == 1
    assert (f"Assignments can only be reset if the group '{group}' is inactive, but the current state is Stable."
            in res.stderr)
    res = strom("consumer-groups", "--delete", "--group", group, *bs)
    assert res.returncode == 1
    assert f"* Group '{group}' could not be deleted due to: " in res.stdout
    assert "The group is not empty" in res.stdout

    member.close()

    def deleted() -> bool:
        return strom("consumer-groups", "--delete", "--group", group, *bs).returncode == 0

    wait_for(deleted, timeout=30, what="the group to be deletable once its member left")
    assert group not in strom("consumer-groups", "--list", *bs).stdout.splitlines()
    res = strom("consumer-groups", "--describe", "--group", group, *bs)
    assert res.returncode == 1 and f"Consumer group '{group}' does not exist." in res.stdout


def kafka_consumer_groups(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    jar = needs_tools()
    cmd = ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dlog4j2.level=WARN", "-cp",
           f"{classpath(ensure_jars())}{os.pathsep}{jar}",
           "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server", bootstrap, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)


def _tables(stdout: str) -> list[str]:
    # Kafka's tool may log its client config to stdout; the table starts at its header.
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP "))
    return [line for line in lines[start:] if line.strip() and not line.startswith(("[", "\t"))]


def _compare(strom: Run, bootstrap: str, *args: str) -> None:
    theirs = kafka_consumer_groups(bootstrap, *args)
    assert theirs.returncode == 0, theirs.stderr[-2000:]
    ours = strom("consumer-groups", *args, "--bootstrap-server", bootstrap)
    assert ours.returncode == 0, ours.stderr
    ours_t, theirs_t = _tables(ours.stdout), _tables(theirs.stdout)
    if args[0] == "--reset-offsets":  # Kafka prints the plan in a HashMap's order
        ours_t, theirs_t = ours_t[:1] + sorted(ours_t[1:]), theirs_t[:1] + sorted(theirs_t[1:])
    assert ours_t == theirs_t, args


@pytest.mark.reference  # runs Kafka's own tool from the reference jars
def test_tables_match_kafkas_tool(broker: Any, strom: Run) -> None:
    """Kafka 4.3.1's kafka-consumer-groups.sh and strom's print the same tables for an empty
    group and for one with a live member, --verbose variants included."""
    run = uuid.uuid4().hex[:8]
    topic, group = f"cg-ref-{run}", f"cg-ref-group-{run}"
    make_topic_with_offsets(broker.bootstrap, topic, group)
    _compare(strom, broker.bootstrap, "--reset-offsets", "--to-earliest", "--all-topics", "--dry-run", "--group", group)
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "cg-ref-client",
                       "enable.auto.commit": False})
    try:
        for with_member in (False, True):
            if with_member:
                member.subscribe([topic])

                def assigned() -> bool:
                    member.poll(0.2)
                    return len(member.assignment()) == 2

                wait_for(assigned, timeout=30, what="the member's assignment")
            views: tuple[tuple[str, ...], ...] = ((), ("--verbose",), ("--state",), ("--state", "--verbose"),
                                                  ("--members",), ("--members", "--verbose"))
            # Each run of Kafka's tool starts a JVM: the empty group gets the three plain views.
            for extra in views if with_member else views[::2]:
                _compare(strom, broker.bootstrap, "--describe", "--group", group, *extra)
            for extra in (("--state",), ("--type",)) if with_member else ():
                # Other tests' groups share the broker: compare the header and this group's line.
                theirs = kafka_consumer_groups(broker.bootstrap, "--list", *extra)
                ours = strom("consumer-groups", "--list", *extra, "--bootstrap-server", broker.bootstrap)
                assert ours.returncode == 0, ours.stderr

                def mine(text: str) -> list[str]:
                    lines = _tables(text)
                    return lines[:1] + [line for line in lines[1:] if line.split()[0] == group]

                assert mine(ours.stdout) == mine(theirs.stdout), extra
    finally:
        member.close()
