"""A typo in a config key is reported where the user looks, naming the key meant, and does not
stop the process: a real broker started with ``--override num.partition=3`` and a real Connect
worker whose file says ``bootstrap.server``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import AdminClient

from strom.core.testing import BrokerProcess

HINT = "unknown config 'num.partition' (did you mean 'num.partitions'?) in --override"


def test_broker_override_typo_is_logged_once_and_the_broker_starts(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", config={"num.partition": "3"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        metadata = admin.list_topics(timeout=30)
        assert metadata.brokers, "the broker serves Metadata"
        assert broker.log_text().count(HINT) == 1, broker.log_tail()


def test_connect_worker_file_typo_names_bootstrap_servers(tmp_path: Path) -> None:
    worker = tmp_path / "worker.properties"
    worker.write_text("bootstrap.server=127.0.0.1:9093\noffset.storage.file.filename=" + str(tmp_path / "o") + "\n")
    connector = tmp_path / "broken.json"
    connector.write_text("{")  # refused right after the worker file is read: nothing connects anywhere
    out = subprocess.run([sys.executable, "-m", "strom.core.cli", "connect", "standalone", str(worker), str(connector)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 2, out.stderr
    line = ("The configuration 'bootstrap.server' was supplied but isn't a known config. "
            "(did you mean 'bootstrap.servers'?) in worker.properties")
    assert out.stderr.count(line) == 1, out.stderr
