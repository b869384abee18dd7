"""Kafka Connect's predicates: ``TopicNameMatches`` (``pattern``), ``HasHeaderKey`` (``name``)
and ``RecordIsTombstone``. The runtime applies ``negate``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strom.connect.api.config import ConfigDef, ConfigType, Importance, NonEmptyString
from strom.connect.api.transforms import Predicate
from strom.connect.transforms.regex_router import REGEX_VALIDATOR, compile_java_regex

PATTERN, NAME = "pattern", "name"


class TopicNameMatches(Predicate):
    """True when the whole topic name matches ``pattern``
    (``org.apache.kafka.connect.transforms.predicates.TopicNameMatches``)."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"
    CONFIG_DEF = ConfigDef().define(
        PATTERN, ConfigType.STRING, validator=REGEX_VALIDATOR, importance=Importance.MEDIUM,
        doc="A Java regular expression for matching against the name of a record's topic.")

    def config(self) -> ConfigDef:
        return self.CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.pattern = compile_java_regex(self.CONFIG_DEF.parse(dict(configs or {}))[PATTERN])

    def test(self, record: Any) -> bool:
        return record.topic is not None and self.pattern.fullmatch(record.topic) is not None


class HasHeaderKey(Predicate):
    """True when the record has at least one header called ``name``
    (``org.apache.kafka.connect.transforms.predicates.HasHeaderKey``)."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.predicates.HasHeaderKey"
    CONFIG_DEF = ConfigDef().define(
        NAME, ConfigType.STRING, validator=NonEmptyString(), importance=Importance.MEDIUM,
        doc="The header name.")

    def config(self) -> ConfigDef:
        return self.CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.name: str = self.CONFIG_DEF.parse(dict(configs or {}))[NAME]

    def test(self, record: Any) -> bool:
        return record.headers.last_with_name(self.name) is not None


class RecordIsTombstone(Predicate):
    """True when the record's value is null
    (``org.apache.kafka.connect.transforms.predicates.RecordIsTombstone``)."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"
    CONFIG_DEF = ConfigDef()

    def config(self) -> ConfigDef:
        return self.CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        """No settings."""

    def test(self, record: Any) -> bool:
        return record.value is None
