"""Fixtures of the web console tests: a console served on a free port against the session broker."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import requests

from strom.console.server import Console, serve
from strom.core.testing import BrokerProcess


@dataclass
class RunningConsole:
    url: str
    console: Console


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_console(bootstrap: str, connect_url: str | None = None, read_only: bool = False) -> Iterator[RunningConsole]:
    console = Console(bootstrap, connect_url, read_only=read_only, sample_interval_s=0.5)
    port = _free_port()
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    async def main() -> None:
        await serve(console, "127.0.0.1", port)
        ready.set()

    t = threading.Thread(target=lambda: (loop.run_until_complete(main()), loop.run_forever()), daemon=True)
    t.start()
    assert ready.wait(20), "console did not start"
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while requests.get(url + "/api/info", timeout=5).status_code != 200:
        assert time.monotonic() < deadline
    yield RunningConsole(url, console)
    loop.call_soon_threadsafe(loop.stop)
    t.join(10)


@pytest.fixture(scope="module")
def console(broker: BrokerProcess) -> Iterator[RunningConsole]:
    yield from start_console(broker.bootstrap)
