"""Build kio response entities for a given API version from plain Python values.

kio has one set of classes per message version, with typed fields (``ErrorCode`` enums,
``timedelta`` durations, ``datetime`` timestamps). Handlers are written once for all the
versions they support: they call ``msgs.make("PartitionData", error_code=0, ...)`` with plain
ints and any field the version lacks is dropped; ints are converted to the field's kio type.
"""

from __future__ import annotations

import dataclasses
import datetime
import sys
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

from strom.core.protocol.codec import request_class, response_class

_UTC = datetime.UTC


def _to_error_code(v: Any) -> Any:
    return v if isinstance(v, ErrorCode) else ErrorCode(int(v))


def _to_timedelta(v: Any) -> Any:
    return v if isinstance(v, datetime.timedelta) else datetime.timedelta(milliseconds=int(v))


def _to_datetime(v: Any) -> Any:
    if v is None or isinstance(v, datetime.datetime):
        return v
    return None if v < 0 else datetime.datetime.fromtimestamp(v / 1000, tz=_UTC)


_CONVERTERS = {
    "error_code": _to_error_code,
    "timedelta_i32": _to_timedelta,
    "timedelta_i64": _to_timedelta,
    "datetime_i64": _to_datetime,
}


@cache
def _field_plan(cls: type[Any]) -> dict[str, Any]:
    """name -> converter (or None) for every init field of a kio entity class."""
    plan: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        plan[f.name] = _CONVERTERS.get(f.metadata.get("kafka_type", ""))
    return plan


class Messages:
    """Entity factory for one (API key, version, request|response)."""

    __slots__ = ("module",)

    def __init__(self, module: Any) -> None:
        self.module = module

    def make(self, name: str, /, **values: Any) -> Any:
        cls = getattr(self.module, name)
        plan = _field_plan(cls)
        kwargs = {}
        for key, value in values.items():
            if key in plan:
                conv = plan[key]
                kwargs[key] = conv(value) if conv is not None and value is not None else value
        return cls(**kwargs)

    def has(self, name: str, field: str) -> bool:
        cls = getattr(self.module, name, None)
        return cls is not None and field in _field_plan(cls)


@cache
def response_messages(api_key: int, version: int) -> Messages:
    return Messages(sys.modules[response_class(api_key, version).__module__])


@cache
def request_messages(api_key: int, version: int) -> Messages:
    return Messages(sys.modules[request_class(api_key, version).__module__])


def ms(value: datetime.timedelta | int | None) -> int:
    """A kio duration (timedelta) as milliseconds."""
    if value is None:
        return 0
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)
