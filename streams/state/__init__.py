"""State stores of strom.streams: byte-level key-value, window and session stores, in memory
and in RocksDB, with atomic commits, checkpoint files and change-logging wrappers."""

from strom.streams.state.api import (
    ChangelogOffsets,
    KeyValueStore,
    SessionStore,
    StateStore,
    TopicPartition,
    Windowed,
    WindowStore,
)
from strom.streams.state.changelogging import (
    ChangeLoggingKeyValueStore,
    ChangeLoggingSessionStore,
    ChangeLoggingWindowStore,
    changelog_topic,
)
from strom.streams.state.checkpoint import (
    delete_checkpoint,
    read_checkpoint,
    store_path,
    task_dir,
    write_checkpoint,
)
from strom.streams.state.factory import DslStoreSupplier, build_store, changelog_topic_config, make_store
from strom.streams.state.keyvalue import InMemoryKeyValueStore, RocksDBKeyValueStore
from strom.streams.state.session import InMemorySessionStore, RocksDBSessionStore
from strom.streams.state.window import InMemoryWindowStore, RocksDBWindowStore

__all__ = [
    "ChangeLoggingKeyValueStore",
    "ChangeLoggingSessionStore",
    "ChangeLoggingWindowStore",
    "ChangelogOffsets",
    "DslStoreSupplier",
    "InMemoryKeyValueStore",
    "InMemorySessionStore",
    "InMemoryWindowStore",
    "KeyValueStore",
    "RocksDBKeyValueStore",
    "RocksDBSessionStore",
    "RocksDBWindowStore",
    "SessionStore",
    "StateStore",
    "TopicPartition",
    "WindowStore",
    "Windowed",
    "build_store",
    "changelog_topic",
    "changelog_topic_config",
    "delete_checkpoint",
    "make_store",
    "read_checkpoint",
    "store_path",
    "task_dir",
    "write_checkpoint",
]
