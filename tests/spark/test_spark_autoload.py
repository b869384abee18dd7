"""PySpark's data source auto-discovery finds "strom" through the ``pyspark_strom`` shim.

Runs in a child process: discovery happens once per JVM, when the first Python data source is
looked up, and the parent's JVM may already exist with a different PYTHONPATH.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from spark_helpers import create_topic, produce

from strom.core.testing import BrokerProcess

AUTOLOAD = Path(__file__).resolve().parents[2] / "spark_bridge" / "autoload"

SCRIPT = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .getOrCreate())
    n = (spark.read.format("strom").option("kafka.bootstrap.servers", sys.argv[1])
         .option("subscribe", sys.argv[2]).load().count())
    print(f"COUNT={n}", flush=True)
    spark.stop()
""")


def test_strom_format_without_register(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [(0, None, b"x")] * 7)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(AUTOLOAD), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", SCRIPT, broker.bootstrap, topic_name], env=env,
                         capture_output=True, text=True, timeout=240)
    assert "COUNT=7" in out.stdout, out.stdout[-2000:] + out.stderr[-4000:]
