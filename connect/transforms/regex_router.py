"""``RegexRouter``: rename the topic when the whole topic name matches ``regex``, to
``replacement`` with Java's ``$1``/``${name}`` group references (Kafka's keys)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from strom.connect.api.config import ConfigDef, ConfigType, Importance, LambdaValidator
from strom.connect.exceptions import ConfigException
from strom.connect.transforms._base import BaseTransformation

REGEX, REPLACEMENT = "regex", "replacement"


_JAVA_NAMED_GROUP = re.compile(r"(?<!\\)\(\?<(?=[A-Za-z])")


def compile_java_regex(pattern: str) -> re.Pattern[str]:
    """Compile a Java regex: Java's named groups ``(?<name>...)`` become Python's ``(?P<name>...)``."""
    return re.compile(_JAVA_NAMED_GROUP.sub("(?P<", pattern))


def _valid_regex(name: str, value: Any) -> None:
    try:
        compile_java_regex(str(value))
    except re.error as e:
        raise ConfigException(name, value, f"Invalid regex: {e}") from None


REGEX_VALIDATOR = LambdaValidator.with_(_valid_regex, "valid regex")

CONFIG_DEF = (
    ConfigDef()
    .define(REGEX, ConfigType.STRING, validator=REGEX_VALIDATOR, importance=Importance.HIGH,
            doc="Regular expression to use for matching.")
    .define(REPLACEMENT, ConfigType.STRING, importance=Importance.HIGH, doc="Replacement string.")
)


def java_replacement(match: re.Match[str], replacement: str) -> str:
    """Expand a Java ``Matcher.replaceFirst`` replacement (``$n``, ``${name}``, ``\\`` escapes)."""
    out: list[str] = []
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\":
            i += 1
            if i >= n:
                raise ConfigException(REPLACEMENT, replacement, "character to be escaped is missing")
            out.append(replacement[i])
            i += 1
        elif c == "$":
            i += 1
            if i >= n:
                raise ConfigException(REPLACEMENT, replacement, "Illegal group reference: group index is missing")
            if replacement[i] == "{":
                end = replacement.find("}", i)
                if end == -1:
                    raise ConfigException(REPLACEMENT, replacement, "named capturing group is missing trailing '}'")
                out.append(match.group(replacement[i + 1:end]) or "")
                i = end + 1
            elif replacement[i].isdigit():
                # Java takes further digits while the group number stays valid.
                group = int(replacement[i])
                i += 1
                while i < n and replacement[i].isdigit() and group * 10 + int(replacement[i]) <= match.re.groups:
                    group = group * 10 + int(replacement[i])
                    i += 1
                if group > match.re.groups:
                    raise ConfigException(REPLACEMENT, replacement, f"No group {group}")
                out.append(match.group(group) or "")
            else:
                raise ConfigException(REPLACEMENT, replacement, "Illegal group reference")
        else:
            out.append(c)
            i += 1
    return "".join(out)


class RegexRouter(BaseTransformation):
    """``org.apache.kafka.connect.transforms.RegexRouter``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.RegexRouter"

    @classmethod
    def config_def(cls) -> ConfigDef:
        return CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.parse(configs)
        self.regex = compile_java_regex(c[REGEX])
        self.replacement: str = c[REPLACEMENT]

    def apply(self, record: Any) -> Any:
        m = self.regex.fullmatch(record.topic)
        if m is None:
            return record
        topic = java_replacement(m, self.replacement)
        return record.new_record(topic, record.kafka_partition, record.key_schema, record.key,
                                 record.value_schema, record.value, record.timestamp)
