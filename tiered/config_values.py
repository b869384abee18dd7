"""Reading one plugin config value (Kafka ``ConfigDef`` style) from a stripped ``rsm.config.`` /
``rlmm.config.`` mapping: the value, or a :class:`~strom.core.exceptions.ConfigError` naming the
key (with the prefix the operator wrote) and what is accepted.

Values arrive as strings from ``.properties`` files and the command line, or typed from YAML/JSON
and tests; both are accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from strom.core.exceptions import ConfigError


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Final = _Required()


class ConfigReader:
    """Typed access to a plugin's configs; ``prefix`` is only for error messages."""

    def __init__(self, configs: Mapping[str, object], prefix: str = "") -> None:
        self.configs = configs
        self.prefix = prefix

    def _raw(self, key: str, default: object, accepted: str) -> object:
        value = self.configs.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            if default is REQUIRED:
                raise ConfigError(self.prefix + key, value, f"{accepted} (the key is required)")
            return default
        return value

    def string(self, key: str, default: str | _Required = REQUIRED) -> str:
        return str(self._raw(key, default, "a non-empty string")).strip()

    def optional_string(self, key: str) -> str | None:
        value = self._raw(key, None, "a string")
        return None if value is None else str(value).strip()

    def integer(self, key: str, default: int | _Required = REQUIRED, *, minimum: int | None = None,
                maximum: int | None = None) -> int:
        accepted = f"an integer in [{minimum if minimum is not None else '-inf'}, " \
                   f"{maximum if maximum is not None else 'inf'}]"
        value = self._raw(key, default, accepted)
        try:
            number = value if isinstance(value, int) and not isinstance(value, bool) else int(str(value).strip())
        except ValueError:
            raise ConfigError(self.prefix + key, value, accepted) from None
        if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
            raise ConfigError(self.prefix + key, value, accepted)
        return number

    def boolean(self, key: str, default: bool | _Required | None = REQUIRED) -> bool | None:
        value = self._raw(key, default, "true or false")
        if value is None or isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text not in ("true", "false"):
            raise ConfigError(self.prefix + key, value, "true or false")
        return text == "true"

    def flag(self, key: str, default: bool) -> bool:
        """A boolean with a default (never ``None``)."""
        return bool(self.boolean(key, default))
