# mypy: disable-error-code="arg-type"
# (kio types fields with phantom NewTypes - GroupId; plain strs are what they are at run time.)
"""Differential: Kafka 4.3.1's own ``kafka-share-groups.sh`` against strom and against Apache Kafka.

The tool is ``org.apache.kafka.tools.consumer.group.ShareGroupCommand`` from the reference's
kafka-tools jar (what bin/kafka-share-groups.sh runs). One scenario runs on each broker: a topic
of two partitions with ten records on partition 0 (timestamps a second apart), a share group reading
from the earliest offset (group config ``share.auto.offset.reset``), one confluent-kafka
``ShareConsumer`` that reads and accepts the ten records. While it is a member: --list,
--describe --members, --describe --state, and the changes the tool refuses on a group with
members (--reset-offsets, --delete-offsets, --delete). After it closes: --describe (offsets and
lag after the acknowledgements), --reset-offsets --to-earliest / --to-latest / --to-datetime
(dry run and --execute; Kafka 4.3.1's tool has no --to-offset), --delete-offsets, --delete and
--list again.

Each command's output is compared line by line with the broker address, the member id and
column padding taken out. Left out on purpose: the group and member epochs of --verbose (Kafka
bumps the group epoch once per share-partition initialization; that is the heartbeat's
business, not this tool's), and --describe right after the member's acknowledgements (when
Kafka's share-partition leader writes its state, start offset or delivered count, is its own
timing: the same run showed "- -", then "0 0", on Kafka).
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer
from diff_wire import WireClient
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka_ref import KafkaRef, classpath, ensure_jars
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from ref_fixtures import HasBootstrap, skip_without_java
from share_kit import set_group_config

pytestmark = pytest.mark.slow  # two brokers, ~30 runs of a JVM tool: about a minute

SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
RECORDS = 10
Seen = dict[str, Any]


def share_groups_tool(bootstrap: str, *args: str) -> tuple[int, str]:
    """One run of kafka-share-groups.sh; (exit code, stdout + stderr)."""
    cmd = ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath(ensure_jars()),
           SHARE_GROUP_COMMAND, "--bootstrap-server", bootstrap, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def normalized(text: str, bootstrap: str, group: str, topic: str) -> list[str]:
    """The output's non-blank lines with names made neutral and columns single-spaced; Java
    stack frames (the tool prints one on a failed describe) left out. In a member table the
    second column, the member id, is MEMBER."""
    out = []
    members = False
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("at "):
            continue
        words = line.replace(bootstrap, "BROKER").replace(group, "GROUP").replace(topic, "TOPIC").split()
        if words[:2] == ["GROUP", "CONSUMER-ID"]:
            members = True
        elif members and words[0] == "GROUP" and len(words) > 1:
            words[1] = "MEMBER"
        out.append(" ".join(words))
    return out


def produce(c: WireClient, topic: str, first_ms: int) -> None:
    """Ten records on partition 0, one second apart from ``first_ms`` (recent: a timestamp older
    than retention.ms would let the broker delete them)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(RECORDS):
        builder.append(i, timestamp=first_ms + 1000 * i, key=None, value=b"r%d" % i, headers=[])
    batch = bytes(builder.build())
    # A broker that just made the topic may answer NOT_LEADER_OR_FOLLOWER once: retry.
    deadline = time.monotonic() + 30
    while (error := c.produce_batches({(topic, 0): batch})[(topic, 0)]) != 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert error == 0, f"produce to {topic}-0 failed with error {error}"


