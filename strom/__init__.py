"""strom: a Kafka platform in Python.

The import package is this folder. ``strom/core``, ``strom/plugins``, ``strom/connect``,
``strom/streams``, ``strom/tiered`` and ``strom/spark_bridge`` are relative symlinks to the
repository's top-level folders, so ``core/`` is ``strom.core``, ``plugins/`` is ``strom.plugins``
and so on, in the source tree (for mypy and IDEs) as in an install (see setup.py).
"""

import sys as _sys

__version__ = "0.1.0"


def _import_kio_without_hypothesis() -> None:
    """Import kio with Hypothesis hidden, unless the process already uses Hypothesis.

    kio registers a Hypothesis strategy for each of its phantom types at import whenever
    Hypothesis is importable, and one of them (``text()``) makes Hypothesis build its Unicode
    tables: ~0.3 s per process, and ~2 s more in a directory without a ``.hypothesis`` cache
    (every fresh working directory). strom's processes (broker, Connect workers, Streams apps)
    never generate kio values, so they skip it; a process that imported Hypothesis first, or a
    pytest session, keeps kio's strategies.
    """
    # Under pytest Hypothesis may not be imported yet (its plugin imports it lazily): keep it.
    if any(name in _sys.modules for name in ("hypothesis", "kio", "pytest", "_hypothesis_pytestplugin")):
        return
    _sys.modules["hypothesis"] = None  # type: ignore[assignment]  # `import hypothesis...` raises ImportError
    try:
        import kio.static._phantom  # noqa: F401 - imported for its one-time side effect
    finally:
        del _sys.modules["hypothesis"]


_import_kio_without_hypothesis()
