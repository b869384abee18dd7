"""The console tools end to end against a real broker: strom's, and Apache Kafka's for reference."""

from __future__ import annotations

import functools
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from strom.core.testing import wait_for

Run = Callable[..., subprocess.CompletedProcess[str]]


wait_until = functools.partial(wait_for, timeout=20.0)


def describe_configs(strom: Run, bootstrap: str, topic: str) -> dict[str, str]:
    res = strom("topics", "describe", "--topic", topic, "--bootstrap-server", bootstrap)
    assert res.returncode == 0, res.stderr
    configs = res.stdout.splitlines()[0].split("\tConfigs: ", 1)[1]
    out: dict[str, str] = {}
    last = ""
    for item in filter(None, configs.split(",")):
        if "=" in item:
            last, value = item.split("=", 1)
            out[last] = value
        else:  # Kafka joins list values with the same comma as the pairs: cleanup.policy=compact,delete
            out[last] += "," + item
    return out


def test_topics_create_list_describe_alter_delete(any_broker: Any, strom: Run, topic_name: str) -> None:
    bs = ("--bootstrap-server", any_broker.bootstrap)
    res = strom("topics", "create", "--topic", topic_name, "--partitions", "3",
                "--config", "retention.ms=3600000", *bs)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"Created topic {topic_name}."

    res = strom("topics", "create", "--topic", topic_name, *bs)
    assert res.returncode == 1
    assert "already exists" in res.stderr and "--if-not-exists" in res.stderr
    assert strom("topics", "create", "--topic", topic_name, "--if-not-exists", *bs).returncode == 0

    res = strom("topics", "list", *bs)
    assert res.returncode == 0, res.stderr
    assert topic_name in res.stdout.splitlines()

    res = strom("topics", "describe", "--topic", topic_name, *bs)
    assert res.returncode == 0, res.stderr
    head, *parts = res.stdout.splitlines()
    m = re.fullmatch(rf"Topic: {topic_name}\tTopicId: ([A-Za-z0-9_-]{{22}})\tPartitionCount: 3\t"
                     r"ReplicationFactor: 1\tConfigs: (.*)", head)
    assert m, head
    assert "retention.ms=3600000" in m.group(2).split(",")
    assert len(parts) == 3
    for i, line in enumerate(parts):
        assert re.fullmatch(rf"\tTopic: {topic_name}\tPartition: {i}\tLeader: (\d+)\tReplicas: \1\tIsr: \1",
                            line), line

    res = strom("topics", "alter-config", "--topic", topic_name,
                "--add-config", "cleanup.policy=[compact,delete],segment.ms=100000",
                "--delete-config", "retention.ms", *bs)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"Completed updating config for topic {topic_name}."
    configs = wait_until(lambda: (c := describe_configs(strom, any_broker.bootstrap, topic_name))
                         .get("segment.ms") == "100000" and c, what="altered configs")
    assert configs["cleanup.policy"] == "compact,delete"
    assert "retention.ms" not in configs

    res = strom("topics", "delete", "--topic", topic_name, *bs)
    assert res.returncode == 0, res.stderr
    wait_until(lambda: topic_name not in strom("topics", "list", *bs).stdout.splitlines(),
               what="topic to disappear")
    res = strom("topics", "delete", "--topic", topic_name, *bs)
    assert res.returncode == 1
    assert "does not exist" in res.stderr
    assert strom("topics", "delete", "--topic", topic_name, "--if-exists", *bs).returncode == 0
    res = strom("topics", "describe", "--topic", topic_name, *bs)
    assert res.returncode == 1
    assert "does not exist" in res.stderr


KEYED_INPUT = "h1:a,h2:b\tk1:v1\n\tk2:v2\nx:1\tk3:v3 with spaces:and colon\n"
PRODUCE_PROPS = ("--property", "parse.key=true", "--property", "key.separator=:",
                 "--property", "parse.headers=true")


