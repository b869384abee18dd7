"""Fixtures of the plugin tests: the third-party test plugin, really pip-installed.

``scripts/test.sh`` installs it (``pip install --no-deps -e tests/data/strom_test_plugin``)
before the tests run; nothing is installed while they run.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

TEST_PLUGIN_DIR = Path(__file__).resolve().parents[1] / "data" / "strom_test_plugin"


def _check_in_fresh_interpreter() -> str:
    """Import the plugin and find its entry point in a new interpreter (as the broker will)."""
    code = ("import importlib.metadata as m, strom_test_plugin;"
            "print([e.value for e in m.entry_points(group='strom.plugins') if e.name == 'strom_test_plugin'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    return out.stdout.strip() + out.stderr.strip()


@pytest.fixture(scope="session")
def test_plugin_installed() -> str:
    """The test plugin's package name, once a new interpreter imports it and finds its entry
    point (group ``strom.plugins``); skips, naming the install command, when it is not installed."""
    seen = _check_in_fresh_interpreter()
    if seen != "['strom_test_plugin']":
        pytest.skip(f"the test plugin is not installed (`{sys.executable} -m pip install --no-deps -e "
                    f"{TEST_PLUGIN_DIR}`, as scripts/test.sh does): {seen[-300:]}")
    importlib.import_module("strom_test_plugin")
    return "strom_test_plugin"
