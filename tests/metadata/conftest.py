"""Fixtures: a real MetadataSystem on a temporary metadata dir (formatted like `strom format`).

``async def`` tests run under ``asyncio.run`` (no pytest-asyncio dependency).
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from strom.core.config import BrokerConfig
from strom.core.controller.metadata_system import MetadataSystem
from strom.core.metadata.bootstrap import format_storage, random_uuid

LISTENERS = [("PLAINTEXT", "127.0.0.1", 9092, 0)]

OpenSystem = Callable[..., Awaitable[MetadataSystem]]


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        names = pyfuncitem._fixtureinfo.argnames
        kwargs: dict[str, Any] = {n: pyfuncitem.funcargs[n] for n in names}
        asyncio.run(pyfuncitem.obj(**kwargs))
        return True
    return None


def make_config(tmp_path: Path, **extra: object) -> BrokerConfig:
    return BrokerConfig.from_mapping({"node.id": 1, "log.dirs": str(tmp_path / "logs"),
                                      "metadata.log.dir": str(tmp_path / "meta"), **extra})


@pytest.fixture
def config(tmp_path: Path) -> BrokerConfig:
    cfg = make_config(tmp_path)
    format_storage(cfg, random_uuid())
    return cfg


@pytest.fixture
def listeners() -> list[tuple[str, str, int, int]]:
    return list(LISTENERS)


@pytest.fixture
def open_system() -> OpenSystem:
    async def open_(config: BrokerConfig, *, register: bool = True) -> MetadataSystem:
        system = MetadataSystem.open(config)
        await system.start()
        if register:
            await system.controller.register_broker(config.node_id, LISTENERS, None, uuid.uuid4())
        return system

    return open_
