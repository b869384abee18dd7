"""Top-level shim for PySpark's data source auto-discovery (Spark 4 ``lookup_data_sources``).

PySpark registers, in every new session, the ``DefaultSource`` of each importable top-level
module whose name starts with ``pyspark_``. With this folder on ``sys.path`` (PYTHONPATH, or
installed as the top-level module ``pyspark_strom``), ``spark.read.format("strom")`` works
without calling :func:`strom.spark_bridge.register`.
"""

from strom.spark_bridge import DefaultSource

__all__ = ["DefaultSource"]
