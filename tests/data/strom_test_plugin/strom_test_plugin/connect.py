"""A third-party Connect source connector, offered through this package's ``strom.plugins``
entry point (``strom_connect_plugins`` in ``__init__``), for strom's plugin-discovery tests.

``strom_test_plugin.connect.CountdownSourceConnector`` (alias ``CountdownSource``): each task
emits string records ``<prefix>-<task>-<n>`` for n = count-1 .. 0 (a countdown, so the values
are unmistakably this plugin's), keyed ``<task>``, into ``topic``; ``count`` per task (default
10). The source partition is ``{"countdown": <task>}`` and the offset ``{"left": n}``: a
restarted task resumes below the last committed ``n``.
"""

from __future__ import annotations

import time

from strom.connect.api.config import ConfigDef, ConfigType, Importance
from strom.connect.api.connector import SourceConnector
from strom.connect.api.records import SourceRecord
from strom.connect.api.task import SourceTask, Task
from strom.connect.data import Schema

VERSION = "0.1.0"

CONFIG_DEF = (
    ConfigDef()
    .define("topic", ConfigType.STRING, importance=Importance.HIGH, doc="Topic to write to")
    .define("count", ConfigType.INT, 10, importance=Importance.MEDIUM, doc="Records per task")
    .define("prefix", ConfigType.STRING, "countdown", importance=Importance.LOW, doc="Value prefix")
)


class CountdownSourceTask(SourceTask):
    def version(self) -> str:
        return VERSION

    def start(self, props: dict[str, str]) -> None:
        parsed = CONFIG_DEF.parse(props)
        self.topic: str = parsed["topic"]
        self.prefix: str = parsed["prefix"]
        self.task = int(props["task.index"])
        self.partition = {"countdown": self.task}
        assert self.context is not None
        committed = self.context.offset_storage_reader.offset(self.partition)
        # The next value to emit: one below the last committed one, or the top of the countdown.
        self.next = int(parsed["count"]) - 1 if committed is None else int(committed["left"]) - 1

    def poll(self) -> list[SourceRecord] | None:
        if self.next < 0:
            time.sleep(0.05)  # done: do not spin the worker thread
            return None
        out = []
        for n in range(self.next, max(-1, self.next - 5), -1):
            out.append(SourceRecord(self.partition, {"left": n}, self.topic, None, Schema.STRING_SCHEMA,
                                    str(self.task), Schema.STRING_SCHEMA, f"{self.prefix}-{self.task}-{n}"))
        self.next -= len(out)
        return out

    def stop(self) -> None:
        pass


class CountdownSourceConnector(SourceConnector):
    def version(self) -> str:
        return VERSION

    def start(self, props: dict[str, str]) -> None:
        CONFIG_DEF.parse(props)  # fail the connector, not its tasks, on a bad config
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return CountdownSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self.props, "task.index": str(i)} for i in range(max_tasks)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return CONFIG_DEF
