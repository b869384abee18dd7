"""AvroConverter against a small Schema Registry REST server (Confluent's API, run in-process).

The registry here is a stand-in for Confluent's Schema Registry (an external service, not a
strom component): it stores schemas, hands out ids and answers the three calls the converter
makes, over real HTTP.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import fastavro
import pytest

from strom.connect.converters.avro import AvroConverter
from strom.connect.data import Date, Decimal, Schema, SchemaBuilder, Struct, Timestamp
from strom.connect.exceptions import ConfigException, DataException

UTC = dt.UTC


class Registry:
    def __init__(self) -> None:
        self.schemas: dict[int, str] = {}
        self.subjects: dict[str, list[int]] = {}
        self.calls: list[str] = []

    def handler(self) -> type[BaseHTTPRequestHandler]:
        reg = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                reg.calls.append(f"POST {self.path}")
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                parts = self.path.strip("/").split("/")
                subject = parts[1]
                text = body["schema"]
                existing = next((i for i, s in reg.schemas.items() if s == text), None)
                if len(parts) == 3:  # register
                    sid = existing or len(reg.schemas) + 1
                    reg.schemas[sid] = text
                    reg.subjects.setdefault(subject, []).append(sid)
                    self._answer(200, {"id": sid})
                elif existing is not None and existing in reg.subjects.get(subject, []):  # lookup
                    self._answer(200, {"subject": subject, "id": existing, "version": 1, "schema": text})
                else:
                    self._answer(404, {"error_code": 40403, "message": "Schema not found"})

            def do_GET(self) -> None:
                reg.calls.append(f"GET {self.path}")
                sid = int(self.path.rsplit("/", 1)[-1])
                if sid in reg.schemas:
                    self._answer(200, {"schema": reg.schemas[sid]})
                else:
                    self._answer(404, {"error_code": 40403, "message": "Schema not found"})

        return Handler


@pytest.fixture
def registry() -> Iterator[tuple[Registry, str]]:
    reg = Registry()
    server = ThreadingHTTPServer(("127.0.0.1", 0), reg.handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield reg, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def make(url: str, is_key: bool = False, **extra: str) -> AvroConverter:
    c = AvroConverter()
    c.configure({"schema.registry.url": url, **extra}, is_key)
    return c


PERSON = (SchemaBuilder.struct().name("com.example.Person").version(1).doc("who")
          .field("name", Schema.STRING_SCHEMA)
          .field("age", Schema.OPTIONAL_INT8_SCHEMA)
          .field("score", Schema.FLOAT64_SCHEMA)
          .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).build())
          .field("attrs", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT64_SCHEMA).build())
          .field("codes", SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.STRING_SCHEMA).optional().build())
          .field("balance", Decimal.schema(2))
          .field("born", Date.SCHEMA)
          .field("seen", SchemaBuilder.int64().name(Timestamp.LOGICAL_NAME).version(1).optional().build())
          .field("raw", Schema.BYTES_SCHEMA)
          .build())


def person() -> Struct:
    return (Struct(PERSON).put("name", "Ada").put("age", 36).put("score", 9.5).put("tags", ["a", "b"])
            .put("attrs", {"x": 1}).put("codes", {1: "one", 2: "two"})
            .put("balance", decimal.Decimal("12.34")).put("born", dt.date(1815, 12, 10))
            .put("seen", dt.datetime(2020, 1, 2, 3, 4, 5, 6000, tzinfo=UTC)).put("raw", b"\x00\x01"))


def test_round_trip_and_wire_format(registry: tuple[Registry, str]) -> None:
    reg, url = registry
    writer = make(url)
    data = writer.from_connect_data("people", PERSON, person())
    assert data is not None and data[0] == 0
    sid = int.from_bytes(data[1:5], "big")
    assert reg.subjects == {"people-value": [sid]}
    # The payload is plain Avro binary under the registered schema.
    avro_schema = json.loads(reg.schemas[sid])
    assert avro_schema["name"] == "com.example.Person" and avro_schema["type"] == "record"
    fields = {f["name"]: f for f in avro_schema["fields"]}
    assert fields["age"]["type"] == ["null", {"type": "int", "connect.type": "int8"}]
    assert fields["balance"]["type"]["logicalType"] == "decimal"
    assert fields["codes"]["type"][1]["items"]["name"] == "io.confluent.connect.avro.MapEntry"
    datum: Any = fastavro.schemaless_reader(io.BytesIO(data[5:]), fastavro.parse_schema(avro_schema), None)
    assert datum["name"] == "Ada" and datum["codes"] == [{"key": 1, "value": "one"}, {"key": 2, "value": "two"}]
    # A fresh converter (no caches) reads it back through the registry.
    reader = make(url)
    back = reader.to_connect_data("people", data)
    assert back.value == person()
    assert back.schema == PERSON
    # The second message with the same schema makes no registry call.
    n = len(reg.calls)
    writer.from_connect_data("people", PERSON, person())
    reader.to_connect_data("people", data)
    assert len(reg.calls) == n


def test_key_subject_and_primitives(registry: tuple[Registry, str]) -> None:
    reg, url = registry
    c = make(url, is_key=True)
    data = c.from_connect_data("t", Schema.STRING_SCHEMA, "k1")
    assert "t-key" in reg.subjects
    assert c.to_connect_data("t", data).value == "k1"
    assert c.from_connect_data("t", Schema.OPTIONAL_STRING_SCHEMA, None) is None
    assert c.to_connect_data("t", None).value is None


def test_unnamed_nested_structs_get_default_names(registry: tuple[Registry, str]) -> None:
    _, url = registry
    inner = SchemaBuilder.struct().field("x", Schema.INT32_SCHEMA).build()
    outer = SchemaBuilder.struct().field("a", inner).field("b", SchemaBuilder.struct().field("y", Schema.INT16_SCHEMA).build()).build()
    field_b = outer.field("b")
    assert field_b is not None
    value = Struct(outer).put("a", Struct(inner).put("x", 1)).put("b", Struct(field_b.schema).put("y", 2))
    c = make(url)
    back = c.to_connect_data("t", c.from_connect_data("t", outer, value))
    assert back.value == value


def test_errors(registry: tuple[Registry, str]) -> None:
    _, url = registry
    c = make(url)
    with pytest.raises(DataException, match="Unknown magic byte"):
        c.to_connect_data("t", b"\x01\x00\x00\x00\x01")
    with pytest.raises(DataException, match="HTTP 404"):
        c.to_connect_data("t", b"\x00\x00\x00\x00\x63\x02")  # unknown schema id
    data = c.from_connect_data("people", PERSON, person())
    assert data is not None
    with pytest.raises(DataException, match="Failed to deserialize Avro"):
        c.to_connect_data("people", data[:-3])  # truncated
    with pytest.raises(DataException, match="needs a schema"):
        c.from_connect_data("t", None, {"a": 1})
    with pytest.raises(ConfigException, match=r"schema\.registry\.url"):
        AvroConverter().configure({}, False)
    no_register = make(url, False, **{"auto.register.schemas": "false"})
    with pytest.raises(DataException, match="404"):
        no_register.from_connect_data("other", Schema.INT64_SCHEMA, 5)


def test_unreachable_registry() -> None:
    c = make("http://127.0.0.1:9")  # discard port: nothing listens
    with pytest.raises(DataException, match="unreachable"):
        c.from_connect_data("t", Schema.INT32_SCHEMA, 1)
