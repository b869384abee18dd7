"""The console against Apache Kafka 4.x (the reference broker): it uses only confluent-kafka's
AdminClient and Consumer, so the same API answers for any Kafka cluster."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
import requests
from confluent_kafka import Producer
from kafka_ref import KafkaRef
from ref_fixtures import kafka_ref  # noqa: F401 (fixture)

from strom.core.testing import wait_for
from tests.console.conftest import RunningConsole, start_console


@pytest.fixture(scope="module")
def kafka_console(kafka_ref: KafkaRef) -> Iterator[RunningConsole]:  # noqa: F811
    yield from start_console(kafka_ref.bootstrap)


def test_console_api_against_apache_kafka(kafka_console: RunningConsole, kafka_ref: KafkaRef) -> None:  # noqa: F811
    url = kafka_console.url
    assert requests.get(url + "/api/overview", timeout=30).json()["brokers"]
    topic = f"console-{uuid.uuid4().hex[:8]}"
    r = requests.post(url + "/api/topics", json={"name": topic, "partitions": 2}, timeout=30)
    assert r.status_code == 201, r.text
    p = Producer({"bootstrap.servers": kafka_ref.bootstrap})
    p.produce(topic, key="k", value=json.dumps({"a": 1}), partition=0)
    assert p.flush(20) == 0
    t = wait_for(lambda: (d := requests.get(f"{url}/api/topics/{topic}", timeout=30).json())
                 .get("partitions", [{}])[0].get("end_offset") == 1 and d, timeout=30, what="end offset 1")
    assert len(t["partitions"]) == 2 and any(c["name"] == "retention.ms" for c in t["configs"])
    m = requests.get(f"{url}/api/topics/{topic}/messages", params={"partition": "0"}, timeout=30).json()
    assert [(x["key"]["text"], json.loads(x["value"]["json"])) for x in m["records"]] == [("k", {"a": 1})]
    assert requests.delete(f"{url}/api/topics/{topic}", timeout=30).status_code == 200
