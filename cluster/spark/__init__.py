"""PySpark data sources of a Strata cluster (Spark's Python Data Source API).

    from cluster.spark import register
    register(spark)
    df.write.format("strata").option("topic", "orders").mode("append").save()
    spark.read.format("strata").option("topic", "orders").load()
    spark.read.format("strata-stats").load()

Options (``address``, ``namespace``, ``startingOffsets``, ``valueFormat``...) are listed in
``cluster.spark.options``; ``cluster.spark.session.local_session`` builds a light local session
whose Python workers join a given Ray cluster. Importing this package loads neither pyspark nor
ray; ``register`` does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the ``strata`` and ``strata-stats`` data sources on ``spark``."""
    from cluster.spark.source import StrataDataSource
    from cluster.spark.stats import StrataStatsDataSource

    spark.dataSource.register(StrataDataSource)
    spark.dataSource.register(StrataStatsDataSource)
