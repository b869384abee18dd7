"""Kafka Connect's ``JsonConverter``: Connect data to JSON bytes and back, byte for byte.

With ``schemas.enable=true`` (the default) every message is the envelope
``{"schema":{...},"payload":...}`` in Kafka Connect's JSON schema format (keys in Kafka's order:
``type``, then ``items``/``keys``+``values``/``fields``, ``optional``, ``name``, ``version``, ``doc``,
``parameters``, ``default``; a struct field's schema ends with ``"field":<name>``). With
``schemas.enable=false`` the payload alone is written and read back schemaless (objects become
dicts, integral numbers int64, other numbers float64). Logical types are encoded as Kafka does:
Date as int32 days, Time as int32 milliseconds of the day, Timestamp as int64 epoch milliseconds,
Decimal as base64 of the unscaled two's-complement bytes (``decimal.format=BASE64``) or as a JSON
number (``NUMERIC``). Output is compact UTF-8 JSON with Java's number forms (``1.0E20``), as
Jackson writes it.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from decimal import Decimal as PyDecimal
from typing import Any

from strom.connect.api.config import CaseInsensitiveValidString, ConfigDef, ConfigType, Importance, Range
from strom.connect.api.converter import Converter, HeaderConverter
from strom.connect.converters._base import TYPE_CONFIG, converter_config_def, with_type
from strom.connect.converters._javafmt import (
    java_double_str,
    java_float_str,
    python_repr_matches_java,
    to_float32,
)
from strom.connect.data import Date, Decimal, Schema, SchemaAndValue, SchemaBuilder, Struct, Time, Timestamp
from strom.connect.data.schema import required_schema
from strom.connect.exceptions import DataException

SCHEMAS_ENABLE_CONFIG = "schemas.enable"
SCHEMAS_CACHE_SIZE_CONFIG = "schemas.cache.size"
DECIMAL_FORMAT_CONFIG = "decimal.format"
REPLACE_NULL_WITH_DEFAULT_CONFIG = "replace.null.with.default"

_INT_RANGES = {"INT8": 8, "INT16": 16, "INT32": 32, "INT64": 64}
_JSON_TYPE_NAMES = {
    "BOOLEAN": "boolean", "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64",
    "FLOAT32": "float", "FLOAT64": "double", "BYTES": "bytes", "STRING": "string",
    "ARRAY": "array", "MAP": "map", "STRUCT": "struct",
}
_BUILDERS = {
    "boolean": SchemaBuilder.boolean, "int8": SchemaBuilder.int8, "int16": SchemaBuilder.int16,
    "int32": SchemaBuilder.int32, "int64": SchemaBuilder.int64, "float": SchemaBuilder.float32,
    "double": SchemaBuilder.float64, "bytes": SchemaBuilder.bytes_, "string": SchemaBuilder.string,
}


def config_def() -> ConfigDef:
    """Kafka's ``JsonConverterConfig`` definition."""
    return converter_config_def().define(
        SCHEMAS_ENABLE_CONFIG, ConfigType.BOOLEAN, default=True, importance=Importance.HIGH,
        doc="Include schemas within each of the serialized values and keys.",
    ).define(
        SCHEMAS_CACHE_SIZE_CONFIG, ConfigType.INT, default=1000, validator=Range.at_least(0),
        importance=Importance.HIGH, doc="The maximum number of schemas that can be cached in this converter instance.",
    ).define(
        DECIMAL_FORMAT_CONFIG, ConfigType.STRING, default="BASE64",
        validator=CaseInsensitiveValidString.in_("BASE64", "NUMERIC"), importance=Importance.LOW,
        doc="Controls which format this converter will serialize decimals in: BASE64 (base64 of the "
            "unscaled bytes) or NUMERIC (a JSON number).",
    ).define(
        REPLACE_NULL_WITH_DEFAULT_CONFIG, ConfigType.BOOLEAN, default=True, importance=Importance.LOW,
        doc="Whether to replace fields that have a default value and that are null to the default value.",
    )


