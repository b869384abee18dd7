# mypy: disable-error-code="arg-type"
# (kio types fields with phantom NewTypes - i32, i64, TopicName, GroupId; plain ints/strs are
# what they are at run time, so only the checker objects.)
"""``strom share-groups`` against strom's broker: the tables of Kafka 4.3.1's kafka-share-groups.sh.

A share group made by AlterShareGroupOffsets (empty, two partitions with start offsets) and one
with a live member (a ShareGroupHeartbeat, no fetching), then every command: --list [--state],
--describe [--verbose], --describe --state [--verbose], --describe --members, the refusals on a
group with a member, --reset-offsets (dry run, --execute) to earliest / latest / a time,
--delete-offsets, --delete. The expected text is what Kafka's own tool printed for the same
commands (tests/differential/test_kafka_share_groups_tool.py runs that tool); the reference test
at the end runs Kafka's tool beside ``strom share-groups`` on the same broker and compares them.
"""

from __future__ import annotations

import base64
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from diff_wire import WireClient
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka_ref import classpath, ensure_jars
from kio.schema.alter_share_group_offsets.v0 import request as alter_req
from kio.schema.share_group_heartbeat.v1 import request as heartbeat_req
from ref_fixtures import skip_without_java

from strom.core.testing import BrokerProcess

RECORDS = 10


@pytest.fixture(scope="module")
def cli_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("share-cli")) as proc:
        yield proc


def strom_share_groups(bootstrap: str, *args: str) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "strom.core.cli", "share-groups", "--bootstrap-server", bootstrap,
                           *args], capture_output=True, text=True, timeout=120, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def kafka_share_groups(bootstrap: str, *args: str) -> tuple[int, str]:
    skip_without_java()
    cmd = ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath(ensure_jars()),
           "org.apache.kafka.tools.consumer.group.ShareGroupCommand", "--bootstrap-server", bootstrap, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def lines(text: str, bootstrap: str) -> list[str]:
    """Non-blank lines, the broker address neutral; columns keep their padding (it is Kafka's)."""
    return [line.rstrip().replace(bootstrap, "BROKER") for line in text.splitlines() if line.strip()]


class Scenario:
    """A topic with ten records on partition 0, an empty group with start offsets 3 and 0 and a
    group with one member (names padded to one length, so the columns do not depend on them)."""

    def __init__(self, bootstrap: str) -> None:
        run = uuid.uuid4().hex[:6]
        self.bootstrap = bootstrap
        self.topic, self.group, self.busy = f"cli-t-{run}", f"cli-g-{run}", f"cli-b-{run}"
        self.first_ms = (int(time.time()) - 60) * 1000
        with WireClient(bootstrap) as c:
            c.create_topic(self.topic, 2)
            c.wait_for_leaders(self.topic, 2)
            builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                                producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
            for i in range(RECORDS):
                builder.append(i, timestamp=self.first_ms + 1000 * i, key=None, value=b"r", headers=[])
            batch = bytes(builder.build())
            deadline = time.monotonic() + 30
            while (err := c.produce_batches({(self.topic, 0): batch})[(self.topic, 0)]) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert err == 0
            c.wait_for_coordinator(self.group)
            resp = c.request(alter_req.AlterShareGroupOffsetsRequest(group_id=self.group, topics=(
                alter_req.AlterShareGroupOffsetsRequestTopic(topic_name=self.topic, partitions=(
                    alter_req.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=3),
                    alter_req.AlterShareGroupOffsetsRequestPartition(partition_index=1, start_offset=0))),)))
            assert int(resp.error_code) == 0
            member = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
            hb = c.request(heartbeat_req.ShareGroupHeartbeatRequest(
                group_id=self.busy, member_id=member, member_epoch=0, rack_id=None,
                subscribed_topic_names=(self.topic,)))
            assert int(hb.error_code) == 0, hb.error_message
            # The partitions are assigned at a heartbeat after the join (they are initialized
            # after it), at most once per group.share.assignment.interval.ms.
            deadline = time.monotonic() + 30
            while hb.assignment is None or not hb.assignment.topic_partitions:
                assert time.monotonic() < deadline, "no assignment"
                time.sleep(0.2)  # heartbeat pacing; the loop's condition is the assignment
                hb = c.request(heartbeat_req.ShareGroupHeartbeatRequest(
                    group_id=self.busy, member_id=member, member_epoch=hb.member_epoch, rack_id=None,
                    subscribed_topic_names=None))
                assert int(hb.error_code) == 0, hb.error_message

    def at(self, seconds: int) -> str:
        ms = self.first_ms + 1000 * seconds
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".000Z"


@pytest.fixture(scope="module")
def scenario(cli_broker: BrokerProcess) -> Scenario:
    return Scenario(cli_broker.bootstrap)


