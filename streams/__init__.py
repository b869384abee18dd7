"""Streams DSL with RocksDB state (later issue)."""