def iso_utc(ms: int) -> str:
    """--to-datetime's format (yyyy-MM-ddTHH:mm:ss.SSS, with a zone)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def group_state(c: WireClient, group: str) -> str:
    resp = c.request(ShareGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False))
    return str(resp.groups[0].group_state)


def observe(bootstrap: str, run: str, first_ms: int) -> Seen:
    seen: Seen = {"crashed": []}
    topic, group = f"sgt-topic-{run}", f"sgt-group-{run}"

    def tool(case: str, *args: str, with_group: bool = True) -> None:
        rc, text = share_groups_tool(bootstrap, *(("--group", group) if with_group else ()), *args)
        seen[case] = (rc, normalized(text, bootstrap, group, topic))

    try:
        with WireClient(bootstrap) as c:
            c.create_topic(topic, 2)
            c.wait_for_leaders(topic, 2)
            produce(c, topic, first_ms)
            c.wait_for_coordinator(group)
            set_group_config(bootstrap, group, {"share.auto.offset.reset": "earliest"})
            consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "sgt-client",
                                      "share.acknowledgement.mode": "explicit"})
            try:
                consumer.subscribe([topic])
                received: set[int] = set()
                deadline = time.monotonic() + 60
                while len(received) < RECORDS and time.monotonic() < deadline:
                    for m in consumer.poll(0.5):
                        offset = m.offset()
                        if m.error() is None and offset is not None:
                            received.add(offset)
                            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                # Acknowledged before the tool looks: the start offset moves past the records.
                consumer.commit_sync()
                seen["consumed"] = sorted(received)
                # --list shows every share group of the broker: keep ours.
                rc, text = share_groups_tool(bootstrap, "--list")
                seen["list_with_member"] = (rc, [x for x in normalized(text, bootstrap, group, topic) if x == "GROUP"])
                tool("describe_members", "--describe", "--members")
                tool("describe_state", "--describe", "--state")
                tool("reset_with_member", "--reset-offsets", "--to-earliest", "--topic", topic, "--execute")
                tool("delete_offsets_with_member", "--delete-offsets", "--topic", topic)
                tool("delete_with_member", "--delete")
            finally:
                consumer.close()  # sends the last acknowledgements and leaves the group
            deadline = time.monotonic() + 30
            while group_state(c, group) != "Empty" and time.monotonic() < deadline:
                time.sleep(0.1)
            tool("describe_state_empty", "--describe", "--state")
            tool("reset_to_earliest", "--reset-offsets", "--to-earliest", "--topic", topic, "--execute")
            tool("describe_after_earliest", "--describe")
            tool("reset_to_latest", "--reset-offsets", "--to-latest", "--all-topics", "--execute")
            tool("describe_after_latest", "--describe")
            tool("reset_to_datetime_dry_run", "--reset-offsets", "--to-datetime", iso_utc(first_ms + 4000),
                 "--topic", f"{topic}:0", "--dry-run")
            tool("reset_to_datetime", "--reset-offsets", "--to-datetime", iso_utc(first_ms + 4000),
                 "--topic", f"{topic}:0", "--execute")
            tool("describe_verbose_after_datetime", "--describe", "--verbose")
            tool("delete_offsets", "--delete-offsets", "--topic", topic)
            tool("describe_after_delete_offsets", "--describe")
            tool("delete", "--delete")
            rc, text = share_groups_tool(bootstrap, "--list")
            seen["list_after_delete"] = (rc, [x for x in normalized(text, bootstrap, group, topic) if x == "GROUP"])
            tool("describe_deleted", "--describe")
    except Exception as e:  # the cases not reached say where the scenario stopped
        seen["crashed"].append(f"{type(e).__name__}: {e}")
    return seen


# What Kafka 4.3.1 printed (checked by hand when this test was written), so a harness mistake
# cannot make a case vacuous: the member read everything, the refusals, the offsets after.
KAFKA_EXPECTED: Seen = {
    "consumed": list(range(RECORDS)),
    "list_with_member": (0, ["GROUP"]),
    "reset_with_member": (1, ["Share group 'GROUP' is not empty."]),
    "describe_after_earliest": (0, ["GROUP TOPIC PARTITION START-OFFSET LAG", "GROUP TOPIC 0 0 10",
                                    "GROUP TOPIC 1 0 0"]),
    "describe_after_latest": (0, ["GROUP TOPIC PARTITION START-OFFSET LAG", "GROUP TOPIC 0 10 0",
                                  "GROUP TOPIC 1 0 0"]),
    "list_after_delete": (0, []),
}

CASES = [
    "consumed", "list_with_member", "describe_members", "describe_state", "reset_with_member",
    "delete_offsets_with_member", "delete_with_member", "describe_state_empty", "reset_to_earliest",
    "describe_after_earliest", "reset_to_latest", "describe_after_latest", "reset_to_datetime_dry_run",
    "reset_to_datetime", "describe_verbose_after_datetime", "delete_offsets", "describe_after_delete_offsets",
    "delete", "list_after_delete", "describe_deleted",
]


@pytest.fixture(scope="module")
def observations(strom: HasBootstrap, kafka: KafkaRef) -> Iterator[tuple[Seen, Seen]]:
    skip_without_java()
    run = uuid.uuid4().hex[:8]
    first_ms = (int(time.time()) - 60) * 1000
    # The two scenarios are independent: side by side (each is mostly JVM start-ups of the tool).
    with ThreadPoolExecutor(2) as pool:
        theirs = pool.submit(observe, kafka.bootstrap, run, first_ms)
        ours = pool.submit(observe, strom.bootstrap, run, first_ms)
        yield ours.result(), theirs.result()


@pytest.mark.parametrize("case", CASES)
def test_matches_kafka(case: str, observations: tuple[Seen, Seen]) -> None:
    ours, theirs = observations
    assert case in theirs, f"Kafka's scenario did not get this far: {theirs.get('crashed')}"
    if case in KAFKA_EXPECTED:
        assert theirs[case] == KAFKA_EXPECTED[case], f"Kafka did not answer as documented: {theirs[case]}"
    assert case in ours, f"strom's scenario did not get this far: {ours.get('crashed')}"
    assert ours[case] == theirs[case], f"\nstrom: {ours[case]}\nKafka: {theirs[case]}\nKafka's run: {theirs}"


def test_every_observation_is_a_case(observations: tuple[Seen, Seen]) -> None:
    ours, theirs = observations
    assert theirs["crashed"] == [] and ours["crashed"] == []
    assert set(theirs) - {"crashed"} == set(CASES)
