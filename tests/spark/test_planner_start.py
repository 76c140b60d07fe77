"""What a planner process of the ``strata`` source loads. Spark unpickles the data source in
Python processes of its own to plan a read; a streaming query starts a NEW one per query (its
``PythonStreamingSourceRunner``) and waits for it before its first micro-batch. Planning asks
offsets over Ray and decodes nothing, so it must load neither numba (its import and the kernels'
warm-up cost about a second there) nor the storage engine: only the tasks that read need them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parents[2])

IMPORT_PROBE = """
import pickle, sys
import cluster.spark.source, cluster.spark.stream
from cluster.spark.source import StrataDataSource
source = pickle.loads(pickle.dumps(StrataDataSource({"topic": "t"})))
heavy = sorted(m for m in ("numba", "storage.records", "storage.view", "storage.kernels",
                           "cluster.spark.encoding", "cluster.spark.decoding") if m in sys.modules)
assert not heavy, heavy
"""

PLAN_PROBE = """
import sys
from pyspark.sql.streaming.datasource import ReadAllAvailable
from pyspark.sql.types import BinaryType, StructField, StructType
from cluster.spark.source import StrataReader
from cluster.spark.stream import StrataStreamReader

options = {"topic": "planned", "namespace": sys.argv[1], "address": sys.argv[2],
           "startingOffsets": "earliest"}
schema = StructType([StructField("value", BinaryType())])
reader = StrataReader(dict(options), schema)
parts = reader.plan()
assert [(p.partition, p.start, p.end) for p in parts] == [(0, 0, 3), (1, 0, 0)], parts
assert [[p.partition for p in t.parts] for t in reader.partitions()] == [[0]]
stream = StrataStreamReader(dict(options), schema)
start = stream.initialOffset()
end = stream.latestOffset(start, ReadAllAvailable())
assert end == {"planned": {"0": 3, "1": 0}}, end
assert [(p.partition, p.start, p.end) for p in stream.plan(start, end)] == [(0, 0, 3)]
assert [[p.partition for p in t.parts] for t in stream.partitions(start, end)] == [[0]]
assert "numba" not in sys.modules, "the planner loaded numba"
"""


def _run(probe: str, *args: str) -> None:
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-c", probe, *args], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_unpickling_the_data_source_loads_neither_numba_nor_the_storage_engine() -> None:
    _run(IMPORT_PROBE)


def test_batch_and_stream_planners_ask_offsets_without_loading_numba(
        module_cluster: Any, ray_session: str) -> None:
    from storage.records import Record

    module_cluster.create_topic("planned", partitions=2)
    module_cluster.produce("planned", 0, [Record(value=b"%d" % i) for i in range(3)])
    _run(PLAN_PROBE, module_cluster.namespace, ray_session)