def test_produce_keys_and_headers_then_consume_them_in_order(any_broker: Any, strom: Run,
                                                             topic_name: str) -> None:
    bs = ("--bootstrap-server", any_broker.bootstrap)
    assert strom("topics", "create", "--topic", topic_name, "--partitions", "1", *bs).returncode == 0
    res = strom("produce", "--topic", topic_name, *PRODUCE_PROPS, *bs, input=KEYED_INPUT)
    assert res.returncode == 0, res.stderr

    res = strom("consume", "--topic", topic_name, "--from-beginning", "--max-messages", "3",
                "--timeout-ms", "30000", "--property", "print.key=true", "--property", "print.headers=true",
                *bs)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "h1:a,h2:b\tk1\tv1",
        "NO_HEADERS\tk2\tv2",
        "x:1\tk3\tv3 with spaces:and colon",
    ]
    assert "Processed a total of 3 messages" in res.stderr

    # From an explicit offset of one partition, with offsets and a custom separator.
    res = strom("consume", "--topic", topic_name, "--partition", "0", "--offset", "1", "--timeout-ms", "3000",
                "--property", "print.offset=true", "--property", "print.key=true",
                "--property", "key.separator=|", *bs)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["Offset:1|k2|v2", "Offset:2|k3|v3 with spaces:and colon"]
    assert "Processed a total of 2 messages" in res.stderr


def test_produce_compressed_with_progress(any_broker: Any, strom: Run, topic_name: str) -> None:
    bs = ("--bootstrap-server", any_broker.bootstrap)
    assert strom("topics", "create", "--topic", topic_name, "--partitions", "2", *bs).returncode == 0
    n = 20000
    lines = "".join(f"record-{i}\n" for i in range(n))
    res = strom("produce", "--topic", topic_name, "--compression-type", "zstd", "--acks", "1",
                "--progress-interval", "0.01", *bs, input=lines)
    assert res.returncode == 0, res.stderr
    assert re.search(r"^produce: \d+ sent, \d+ delivered, 0 failed", res.stderr, re.M), res.stderr
    res = strom("consume", "--topic", topic_name, "--from-beginning", "--max-messages", str(n),
                "--timeout-ms", "30000", *bs)
    assert res.returncode == 0, res.stderr
    assert sorted(res.stdout.splitlines()) == sorted(f"record-{i}" for i in range(n))


def test_consume_missing_topic(any_broker: Any, strom: Run, topic_name: str) -> None:
    res = strom("consume", "--topic", topic_name, "--timeout-ms", "1000",
                "--bootstrap-server", any_broker.bootstrap)
    assert res.returncode == 1
    assert "does not exist" in res.stderr and "strom topics create" in res.stderr


def test_consume_stops_cleanly_on_sigint(any_broker: Any, strom: Run, topic_name: str) -> None:
    bs = ("--bootstrap-server", any_broker.bootstrap)
    assert strom("topics", "create", "--topic", topic_name, *bs).returncode == 0
    assert strom("produce", "--topic", topic_name, *bs, input="only one\n").returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "strom.core.cli", "consume", "--topic", topic_name,
                             "--from-beginning", *bs], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "only one\n"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Processed a total of 1 messages" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_consume_isolation_levels_read_plain_records(any_broker: Any, strom: Run, topic_name: str,
                                                     isolation: str) -> None:
    bs = ("--bootstrap-server", any_broker.bootstrap)
    assert strom("topics", "create", "--topic", topic_name, *bs).returncode == 0
    assert strom("produce", "--topic", topic_name, "--sync", *bs, input="a\nb\n").returncode == 0
    res = strom("consume", "--topic", topic_name, "--from-beginning", "--isolation-level", isolation,
                "--max-messages", "2", "--timeout-ms", "30000", *bs)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["a", "b"]


def test_consume_with_group_commits_offsets(kafka_ref: Any, strom: Run, topic_name: str) -> None:
    """--group subscribes and commits (checked against Apache Kafka until strom has groups)."""
    bs = ("--bootstrap-server", kafka_ref.bootstrap)
    assert strom("topics", "create", "--topic", topic_name, "--partitions", "2", *bs).returncode == 0
    assert strom("produce", "--topic", topic_name, *bs, input="a\nb\nc\n").returncode == 0
    group = f"g-{topic_name}"
    res = strom("consume", "--topic", topic_name, "--group", group, "--from-beginning", "--max-messages", "3",
                "--timeout-ms", "30000", *bs)
    assert res.returncode == 0, res.stderr
    assert sorted(res.stdout.splitlines()) == ["a", "b", "c"]
    assert strom("produce", "--topic", topic_name, *bs, input="d\n").returncode == 0
    res = strom("consume", "--topic", topic_name, "--group", group, "--from-beginning", "--max-messages", "1",
                "--timeout-ms", "30000", *bs)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["d"]
