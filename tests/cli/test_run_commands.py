"""``strom dev`` and ``strom broker start`` as real processes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from cli_broker import broker_start

from strom.core.config import parse_properties
from strom.core.testing import BrokerProcess

Run = Callable[..., subprocess.CompletedProcess[str]]


def cluster_id(directory: Path) -> str:
    return parse_properties((directory / "meta.properties").read_text())["cluster.id"]


def test_dev_help_documents_the_default_data_dir(strom: Run) -> None:
    res = strom("dev", "--help")
    assert res.returncode == 0
    assert "./.strom-data" in res.stdout


def test_dev_formats_on_first_run_and_keeps_the_cluster_id(fresh_broker: BrokerProcess, strom: Run) -> None:
    fresh_broker.start()
    data = fresh_broker.data_dir
    first = cluster_id(data / "metadata")
    assert cluster_id(data / "logs") == first
    assert "formatted" in fresh_broker.log_text()
    assert strom("topics", "create", "--topic", "kept", "--bootstrap-server", fresh_broker.bootstrap).returncode == 0
    assert fresh_broker.stop() == 0

    fresh_broker.output.clear()
    fresh_broker.start()
    assert cluster_id(data / "metadata") == first
    assert "strom dev: formatted" not in fresh_broker.log_text()
    res = strom("topics", "list", "--bootstrap-server", fresh_broker.bootstrap)
    assert "kept" in res.stdout.splitlines()
    assert fresh_broker.stop() == 0


def test_broker_start_runs_a_formatted_node(strom: Run, tmp_path: Path) -> None:
    with broker_start(tmp_path) as bootstrap:
        res = strom("topics", "create", "--topic", "from-config", "--bootstrap-server", bootstrap)
        assert res.returncode == 0, res.stderr
    assert (tmp_path / "logs" / "from-config-0").is_dir()


def test_first_dev_run_says_nothing_about_recovery(fresh_broker: BrokerProcess) -> None:
    """A freshly formatted directory has no clean-shutdown marker and nothing to recover: no
    "No clean shutdown marker ... recovering 0 partition(s)" line, which reads like a crash."""
    fresh_broker.start()
    text = fresh_broker.log_text()
    assert "strom dev: formatted" in text
    assert "No clean shutdown marker" not in text
    assert " INFO " in text  # the default level is INFO
    assert fresh_broker.stop() == 0


def test_log_level_from_the_environment(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", env={"STROM_LOG_LEVEL": "WARN"}) as proc:
        text = proc.log_text()
        assert "strom dev: formatted" in text
        assert " INFO " not in text, text


def test_log_level_flag_wins_over_the_environment(tmp_path: Path) -> None:
    # BrokerProcess puts `dev ARGS` after its launcher; this launcher appends the flag to them.
    launcher = [sys.executable, "-c",
                "import sys; from strom.core.cli import main; sys.exit(main(sys.argv[1:] + ['--log-level', 'ERROR']))"]
    with BrokerProcess(tmp_path / "data", env={"STROM_LOG_LEVEL": "DEBUG"}, launcher=launcher) as proc:
        text = proc.log_text()
        assert " INFO " not in text and " DEBUG " not in text, text
