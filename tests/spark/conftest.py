"""Fixtures of the Spark tests: ONE local SparkSession for the whole session (a JVM costs 6-9 s),
whose Python workers join the session's Ray head (``RAY_ADDRESS`` is set for the JVM only), ONE
Strata cluster per test module (``strata``: five actor processes cost 5-10 s to start; each test
starts with no topic of its own), and the cluster fixtures of tests/cluster."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.cluster.conftest import FAST, start_cluster, wait_for  # noqa: F401 - fixtures

# transactions left open by a test (a "dead driver") are aborted within 0.1 s of their timeout
FAST_TXN = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 100}
TASK_ATTEMPTS = 2          # local[2,N]: N attempts per task, so a failed task is retried once


@pytest.fixture(scope="session")
def spark(ray_session: str) -> Iterator[Any]:
    from cluster.spark.session import local_session

    session = local_session(ray_address=ray_session, master=f"local[2,{TASK_ATTEMPTS}]",
                            app_name="strata-tests", config={"spark.driver.memory": "512m"},
                            quick_start=True)
    try:
        yield session
    finally:
        session.stop()


_modules = itertools.count()


@pytest.fixture(scope="module")
def module_cluster(ray_session: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A 3-directory cluster shared by the tests of one module (stopped at its end)."""
    from cluster import Cluster

    root: Path = tmp_path_factory.mktemp("spark-cluster")
    cluster = Cluster.start(log_dirs=[str(root / f"d{i}") for i in range(3)], cleaners=1,
                            config={**FAST, **FAST_TXN},
                            namespace=f"strata-spark-{next(_modules)}", address=ray_session)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def strata(spark: Any, module_cluster: Any) -> Iterator[Any]:
    """The module's 3-directory cluster, holding no topic but the internal ones when the test
    starts (the topics a test created are deleted after it, so the next test may reuse a name);
    ``strata.read(topic)`` / ``strata.write(df, topic)`` use its namespace. What else a test
    leaves (transactions, cleaner statistics) stays for the next tests of the module."""
    yield _Strata(spark, module_cluster)
    for topic in module_cluster.list_topics():
        if not topic.name.startswith("__"):
            module_cluster.delete_topic(topic.name)


class _Strata:
    def __init__(self, spark: Any, cluster: Any) -> None:
        self.spark = spark
        self.cluster = cluster
        self.namespace = cluster.namespace

    def write(self, df: Any, topic: str, **options: Any) -> None:
        writer = df.write.format("strata").option("topic", topic) \
            .option("namespace", self.namespace).mode("append")
        for key, value in options.items():
            writer = writer.option(key, str(value))
        writer.save()

    def read(self, topic: str, **options: Any) -> Any:
        reader = self.spark.read.format("strata").option("topic", topic) \
            .option("namespace", self.namespace)
        for key, value in options.items():
            reader = reader.option(key, str(value))
        return reader.load()

    def stats(self) -> Any:
        return self.spark.read.format("strata-stats").option("namespace", self.namespace).load()
