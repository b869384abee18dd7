"""Only maps the repository onto the ``strom`` import package; metadata lives in pyproject.toml.

``strom/`` is the package root, and ``strom/core``, ``strom/plugins``, ``strom/connect``,
``strom/streams``, ``strom/tiered``, ``strom/spark_bridge`` and ``strom/console`` are relative symlinks to the
top-level folders, so the source tree itself is the ``strom`` package for every tool that reads
it (mypy, IDEs, call-graph tools), not only for the installed copy. setuptools follows the links:
a wheel holds real files under ``strom/``, and an editable install maps ``strom`` to ``strom/``.
Nothing is installed under a top-level folder's own name (``import core`` fails).
"""

from setuptools import find_packages, setup

# PySpark (4.x) auto-registers Python data sources from top-level modules named pyspark_*
# that expose DefaultSource: ship strom's shim as the top-level module pyspark_strom.
setup(
    package_dir={"strom": "strom", "": "spark_bridge/autoload"},
    packages=find_packages(include=["strom", "strom.*"]),
    py_modules=["pyspark_strom"],
)
