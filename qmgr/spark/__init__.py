"""qmgr from Spark (extra ``[spark]``): the "qmgr" data source for ``df.write``,
``spark.read`` and the load job.

    from qmgr.spark import register
    register(spark)
    df.write.format("qmgr").mode("append").option("node", "QM1").option("topic", "T").save()
    spark.read.format("qmgr").option("node", "QM1").option("subscription", "S1").load()
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the "qmgr" data source with ``spark`` (a SparkSession). Node names given as
    options resolve through this process's QMGR_HOME (nodes started on this machine)."""
    from qmgr.spark.source import for_driver

    spark.dataSource.register(for_driver(os.environ.get("QMGR_HOME")))
