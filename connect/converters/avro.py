"""Confluent's ``AvroConverter``: Connect data as Avro in the Schema Registry wire format.

Each message is ``0x00``, the 4-byte big-endian schema id the registry gave the writer schema,
then the Avro binary encoding of the value. Schemas go to and come from a Confluent-compatible
Schema Registry (``schema.registry.url``) under the topic name strategy (``<topic>-key`` /
``<topic>-value``). Connect schemas map onto Avro as Confluent's ``AvroData`` does: int8/int16
are Avro ints tagged ``"connect.type"``, optional schemas are ``["null", T]`` unions, structs are
records named after the Connect schema (``io.confluent.connect.avro.ConnectDefault`` when
unnamed), maps with non-string keys are arrays of ``io.confluent.connect.avro.MapEntry``
records, the logical types carry Avro's ``logicalType`` plus ``connect.name``/``connect.version``/
``connect.parameters``. Reading maps any Avro schema back (enums and fixed become strings and
bytes; unions other than ``[null, T]`` are not supported).
"""

from __future__ import annotations

import io
import json
import struct
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from strom.connect.api.config import ConfigDef, ConfigType, Importance
from strom.connect.api.converter import Converter
from strom.connect.converters._base import converter_config_def, with_type
from strom.connect.data import (
    Date,
    Decimal,
    Schema,
    SchemaAndValue,
    SchemaBuilder,
    Struct,
    Time,
    Timestamp,
    Type,
)
from strom.connect.data.schema import required_schema
from strom.connect.exceptions import ConfigException, DataException


def _fastavro() -> Any:
    """fastavro, imported on first use: loading its extension modules takes ~0.1 s that a worker
    not using Avro should not pay at start-up."""
    import fastavro

    return fastavro

REGISTRY_URL_CONFIG = "schema.registry.url"
AUTO_REGISTER_CONFIG = "auto.register.schemas"
MAGIC = 0
DEFAULT_RECORD = "io.confluent.connect.avro.ConnectDefault"
MAP_ENTRY = "io.confluent.connect.avro.MapEntry"
PRECISION_PARAM = "connect.decimal.precision"
_HEADER = struct.Struct(">bI")

_PRIMITIVE_AVRO = {
    Type.INT8: "int", Type.INT16: "int", Type.INT32: "int", Type.INT64: "long", Type.FLOAT32: "float",
    Type.FLOAT64: "double", Type.BOOLEAN: "boolean", Type.STRING: "string", Type.BYTES: "bytes",
}


def config_def() -> ConfigDef:
    return converter_config_def().define(
        REGISTRY_URL_CONFIG, ConfigType.LIST, importance=Importance.HIGH,
        doc="Comma-separated list of URLs for Schema Registry instances.",
    ).define(
        AUTO_REGISTER_CONFIG, ConfigType.BOOLEAN, default=True, importance=Importance.MEDIUM,
        doc="Specify if the serializer should attempt to register the schema with Schema Registry.",
    )


class SchemaRegistryClient:
    """The few Confluent Schema Registry REST calls the converter needs, with caches."""

    def __init__(self, urls: list[str], timeout: float = 10.0) -> None:
        if not urls:
            raise ConfigException(REGISTRY_URL_CONFIG, urls, "at least one URL is required")
        self.urls = [u.rstrip("/") for u in urls]
        self.timeout = timeout
        self._ids: dict[tuple[str, str], int] = {}
        self._schemas: dict[int, str] = {}
        self._lock = threading.Lock()

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        last: Exception | None = None
        for url in self.urls:
            req = urllib.request.Request(url + path, data=data, method=method, headers={
                "Content-Type": "application/vnd.schemaregistry.v1+json",
                "Accept": "application/vnd.schemaregistry.v1+json, application/json"})
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as e:
                detail = e.read().decode("utf-8", "replace")
                raise DataException(f"Schema Registry {method} {path} failed: HTTP {e.code} {detail}") from e
            except (urllib.error.URLError, OSError) as e:
                last = e
        raise DataException(f"Schema Registry unreachable at {self.urls}: {last}")

    def register(self, subject: str, schema_text: str, auto_register: bool) -> int:
        key = (subject, schema_text)
        with self._lock:
            if key in self._ids:
                return self._ids[key]
        quoted = urllib.parse.quote(subject, safe="")
        if auto_register:
            answer = self._call("POST", f"/subjects/{quoted}/versions", {"schema": schema_text})
        else:
            answer = self._call("POST", f"/subjects/{quoted}", {"schema": schema_text})
        schema_id = int(answer["id"])
        with self._lock:
            self._ids[key] = schema_id
            self._schemas[schema_id] = schema_text
        return schema_id

    def schema_by_id(self, schema_id: int) -> str:
        with self._lock:
            if schema_id in self._schemas:
                return self._schemas[schema_id]
        text = str(self._call("GET", f"/schemas/ids/{schema_id}")["schema"])
        with self._lock:
            self._schemas[schema_id] = text
        return text


