"""DatagenConnector: mock records for demos and benchmarks (Confluent datagen's quickstarts).

Keys: ``kafka.topic``, ``quickstart`` (users | pageviews | orders), ``iterations`` (records per
task, -1 unbounded), ``max.interval`` (ms; a random pause up to this between records, as
Confluent's), ``rate`` (records per second per task; when > 0 it replaces ``max.interval``),
``random.seed`` (same seed -> same records, per task ``seed + task id``), ``batch.size``.

Values are Structs with the quickstart's schema; keys are the quickstart's key field. The source
partition is ``{"task.id": n}`` and the offset ``{"current.iteration": i}``: a restarted task
replays its generator to ``i`` and continues, so a seeded run yields exactly the same records
with or without restarts.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from strom.connect.api.config import ConfigDef, ConfigType, Importance, NonEmptyString, Range, ValidString
from strom.connect.api.connector import ExactlyOnceSupport, SourceConnector
from strom.connect.api.records import SourceRecord
from strom.connect.api.task import SourceTask, Task
from strom.connect.data import Schema, SchemaBuilder, Struct

TASK_ID = "task.id"
ITERATION = "current.iteration"


@dataclass(frozen=True)
class Quickstart:
    value_schema: Schema
    key_field: str
    make: Callable[[random.Random, int], Struct]

    @property
    def key_schema(self) -> Schema:
        field = self.value_schema.field(self.key_field)
        assert field is not None
        return field.schema


_USERS = (SchemaBuilder.struct().name("ksql.users")
          .field("registertime", Schema.INT64_SCHEMA).field("userid", Schema.STRING_SCHEMA)
          .field("regionid", Schema.STRING_SCHEMA).field("gender", Schema.STRING_SCHEMA).build())
_PAGEVIEWS = (SchemaBuilder.struct().name("ksql.pageviews")
              .field("viewtime", Schema.INT64_SCHEMA).field("userid", Schema.STRING_SCHEMA)
              .field("pageid", Schema.STRING_SCHEMA).build())
_ADDRESS = (SchemaBuilder.struct().name("ksql.address").field("city", Schema.STRING_SCHEMA)
            .field("state", Schema.STRING_SCHEMA).field("zipcode", Schema.INT64_SCHEMA).build())
_ORDERS = (SchemaBuilder.struct().name("ksql.orders")
           .field("ordertime", Schema.INT64_SCHEMA).field("orderid", Schema.INT32_SCHEMA)
           .field("itemid", Schema.STRING_SCHEMA).field("orderunits", Schema.FLOAT64_SCHEMA)
           .field("address", _ADDRESS).build())

_GENDERS = ("MALE", "FEMALE", "OTHER")
_CITIES = (("City_1", "State_1"), ("City_2", "State_2"), ("City_3", "State_3"), ("City_4", "State_4"))


def _users(rng: random.Random, i: int) -> Struct:
    return (Struct(_USERS).put("registertime", rng.randint(1487715775521, 1519273364600))
            .put("userid", f"User_{rng.randint(1, 9)}").put("regionid", f"Region_{rng.randint(1, 9)}")
            .put("gender", rng.choice(_GENDERS)))


def _pageviews(rng: random.Random, i: int) -> Struct:
    return (Struct(_PAGEVIEWS).put("viewtime", 1 + 10 * i).put("userid", f"User_{rng.randint(1, 9)}")
            .put("pageid", f"Page_{rng.randint(1, 99)}"))


def _orders(rng: random.Random, i: int) -> Struct:
    city, state = rng.choice(_CITIES)
    address = Struct(_ADDRESS).put("city", city).put("state", state).put("zipcode", rng.randint(10000, 99999))
    return (Struct(_ORDERS).put("ordertime", rng.randint(1487715775521, 1519273364600)).put("orderid", i)
            .put("itemid", f"Item_{rng.randint(1, 999)}").put("orderunits", round(rng.uniform(0.1, 10.0), 4))
            .put("address", address))


QUICKSTARTS: dict[str, Quickstart] = {
    "users": Quickstart(_USERS, "userid", _users),
    "pageviews": Quickstart(_PAGEVIEWS, "viewtime", _pageviews),
    "orders": Quickstart(_ORDERS, "orderid", _orders),
}

CONFIG_DEF = (
    ConfigDef()
    .define("kafka.topic", ConfigType.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
            doc="Topic to write to")
    .define("quickstart", ConfigType.STRING, "users", validator=ValidString.in_(*QUICKSTARTS),
            importance=Importance.HIGH, doc="Which schema and data to generate")
    .define("iterations", ConfigType.LONG, 1_000_000, validator=Range.at_least(-1), importance=Importance.MEDIUM,
            doc="Records each task generates; -1 never stops")
    .define("max.interval", ConfigType.LONG, 500, validator=Range.at_least(0), importance=Importance.MEDIUM,
            doc="Longest random pause between records, in ms (0: none)")
    .define("rate", ConfigType.DOUBLE, 0.0, validator=Range.at_least(0), importance=Importance.MEDIUM,
            doc="Records per second per task; when > 0 it replaces max.interval")
    .define("random.seed", ConfigType.LONG, None, importance=Importance.LOW,
            doc="Seed of the generator; the same seed gives the same records")
    .define("batch.size", ConfigType.INT, 1000, validator=Range.at_least(1), importance=Importance.LOW,
            doc="Most records per poll")
)


class DatagenConnector(SourceConnector):
    """Generates quickstart records; ``tasks.max`` independent generators."""

    # Confluent's class name, so configs written for kafka-connect-datagen run unchanged (the
    # registry resolves it, and the short names DatagenConnector / Datagen keep working).
    KAFKA_CLASS_NAME = "io.confluent.kafka.connect.datagen.DatagenConnector"

    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def start(self, props: dict[str, str]) -> None:
        CONFIG_DEF.parse(props)
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        return DatagenTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self._props, TASK_ID: str(i)} for i in range(max_tasks)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return CONFIG_DEF

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        # Only a seeded generator replays the same records after a restart.
        return ExactlyOnceSupport.SUPPORTED if props.get("random.seed") else ExactlyOnceSupport.UNSUPPORTED


class DatagenTask(SourceTask):
    """Generates records of one quickstart, paced by ``rate`` or ``max.interval``."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._count = 0
        self._next_at = 0.0

    def start(self, props: dict[str, str]) -> None:
        cfg = CONFIG_DEF.parse(props)
        self.topic: str = cfg["kafka.topic"]
        self.quickstart = QUICKSTARTS[cfg["quickstart"]]
        self.iterations: int = cfg["iterations"]
        self.max_interval_s: float = cfg["max.interval"] / 1000.0
        self.rate: float = cfg["rate"]
        self.batch_size: int = cfg["batch.size"]
        self.task_id = int(props.get(TASK_ID, "0"))
        seed = cfg["random.seed"]
        self._rng = random.Random(None if seed is None else seed + self.task_id)
        self._pace_rng = random.Random()
        self._partition = {TASK_ID: self.task_id}
        self._stop.clear()
        self._count = 0
        stored = self.context.offset_storage_reader.offset(self._partition) if self.context else None
        if stored is not None and isinstance(stored.get(ITERATION), int):
            # Replay the generator so a seeded run continues with the records it would have made.
            for i in range(stored[ITERATION]):
                self.quickstart.make(self._rng, i)
            self._count = stored[ITERATION]
        self._next_at = time.monotonic()

    def _pause(self) -> float:
        if self.rate > 0:
            return 1.0 / self.rate
        # A generator of its own: pacing must not shift the seeded data sequence.
        return self._pace_rng.uniform(0, self.max_interval_s) if self.max_interval_s > 0 else 0.0

    def poll(self) -> list[SourceRecord] | None:
        if 0 <= self.iterations <= self._count:
            self._stop.wait(0.5)  # done: idle until stopped
            return None
        wait = self._next_at - time.monotonic()
        if wait > 0 and self._stop.wait(wait):
            return None
        out: list[SourceRecord] = []
        qs, key_field, key_schema = self.quickstart, self.quickstart.key_field, self.quickstart.key_schema
        now_ms = int(time.time() * 1000)
        while len(out) < self.batch_size and not (0 <= self.iterations <= self._count):
            value = qs.make(self._rng, self._count)
            self._count += 1
            out.append(SourceRecord(self._partition, {ITERATION: self._count}, self.topic, None, key_schema,
                                    value.get(key_field), qs.value_schema, value, now_ms))
            pause = self._pause()
            if pause > 0:
                self._next_at = max(self._next_at, time.monotonic() - 1.0) + pause
                if self._next_at > time.monotonic():
                    break  # the rest of this batch is not due yet
        return out

    def stop(self) -> None:
        self._stop.set()


def generate(quickstart: str, count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` records of a quickstart as plain dicts (for checks and examples)."""
    rng = random.Random(seed)
    qs = QUICKSTARTS[quickstart]
    return [qs.make(rng, i).to_dict() for i in range(count)]
