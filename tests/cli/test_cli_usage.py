"""The ``strom`` command line without a broker: parsing, exit codes, error messages, storage."""

from __future__ import annotations

import base64
import re
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

from strom.core.config import parse_properties

Run = Callable[..., subprocess.CompletedProcess[str]]

UUID_RE = re.compile(r"^[A-Za-z0-9_-]{22}$")


def closed_port() -> int:
    """A loopback port nothing listens on (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- help and usage errors (exit 2) -----------------------------------------------------------


def test_help_lists_commands(strom: Run) -> None:
    res = strom("--help")
    assert res.returncode == 0
    for command in ("dev", "broker", "storage", "topics", "produce", "consume"):
        assert command in res.stdout


def test_no_command_is_a_usage_error(strom: Run) -> None:
    res = strom()
    assert res.returncode == 2
    assert "COMMAND" in res.stderr


def test_unknown_flag_exits_2_and_names_it(strom: Run) -> None:
    res = strom("topics", "create", "--topic", "t", "--bogus")
    assert res.returncode == 2
    assert "unrecognized arguments: --bogus" in res.stderr
    assert "usage: strom topics create" in res.stderr


def test_missing_required_flag(strom: Run) -> None:
    res = strom("produce")
    assert res.returncode == 2
    assert "--topic" in res.stderr


def test_bad_port(strom: Run) -> None:
    res = strom("dev", "--port", "70000")
    assert res.returncode == 2
    assert "--port" in res.stderr and "70000" in res.stderr


def test_override_without_equals(strom: Run, tmp_path: Path) -> None:
    res = strom("dev", "--data-dir", str(tmp_path / "d"), "--override", "num.partitions")
    assert res.returncode == 2
    assert "--override expects key=value" in res.stderr
    assert not (tmp_path / "d").exists()


def test_bad_bootstrap_server(strom: Run) -> None:
    res = strom("topics", "list", "--bootstrap-server", "no-port-here")
    assert res.returncode == 2
    assert "--bootstrap-server" in res.stderr


def test_consume_offset_needs_partition(strom: Run) -> None:
    res = strom("consume", "--topic", "t", "--offset", "5")
    assert res.returncode == 2
    assert "--offset needs --partition" in res.stderr


def test_consume_bad_offset(strom: Run) -> None:
    res = strom("consume", "--topic", "t", "--partition", "0", "--offset", "soon")
    assert res.returncode == 2
    assert "--offset" in res.stderr and "'soon'" in res.stderr


def test_consume_offset_and_from_beginning_conflict(strom: Run) -> None:
    res = strom("consume", "--topic", "t", "--partition", "0", "--offset", "1", "--from-beginning")
    assert res.returncode == 2
    assert "--from-beginning" in res.stderr


def test_unknown_format_property(strom: Run) -> None:
    res = strom("consume", "--topic", "t", "--property", "print.kee=true")
    assert res.returncode == 2
    assert "print.kee" in res.stderr and "print.key" in res.stderr
    res = strom("produce", "--topic", "t", "--property", "parse.key=yes", input="")
    assert res.returncode == 2
    assert "parse.key" in res.stderr


def test_alter_config_needs_a_change(strom: Run) -> None:
    res = strom("topics", "alter-config", "--topic", "t")
    assert res.returncode == 2
    assert "--add-config" in res.stderr


# -- config errors (exit 1, message names the key) --------------------------------------------


def test_bad_broker_config_value_names_the_key(strom: Run, tmp_path: Path) -> None:
    res = strom("dev", "--data-dir", str(tmp_path / "d"), "--override", "log.segment.bytes=lots")
    assert res.returncode == 1
    assert "log.segment.bytes" in res.stderr and "'lots'" in res.stderr
    assert res.stderr.startswith("error: ")
    # Nothing is formatted from an invalid config.
    assert not (tmp_path / "d").exists()


def test_bad_config_file_value_names_the_key(strom: Run, tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={tmp_path / 'logs'}\nnum.partitions=0\n")
    res = strom("storage", "format", "--config", str(props))
    assert res.returncode == 1
    assert "num.partitions" in res.stderr
    assert not (tmp_path / "logs").exists()


def test_missing_config_file(strom: Run, tmp_path: Path) -> None:
    res = strom("broker", "start", "--config", str(tmp_path / "nope.properties"))
    assert res.returncode == 1
    assert "--config" in res.stderr and "nope.properties" in res.stderr


def test_bad_topic_config_is_refused_before_connecting(strom: Run) -> None:
    # No broker listens on this port: the value check comes first, so the answer is immediate.
    bootstrap = f"127.0.0.1:{closed_port()}"
    res = strom("topics", "create", "--topic", "t", "--config", "segment.bytes=1",
                "--bootstrap-server", bootstrap, timeout=20)
    assert res.returncode == 1
    assert "segment.bytes" in res.stderr
    res = strom("topics", "alter-config", "--topic", "t", "--delete-config", "no.such.key",
                "--bootstrap-server", bootstrap, timeout=20)
    assert res.returncode == 1
    assert "no.such.key" in res.stderr


# -- storage -----------------------------------------------------------------------------------


def test_random_uuid_format(strom: Run) -> None:
    ids = set()
    for _ in range(3):
        res = strom("storage", "random-uuid")
        assert res.returncode == 0, res.stderr
        text = res.stdout.strip()
        assert UUID_RE.match(text), text
        assert not text.startswith("-")
        assert len(base64.urlsafe_b64decode(text + "==")) == 16
        ids.add(text)
    assert len(ids) == 3


def _server_properties(tmp_path: Path) -> Path:
    props = tmp_path / "server.properties"
    props.write_text(
        "process.roles=broker,controller\n"
        "node.id=3\n"
        f"log.dirs={tmp_path / 'logs-a'},{tmp_path / 'logs-b'}\n"
        f"metadata.log.dir={tmp_path / 'meta'}\n"
        "listeners=PLAINTEXT://127.0.0.1:0\n")
    return props


def _meta(directory: Path) -> dict[str, str]:
    return parse_properties((directory / "meta.properties").read_text())


def test_format_then_reformat_with_other_cluster_id_is_refused(strom: Run, tmp_path: Path) -> None:
    props = _server_properties(tmp_path)
    first = strom("storage", "random-uuid").stdout.strip()
    second = strom("storage", "random-uuid").stdout.strip()
    res = strom("storage", "format", "--config", str(props), "--cluster-id", first)
    assert res.returncode == 0, res.stderr
    dirs = [tmp_path / "logs-a", tmp_path / "logs-b", tmp_path / "meta"]
    for d in dirs:
        meta = _meta(d)
        assert meta["cluster.id"] == first
        assert meta["node.id"] == "3"
        assert meta["version"] == "1"
    directory_ids = {_meta(d)["directory.id"] for d in dirs}
    assert len(directory_ids) == 3

    for extra in ([], ["--ignore-formatted"]):
        res = strom("storage", "format", "--config", str(props), "--cluster-id", second, *extra)
        assert res.returncode == 1
        assert first in res.stderr
        for d in dirs:
            assert _meta(d)["cluster.id"] == first

    # Same id again: refused without --ignore-formatted (which the message suggests), fine with it.
    res = strom("storage", "format", "--config", str(props), "--cluster-id", first)
    assert res.returncode == 1
    assert "--ignore-formatted" in res.stderr
    res = strom("storage", "format", "--config", str(props), "--cluster-id", first, "--ignore-formatted")
    assert res.returncode == 0, res.stderr
    assert {_meta(d)["directory.id"] for d in dirs} == directory_ids


def test_format_completes_a_partly_formatted_node(strom: Run, tmp_path: Path) -> None:
    props = _server_properties(tmp_path)
    res = strom("storage", "format", "--config", str(props))
    assert res.returncode == 0, res.stderr
    cluster_id = _meta(tmp_path / "meta")["cluster.id"]
    assert UUID_RE.match(cluster_id)
    assert cluster_id in res.stdout
    (tmp_path / "logs-b" / "meta.properties").unlink()
    res = strom("storage", "format", "--config", str(props), "--ignore-formatted")
    assert res.returncode == 0, res.stderr
    assert _meta(tmp_path / "logs-b")["cluster.id"] == cluster_id


def test_format_rejects_a_malformed_cluster_id(strom: Run, tmp_path: Path) -> None:
    props = _server_properties(tmp_path)
    res = strom("storage", "format", "--config", str(props), "--cluster-id", "not-a-uuid")
    assert res.returncode == 2
    assert "--cluster-id" in res.stderr and "random-uuid" in res.stderr
    assert not (tmp_path / "meta").exists()


def test_broker_start_refuses_unformatted_storage(strom: Run, tmp_path: Path) -> None:
    props = _server_properties(tmp_path)
    res = strom("broker", "start", "--config", str(props))
    assert res.returncode == 1
    assert f"strom storage format --config {props}" in res.stderr
    assert "meta.properties" in res.stderr


# -- produce without a broker: line-numbered errors --------------------------------------------


def test_produce_parse_error_names_the_line(strom: Run) -> None:
    bootstrap = f"127.0.0.1:{closed_port()}"
    res = strom("produce", "--topic", "t", "--bootstrap-server", bootstrap,
                "--property", "parse.key=true", "--property", "key.separator=:",
                input="no separator here\n", timeout=30)
    assert res.returncode == 1
    assert "line 1" in res.stderr and "key separator" in res.stderr


def test_produce_reports_failed_records_by_line(strom: Run) -> None:
    # Nobody listens: every record times out, except line 2, which is too large to even queue.
    bootstrap = f"127.0.0.1:{closed_port()}"
    big = "x" * 2_000_000
    res = strom("produce", "--topic", "t", "--bootstrap-server", bootstrap,
                "-X", "message.timeout.ms=1000", input=f"a\n{big}\nc\n", timeout=60)
    assert res.returncode == 1
    lines = res.stderr.splitlines()
    assert any("line 2" in line and "MSG_SIZE_TOO_LARGE" in line for line in lines), res.stderr
    assert any("line 1: delivery failed" in line for line in lines), res.stderr
    assert any("line 3: delivery failed" in line for line in lines), res.stderr
    assert "3 of 3 records failed" in res.stderr


def test_produce_gives_up_when_no_broker_answers(strom: Run) -> None:
    # Kafka's console producer would wait out delivery.timeout.ms (2 minutes); with nobody
    # answering at all the tool stops well within the run's 20 s bound, with the way out.
    res = strom("produce", "--topic", "t", "--bootstrap-server", f"127.0.0.1:{closed_port()}",
                input="a\nb\n", timeout=20)
    assert res.returncode == 1
    assert "start one with `strom dev`" in res.stderr and "2 record(s) not sent" in res.stderr
    assert "delivery failed" not in res.stderr


def test_consume_timeout_bounds_connecting(strom: Run) -> None:
    # Without a cluster the metadata wait used to be a fixed 30 s, whatever --timeout-ms said.
    res = strom("consume", "--topic", "t", "--timeout-ms", "1000", "--bootstrap-server",
                f"127.0.0.1:{closed_port()}", timeout=15)
    assert res.returncode == 1
    assert "start one with `strom dev`" in res.stderr
