"""Pick the spark-sql-kafka-0-10 artifact (Scala 2.13) for the installed PySpark, from Maven Central.

Spark resolves it itself through ``spark.jars.packages``; this module only chooses the version:
the installed Spark's own when Maven Central has it, otherwise the newest release published
below it (with a note, because a connector of another Spark version is not guaranteed to work).
"""

from __future__ import annotations

import re
import urllib.request

GROUP_PATH = "https://repo1.maven.org/maven2/org/apache/spark/spark-sql-kafka-0-10_2.13"


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version.split("-")[0]))


def published_versions(timeout: float = 20.0) -> list[str]:
    """Release versions (no previews) listed in Maven Central's metadata, oldest first."""
    with urllib.request.urlopen(f"{GROUP_PATH}/maven-metadata.xml", timeout=timeout) as resp:
        text = resp.read().decode()
    found = re.findall(r"<version>([^<]+)</version>", text)
    return sorted({v for v in found if re.fullmatch(r"\d+\.\d+\.\d+", v)}, key=_key)


def _exists(version: str, timeout: float = 20.0) -> bool:
    url = f"{GROUP_PATH}/{version}/spark-sql-kafka-0-10_2.13-{version}.pom"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def connector_coordinate(spark_version: str) -> tuple[str, str | None]:
    """(Maven coordinate, note or None) of the connector to use with ``spark_version``."""
    base = spark_version.split("+")[0]
    if _exists(base):
        return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{base}", None
    older = [v for v in published_versions() if _key(v) < _key(base)]
    if not older:
        raise RuntimeError(f"no spark-sql-kafka-0-10_2.13 release at or below {base} on Maven Central")
    chosen = older[-1]
    return (f"org.apache.spark:spark-sql-kafka-0-10_2.13:{chosen}",
            f"spark-sql-kafka {base} is not on Maven Central; using {chosen}, the newest release below it")


if __name__ == "__main__":
    import pyspark

    coord, note = connector_coordinate(pyspark.__version__)
    print(coord)
    if note:
        print(note)
