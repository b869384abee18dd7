"""The optional interactive-query HTTP endpoint of a KafkaStreams instance.

Enabled with ``strom.iq.http.enable=true`` plus ``application.server=<host>:<port>``; the
server listens on that host and port (stdlib ``ThreadingHTTPServer``, one thread per request)
and answers, with JSON bodies:

* ``GET /stores/<store>/keys/<key>`` — the key is URL-decoded and converted for the store's key
  serde (integer/long: int, double: float, json: parsed JSON, else the string).
  If this instance owns the key's partition (or the store is global): ``200`` with
  ``{"store", "key", "value", "host"}`` (window stores: ``"windows": [[start, value]...]``,
  session stores: ``"sessions": [[start, end, value]...]``), or ``404`` if absent.
  If another instance owns it: ``307 Temporary Redirect`` with ``Location`` set to the same path
  on the owner and a body ``{"owner": "host:port", "partition": n}``.
  ``503`` while no instance owns the partition (rebalancing).
* ``GET /metadata`` — every instance: host, process, stores, partitions.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from strom.streams.exceptions import StreamsError
from strom.streams.runtime.queries import ReadOnlySessionStore, ReadOnlyWindowStore

if TYPE_CHECKING:
    from strom.streams.runtime.kafka_streams import KafkaStreams


def key_from_text(text: str, serde: Any) -> Any:
    name = getattr(serde, "name", "")
    if name in ("integer", "long"):
        return int(text)
    if name == "double":
        return float(text)
    if name == "json":
        return json.loads(text)
    return text


class IQServer:
    """Serves interactive queries of one KafkaStreams instance over HTTP."""

    def __init__(self, streams: KafkaStreams, host: str, port: int) -> None:
        self.streams = streams
        handler = type("Handler", (_Handler,), {"streams": streams})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name=f"{streams.app}-iq-http",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)


class _Handler(BaseHTTPRequestHandler):
    streams: KafkaStreams

    def log_message(self, format: str, *args: Any) -> None:
        pass  # no per-request lines on stderr

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, default=repr).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        parts = [urllib.parse.unquote(p) for p in urllib.parse.urlsplit(self.path).path.split("/") if p]
        try:
            if parts == ["metadata"]:
                self._send(HTTPStatus.OK, [
                    {"host": str(m.host_info) if m.host_info else None, "process": m.process_id,
                     "stores": sorted(m.state_store_names), "partitions": sorted(m.topic_partitions)}
                    for m in self.streams.streams_metadata()])
                return
            if len(parts) == 4 and parts[0] == "stores" and parts[2] == "keys":
                self._key(parts[1], parts[3])
                return
            self._send(HTTPStatus.NOT_FOUND, {"error": f"no such resource {self.path!r}; "
                                                       f"use /stores/<store>/keys/<key> or /metadata"})
        except StreamsError as exc:
            self._send(HTTPStatus.NOT_FOUND, {"error": str(exc)})
        except ValueError as exc:
            self._send(HTTPStatus.BAD_REQUEST, {"error": str(exc)})

    def _key(self, store: str, text: str) -> None:
        streams = self.streams
        serde = streams.store_key_serde(store)
        key = key_from_text(text, serde)
        me = streams.config.application_server
        if store not in streams.topology.global_stores:
            meta = streams.query_metadata_for_key(store, key, serde)
            if meta.active_host is None:
                self._send(HTTPStatus.SERVICE_UNAVAILABLE,
                           {"error": f"no instance owns partition {meta.partition} of store {store!r} now",
                            "partition": meta.partition})
                return
            if meta.active_process != streams.process_key:
                owner = str(meta.active_host)
                self._send(HTTPStatus.TEMPORARY_REDIRECT, {"owner": owner, "partition": meta.partition},
                           {"Location": f"http://{owner}{self.path}"})
                return
        view = streams.store(store)
        body: dict[str, Any] = {"store": store, "key": key, "host": me}
        if isinstance(view, ReadOnlyWindowStore):
            body["windows"] = [[start, value] for start, value in view.fetch(key, -(1 << 63), (1 << 63) - 1)]
            found = bool(body["windows"])
        elif isinstance(view, ReadOnlySessionStore):
            body["sessions"] = [[w.window.start, w.window.end, value] for w, value in view.fetch(key)]
            found = bool(body["sessions"])
        else:
            body["value"] = view.get(key)
            found = body["value"] is not None
        self._send(HTTPStatus.OK if found else HTTPStatus.NOT_FOUND, body)
