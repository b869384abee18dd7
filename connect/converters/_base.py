"""What every built-in converter shares: Kafka's ``converter.type`` handling.

Kafka's ``ConverterConfig`` carries ``converter.type`` (key, value or header); a converter
configured through ``configure(configs, is_key)`` gets it set from ``is_key``, a header
converter through ``configure(configs)`` defaults to ``header``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strom.connect.api.config import ConfigDef, ConfigType, Importance, ValidString

TYPE_CONFIG = "converter.type"
TYPE_DOC = "How this converter will be used."
KEY, VALUE, HEADER = "key", "value", "header"


def converter_config_def() -> ConfigDef:
    """Kafka's ``ConverterConfig.newConfigDef()``: only ``converter.type``."""
    return ConfigDef().define(
        TYPE_CONFIG, ConfigType.STRING, default=VALUE, validator=ValidString.in_(KEY, VALUE, HEADER),
        importance=Importance.LOW, doc=TYPE_DOC,
    )


def with_type(configs: Mapping[str, Any] | None, is_key: bool | None) -> dict[str, Any]:
    """``configs`` with ``converter.type`` set the way Kafka's ``configure(configs, isKey)`` does."""
    conf = dict(configs or {})
    if is_key is None:
        conf.setdefault(TYPE_CONFIG, HEADER)
    else:
        conf[TYPE_CONFIG] = KEY if is_key else VALUE
    return conf
