"""Helpers for the storage-engine tests: build/validate/append batches to a real Log."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from strom.core.config import LogConfig
from strom.core.log.log import Log, LogAppendInfo
from strom.core.records.builder import SimpleRecord, build_batch, decode_records
from strom.core.records.validate import validate_produce_batches


def make_config(**overrides: Any) -> LogConfig:
    """LogConfig.defaults() with topic keys given as python names (segment_bytes=...)."""
    return LogConfig.defaults().with_overrides({k.replace("_", "."): v for k, v in overrides.items()})


def append(log: Log, records: Sequence[SimpleRecord], epoch: int = 0, **kw: Any) -> LogAppendInfo:
    buf = bytearray(build_batch(records, **kw))
    batches = validate_produce_batches(buf, max_batch_bytes=10**8, now_ms=0,
                                       compacted=log.config.compact)
    return log.append_as_leader(buf, batches, epoch)


def values(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in decode_records(data)]


@pytest.fixture
def cfg() -> Callable[..., LogConfig]:
    return make_config


@pytest.fixture
def appender() -> Callable[..., LogAppendInfo]:
    return append


@pytest.fixture
def decode() -> Callable[[bytes], list[tuple[int, bytes | None, bytes | None]]]:
    return values


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"
