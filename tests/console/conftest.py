"""Fixtures of the web console tests: a console served on a free port against the session broker."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


CONNECT_READY = "strom connect worker started: "


@dataclass
class ConnectWorker:
    """A ``strom connect standalone`` worker subprocess; its REST URL is the one it prints once ready."""

    proc: subprocess.Popen[str]
    url: str

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_worker(tmp: Path, bootstrap: str) -> ConnectWorker:
    props = tmp / "worker.properties"
    props.write_text("\n".join([
        f"bootstrap.servers={bootstrap}", "listeners=http://127.0.0.1:0",
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        "value.converter=org.apache.kafka.connect.storage.StringConverter",
        f"offset.storage.file.filename={tmp / 'offsets.dat'}", "offset.flush.interval.ms=500"]) + "\n")
    proc = subprocess.Popen([sys.executable, "-m", "strom.connect.cli", "standalone", str(props)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if CONNECT_READY in line and not url:
                url.append(line.split(CONNECT_READY, 1)[1].strip().rstrip("/"))
                ready.set()
        ready.set()
    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(60) or not url:
        proc.kill()
        raise AssertionError("Connect worker did not start")
    return ConnectWorker(proc, url[0])


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
needs_chromium = pytest.mark.skipif(not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
                                reason="needs Debian's chromium and chromium-driver (scripts/setup-test-deps.sh)")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("selenium")
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip("needs Debian's chromium and chromium-driver (scripts/setup-test-deps.sh)")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

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
