"""A listener's security settings, looked up as Kafka looks them up.

Kafka reads a listener's TLS and SASL keys first with the listener's prefix,
``listener.name.<listener name in lower case>.<key>``, then without it (``ssl.keystore.location``).
SASL keys may also carry the mechanism: ``listener.name.<l>.<mechanism lower case>.sasl.jaas.config``.
These keys are not fields of :class:`~strom.core.config.BrokerConfig`; they arrive as its extras.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strom.core.exceptions import ConfigError

# Keys whose values never appear in an error message.
_SECRET_MARKERS = ("password", "jaas", "keystore.key", "secret")


def is_secret(key: str) -> bool:
    return any(marker in key for marker in _SECRET_MARKERS)


class ListenerSettings:
    """The security keys of one listener (``name``) over a broker's config values."""

    def __init__(self, name: str, values: Mapping[str, Any]) -> None:
        self.name = name
        self.prefix = f"listener.name.{name.lower()}."
        self.values = values

    @classmethod
    def from_config(cls, name: str, config: Any) -> ListenerSettings:
        """From a :class:`~strom.core.config.BrokerConfig`: its extras (where ``ssl.*``/``sasl.*``
        keys land) over the aliases of its fields."""
        values: dict[str, Any] = {}
        for field_name, field in type(config).model_fields.items():
            if field.alias:
                values[field.alias] = getattr(config, field_name)
        values.update(config.model_extra or {})
        return cls(name, values)

    def key_used(self, key: str, mechanism: str | None = None) -> str:
        """The full key a value comes from (for error messages): the most specific one set."""
        for candidate in self._candidates(key, mechanism):
            if self.values.get(candidate) not in (None, ""):
                return candidate
        return self.prefix + key if mechanism is None else f"{self.prefix}{mechanism.lower()}.{key}"

    def _candidates(self, key: str, mechanism: str | None) -> list[str]:
        out = []
        if mechanism is not None:
            out.append(f"{self.prefix}{mechanism.lower()}.{key}")
        out += [self.prefix + key, key]
        return out

    def get(self, key: str, default: str | None = None, *, mechanism: str | None = None) -> str | None:
        for candidate in self._candidates(key, mechanism):
            value = self.values.get(candidate)
            if value is not None and str(value) != "":
                return str(value)
        return default

    def get_list(self, key: str, default: str = "", *, mechanism: str | None = None) -> list[str]:
        value = self.get(key, default, mechanism=mechanism) or ""
        return [item.strip() for item in value.split(",") if item.strip()]

    def get_int(self, key: str, default: int, *, mechanism: str | None = None, minimum: int | None = None) -> int:
        value = self.get(key, mechanism=mechanism)
        if value is None:
            return default
        try:
            number = int(value.strip())
        except ValueError:
            raise ConfigError(self.key_used(key, mechanism), value, "an integer") from None
        if minimum is not None and number < minimum:
            raise ConfigError(self.key_used(key, mechanism), value, f"an integer >= {minimum}")
        return number

    def fail(self, key: str, accepted: str, *, mechanism: str | None = None) -> ConfigError:
        """A :class:`ConfigError` naming the key in use (its value hidden if it is a secret)."""
        full = self.key_used(key, mechanism)
        value = self.get(key, mechanism=mechanism)
        return ConfigError(full, "(hidden)" if is_secret(full) and value is not None else value, accepted)
