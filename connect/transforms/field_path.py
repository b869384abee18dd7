"""Kafka's field paths (KIP-821): ``field.syntax.version`` V1 names one top-level field, V2
reads dots as nesting (``a.b.c``) with backticks quoting a name that holds dots
(```a.b`.c``).
"""

from __future__ import annotations

from typing import Any

from strom.connect.api.config import CaseInsensitiveValidString, ConfigDef, ConfigType, Importance
from strom.connect.data import Field, Schema, Struct
from strom.connect.exceptions import ConfigException

FIELD_SYNTAX_VERSION_CONFIG = "field.syntax.version"
FIELD_SYNTAX_VERSION_DOC = (
    "Defines the version of the syntax to access fields. If set to `V1`, then the field paths are "
    "limited to access the elements at the root level of the struct or map. If set to `V2`, the "
    "syntax will support accessing nested elements. To access nested elements, dotted notation is "
    "used. If dots are already included in the field name, then backtick pairs can be used to "
    "wrap field names containing dots.")


def define_syntax_version(config_def: ConfigDef) -> ConfigDef:
    return config_def.define(
        FIELD_SYNTAX_VERSION_CONFIG, ConfigType.STRING, default="V1",
        validator=CaseInsensitiveValidString.in_("V1", "V2"), importance=Importance.HIGH,
        doc=FIELD_SYNTAX_VERSION_DOC)


def split_path(path: str, version: str) -> list[str]:
    """The step names of ``path`` under syntax ``version`` (V1: the whole string)."""
    if version.upper() == "V1" or ("." not in path and "`" not in path):
        return [path]
    steps: list[str] = []
    i, n = 0, len(path)
    while i <= n:
        if i < n and path[i] == "`":
            end = path.find("`", i + 1)
            # A closing backtick counts only when it ends the step.
            while end != -1 and end + 1 < n and path[end + 1] != ".":
                end = path.find("`", end + 1)
            if end == -1:
                raise ConfigException(FIELD_SYNTAX_VERSION_CONFIG, path, "unbalanced backticks in field path")
            steps.append(path[i + 1:end])
            i = end + 2
        else:
            end = path.find(".", i)
            if end == -1:
                end = n
            steps.append(path[i:end])
            i = end + 1
    if any(s == "" for s in steps):
        raise ConfigException(FIELD_SYNTAX_VERSION_CONFIG, path, "empty step in field path")
    return steps


def value_from_map(value: dict[str, Any], steps: list[str]) -> Any:
    current: Any = value
    for step in steps:
        if not isinstance(current, dict):
            return None
        current = current.get(step)
    return current


def field_from(schema: Schema, steps: list[str]) -> Field | None:
    current = schema
    found: Field | None = None
    for step in steps:
        if current is None or current.type.name != "STRUCT":
            return None
        found = current.field(step)
        if found is None:
            return None
        current = found.schema
    return found


def value_from_struct(struct: Struct, steps: list[str], replace_null_with_default: bool) -> Any:
    current: Any = struct
    for step in steps:
        if not isinstance(current, Struct):
            return None
        current = current.get(step) if replace_null_with_default else current.get_without_default(step)
    return current
