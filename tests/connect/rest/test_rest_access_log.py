"""The Connect REST server logs each request at INFO, as Kafka Connect's request log does:
client, time, request line, status, size, referer, user agent and duration in ms. Over the
real StandaloneHerder on the bundled broker, through a real HTTP client."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import requests

from strom.connect.plugins import PluginRegistry
from strom.connect.rest import RestServer
from strom.connect.runtime.config import WorkerConfig
from strom.connect.runtime.standalone import StandaloneHerder
from strom.core.testing import BrokerProcess, wait_for

LINE = re.compile(r'127\.0\.0\.1 - - \[\d{2}/\w{3}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}\] "(\w+) (\S+) HTTP/1\.1" '
                  r'(\d{3}) (\d+|-) "-" "(strom-test/1\.0)" (\d+)')


def test_each_request_is_logged(broker: BrokerProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = WorkerConfig.from_mapping({
        "bootstrap.servers": broker.bootstrap, "listeners": "http://127.0.0.1:0",
        "offset.storage.file.filename": str(tmp_path / "offsets.dat")})
    herder = StandaloneHerder(config, PluginRegistry())
    rest = RestServer.from_worker_config(herder, config)
    caplog.set_level(logging.INFO, logger="strom.connect.rest.server")
    herder.start()
    rest.start()
    try:
        headers = {"User-Agent": "strom-test/1.0"}
        assert requests.get(rest.url + "/connectors", headers=headers, timeout=30).status_code == 200
        assert requests.get(rest.url + "/connectors/nope", headers=headers, timeout=30).status_code == 404

        def logged() -> list[tuple[str, ...]]:
            found = [LINE.search(r.getMessage()) for r in caplog.records if r.name == "strom.connect.rest.server"]
            return [m.groups() for m in found if m]

        lines = wait_for(lambda: len(logged()) >= 2 and logged(), timeout=10, what="two access log lines")
        assert [(m, p, s) for m, p, s, *_ in lines] == [("GET", "/connectors", "200"),
                                                         ("GET", "/connectors/nope", "404")]
        assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "strom.connect.rest.server")
    finally:
        rest.stop()
        herder.stop()
