"""Helpers the transform tests share: a configured transform and the sink and source records
they are applied to (imported as ``from tests.connect.transforms.conftest import ...``)."""

from __future__ import annotations

from typing import Any

from strom.connect.api.records import Headers, SinkRecord, SourceRecord


def make(cls: type, **configs: Any) -> Any:
    """A ``cls`` transform configured with ``configs``; ``__`` in a name stands for ``.``
    (``spec__field`` -> ``spec.field``)."""
    t = cls()
    t.configure({k.replace("__", "."): v for k, v in configs.items()})
    return t


def sink(value_schema: Any = None, value: Any = None, key_schema: Any = None, key: Any = None,
         topic: str = "orders", partition: int = 3, offset: int = 42, timestamp: int | None = 1_600_000_000_123,
         headers: Headers | None = None) -> SinkRecord:
    return SinkRecord(topic, partition, key_schema, key, value_schema, value, kafka_offset=offset,
                      timestamp=timestamp, timestamp_type="CreateTime", headers=headers)


def source(value_schema: Any = None, value: Any = None, key_schema: Any = None, key: Any = None,
           topic: str = "orders", timestamp: int | None = 1_600_000_000_123) -> SourceRecord:
    return SourceRecord({"file": "f"}, {"pos": 1}, topic, 0, key_schema, key, value_schema, value, timestamp)
