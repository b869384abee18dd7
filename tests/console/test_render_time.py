"""The topics page with 1,000 topics renders in under a second (issue 24's bound), measured in
headless Chromium with performance.now() from the route's start (API call included) to the frame
after the table is in the DOM. The figure is printed; bench/console_render.py measures it alone.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.testing import BrokerProcess
from tests.console.conftest import RunningConsole, open_page, shot, start_console

TOPICS = 1000
BOUND_MS = 1000.0


def create_topics(bootstrap: str, n: int, prefix: str = "many") -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"{prefix}-{i:04d}" for i in range(n)]
    for i in range(0, n, 200):
        futs = admin.create_topics([NewTopic(t, 1, 1) for t in names[i:i + 200]], request_timeout=60)
        for f in futs.values():
            f.result(timeout=60)


@pytest.fixture(scope="module")
def many_topics_console() -> Iterator[RunningConsole]:
    with tempfile.TemporaryDirectory() as d, BrokerProcess(Path(d)) as b:
        create_topics(b.bootstrap, TOPICS)
        yield from start_console(b.bootstrap)


@pytest.mark.slow
def test_topics_page_with_1000_topics_renders_under_a_second(browser: Any,
                                                             many_topics_console: RunningConsole,
                                                             tmp_path: Path) -> None:
    url = many_topics_console.url
    open_page(browser, url + "/#/overview", "overview")
    times = []
    for _ in range(3):  # the first includes warming the page's JS; the bound holds for each
        open_page(browser, url + "/#/overview", "overview")
        r = open_page(browser, url + "/#/topics", "topics")
        rows = browser.execute_script("return document.querySelectorAll('#topics tbody tr').length;")
        assert rows >= TOPICS
        times.append(r["ms"])
    shot(browser, tmp_path, "topics-1000")
    print(f"topics page with {TOPICS} topics rendered in {', '.join(f'{t:.0f}' for t in times)} ms")
    # Generous margin over the measured figure (see the report / bench); fails only on a real regression.
    assert max(times) < BOUND_MS, times
