"""Fault tests: real broker processes under kill -9, corrupt files, hostile frames.

Their shared helpers (``kafka_wire``, ``ck_helpers``) and bench/'s scripts (``restart_cycles``)
are importable by plain name through the import path tests/conftest.py sets.
"""
