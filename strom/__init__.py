"""strom: a Kafka platform in Python.

The import package is assembled from the repository's top-level folders (see setup.py):
``core/`` is ``strom.core``, ``plugins/`` is ``strom.plugins`` and so on.
"""

__version__ = "0.1.0"