class _Raw:
    """A number whose JSON text is already decided (Java's float forms)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_DECODER = json.JSONDecoder(parse_float=PyDecimal)


class _State(threading.local):
    # Per-call flag "the tree holds _Raw numbers", per thread so a shared instance stays safe.
    raw_used = False


_STATE = _State()
_encode_str = json.encoder.encode_basestring


def _dump_raw(node: Any, out: list[str]) -> None:
    # Compact JSON writer used only when the tree holds _Raw numbers (json.dumps cannot emit them).
    if isinstance(node, _Raw):
        out.append(node.text)
    elif isinstance(node, dict):
        out.append("{")
        first = True
        for k, v in node.items():
            if not first:
                out.append(",")
            first = False
            out.append(_encode_str(k))
            out.append(":")
            _dump_raw(v, out)
        out.append("}")
    elif isinstance(node, list):
        out.append("[")
        for i, v in enumerate(node):
            if i:
                out.append(",")
            _dump_raw(v, out)
        out.append("]")
    else:
        out.append(json.dumps(node, ensure_ascii=False))


def _type_name(schema: Schema) -> str:
    return schema.type.name


class JsonConverter(Converter, HeaderConverter):
    """Kafka Connect's ``org.apache.kafka.connect.json.JsonConverter`` (also a header converter)."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.json.JsonConverter"

    def __init__(self) -> None:
        self._schemas_enabled = True
        self._numeric_decimals = False
        self._replace_null_with_default = True
        self._cache_size = 1000
        self._to_json_cache: OrderedDict[Any, dict[str, Any]] = OrderedDict()
        self._to_connect_cache: OrderedDict[str, Schema | None] = OrderedDict()
        self._schema_text_cache: OrderedDict[Schema, str] = OrderedDict()
        self._cache_lock = threading.Lock()
        # (envelope prefix, its schema) of the last message read; one tuple so threads never
        # see a prefix paired with another message's schema.
        self._last: tuple[str, Schema | None] | None = None

    # -- configuration -------------------------------------------------------------------------
    def config(self) -> ConfigDef:
        return config_def()

    def configure(self, configs: Mapping[str, Any], is_key: bool | None = None) -> None:
        parsed = config_def().parse(with_type(configs, is_key))
        self._schemas_enabled = bool(parsed[SCHEMAS_ENABLE_CONFIG])
        self._numeric_decimals = str(parsed[DECIMAL_FORMAT_CONFIG]).upper() == "NUMERIC"
        self._replace_null_with_default = bool(parsed[REPLACE_NULL_WITH_DEFAULT_CONFIG])
        self._cache_size = int(parsed[SCHEMAS_CACHE_SIZE_CONFIG])
        self._converter_type = parsed[TYPE_CONFIG]
        self._to_json_cache.clear()
        self._to_connect_cache.clear()
        self._schema_text_cache.clear()
        self._last = None

    def close(self) -> None:
        """Nothing to release."""

    # -- HeaderConverter -----------------------------------------------------------------------
    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)

    # -- Converter -----------------------------------------------------------------------------
    def from_connect_data(self, topic: str, schema: Schema | None, value: Any, headers: Any = None) -> bytes | None:
        if schema is None and value is None:
            return None
        _STATE.raw_used = False
        payload = self._serialize(self._to_json(schema, value))
        if not self._schemas_enabled:
            return payload.encode("utf-8", "surrogatepass")
        # The envelope is assembled from the cached text of the schema: only the payload is
        # serialized per record.
        return ('{"schema":' + self._schema_text(schema) + ',"payload":' + payload + "}").encode(
            "utf-8", "surrogatepass")

    def _serialize(self, tree: Any) -> str:
        if not _STATE.raw_used:
            try:
                return json.dumps(tree, ensure_ascii=False, separators=(",", ":"))
            except TypeError:
                pass  # holds Java-formatted numbers from a cached schema default
        out: list[str] = []
        try:
            _dump_raw(tree, out)
        except (TypeError, ValueError) as e:
            raise DataException(f"Converting Kafka Connect data to byte[] failed due to serialization error: {e}") from e
        return "".join(out)

    def _schema_text(self, schema: Schema | None) -> str:
        if schema is None:
            return "null"
        text = self._schema_text_cache.get(schema)
        if text is None:
            saved = _STATE.raw_used
            _STATE.raw_used = False
            text = self._serialize(self.as_json_schema(schema))
            _STATE.raw_used = saved
            self._remember(self._schema_text_cache, schema, text)
        return text

    def to_connect_data(self, topic: str, value: bytes | None, headers: Any = None) -> SchemaAndValue:
        if value is None:
            return SchemaAndValue(None, None)
        if not self._schemas_enabled:
            # Schemaless: plain JSON maps onto Connect's schemaless values directly.
            return SchemaAndValue(None, self._parse(value, exact=False))
        try:
            text = bytes(value).decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataException(f"Converting byte[] to Kafka Connect data failed due to serialization error: {e}") from e
        last = self._last
        if last is not None and text.startswith(last[0]) and text.endswith("}"):
            prefix, last_schema = last
            # Same schema text as the previous message: parse only the payload. Anything odd
            # after the prefix fails to parse and takes the full path below.
            try:
                payload = json.loads(text[len(prefix):-1], parse_float=PyDecimal, parse_constant=_reject_constant)
            except (ValueError, RecursionError):
                pass
            else:
                return SchemaAndValue(last_schema, self._to_connect(last_schema, payload))
        doc = self._parse(text, exact=True)
        if not (isinstance(doc, dict) and len(doc) == 2 and "schema" in doc and "payload" in doc):
            raise DataException(
                'JsonConverter with schemas.enable requires "schema" and "payload" fields and may not '
                "contain additional fields. If you are trying to deserialize plain JSON data, set "
                "schemas.enable=false in your converter configuration.")
        schema = self.as_connect_schema(doc["schema"])
        result = SchemaAndValue(schema, self._to_connect(schema, doc["payload"]))
        self._learn_prefix(text, schema)
        return result

    def _learn_prefix(self, text: str, schema: Schema | None) -> None:
        # Remember '{"schema":<text>,"payload":' when the message has Kafka's layout.
        if not text.startswith('{"schema":'):
            return
        try:
            _, end = _DECODER.raw_decode(text, 10)
        except ValueError:
            return
        if text.startswith(',"payload":', end):
            self._last = (text[: end + 11], schema)

    @staticmethod
    def _parse(value: bytes | str, *, exact: bool) -> Any:
        try:
            if exact:
                # Decimal keeps NUMERIC decimals exact; _to_connect turns the rest into floats.
                return json.loads(value, parse_float=PyDecimal, parse_constant=_reject_constant)
            return json.loads(value, parse_constant=_reject_constant)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise DataException(f"Converting byte[] to Kafka Connect data failed due to serialization error: {e}") from e

    # -- schemas -------------------------------------------------------------------------------
    def as_json_schema(self, schema: Schema | None) -> dict[str, Any] | None:
        """Kafka Connect's JSON form of a schema (``None`` for no schema)."""
        if schema is None:
            return None
        cached = self._to_json_cache.get(schema)
        if cached is not None:
            return cached
        tname = _type_name(schema)
        js: dict[str, Any] = {"type": _JSON_TYPE_NAMES[tname]}
        if tname == "ARRAY":
            js["items"] = self.as_json_schema(schema.value_schema)
        elif tname == "MAP":
            js["keys"] = self.as_json_schema(schema.key_schema)
            js["values"] = self.as_json_schema(schema.value_schema)
        elif tname == "STRUCT":
            fields = []
            for f in schema.fields or ():
                fjs = dict(self.as_json_schema(f.schema) or {})
                fjs["field"] = f.name
                fields.append(fjs)
            js["fields"] = fields
        js["optional"] = bool(schema.optional)
        if schema.name is not None:
            js["name"] = schema.name
        if schema.version is not None:
            js["version"] = schema.version
        if schema.doc is not None:
            js["doc"] = schema.doc
        if schema.parameters is not None:
            js["parameters"] = dict(schema.parameters)
        if schema.default is not None:
            js["default"] = self._to_json(schema, schema.default)
        self._remember(self._to_json_cache, schema, js)
        return js

    def as_connect_schema(self, js: Any) -> Schema | None:
        """The Connect schema of Kafka Connect's JSON schema form (``None`` for JSON null)."""
        if js is None:
            return None
        if not isinstance(js, dict):
            raise DataException(f"Schema must be a JSON object, found {type(js).__name__}")
        key = json.dumps(js, sort_keys=True, default=str)
        if key in self._to_connect_cache:
            return self._to_connect_cache[key]
        tname = js.get("type")
        if not isinstance(tname, str):
            raise DataException("Schema must contain 'type' field")
        if tname in _BUILDERS:
            builder = _BUILDERS[tname]()
        elif tname == "array":
            items = js.get("items")
            if items is None:
                raise DataException("Array schema did not specify the element type")
            builder = SchemaBuilder.array(required_schema(self.as_connect_schema(items), "array element"))
        elif tname == "map":
            if "keys" not in js:
                raise DataException("Map schema did not specify the key type")
            if "values" not in js:
                raise DataException("Map schema did not specify the value type")
            builder = SchemaBuilder.map(required_schema(self.as_connect_schema(js["keys"]), "map key"),
                                        required_schema(self.as_connect_schema(js["values"]), "map value"))
        elif tname == "struct":
            builder = SchemaBuilder.struct()
            fields = js.get("fields")
            if not isinstance(fields, list):
                raise DataException('Struct schema\'s "fields" argument is not an array.')
            for f in fields:
                fname = f.get("field") if isinstance(f, dict) else None
                if not isinstance(fname, str):
                    raise DataException("Struct schema's field name not specified properly")
                builder.field(fname, required_schema(self.as_connect_schema(f), f"field {fname}"))
        else:
            raise DataException(f"Unknown schema type: {tname}")
        if js.get("optional") is True:
            builder.optional()
        if isinstance(js.get("name"), str):
            builder.name(js["name"])
        version = js.get("version")
        if isinstance(version, int) and not isinstance(version, bool):
            builder.version(version)
        if isinstance(js.get("doc"), str):
            builder.doc(js["doc"])
        params = js.get("parameters")
        if isinstance(params, dict):
            for k, v in params.items():
                if not isinstance(v, str):
                    raise DataException("Schema parameters must have string values.")
                builder.parameter(k, v)
        if js.get("default") is not None:
            partial = builder.build()
            builder.default_value(self._to_connect(partial, js["default"]))
        schema = builder.build()
        self._remember(self._to_connect_cache, key, schema)
        return schema

    def _remember(self, cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
        if self._cache_size <= 0:
            return
        with self._cache_lock:
            cache[key] = value
            cache.move_to_end(key)
            while len(cache) > self._cache_size:
                cache.popitem(last=False)

    # -- values: Connect -> JSON ---------------------------------------------------------------
    def _float(self, x: float, float32: bool) -> Any:
        if float32:
            _STATE.raw_used = True
            text = java_float_str(x)
        elif python_repr_matches_java(x):
            return float(x)
        else:
            _STATE.raw_used = True
            text = java_double_str(x)
        # Jackson writes non-finite numbers as the strings "NaN", "Infinity", "-Infinity".
        return _Raw(json.dumps(text) if text in ("NaN", "Infinity", "-Infinity") else text)

    def _to_json(self, schema: Schema | None, value: Any) -> Any:
        if value is None:
            if schema is None:
                return None
            if schema.default is not None and self._replace_null_with_default:
                return self._to_json(schema, schema.default)
            if schema.optional:
                return None
            raise DataException("Conversion error: null value for field that is required and has no default value")
        if schema is None:
            return self._schemaless_to_json(value)
        name = schema.name
        if name is not None:
            if name == Decimal.LOGICAL_NAME:
                if not isinstance(value, PyDecimal):
                    raise DataException(f"Invalid type for Decimal, expected Decimal but was {type(value).__name__}")
                if self._numeric_decimals:
                    _STATE.raw_used = True
                    return _Raw(str(value))
                return base64.b64encode(Decimal.from_logical(schema, value)).decode("ascii")
            if name == Date.LOGICAL_NAME:
                return Date.from_logical(schema, value)
            if name == Time.LOGICAL_NAME:
                return Time.from_logical(schema, value)
            if name == Timestamp.LOGICAL_NAME:
                return Timestamp.from_logical(schema, value)
        tname = _type_name(schema)
        if tname in _INT_RANGES:
            if isinstance(value, bool) or not isinstance(value, int):
                raise DataException(f"Invalid type for {tname}: {type(value).__name__}")
            return value
        if tname in ("FLOAT32", "FLOAT64"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise DataException(f"Invalid type for {tname}: {type(value).__name__}")
            return self._float(float(value), tname == "FLOAT32")
        if tname == "BOOLEAN":
            if not isinstance(value, bool):
                raise DataException(f"Invalid type for BOOLEAN: {type(value).__name__}")
            return value
        if tname == "STRING":
            if not isinstance(value, str):
                raise DataException(f"Invalid type for STRING: {type(value).__name__}")
            return value
        if tname == "BYTES":
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise DataException(f"Invalid type for bytes type: {type(value).__name__}")
            return base64.b64encode(bytes(value)).decode("ascii")
        if tname == "ARRAY":
            if not isinstance(value, (list, tuple)):
                raise DataException(f"Invalid type for ARRAY: {type(value).__name__}")
            vs = schema.value_schema
            return [self._to_json(vs, v) for v in value]
        if tname == "MAP":
            if not isinstance(value, dict):
                raise DataException(f"Invalid type for MAP: {type(value).__name__}")
            ks, vs = schema.key_schema, schema.value_schema
            if ks is not None and _type_name(ks) == "STRING":
                return {self._json_key(self._to_json(ks, k)): self._to_json(vs, v) for k, v in value.items()}
            return [[self._to_json(ks, k), self._to_json(vs, v)] for k, v in value.items()]
        if tname == "STRUCT":
            if not isinstance(value, Struct):
                raise DataException(f"Invalid type for STRUCT: {type(value).__name__}")
            if value.schema != schema:
                raise DataException("Mismatching schema.")
            return {f.name: self._to_json(f.schema, self._struct_get(value, f.name)) for f in schema.fields or ()}
        raise DataException(f"Couldn't convert {value!r} to JSON.")

    def _struct_get(self, struct: Struct, name: str) -> Any:
        # replace.null.with.default=false writes a null field as null even when it has a default.
        if self._replace_null_with_default:
            return struct.get(name)
        getter = getattr(struct, "get_without_default", None)
        return getter(name) if getter is not None else struct.get(name)

    @staticmethod
    def _json_key(node: Any) -> str:
        # Jackson's asText() of the key node.
        if isinstance(node, _Raw):
            return node.text
        if isinstance(node, bool):
            return "true" if node else "false"
        return str(node)

    def _schemaless_to_json(self, value: Any) -> Any:
        if isinstance(value, bool) or value is None or isinstance(value, str):
            return value
        if isinstance(value, int):
            return value
        if isinstance(value, float):
            return self._float(value, False)
        if isinstance(value, (bytes, bytearray, memoryview)):
            return base64.b64encode(bytes(value)).decode("ascii")
        if isinstance(value, (list, tuple)):
            return [self._schemaless_to_json(v) for v in value]
        if isinstance(value, dict):
            if all(isinstance(k, str) for k in value):
                return {k: self._schemaless_to_json(v) for k, v in value.items()}
            return [[self._schemaless_to_json(k), self._schemaless_to_json(v)] for k, v in value.items()]
        if isinstance(value, Struct):
            raise DataException("Mismatching schema.")
        raise DataException(f"Python type {type(value).__name__} does not have corresponding schema type.")

    # -- values: JSON -> Connect ---------------------------------------------------------------
    def _to_connect(self, schema: Schema | None, node: Any) -> Any:
        if schema is None:
            return _plain(node)
        tname = _type_name(schema)
        if node is None:
            if schema.default is not None:
                return schema.default
            if schema.optional:
                return None
            raise DataException(f"Invalid null value for required {tname} field")
        name = schema.name
        if name is not None:
            if name == Decimal.LOGICAL_NAME:
                if isinstance(node, (int, PyDecimal)) and not isinstance(node, bool):
                    return PyDecimal(node)
                if isinstance(node, str):
                    return Decimal.to_logical(schema, _b64(node, "Invalid bytes for Decimal field"))
                raise DataException("Invalid type for Decimal, underlying representation should be numeric or "
                                    f"bytes but was {_node_type(node)}")
            if name in (Date.LOGICAL_NAME, Time.LOGICAL_NAME):
                if isinstance(node, bool) or not isinstance(node, int) or not -(2**31) <= node < 2**31:
                    kind = "Date" if name == Date.LOGICAL_NAME else "Time"
                    raise DataException(f"Invalid type for {kind}, underlying representation should be integer "
                                        f"but was {_node_type(node)}")
                return (Date if name == Date.LOGICAL_NAME else Time).to_logical(schema, node)
            if name == Timestamp.LOGICAL_NAME:
                if isinstance(node, bool) or not isinstance(node, int):
                    raise DataException("Invalid type for Timestamp, underlying representation should be integral "
                                        f"but was {_node_type(node)}")
                return Timestamp.to_logical(schema, node)
        if tname == "BOOLEAN":
            if not isinstance(node, bool):
                raise DataException(f"Invalid value for BOOLEAN: {_node_type(node)}")
            return node
        if tname in _INT_RANGES:
            if isinstance(node, bool) or not isinstance(node, (int, PyDecimal)):
                raise DataException(f"Invalid value for {tname}: {_node_type(node)}")
            bits = _INT_RANGES[tname]
            iv = int(node)
            if not -(1 << (bits - 1)) <= iv < (1 << (bits - 1)):
                raise DataException(f"Value {iv} out of range for {tname}")
            return iv
        if tname in ("FLOAT32", "FLOAT64"):
            if isinstance(node, str) and node in ("NaN", "Infinity", "-Infinity"):
                return float(node.replace("Infinity", "inf"))
            if isinstance(node, bool) or not isinstance(node, (int, PyDecimal, float)):
                raise DataException(f"Invalid value for {tname}: {_node_type(node)}")
            # Jackson's floatValue(): the nearest float32.
            return to_float32(float(node)) if tname == "FLOAT32" else float(node)
        if tname == "STRING":
            if not isinstance(node, str):
                raise DataException(f"Invalid value for STRING: {_node_type(node)}")
            return node
        if tname == "BYTES":
            if not isinstance(node, str):
                raise DataException(f"Invalid bytes field: {_node_type(node)}")
            return _b64(node, "Invalid bytes field")
        if tname == "ARRAY":
            if not isinstance(node, list):
                raise DataException(f"Arrays should be encoded as JSON arrays, but found {_node_type(node)}")
            vs = schema.value_schema
            return [self._to_connect(vs, e) for e in node]
        if tname == "MAP":
            ks, vs = schema.key_schema, schema.value_schema
            if ks is None or _type_name(ks) == "STRING":
                if not isinstance(node, dict):
                    raise DataException(f"Maps with string fields should be encoded as JSON objects, but found {_node_type(node)}")
                return {k: self._to_connect(vs, v) for k, v in node.items()}
            if not isinstance(node, list):
                raise DataException(f"Maps with non-string fields should be encoded as JSON array of tuples, but found {_node_type(node)}")
            result: dict[Any, Any] = {}
            for entry in node:
                if not isinstance(entry, list):
                    raise DataException(f"Found invalid map entry instead of array tuple: {_node_type(entry)}")
                if len(entry) != 2:
                    raise DataException(f"Found invalid map entry, expected length 2 but found :{len(entry)}")
                result[_hashable(self._to_connect(ks, entry[0]))] = self._to_connect(vs, entry[1])
            return result
        if tname == "STRUCT":
            if not isinstance(node, dict):
                raise DataException(f"Structs should be encoded as JSON objects, but found {_node_type(node)}")
            struct = Struct(schema)
            for f in schema.fields or ():
                struct.put(f.name, self._to_connect(f.schema, node.get(f.name)))
            return struct
        raise DataException(f"Unknown schema type: {tname}")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"Non-standard token '{name}'")


def _b64(text: str, message: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise DataException(f"{message}: {e}") from e


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    return v


def _node_type(node: Any) -> str:
    # Jackson's JsonNodeType names, for messages that read like Kafka's.
    if node is None:
        return "NULL"
    if isinstance(node, bool):
        return "BOOLEAN"
    if isinstance(node, (int, float, PyDecimal)):
        return "NUMBER"
    if isinstance(node, str):
        return "STRING"
    if isinstance(node, list):
        return "ARRAY"
    return "OBJECT"


def _plain(node: Any) -> Any:
    # Schemaless value of a JSON node parsed with exact decimals: floats become float64.
    if isinstance(node, PyDecimal):
        return float(node)
    if isinstance(node, list):
        return [_plain(x) for x in node]
    if isinstance(node, dict):
        return {k: _plain(v) for k, v in node.items()}
    return node
