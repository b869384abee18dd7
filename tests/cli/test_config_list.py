"""`strom config list` prints every supported key from the definitions, and docs/configuration.md
is the same list (scripts/gen_config_docs.py --check fails when it is stale)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from strom.core.config import TOPIC_CONFIG_DEFS, BrokerConfig
from strom.core.tools.config_list import SECTIONS, text

REPO = Path(__file__).resolve().parents[2]
Run = Callable[..., subprocess.CompletedProcess[str]]


def test_config_list_broker_shows_num_partitions_with_its_default(strom: Run) -> None:
    out = strom("config", "list", "broker")
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split(maxsplit=3) for line in out.stdout.splitlines()[1:]}
    assert rows["num.partitions"][:3] == ["num.partitions", "INT", "1"]
    assert "number of log partitions" in rows["num.partitions"][3]
    # every key of the broker's definition is listed, strom's own ones too
    aliases = {f.alias for f in BrokerConfig.model_fields.values()}
    assert aliases <= set(rows)
    assert "strom.metrics.listener" in rows


def test_config_list_rejects_an_unknown_section(strom: Run) -> None:
    out = strom("config", "list", "brokers")
    assert out.returncode == 2
    assert "invalid choice: 'brokers'" in out.stderr


@pytest.mark.parametrize("section", list(SECTIONS))
def test_every_section_lists_keys_with_a_doc(section: str) -> None:
    lines = text(section).splitlines()
    assert lines[0].split() == ["KEY", "TYPE", "DEFAULT", "DOC"]
    assert len(lines) > 5
    undocumented = [line.split()[0] for line in lines[1:] if len(line.split(maxsplit=3)) < 3]
    assert len(undocumented) < len(lines) // 4, undocumented


def test_topic_section_is_the_topic_table() -> None:
    listed = [line.split()[0] for line in text("topic").splitlines()[1:]]
    assert listed == [d.name for d in TOPIC_CONFIG_DEFS]


def test_the_configuration_page_is_generated_from_the_definitions() -> None:
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_config_docs.py"), "--check"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    page = (REPO / "docs" / "configuration.md").read_text()
    assert "| `num.partitions` | INT | `1` |" in page
    assert "| `bootstrap.servers` |" in page
