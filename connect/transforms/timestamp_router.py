"""``TimestampRouter``: route to a topic built from the topic and the record timestamp.

Kafka's keys: ``topic.format`` (default ``${topic}-${timestamp}``) and ``timestamp.format`` (a
Java date pattern, default ``yyyyMMdd``, UTC). A record without a timestamp is a DataException.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strom.connect.api.config import ConfigDef, ConfigType, Importance
from strom.connect.exceptions import DataException
from strom.connect.transforms._base import BaseTransformation
from strom.connect.transforms.java_date_format import JavaDateFormat

TOPIC_FORMAT, TIMESTAMP_FORMAT = "topic.format", "timestamp.format"

CONFIG_DEF = (
    ConfigDef()
    .define(TOPIC_FORMAT, ConfigType.STRING, default="${topic}-${timestamp}", importance=Importance.HIGH,
            doc="Format string which can contain <code>${topic}</code> and <code>${timestamp}</code> as "
                "placeholders for the topic and timestamp, respectively.")
    .define(TIMESTAMP_FORMAT, ConfigType.STRING, default="yyyyMMdd", importance=Importance.HIGH,
            doc="Format string for the timestamp that is compatible with <code>java.text.SimpleDateFormat</code>.")
)


class TimestampRouter(BaseTransformation):
    """``org.apache.kafka.connect.transforms.TimestampRouter``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.TimestampRouter"

    @classmethod
    def config_def(cls) -> ConfigDef:
        return CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.parse(configs)
        self.topic_format: str = c[TOPIC_FORMAT]
        self.timestamp_format = JavaDateFormat(c[TIMESTAMP_FORMAT], TIMESTAMP_FORMAT)

    def apply(self, record: Any) -> Any:
        if record.timestamp is None:
            raise DataException(f"Timestamp missing on record: {record}")
        formatted = self.timestamp_format.format_millis(record.timestamp)
        topic = self.topic_format.replace("${topic}", record.topic).replace("${timestamp}", formatted)
        return record.new_record(topic, record.kafka_partition, record.key_schema, record.key,
                                 record.value_schema, record.value, record.timestamp)
