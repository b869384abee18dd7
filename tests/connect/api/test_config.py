"""ConfigDef: parsing, validation errors that name the key, AbstractConfig and ConfigInfos JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from strom.connect.api.config import (
    NO_DEFAULT,
    AbstractConfig,
    CaseInsensitiveValidString,
    ConfigDef,
    ConfigType,
    ConfigValue,
    Importance,
    NonEmptyString,
    Password,
    Range,
    ValidList,
    ValidString,
    Width,
    config_infos,
)
from strom.connect.exceptions import ConfigException


def _def() -> ConfigDef:
    return (ConfigDef()
            .define("file", ConfigType.STRING, NO_DEFAULT, NonEmptyString(), Importance.HIGH,
                    "Source file", group="Common", order=1, width=Width.LONG, display_name="File")
            .define("batch.size", "INT", 2000, Range.at_least(1), "LOW", "Records per poll",
                    group="Common", order=2)
            .define("mode", ConfigType.STRING, "append", ValidString.in_("append", "overwrite"),
                    Importance.MEDIUM, "Write mode", group="Advanced")
            .define("tolerance", ConfigType.STRING, "none", CaseInsensitiveValidString.in_("none", "all"))
            .define("topics", ConfigType.LIST, "", ValidList.in_("a", "b", "c"))
            .define("ratio", ConfigType.DOUBLE, 0.5, Range.between(0, 1))
            .define("enabled", ConfigType.BOOLEAN, True)
            .define("big", ConfigType.LONG, 1 << 40)
            .define("small", ConfigType.SHORT, 1)
            .define("secret", ConfigType.PASSWORD, None)
            .define("cls", ConfigType.CLASS, "org.example.Foo"))


def test_parse_fills_defaults_and_types() -> None:
    parsed = _def().parse({"file": " /tmp/x ", "batch.size": "10", "topics": "a, b", "ratio": "1",
                           "enabled": "FALSE", "secret": "hunter2", "unknown.key": "ignored"})
    assert parsed["file"] == "/tmp/x"  # strings are trimmed
    assert parsed["batch.size"] == 10 and parsed["mode"] == "append"
    assert parsed["topics"] == ["a", "b"] and parsed["ratio"] == 1.0 and parsed["enabled"] is False
    assert parsed["big"] == 1 << 40 and parsed["cls"] == "org.example.Foo"
    assert isinstance(parsed["secret"], Password) and parsed["secret"].value == "hunter2"
    assert str(parsed["secret"]) == "[hidden]" and "hunter2" not in repr(parsed)
    assert "unknown.key" not in parsed
    assert _def().parse({"file": "f", "topics": ""})["topics"] == []


@pytest.mark.parametrize(("props", "key", "fragment"), [
    ({}, "file", "Missing required configuration"),
    ({"file": ""}, "file", "non-empty"),
    ({"file": "f", "batch.size": "0"}, "batch.size", "at least 1"),
    ({"file": "f", "batch.size": "ten"}, "batch.size", "Not a number"),
    ({"file": "f", "batch.size": str(1 << 31)}, "batch.size", "32-bit"),
    ({"file": "f", "small": "40000"}, "small", "16-bit"),
    ({"file": "f", "mode": "delete"}, "mode", "append, overwrite"),
    ({"file": "f", "topics": "a,z"}, "topics", "a, b, c"),
    ({"file": "f", "ratio": "2"}, "ratio", "no more than 1"),
    ({"file": "f", "enabled": "yes"}, "enabled", "true or false"),
])
def test_parse_errors_name_key_and_accepted(props: dict[str, str], key: str, fragment: str) -> None:
    with pytest.raises(ConfigException) as info:
        _def().parse(props)
    assert key in str(info.value)
    assert fragment in str(info.value)


def test_case_insensitive_valid_string() -> None:
    assert _def().parse({"file": "f", "tolerance": "ALL"})["tolerance"] == "ALL"
    with pytest.raises(ConfigException, match="tolerance"):
        _def().parse({"file": "f", "tolerance": "some"})


def test_define_checks_default_and_duplicates() -> None:
    with pytest.raises(ConfigException, match="x"):
        ConfigDef().define("x", ConfigType.INT, 0, Range.at_least(1))
    with pytest.raises(ConfigException, match="defined twice"):
        ConfigDef().define("x", ConfigType.INT, 1).define("x", ConfigType.INT, 1)


def test_validate_collects_every_error_per_key() -> None:
    values = _def().validate({"batch.size": "-5", "mode": "nope", "enabled": "true"})
    by_name = {v.name: v for v in values}
    assert [v.name for v in values] == list(_def().config_keys)  # definition order
    assert by_name["file"].errors and "Missing required" in by_name["file"].errors[0]
    assert by_name["batch.size"].errors and "at least 1" in by_name["batch.size"].errors[0]
    assert by_name["batch.size"].value == -5
    assert by_name["mode"].errors and by_name["mode"].value == "nope"
    assert by_name["enabled"].errors == [] and by_name["enabled"].value is True
    assert by_name["ratio"].value == 0.5 and by_name["ratio"].errors == []


class _ModeRecommender:
    def valid_values(self, name: str, parsed_config: Mapping[str, Any]) -> list[Any]:
        return ["append", "overwrite"]

    def visible(self, name: str, parsed_config: Mapping[str, Any]) -> bool:
        return parsed_config.get("enabled") is True


def test_recommender_sets_recommendations_and_visibility() -> None:
    d = (ConfigDef().define("enabled", ConfigType.BOOLEAN, False)
         .define("mode", ConfigType.STRING, "append", recommender=_ModeRecommender()))
    hidden = {v.name: v for v in d.validate({})}["mode"]
    assert hidden.visible is False and hidden.recommended_values == ["append", "overwrite"]
    assert {v.name: v for v in d.validate({"enabled": "true"})}["mode"].visible is True


def test_merge_and_abstract_config() -> None:
    base = ConfigDef().define("name", ConfigType.STRING, NO_DEFAULT, importance=Importance.HIGH, group="Common")
    merged = base.copy().merge(_def())
    assert "name" in merged and "file" in merged and "name" not in _def()
    assert merged.groups() == ["Common", "Advanced"]
    cfg = AbstractConfig(_def(), {"file": "f", "batch.size": "3", "x.y": "1", "x.z": "2"})
    assert cfg.get_int("batch.size") == 3 and cfg.get_string("file") == "f"
    assert cfg.get_list("topics") == [] and cfg.get_boolean("enabled") is True
    assert cfg.originals_with_prefix("x.") == {"y": "1", "z": "2"}
    with pytest.raises(ConfigException):
        cfg.get_int("file")  # wrong type
    with pytest.raises(ConfigException):
        cfg.get("nope")


def test_config_infos_is_kafka_validate_json() -> None:
    d = _def()
    values = d.validate({"file": "/tmp/in", "batch.size": "0", "topics": "a,b", "secret": "pw"})
    values.append(ConfigValue("extra.key", "v", errors=["not allowed"]))
    out = config_infos("org.apache.kafka.connect.file.FileStreamSourceConnector", d, values)
    json.dumps(out)  # plain JSON
    assert out["name"] == "org.apache.kafka.connect.file.FileStreamSourceConnector"
    assert out["error_count"] == 2
    assert out["groups"] == ["Common", "Advanced"]
    configs = {(c["definition"] or {}).get("name", c["value"]["name"]): c for c in out["configs"]}
    assert configs["file"] == {
        "definition": {"name": "file", "type": "STRING", "required": True, "default_value": None,
                       "importance": "HIGH", "documentation": "Source file", "group": "Common",
                       "width": "LONG", "display_name": "File", "dependents": [], "order": 1},
        "value": {"name": "file", "value": "/tmp/in", "recommended_values": [], "errors": [],
                  "visible": True},
    }
    bs = configs["batch.size"]
    assert bs["definition"]["default_value"] == "2000" and bs["definition"]["required"] is False
    assert bs["definition"]["display_name"] == "batch.size" and bs["definition"]["width"] == "NONE"
    assert bs["value"]["value"] == "0" and "at least 1" in bs["value"]["errors"][0]
    assert configs["topics"]["value"]["value"] == "a,b"
    assert configs["secret"]["value"]["value"] == "[hidden]"
    assert configs["enabled"]["definition"]["default_value"] == "true"
    assert configs["ratio"]["definition"]["type"] == "DOUBLE"
    assert configs["extra.key"]["definition"] is None
    assert configs["extra.key"]["value"]["errors"] == ["not allowed"]
