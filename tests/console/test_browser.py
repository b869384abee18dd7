"""The console's pages in a real browser: headless Debian Chromium driven by Selenium.

Each page is opened, checked for what the test put in the cluster, and saved as a screenshot
under the test's tmp dir (the path is printed). Skipped when chromium/chromedriver are absent
(scripts/setup-test-deps.sh installs them).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from confluent_kafka import Consumer, Producer

from strom.core.testing import BrokerProcess
from tests.console.conftest import (
    RunningConsole,
    needs_chromium,
    open_page,
    shot,
    start_console,
    start_worker,
    wait,
)

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def worker_console(broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningConsole]:
    worker = start_worker(tmp_path_factory.mktemp("connect"), broker.bootstrap)
    try:
        yield from start_console(broker.bootstrap, connect_url=worker.url)
    finally:
        worker.stop()


def test_every_page_shows_what_is_in_the_cluster(browser: Any, worker_console: RunningConsole,
                                                  broker: BrokerProcess, tmp_path: Path) -> None:
    url = worker_console.url
    shots = tmp_path / "screenshots"
    shots.mkdir()
    topic, group = f"browse-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"

    open_page(browser, url + "/#/overview", "overview")
    assert str(broker.port) in browser.find_element("id", "brokers").text
    shot(browser, shots, "overview")

    # Create the topic through the page's form.
    open_page(browser, url + "/#/topics", "topics")
    browser.find_element("css selector", "#create-topic input[name=name]").send_keys(topic)
    browser.find_element("css selector", "#create-topic button").click()
    wait(lambda: browser.find_element("id", "topic-name").text == topic, "topic page after create")
    open_page(browser, url + "/#/topics", "topics")
    assert topic in browser.find_element("id", "topics").text
    shot(browser, shots, "topics")

    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        p.produce(topic, key=f"key-{i}", value=json.dumps({"order": i, "item": "marker-xyz" if i == 13 else "x"}))
    assert p.flush(20) == 0
    open_page(browser, f"{url}/#/topic/{topic}", "topic")
    wait(lambda: "20" in browser.find_element("id", "partitions").text, "end offset 20 on the topic page")
    shot(browser, shots, "topic")

    open_page(browser, f"{url}/#/messages/{topic}?search=marker-xyz&format=json", "messages")
    table = browser.find_element("id", "records-table").text
    assert "key-13" in table and '"order": 13' in table and "key-12" not in table
    shot(browser, shots, "messages")

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    m = wait(lambda: (x := c.poll(0.5)) is not None and x.error() is None and x, "a record consumed")
    c.commit(message=m, asynchronous=False)
    c.close()
    open_page(browser, f"{url}/#/group/{group}", "group")
    assert browser.find_element("id", "total-lag").text == "19"
    # The lag chart appears once the sampler has two points for the group (sampled every 0.5 s here).
    wait(lambda: open_page(browser, f"{url}/#/group/{group}?r={time.monotonic()}", "group") and
         browser.find_elements("css selector", "svg.chart polyline"), "lag chart drawn")
    shot(browser, shots, "group")
    open_page(browser, url + "/#/groups", "groups")
    assert group in browser.find_element("id", "groups").text
    shot(browser, shots, "groups")

    # A connector, paused from the page.
    src = tmp_path / "source.txt"
    src.write_text("a\nb\n")
    requests.post(f"{url}/api/connectors", json={"name": "file-src", "config": {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "file": str(src), "topic": topic, "tasks.max": "1"}}, timeout=30).raise_for_status()
    open_page(browser, url + "/#/connect", "connect")
    wait(lambda: "RUNNING" in browser.find_element("id", "connectors").text, "connector running")
    browser.find_element("css selector", "button[data-c='file-src'][data-a='pause']").click()
    # A new hash each time: reopening the same one fires no hashchange, so nothing would re-render.
    wait(lambda: "PAUSED" in (open_page(browser, f"{url}/#/connect?n={time.monotonic()}", "connect") and
                              browser.find_element("id", "connectors").text), "connector paused")
    shot(browser, shots, "connect")
    for action, state in (("resume", "RUNNING"), ("restart", "RUNNING")):
        requests.post(f"{url}/api/connectors/file-src/{action}", timeout=30).raise_for_status()
        wait(lambda s=state: s in (open_page(browser, f"{url}/#/connect?n={time.monotonic()}", "connect") and  # type: ignore[misc]
                                   browser.find_element("id", "connectors").text), f"connector {state}")
    requests.post(f"{url}/api/connectors/file-src/delete", timeout=30).raise_for_status()
    wait(lambda: requests.get(f"{url}/api/connectors", timeout=30).json() == {}, "connector deleted")

    # An error is the broker's message on the page, never a stack trace.
    r = open_page(browser, url + "/#/topic/no-such-topic-here", "topic")
    box = browser.find_element("id", "error").text
    assert "UNKNOWN_TOPIC_OR_PARTITION" in box and "Traceback" not in box and r["error"]
    shot(browser, shots, "error")

    open_page(browser, url + "/#/streams", "streams")
    assert "Kafka Streams applications" in browser.find_element("id", "page").text
    shot(browser, shots, "streams")
