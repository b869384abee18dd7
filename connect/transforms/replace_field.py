"""``ReplaceField$Key`` / ``ReplaceField$Value``: keep, drop and rename fields.

Kafka's keys: ``exclude`` (dropped fields), ``include`` (if set, only these are kept), ``renames``
(``old:new`` pairs), ``replace.null.with.default``; the deprecated ``blacklist``/``whitelist``
still work as aliases of ``exclude``/``include``. A field is kept when it is not excluded and
``include`` is empty or names it; ``renames`` apply to kept fields by their original name.
Null values (tombstones) pass unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from strom.connect.api.config import ConfigDef, ConfigType, Importance
from strom.connect.data import SchemaBuilder, Struct
from strom.connect.exceptions import ConfigException
from strom.connect.transforms._base import (
    REPLACE_NULL_WITH_DEFAULT_CONFIG,
    REPLACE_NULL_WITH_DEFAULT_DOC,
    BaseTransformation,
    KeyOrValue,
    SchemaCache,
    copy_schema_basics,
    require_map,
    require_struct,
    struct_get,
)

PURPOSE = "field replacement"
EXCLUDE, INCLUDE, RENAMES = "exclude", "include", "renames"


def parse_renames(mappings: list[str]) -> dict[str, str]:
    """``["a:b", ...]`` -> ``{"a": "b"}``; ConfigException for a malformed pair."""
    out: dict[str, str] = {}
    for mapping in mappings:
        parts = mapping.split(":")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ConfigException(RENAMES, mappings, f"Invalid rename mapping: {mapping}")
        out[parts[0]] = parts[1]
    return out


CONFIG_DEF = (
    ConfigDef()
    .define(EXCLUDE, ConfigType.LIST, default=[], importance=Importance.MEDIUM,
            doc="Fields to exclude. This takes precedence over the fields to include.")
    .define(INCLUDE, ConfigType.LIST, default=[], importance=Importance.MEDIUM,
            doc="Fields to include. If specified, only these fields will be used.")
    .define(RENAMES, ConfigType.LIST, default=[], importance=Importance.MEDIUM,
            doc="Field rename mappings, as comma-separated old:new pairs.")
    .define("blacklist", ConfigType.LIST, default=None, importance=Importance.LOW,
            doc="Deprecated. Use exclude instead.")
    .define("whitelist", ConfigType.LIST, default=None, importance=Importance.LOW,
            doc="Deprecated. Use include instead.")
    .define(REPLACE_NULL_WITH_DEFAULT_CONFIG, ConfigType.BOOLEAN, default=True, importance=Importance.MEDIUM,
            doc=REPLACE_NULL_WITH_DEFAULT_DOC)
)


class ReplaceField(KeyOrValue, BaseTransformation):
    """Kafka's ``ReplaceField``; use :class:`ReplaceFieldKey` or :class:`ReplaceFieldValue`."""

    Key: ClassVar[type[ReplaceField]]
    Value: ClassVar[type[ReplaceField]]

    @classmethod
    def config_def(cls) -> ConfigDef:
        return CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        configs = dict(configs or {})
        # Kafka's ConfigUtils.translateDeprecatedConfigs: the old name fills the new one.
        for old, new in (("blacklist", EXCLUDE), ("whitelist", INCLUDE)):
            if old in configs and new not in configs:
                configs[new] = configs[old]
        c = self.parse(configs)
        self.exclude = set(c[EXCLUDE] or ())
        self.include = set(c[INCLUDE] or ())
        self.renames = parse_renames(list(c[RENAMES] or ()))
        self.reverse_renames = {v: k for k, v in self.renames.items()}
        self.replace_null_with_default = bool(c[REPLACE_NULL_WITH_DEFAULT_CONFIG])
        self._cache = SchemaCache()

    def filter(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def renamed(self, name: str) -> str:
        return self.renames.get(name, name)

    def reverse_renamed(self, name: str) -> str:
        return self.reverse_renames.get(name, name)

    def apply(self, record: Any) -> Any:
        value = self.operating_value(record)
        if value is None:
            return record
        if self.operating_schema(record) is None:
            original = require_map(value, PURPOSE)
            return self.new_record(record, None,
                                   {self.renamed(k): v for k, v in original.items() if self.filter(k)})
        struct = require_struct(value, PURPOSE)
        schema = self._cache.get(struct.schema)
        if schema is None:
            builder = copy_schema_basics(struct.schema, SchemaBuilder.struct())
            for f in struct.schema.fields or ():
                if self.filter(f.name):
                    builder.field(self.renamed(f.name), f.schema)
            schema = builder.build()
            self._cache.put(struct.schema, schema)
        updated = Struct(schema)
        for f in schema.fields or ():
            updated.put(f.name, struct_get(struct, self.reverse_renamed(f.name), self.replace_null_with_default))
        return self.new_record(record, schema, updated)


class ReplaceFieldKey(ReplaceField):
    """``org.apache.kafka.connect.transforms.ReplaceField$Key``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.ReplaceField$Key"
    IS_KEY = True


class ReplaceFieldValue(ReplaceField):
    """``org.apache.kafka.connect.transforms.ReplaceField$Value``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.ReplaceField$Value"
    IS_KEY = False


ReplaceField.Key = ReplaceFieldKey
ReplaceField.Value = ReplaceFieldValue
