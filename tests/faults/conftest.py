"""Fault-test setup: reuse the wire and confluent-kafka helpers that live in tests/conformance.

pytest runs with ``--import-mode=importlib``, which does not put test folders on ``sys.path``.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HELPERS = str(Path(__file__).resolve().parent.parent / "conformance")
if _HELPERS not in sys.path:
    sys.path.insert(0, _HELPERS)
