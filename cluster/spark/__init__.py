"""PySpark data sources of a Strata cluster (Spark's Python Data Source API).

    from cluster.spark import register
    register(spark)
    df.write.format("strata").option("topic", "orders").mode("append").save()
    spark.read.format("strata").option("topic", "orders").load()
    spark.readStream.format("strata").option("topic", "orders").load()
    spark.read.format("strata-stats").load()

Options (``address``, ``namespace``, ``startingOffsets``, ``valueFormat``...) are listed in
``cluster.spark.options``; ``cluster.spark.session.local_session`` builds a light local session
whose Python workers join a given Ray cluster. Importing this package loads neither pyspark nor
ray; ``register`` does.

Owns: ``source`` (the ``strata`` data source Spark sees), ``reader`` and ``writer`` (the batch
read and write), ``stream`` (the streaming source), ``sink`` (the streaming sink), ``stats`` (the
``strata-stats`` source), and their parts: ``options``, ``offsets``, ``read_tasks``,
``connection``, ``encoding``, ``decoding``, ``kernels``, ``session``, ``errors``.

May call: ``cluster.client`` (every call to the cluster goes through a ``Cluster``),
``cluster.client.txn_client`` and ``cluster.transactions`` (a write's transaction),
``cluster.runtime.head`` (a Ray cluster's token check), the shared floor, and storage's
read-only views of the segment files. Nothing else of the cluster calls it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the ``strata`` and ``strata-stats`` data sources on ``spark``. First checks that
    the Python its workers run (``PYSPARK_PYTHON`` when the session started, else ``python3``
    from PATH) can import ray, pyarrow and this package: ``SparkWorkerPythonError`` in one line
    otherwise (a Spark Connect session, which has no ``sparkContext``, is not checked). Reads
    group topic partitions into as many tasks as the session's default parallelism
    (``cluster.spark.read_tasks``)."""
    import os
    import subprocess
    import sys

    from cluster.errors import SparkWorkerPythonError

    context = getattr(spark, "_sc", None) or getattr(spark, "sparkContext", None)
    python = getattr(context, "pythonExec", None)
    if python and os.path.realpath(str(python)) != os.path.realpath(sys.executable):
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        try:
            probe = subprocess.run([str(python), "-c", "import ray, pyarrow, cluster"],
                                   capture_output=True, text=True, timeout=120, env=env)
            failed = probe.returncode != 0 and (probe.stderr.strip().splitlines() or ["?"])[-1]
        except OSError as err:
            failed = err.strerror or str(err)
        if failed:
            raise SparkWorkerPythonError(
                f"Spark's Python workers run {python} (PYSPARK_PYTHON when the session "
                f"started), which cannot import ray, pyarrow and cluster ({failed}): set "
                f"PYSPARK_PYTHON={sys.executable} before creating the session, or create it with "
                "cluster.spark.session.local_session()", python=str(python))
    from cluster.spark.source import StrataDataSource
    from cluster.spark.stats import StrataStatsDataSource

    parallelism = getattr(context, "defaultParallelism", None)
    spark.dataSource.register(StrataDataSource.for_session(parallelism))
    spark.dataSource.register(StrataStatsDataSource)
