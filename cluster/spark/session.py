"""A light local SparkSession whose Python workers use this interpreter and join a Ray cluster.

Spark starts its Python workers from the JVM with the JVM's environment, so what they need is set
in ``os.environ`` while the JVM starts: ``PYSPARK_PYTHON`` (else they run ``python3`` from PATH,
without ray or pyarrow; Spark's ``spark.pyspark.python`` setting is ignored for local workers),
``SPARK_LOCAL_IP`` and, when ``ray_address`` is given, ``RAY_ADDRESS`` (what the data sources'
default ``address=auto`` resolves to). ``RAY_ADDRESS`` is put back as it was afterwards, so this
process's own Ray calls are not redirected.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

LIGHT_CONFIG = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.sql.adaptive.enabled": "false",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    "spark.sql.session.timeZone": "UTC",
}


def local_session(*, ray_address: str | None = None, master: str = "local[2]",
                  app_name: str = "strata", config: Mapping[str, str] | None = None,
                  register_sources: bool = True) -> Any:
    """``getOrCreate`` a local session with ``LIGHT_CONFIG`` (+ ``config``), log level ERROR, and
    the ``strata`` data sources registered."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    saved = os.environ.get("RAY_ADDRESS")
    if ray_address is not None:
        os.environ["RAY_ADDRESS"] = ray_address
    try:
        builder = SparkSession.builder.master(master).appName(app_name)
        for key, value in {**LIGHT_CONFIG, **(config or {})}.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
    finally:
        if saved is None:
            os.environ.pop("RAY_ADDRESS", None)
        else:
            os.environ["RAY_ADDRESS"] = saved
    spark.sparkContext.setLogLevel("ERROR")
    if register_sources:
        from cluster.spark import register

        register(spark)
    return spark


def ray_address() -> str:
    """The GCS address of the Ray cluster this process is a driver of."""
    import ray

    return ray.get_runtime_context().gcs_address
