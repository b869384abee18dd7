"""``Filter``: drops every record it is applied to — used with a predicate
(``transforms.f.predicate``, optionally ``negate``) to drop only matching records."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strom.connect.api.config import ConfigDef
from strom.connect.transforms._base import BaseTransformation

CONFIG_DEF = ConfigDef()


class Filter(BaseTransformation):
    """``org.apache.kafka.connect.transforms.Filter``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.transforms.Filter"

    @classmethod
    def config_def(cls) -> ConfigDef:
        return CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        """No settings."""

    def apply(self, record: Any) -> Any:
        return None
