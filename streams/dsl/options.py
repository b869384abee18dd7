"""Parameter objects of the DSL: Consumed, Produced, Grouped, Materialized, Named, Branched,
Repartitioned, Joined — Kafka's names, with ``with_`` for Java's ``with`` (a Python keyword).

Each is a small immutable-by-convention value; ``with_*`` methods return a modified copy.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, TypeVar

from strom.streams.exceptions import TopologyError

_T = TypeVar("_T")


def _replace(obj: _T, **changes: Any) -> _T:
    new = copy.copy(obj)
    for k, v in changes.items():
        setattr(new, k, v)
    return new


class Named:
    """A name for the processor node an operation creates."""

    def __init__(self, name: str | None = None) -> None:
        if name is not None and not name:
            raise TopologyError("a Named name must not be empty")
        self.name = name

    @classmethod
    def as_(cls, name: str) -> Named:
        return cls(name)


class Consumed:
    """Serdes (and node name) for reading a topic."""

    def __init__(self, key_serde: Any = None, value_serde: Any = None, name: str | None = None) -> None:
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.name = name

    @classmethod
    def with_(cls, key_serde: Any = None, value_serde: Any = None) -> Consumed:
        return cls(key_serde, value_serde)

    @classmethod
    def as_(cls, name: str) -> Consumed:
        return cls(name=name)

    def with_key_serde(self, serde: Any) -> Consumed:
        return _replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> Consumed:
        return _replace(self, value_serde=serde)

    def with_name(self, name: str) -> Consumed:
        return _replace(self, name=name)


class Produced:
    """Serdes, partitioner and node name for writing a topic."""

    def __init__(self, key_serde: Any = None, value_serde: Any = None, name: str | None = None,
                 partitioner: Callable[[str, Any, Any, int], int | None] | None = None) -> None:
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.name = name
        self.partitioner = partitioner

    @classmethod
    def with_(cls, key_serde: Any = None, value_serde: Any = None) -> Produced:
        return cls(key_serde, value_serde)

    @classmethod
    def as_(cls, name: str) -> Produced:
        return cls(name=name)

    def with_key_serde(self, serde: Any) -> Produced:
        return _replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> Produced:
        return _replace(self, value_serde=serde)

    def with_name(self, name: str) -> Produced:
        return _replace(self, name=name)

    def with_stream_partitioner(self, partitioner: Callable[[str, Any, Any, int], int | None]) -> Produced:
        return _replace(self, partitioner=partitioner)


class Grouped:
    """Serdes and the name of the repartition topic of a grouping."""

    def __init__(self, key_serde: Any = None, value_serde: Any = None, name: str | None = None) -> None:
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.name = name

    @classmethod
    def with_(cls, key_serde: Any = None, value_serde: Any = None) -> Grouped:
        return cls(key_serde, value_serde)

    @classmethod
    def as_(cls, name: str) -> Grouped:
        return cls(name=name)

    def with_key_serde(self, serde: Any) -> Grouped:
        return _replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> Grouped:
        return _replace(self, value_serde=serde)

    def with_name(self, name: str) -> Grouped:
        return _replace(self, name=name)


class Repartitioned:
    """Name, serdes and partition count of an explicit ``KStream.repartition()``."""

    def __init__(self, key_serde: Any = None, value_serde: Any = None, name: str | None = None,
                 num_partitions: int | None = None) -> None:
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.name = name
        self.num_partitions = num_partitions

    @classmethod
    def with_(cls, key_serde: Any = None, value_serde: Any = None) -> Repartitioned:
        return cls(key_serde, value_serde)

    @classmethod
    def as_(cls, name: str) -> Repartitioned:
        return cls(name=name)

    def with_number_of_partitions(self, n: int) -> Repartitioned:
        if n < 1:
            raise TopologyError(f"number of partitions must be >= 1, got {n}")
        return _replace(self, num_partitions=n)

    def with_key_serde(self, serde: Any) -> Repartitioned:
        return _replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> Repartitioned:
        return _replace(self, value_serde=serde)


class Materialized:
    """Name, serdes and kind of the store behind a KTable or an aggregation.

    A plain string wherever a Materialized is accepted means ``Materialized.as_(name)``.
    """

    def __init__(self, store_name: str | None = None, key_serde: Any = None, value_serde: Any = None,
                 store_type: str = "rocksdb", logging_enabled: bool = True,
                 store_supplier: Callable[[], Any] | None = None, caching_enabled: bool = True) -> None:
        if store_type not in ("rocksdb", "in_memory"):
            raise TopologyError(f"store_type must be 'rocksdb' or 'in_memory', got {store_type!r}")
        self.store_name = store_name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.store_type = store_type
        self.logging_enabled = logging_enabled
        self.store_supplier = store_supplier
        #: whether the record cache sits in front of the store (Kafka's default: on)
        self.caching_enabled = caching_enabled
        #: window/session stores: how long windows stay queryable (None: window size + grace)
        self.retention_ms: int | None = None

    @classmethod
    def as_(cls, store: str | Callable[[], Any]) -> Materialized:
        if isinstance(store, str):
            return cls(store)
        return cls(getattr(store, "name", None), store_supplier=store)

    @classmethod
    def with_(cls, key_serde: Any = None, value_serde: Any = None) -> Materialized:
        return cls(None, key_serde, value_serde)

    @classmethod
    def of(cls, m: Materialized | str | None) -> Materialized:
        """Normalise the ``materialized`` argument of DSL methods."""
        if m is None:
            return cls()
        if isinstance(m, str):
            return cls(m)
        if isinstance(m, Materialized):
            return m
        raise TopologyError(f"materialized must be a Materialized or a store name, got {m!r}")

    def with_key_serde(self, serde: Any) -> Materialized:
        return _replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> Materialized:
        return _replace(self, value_serde=serde)

    def with_store_type(self, store_type: str) -> Materialized:
        if store_type not in ("rocksdb", "in_memory"):
            raise TopologyError(f"store_type must be 'rocksdb' or 'in_memory', got {store_type!r}")
        return _replace(self, store_type=store_type)

    def with_retention(self, retention_ms: int) -> Materialized:
        """Keep windows of a windowed aggregation this long (ms) after their start, for
        interactive queries; at least window size + grace (checked when the store is built)."""
        if not isinstance(retention_ms, int) or retention_ms < 0:
            raise TopologyError(f"retention must be a non-negative int of milliseconds, got {retention_ms!r}")
        return _replace(self, retention_ms=retention_ms)

    def with_logging_disabled(self) -> Materialized:
        return _replace(self, logging_enabled=False)

    def with_logging_enabled(self) -> Materialized:
        return _replace(self, logging_enabled=True)

    def with_caching_disabled(self) -> Materialized:
        """No record cache in front of this store (Kafka's ``withCachingDisabled()``): every
        update is written to the store and its changelog and forwarded downstream at once, as
        with ``statestore.cache.max.bytes`` = 0 for this store alone.

        Honoured by key-value and time-window aggregations (count/aggregate/reduce, windowed
        ones too); session and sliding-window stores have no record cache yet, so for them the
        flag is accepted and has no effect.
        """
        return _replace(self, caching_enabled=False)

    def with_caching_enabled(self) -> Materialized:
        """Put the record cache in front of this store again (Kafka's ``withCachingEnabled()``;
        the default). Its size is the task's share of ``statestore.cache.max.bytes``."""
        return _replace(self, caching_enabled=True)


class Branched:
    """Name and optional chain function of one branch of ``KStream.split()``."""

    def __init__(self, name: str | None = None, chain: Callable[[Any], Any] | None = None,
                 consume: bool = False) -> None:
        self.name = name
        self.chain = chain
        self.consume = consume  # chain is a consumer: the branch is not returned

    @classmethod
    def as_(cls, name: str) -> Branched:
        return cls(name)

    @classmethod
    def with_function(cls, chain: Callable[[Any], Any], name: str | None = None) -> Branched:
        return cls(name, chain)

    @classmethod
    def with_consumer(cls, chain: Callable[[Any], None], name: str | None = None) -> Branched:
        return cls(name, chain, consume=True)


class Joined:
    """Serdes and name of a stream-table join."""

    def __init__(self, key_serde: Any = None, value_serde: Any = None, other_value_serde: Any = None,
                 name: str | None = None) -> None:
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.other_value_serde = other_value_serde
        self.name = name

    @classmethod
    def with_(cls, key_serde: Any = None, value_serde: Any = None, other_value_serde: Any = None) -> Joined:
        return cls(key_serde, value_serde, other_value_serde)

    @classmethod
    def as_(cls, name: str) -> Joined:
        return cls(name=name)
