"""``cluster.spark.register(spark)`` checks the Python Spark starts its workers with before
registering: the README's snippet failed deep inside a Spark task when ``PYSPARK_PYTHON`` was not
set (workers ran ``python3`` from PATH, without ray or pyarrow). The session here is a stand-in
with the two attributes ``register`` reads (``_sc.pythonExec``, what PySpark's SparkContext
sets from ``PYSPARK_PYTHON``, and ``dataSource``): starting a JVM would prove nothing more."""

from __future__ import annotations

import pickle
import shutil
import sys
from types import SimpleNamespace

import pytest

from cluster.errors import SparkWorkerPythonError
from cluster.spark import register


def session(python: str) -> SimpleNamespace:
    registered: list[str] = []
    return SimpleNamespace(_sc=SimpleNamespace(pythonExec=python), registered=registered,
                           dataSource=SimpleNamespace(register=lambda s: registered.append(
                               s.name())))


@pytest.mark.parametrize("python", ["/usr/bin/python3", "/nonexistent/python3"])
def test_register_refuses_worker_python_without_ray_in_one_line(python: str) -> None:
    if python == "/usr/bin/python3" and shutil.which(python) is None:
        python = "/bin/false"
    spark = session(python)
    with pytest.raises(SparkWorkerPythonError) as raised:
        register(spark)
    message = str(raised.value)
    assert "\n" not in message and python in message
    assert f"PYSPARK_PYTHON={sys.executable}" in message
    assert "cluster.spark.session.local_session()" in message
    assert spark.registered == []
    assert str(pickle.loads(pickle.dumps(raised.value))) == message


def test_register_accepts_this_interpreter() -> None:
    spark = session(sys.executable)
    register(spark)
    assert spark.registered == ["strata", "strata-stats"]