# -- Connect schema -> Avro schema -----------------------------------------------------------

class _ToAvro:
    """One Connect -> Avro schema translation (tracks the generated record names)."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._named: dict[str, Schema] = {}

    def _generated(self, base: str) -> str:
        # Avro names must be unique in one schema: ConnectDefault, ConnectDefault2, ...
        n = self._counts.get(base, 0) + 1
        self._counts[base] = n
        return base if n == 1 else f"{base}{n}"

    def schema(self, schema: Schema, optional_union: bool = True) -> Any:
        base = self._base(schema)
        if schema.optional and optional_union:
            return ["null", base]
        return base

    def _base(self, schema: Schema) -> Any:
        name = schema.name
        if name == Decimal.LOGICAL_NAME:
            params = dict(schema.parameters or {})
            precision = int(params.get(PRECISION_PARAM, "64"))
            return {"type": "bytes", "scale": Decimal.scale(schema), "precision": precision,
                    "connect.version": 1, "connect.parameters": params, "connect.name": name,
                    "logicalType": "decimal"}
        if name == Date.LOGICAL_NAME:
            return {"type": "int", "connect.version": 1, "connect.name": name, "logicalType": "date"}
        if name == Time.LOGICAL_NAME:
            return {"type": "int", "connect.version": 1, "connect.name": name, "logicalType": "time-millis"}
        if name == Timestamp.LOGICAL_NAME:
            return {"type": "long", "connect.version": 1, "connect.name": name, "logicalType": "timestamp-millis"}
        t = schema.type
        out: dict[str, Any]
        if t in _PRIMITIVE_AVRO:
            out = {"type": _PRIMITIVE_AVRO[t]}
            if t in (Type.INT8, Type.INT16):
                out["connect.type"] = t.value
        elif t is Type.ARRAY:
            out = {"type": "array", "items": self.schema(required_schema(schema.value_schema, "array element"))}
        elif t is Type.MAP:
            ks, vs = schema.key_schema, schema.value_schema
            assert ks is not None and vs is not None
            if ks.type is Type.STRING and not ks.optional:
                out = {"type": "map", "values": self.schema(vs)}
            else:
                out = {"type": "array", "items": {
                    "type": "record", "name": self._generated(MAP_ENTRY),
                    "fields": [{"name": "key", "type": self.schema(ks)}, {"name": "value", "type": self.schema(vs)}]}}
        else:  # STRUCT
            if schema.name:
                seen = self._named.get(schema.name)
                if seen is not None:
                    if seen != schema:
                        raise DataException(f"Two different struct schemas named {schema.name} in one Avro schema")
                    return schema.name  # a reference to the record defined earlier
                self._named[schema.name] = schema
            fields = []
            for f in schema.fields or ():
                fjs: dict[str, Any] = {"name": f.name, "type": self.schema(f.schema)}
                if f.schema.optional:
                    fjs["default"] = None
                fields.append(fjs)
            out = {"type": "record", "name": schema.name or self._generated(DEFAULT_RECORD), "fields": fields}
        if schema.doc is not None:
            out["connect.doc"] = schema.doc
        if schema.version is not None:
            out["connect.version"] = schema.version
        if schema.parameters:
            out["connect.parameters"] = dict(schema.parameters)
        if schema.name is not None and t is not Type.STRUCT:
            out["connect.name"] = schema.name
        return out


# -- Connect value <-> Avro datum ------------------------------------------------------------

def _to_datum(schema: Schema, value: Any) -> Any:
    if value is None:
        if schema.default is not None:
            return _to_datum(schema, schema.default)
        if schema.optional:
            return None
        raise DataException("Conversion error: null value for field that is required and has no default value")
    if schema.name in (Decimal.LOGICAL_NAME, Date.LOGICAL_NAME, Time.LOGICAL_NAME, Timestamp.LOGICAL_NAME):
        return value  # fastavro encodes the logical types itself
    t = schema.type
    if t is Type.ARRAY:
        return [_to_datum(required_schema(schema.value_schema, "array element"), v) for v in value]
    if t is Type.MAP:
        ks, vs = schema.key_schema, schema.value_schema
        assert ks is not None and vs is not None
        if ks.type is Type.STRING and not ks.optional:
            return {k: _to_datum(vs, v) for k, v in value.items()}
        return [{"key": _to_datum(ks, k), "value": _to_datum(vs, v)} for k, v in value.items()]
    if t is Type.STRUCT:
        if not isinstance(value, Struct) or value.schema != schema:
            raise DataException(f"Mismatching schema for Avro conversion: {type(value).__name__}")
        return {f.name: _to_datum(f.schema, value.get(f.name)) for f in schema.fields or ()}
    if t is Type.BYTES:
        return bytes(value)
    return value


def _from_avro_schema(avro: Any) -> Schema:
    """The Connect schema of an Avro schema (as JSON), honouring Confluent's connect.* props."""
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(branches) != 1 or len(avro) != 2:
            raise DataException(f"Avro unions other than [null, T] are not supported: {avro}")
        return _with_optional(_from_avro_schema(branches[0]))
    if isinstance(avro, str):
        avro = {"type": avro}
    t = avro["type"]
    if isinstance(t, (dict, list)):
        return _from_avro_schema(t)
    logical = avro.get("logicalType")
    builder: SchemaBuilder
    if logical == "decimal":
        builder = Decimal.builder(int(avro.get("scale", 0)))
        params = avro.get("connect.parameters") or {}
        # As Confluent's AvroData: the precision is kept as a parameter unless it is the default 64.
        precision = params.get(PRECISION_PARAM, avro.get("precision", 64))
        if PRECISION_PARAM in params or int(precision) != 64:
            builder.parameter(PRECISION_PARAM, str(precision))
        return builder.build()
    if logical == "date":
        return Date.SCHEMA
    if logical == "time-millis":
        return Time.SCHEMA
    if logical == "timestamp-millis":
        return Timestamp.SCHEMA
    if t == "int":
        builder = {"int8": SchemaBuilder.int8, "int16": SchemaBuilder.int16}.get(
            avro.get("connect.type", ""), SchemaBuilder.int32)()
    elif t == "long":
        builder = SchemaBuilder.int64()
    elif t == "float":
        builder = SchemaBuilder.float32()
    elif t == "double":
        builder = SchemaBuilder.float64()
    elif t == "boolean":
        builder = SchemaBuilder.boolean()
    elif t in ("string", "enum"):
        builder = SchemaBuilder.string()
    elif t in ("bytes", "fixed"):
        builder = SchemaBuilder.bytes_()
    elif t == "array":
        items = avro["items"]
        item_name = items.get("name") if isinstance(items, dict) else None
        if isinstance(items, dict) and items.get("type") == "record" and item_name and \
                str(item_name).startswith(MAP_ENTRY):
            fields = {f["name"]: f["type"] for f in items["fields"]}
            builder = SchemaBuilder.map(_from_avro_schema(fields["key"]), _from_avro_schema(fields["value"]))
        else:
            builder = SchemaBuilder.array(_from_avro_schema(items))
    elif t == "map":
        builder = SchemaBuilder.map(Schema.STRING_SCHEMA, _from_avro_schema(avro["values"]))
    elif t == "record":
        builder = SchemaBuilder.struct()
        full = avro.get("name", "")
        ns = avro.get("namespace")
        if ns and "." not in full:
            full = f"{ns}.{full}"
        if full and not full.startswith(DEFAULT_RECORD):
            builder.name(full)
        for f in avro["fields"]:
            builder.field(f["name"], _from_avro_schema(f["type"]))
    elif t == "null":
        raise DataException("A bare Avro null schema has no Connect equivalent")
    else:
        raise DataException(f"Unsupported Avro type: {t}")
    if "connect.name" in avro and t != "record":
        builder.name(avro["connect.name"])
    if "connect.version" in avro:
        builder.version(int(avro["connect.version"]))
    if "connect.doc" in avro:
        builder.doc(str(avro["connect.doc"]))
    for k, v in (avro.get("connect.parameters") or {}).items():
        builder.parameter(k, str(v))
    return builder.build()


