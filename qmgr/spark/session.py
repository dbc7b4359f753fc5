"""The Spark session of the load job and its tests: a master URL (``local[*]`` by default),
loopback networking, UTC timestamps, the Python of this process on the executors, the JVMs'
options (:data:`JAVA_OPTIONS`), and the ``qmgr`` data source registered when it is available."""

from __future__ import annotations

import os
import sys
from typing import Any

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
# The driver's and executors' JVMs compile with the client compiler only (C1). The job's JVM
# side is short work on small frames (planning, Arrow hand-over, Parquet, the metric queries)
# next to a cluster it measures on the same cores; the optimising compiler's threads spent
# more CPU compiling than its code saved: the demo (3 scenarios × 400 messages) took 110 s of
# machine CPU with it and 77 s without, a 100,000-message scenario 246 s and 208 s, and each
# ran faster. QMGR_SPARK_JAVA_OPTIONS replaces these options ("" for the JVM's defaults).
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
JAVA_OPTIONS_ENV = "QMGR_SPARK_JAVA_OPTIONS"


def session_config(master: str, cores: int | None = None) -> dict[str, str]:
    """The settings :func:`session` gives a new session (``cores``: executor cores to ask a
    cluster master for, and the shuffle width)."""
    width = str(max(2, (cores or os.cpu_count() or 2) * 2))
    config = {
        "spark.master": master,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": width,
        "spark.default.parallelism": width,
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "spark.python.worker.reuse": "true",
    }
    java = os.environ.get(JAVA_OPTIONS_ENV, JAVA_OPTIONS).strip()
    if java:
        config["spark.driver.extraJavaOptions"] = java
        config["spark.executor.extraJavaOptions"] = java
    if cores is not None and not master.startswith("local"):
        config["spark.cores.max"] = str(cores)
    return config


def session(app: str, master: str = DEFAULT_MASTER, cores: int | None = None) -> SparkSession:
    """A session on ``master`` (an existing active session is reused, as Spark does)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder: Any = SparkSession.builder.appName(app)
    for key, value in session_config(master, cores).items():
        builder = builder.config(key, value)
    spark: SparkSession = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register_source(spark)
    return spark


def local_session(app: str, cores: int = 2) -> SparkSession:
    """A session in local mode with ``cores`` threads."""
    return session(app, f"local[{cores}]", cores)


def register_source(spark: SparkSession) -> bool:
    """Register the ``qmgr`` data source; False when this installation has none."""
    try:
        from qmgr import spark as qspark
    except ImportError:
        return False
    register = getattr(qspark, "register", None)
    if register is None:
        return False
    register(spark)
    return True
