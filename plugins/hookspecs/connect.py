"""Extension point: Kafka Connect plugins (connectors, converters, header converters,
transformations and predicates).

A plugin offers classes through :func:`strom_connect_plugins`; ``strom.connect.plugins.
PluginRegistry`` sorts them by kind (by their base classes in ``strom.connect.api``) and resolves
the names configs use: the Python qualified name, the class's ``KAFKA_CLASS_NAME`` (e.g.
``org.apache.kafka.connect.file.FileStreamSourceConnector``), the simple name and Kafka's alias
(``FileStreamSource``). Built-ins are offered by ``strom.connect.builtin`` the same way.

This module imports nothing from ``strom.connect``: the broker registers every hookspec and must
not load Connect.
"""

from __future__ import annotations

from strom.plugins.markers import hookspec


@hookspec
def strom_connect_plugins() -> list[type]:  # type: ignore[empty-body]
    """Offer Connect plugin classes.

    Return the classes (not instances): subclasses of ``strom.connect.api``'s ``Connector``
    (``SourceConnector``/``SinkConnector``), ``Converter``, ``HeaderConverter``,
    ``Transformation`` or ``Predicate``. Each must be instantiable with no arguments. A class
    may set ``KAFKA_CLASS_NAME`` to the fully qualified Java class name it replaces.
    """
