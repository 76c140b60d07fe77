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
    "spark.sql.session.timeZone": "UTC",
}
# a JVM that starts sooner and runs slower: the C1 compiler only, the serial collector. For tests
# and short scripts; a job that moves data wants the full JIT (with these flags the JVM's per-row
# work, e.g. turning a read's Arrow columns into rows, takes about 1.5 times as long)
QUICK_START_CONFIG = {
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
}


def local_session(*, ray_address: str | None = None, master: str = "local[2]",
                  app_name: str = "strata", config: Mapping[str, str] | None = None,
                  register_sources: bool = True, quick_start: bool = False) -> Any:
    """``getOrCreate`` a local session with ``LIGHT_CONFIG`` (+ ``QUICK_START_CONFIG`` with
    ``quick_start``, + ``config``), log level ERROR, and the ``strata`` data sources
    registered."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    saved = os.environ.get("RAY_ADDRESS")
    if ray_address is not None:
        os.environ["RAY_ADDRESS"] = ray_address
    try:
        builder = SparkSession.builder.master(master).appName(app_name)
        for key, value in session_config(quick_start=quick_start, config=config).items():
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


def session_config(*, quick_start: bool = False,
                   config: Mapping[str, str] | None = None) -> dict[str, str]:
    """What ``local_session`` sets: ``LIGHT_CONFIG``, ``QUICK_START_CONFIG`` with
    ``quick_start``, then ``config``."""
    return {**LIGHT_CONFIG, **(QUICK_START_CONFIG if quick_start else {}), **(config or {})}


def ray_address() -> str:
    """The GCS address of the Ray cluster this process is a driver of."""
    import ray

    return ray.get_runtime_context().gcs_address
