"""Connectors bundled with strom.connect, registered as built-in plugins (``PLUGINS``).

FileStreamSource/FileStreamSink (Kafka's file connectors, same class names and offsets), a
directory source for CSV and JSON-lines files, a datagen source for demos and benchmarks, and a
JDBC-style sink into SQLite and PostgreSQL.
"""

from __future__ import annotations

from strom.connect.connectors.datagen import DatagenConnector
from strom.connect.connectors.directory import DirectorySourceConnector
from strom.connect.connectors.file_stream import FileStreamSinkConnector, FileStreamSourceConnector
from strom.connect.connectors.jdbc_sink import JdbcSinkConnector

PLUGINS: list[type] = [
    FileStreamSourceConnector,
    FileStreamSinkConnector,
    DirectorySourceConnector,
    DatagenConnector,
    JdbcSinkConnector,
]

__all__ = ["PLUGINS", "DatagenConnector", "DirectorySourceConnector", "FileStreamSinkConnector",
           "FileStreamSourceConnector", "JdbcSinkConnector"]
