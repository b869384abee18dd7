"""The console's pages in a real browser: headless Debian Chromium driven by Selenium.

Each page is opened, checked for what the test put in the cluster, and saved as a screenshot
under the test's tmp dir (the path is printed). Skipped when chromium/chromedriver are absent
(scripts/setup-test-deps.sh installs them).
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from confluent_kafka import Consumer, Producer

from strom.core.testing import BrokerProcess
from tests.console.conftest import RunningConsole, start_console, start_worker

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
pytestmark = pytest.mark.skipif(not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
                                reason="needs Debian's chromium and chromium-driver (scripts/setup-test-deps.sh)")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    opts = Options()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1280,1000", f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def wait(fn: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = fn()
        except Exception:
            v = None
        if v:
            return v
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def open_page(driver: Any, url: str, route: str) -> dict[str, Any]:
    """Open a route and wait for its render to finish; returns window.lastRender."""
    driver.execute_script("window.lastRender = null;")
    driver.get(url)
    result: dict[str, Any] = wait(lambda: driver.execute_script(
        "return window.lastRender && window.lastRender.route === arguments[0] ? window.lastRender : null;",
        route), f"page {route} rendered")
    return result


def shot(driver: Any, shots: Path, name: str) -> None:
    path = shots / f"{name}.png"
    driver.save_screenshot(str(path))
    print(f"screenshot: {path}")


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
    assert str(broker.port) in browser.find_element(By.ID, "brokers").text
    shot(browser, shots, "overview")

    # Create the topic through the page's form.
    open_page(browser, url + "/#/topics", "topics")
    browser.find_element(By.CSS_SELECTOR, "#create-topic input[name=name]").send_keys(topic)
    browser.find_element(By.CSS_SELECTOR, "#create-topic button").click()
    wait(lambda: browser.find_element(By.ID, "topic-name").text == topic, "topic page after create")
    open_page(browser, url + "/#/topics", "topics")
    assert topic in browser.find_element(By.ID, "topics").text
    shot(browser, shots, "topics")

    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        p.produce(topic, key=f"key-{i}", value=json.dumps({"order": i, "item": "marker-xyz" if i == 13 else "x"}))
    assert p.flush(20) == 0
    open_page(browser, f"{url}/#/topic/{topic}", "topic")
    wait(lambda: "20" in browser.find_element(By.ID, "partitions").text, "end offset 20 on the topic page")
    shot(browser, shots, "topic")

    open_page(browser, f"{url}/#/messages/{topic}?search=marker-xyz&format=json", "messages")
    table = browser.find_element(By.ID, "records-table").text
    assert "key-13" in table and '"order": 13' in table and "key-12" not in table
    shot(browser, shots, "messages")

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    m = wait(lambda: (x := c.poll(0.5)) is not None and x.error() is None and x, "a record consumed")
    c.commit(m, asynchronous=False)
    c.close()
    open_page(browser, f"{url}/#/group/{group}", "group")
    assert browser.find_element(By.ID, "total-lag").text == "19"
    shot(browser, shots, "group")
    open_page(browser, url + "/#/groups", "groups")
    assert group in browser.find_element(By.ID, "groups").text
    shot(browser, shots, "groups")

    # A connector, paused from the page.
    src = tmp_path / "source.txt"
    src.write_text("a\nb\n")
    requests.post(f"{url}/api/connectors", json={"name": "file-src", "config": {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "file": str(src), "topic": topic, "tasks.max": "1"}}, timeout=30).raise_for_status()
    open_page(browser, url + "/#/connect", "connect")
    wait(lambda: "RUNNING" in browser.find_element(By.ID, "connectors").text, "connector running")
    browser.find_element(By.CSS_SELECTOR, "button[data-c='file-src'][data-a='pause']").click()
    wait(lambda: "PAUSED" in (open_page(browser, url + "/#/connect", "connect") and
                              browser.find_element(By.ID, "connectors").text), "connector paused")
    shot(browser, shots, "connect")

    open_page(browser, url + "/#/streams", "streams")
    assert "Kafka Streams applications" in browser.find_element(By.ID, "page").text
    shot(browser, shots, "streams")