def _with_optional(schema: Schema) -> Schema:
    import dataclasses

    return dataclasses.replace(schema, optional=True)


def _from_datum(schema: Schema, datum: Any) -> Any:
    if datum is None:
        return None
    if schema.name in (Decimal.LOGICAL_NAME, Date.LOGICAL_NAME, Time.LOGICAL_NAME, Timestamp.LOGICAL_NAME):
        return datum
    t = schema.type
    if t is Type.ARRAY:
        return [_from_datum(required_schema(schema.value_schema, "array element"), v) for v in datum]
    if t is Type.MAP:
        ks, vs = schema.key_schema, schema.value_schema
        assert ks is not None and vs is not None
        if isinstance(datum, list):
            return {_from_datum(ks, e["key"]): _from_datum(vs, e["value"]) for e in datum}
        return {k: _from_datum(vs, v) for k, v in datum.items()}
    if t is Type.STRUCT:
        out = Struct(schema)
        for f in schema.fields or ():
            out.put(f.name, _from_datum(f.schema, datum.get(f.name)))
        return out
    return datum


class AvroConverter(Converter):
    """``io.confluent.connect.avro.AvroConverter`` (Schema Registry wire format)."""

    KAFKA_CLASS_NAME = "io.confluent.connect.avro.AvroConverter"

    def __init__(self) -> None:
        self._client: SchemaRegistryClient | None = None
        self._is_key = False
        self._auto_register = True
        self._writer_cache: dict[Schema, tuple[str, Any]] = {}
        self._reader_cache: dict[int, tuple[Schema, Any]] = {}

    def config(self) -> ConfigDef:
        return config_def()

    def configure(self, configs: Mapping[str, Any], is_key: bool | None = None) -> None:
        parsed = config_def().parse(with_type(configs, is_key))
        self._is_key = bool(is_key)
        self._auto_register = bool(parsed[AUTO_REGISTER_CONFIG])
        self._client = SchemaRegistryClient(list(parsed[REGISTRY_URL_CONFIG]))

    def _subject(self, topic: str) -> str:
        return f"{topic}-{'key' if self._is_key else 'value'}"

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any, headers: Any = None) -> bytes | None:
        if value is None and (schema is None or schema.default is None):
            return None
        if schema is None:
            raise DataException("AvroConverter needs a schema; schemaless data cannot be written as Avro")
        assert self._client is not None, "configure() first"
        cached = self._writer_cache.get(schema)
        if cached is None:
            avro_json = _ToAvro().schema(schema)
            text = json.dumps(avro_json, separators=(",", ":"))
            cached = (text, _fastavro().parse_schema(avro_json))
            self._writer_cache[schema] = cached
        text, parsed = cached
        schema_id = self._client.register(self._subject(topic), text, self._auto_register)
        buf = io.BytesIO()
        buf.write(_HEADER.pack(MAGIC, schema_id))
        try:
            _fastavro().schemaless_writer(buf, parsed, _to_datum(schema, value))
        except (ValueError, TypeError, OverflowError, struct.error) as e:
            raise DataException(f"Failed to serialize Avro data from topic {topic}: {e}") from e
        return buf.getvalue()

    def to_connect_data(self, topic: str, value: bytes | None, headers: Any = None) -> SchemaAndValue:
        if value is None:
            return SchemaAndValue(None, None)
        if len(value) < _HEADER.size or value[0] != MAGIC:
            raise DataException(f"Failed to deserialize data for topic {topic} to Avro: Unknown magic byte!")
        assert self._client is not None, "configure() first"
        _, schema_id = _HEADER.unpack_from(value)
        cached = self._reader_cache.get(schema_id)
        if cached is None:
            avro_json = json.loads(self._client.schema_by_id(schema_id))
            cached = (_from_avro_schema(avro_json), _fastavro().parse_schema(avro_json))
            self._reader_cache[schema_id] = cached
        schema, parsed = cached
        try:
            datum = _fastavro().schemaless_reader(io.BytesIO(value[_HEADER.size:]), parsed, None)
        except (EOFError, ValueError, TypeError, IndexError, struct.error) as e:
            raise DataException(f"Failed to deserialize Avro data for topic {topic}: {e}") from e
        return SchemaAndValue(schema, _from_datum(schema, datum))