def test_describe_list_and_state(scenario: Scenario) -> None:
    s, b = scenario, scenario.bootstrap
    g, t = s.group, s.topic
    rc, out = strom_share_groups(b, "--list")
    assert rc == 0 and {g, s.busy} <= set(out.split())
    rc, out = strom_share_groups(b, "--list", "--state", "empty")
    assert rc == 0 and f"{g}    Empty" in lines(out, b) and s.busy not in out
    assert strom_share_groups(b, "--describe", "--group", g) == (0, (
        "\nGROUP           TOPIC           PARTITION  START-OFFSET  LAG\n"
        f"{g}    {t}    0          3             7\n"
        f"{g}    {t}    1          0             0\n\n"))
    rc, out = strom_share_groups(b, "--describe", "--group", g, "--verbose")
    assert (rc, lines(out, b)) == (0, ["GROUP           TOPIC           PARTITION  LEADER-EPOCH  START-OFFSET  LAG",
                                      f"{g}    {t}    0          0             3             7",
                                      f"{g}    {t}    1          0             0             0"])
    rc, out = strom_share_groups(b, "--describe", "--group", g, "--state", "--verbose")
    # (stdout, then stderr's note, as both tools print them)
    assert (rc, lines(out, b)) == (0, [
        "GROUP           COORDINATOR (ID)          STATE           GROUP-EPOCH  ASSIGNMENT-EPOCH  #MEMBERS",
        f"{g}    BROKER  (1)      Empty           1            1                 0",
        f"Share group '{g}' has no active members."])
    rc, out = strom_share_groups(b, "--describe", "--group", s.busy, "--members")
    rows = lines(out, b)
    assert rc == 0 and rows[0].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
    assert rows[1].split()[0] == s.busy and rows[1].split()[-2:] == ["2", f"{t}:0,1"]
    rc, out = strom_share_groups(b, "--describe", "--group", s.busy, "--state")
    assert (rc, lines(out, b)[1].split()[-2:]) == (0, ["Stable", "1"])


def test_changes_refused_on_a_group_with_members(scenario: Scenario) -> None:
    s, b = scenario, scenario.bootstrap
    assert strom_share_groups(b, "--reset-offsets", "--group", s.busy, "--topic", s.topic, "--to-earliest",
                              "--execute") == (1, f"Error: Share group '{s.busy}' is not empty.\n")
    rc, out = strom_share_groups(b, "--delete-offsets", "--group", s.busy, "--topic", s.topic)
    assert (rc, lines(out, b)) == (1, ["Error: The group is not empty.", "TOPIC           STATUS",
                                      f"{s.topic}    Error: The group is not empty."])
    rc, out = strom_share_groups(b, "--delete", "--group", s.busy)
    assert (rc, lines(out, b)) == (1, ["Error: Deletion of some share groups failed:",
                                      f"* Group '{s.busy}' could not be deleted due to: "
                                      f"Share group '{s.busy}' is not EMPTY."])


def test_reset_delete_offsets_and_delete(scenario: Scenario) -> None:
    s, b = scenario, scenario.bootstrap
    g, t = s.group, s.topic
    table = "GROUP           TOPIC           PARTITION  NEW-OFFSET"
    rc, out = strom_share_groups(b, "--reset-offsets", "--group", g, "--topic", f"{t}:0", "--to-datetime", s.at(4))
    assert (rc, lines(out, b)) == (0, [table, f"{g}    {t}    0          4"])
    # A dry run (the default) changes nothing.
    assert f"{g}    {t}    0          3             7" in lines(strom_share_groups(b, "--describe", "--group", g)[1], b)
    rc, out = strom_share_groups(b, "--reset-offsets", "--group", g, "--all-topics", "--to-latest", "--execute")
    assert (rc, lines(out, b)) == (0, [table, f"{g}    {t}    0          10", f"{g}    {t}    1          0"])
    rc, out = strom_share_groups(b, "--reset-offsets", "--group", g, "--topic", t, "--to-earliest", "--execute")
    assert (rc, lines(out, b)) == (0, [table, f"{g}    {t}    0          0", f"{g}    {t}    1          0"])
    assert f"{g}    {t}    0          0             10" in lines(strom_share_groups(b, "--describe", "--group", g)[1], b)
    rc, out = strom_share_groups(b, "--delete-offsets", "--group", g, "--topic", t)
    assert (rc, lines(out, b)) == (0, ["TOPIC           STATUS", f"{t}    Successful"])
    assert strom_share_groups(b, "--describe", "--group", g) == (0, f"\nShare group '{g}' has no offset information.\n")
    rc, out = strom_share_groups(b, "--delete-offsets", "--group", g, "--topic", t)
    assert (rc, lines(out, b)) == (1, ["TOPIC           STATUS", f"{t}    Error: There is no offset information to delete."])
    assert strom_share_groups(b, "--delete", "--group", g) == (0, f"Deletion of requested share groups ('{g}') was successful.\n")
    assert g not in strom_share_groups(b, "--list")[1].split()


@pytest.mark.reference
def test_the_tables_are_kafkas(cli_broker: BrokerProcess) -> None:
    """Kafka's tool and strom's print the same lines for the same commands on the same broker."""
    s = Scenario(cli_broker.bootstrap)
    b, g, t = s.bootstrap, s.group, s.topic
    for args in (["--describe", "--group", g], ["--describe", "--group", g, "--verbose"],
                 ["--describe", "--group", g, "--state", "--verbose"], ["--list", "--state", "empty"],
                 ["--reset-offsets", "--group", g, "--topic", f"{t}:0", "--to-datetime", s.at(4), "--dry-run"],
                 ["--delete-offsets", "--group", s.busy, "--topic", t]):
        ours, theirs = strom_share_groups(b, *args), kafka_share_groups(b, *args)
        # --list: Kafka's order is its listing's (a hash map); strom sorts.
        assert (sorted if args[0] == "--list" else list)(lines(ours[1], b)) == \
            (sorted if args[0] == "--list" else list)(lines(theirs[1], b)), args
