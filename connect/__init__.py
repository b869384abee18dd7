"""strom.connect: a Kafka Connect runtime in Python.

Layering follows Kafka Connect: :mod:`strom.connect.data` (schemas and values) and
:mod:`strom.connect.api` (the SPI connectors, tasks, converters and transformations implement)
are the foundation; :mod:`strom.connect.runtime` runs them; :mod:`strom.connect.rest` serves
Kafka Connect's REST API. This package's ``__init__`` imports nothing, so that the broker's
plugin manager can register :mod:`strom.connect.builtin` without loading Connect.
"""
