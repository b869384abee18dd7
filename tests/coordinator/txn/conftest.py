"""Make the raw-wire helpers of tests/conformance importable (``--import-mode=importlib``)."""

from __future__ import annotations

import sys
from pathlib import Path

_WIRE = str(Path(__file__).resolve().parents[2] / "conformance")
if _WIRE not in sys.path:
    sys.path.append(_WIRE)
