"""How a read is cut into Spark tasks (``cluster.spark.read_tasks``), against plain oracles: every
topic partition with records in exactly one task, none without, as many tasks as the rule says,
and a balance within LPT's bound of the best possible split (found by trying every split)."""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark import cloudpickle

from cluster.spark.read_tasks import GROUP_RECORDS_AT_MOST, read_tasks
from cluster.spark.source import StrataDataSource


@dataclass(frozen=True)
class Part:
    partition: int
    start: int
    end: int


def _parts(sizes: list[int]) -> list[Part]:
    return [Part(p, 100, 100 + n) for p, n in enumerate(sizes)]


def _loads(tasks) -> list[int]:
    return [sum(p.end - p.start for p in t.parts) for t in tasks]


def _best_makespan(sizes: list[int], bins: int) -> int:
    best = sum(sizes)
    for assignment in itertools.product(range(bins), repeat=len(sizes)):
        loads = [0] * bins
        for size, b in zip(sizes, assignment):
            loads[b] += size
        best = min(best, max(loads))
    return best


def test_six_equal_partitions_on_two_cores_are_two_tasks_of_three() -> None:
    tasks = read_tasks(_parts([1000] * 6), parallelism=2)
    assert [[p.partition for p in t.parts] for t in tasks] == [[0, 2, 4], [1, 3, 5]]
    assert _loads(tasks) == [3000, 3000]


def test_without_a_parallelism_each_partition_with_records_is_a_task_of_its_own() -> None:
    tasks = read_tasks(_parts([5, 0, 7]), parallelism=None)
    assert [[(p.partition, p.start, p.end) for p in t.parts] for t in tasks] == [
        [(0, 100, 105)], [(2, 100, 107)]]


def test_partitions_with_nothing_to_read_get_no_task() -> None:
    assert read_tasks(_parts([0, 0, 0]), parallelism=2) == []
    tasks = read_tasks(_parts([0, 3, 0, 0]), parallelism=4)
    assert [[p.partition for p in t.parts] for t in tasks] == [[1]]


def test_a_large_read_gets_more_tasks_than_the_parallelism() -> None:
    sizes = [GROUP_RECORDS_AT_MOST] * 5
    tasks = read_tasks(_parts(sizes), parallelism=2)
    assert len(tasks) == 5 and _loads(tasks) == sizes
    # never more tasks than partitions, however large
    assert len(read_tasks(_parts([10 * GROUP_RECORDS_AT_MOST] * 2), parallelism=1)) == 2


@pytest.mark.parametrize("seed", range(200))
def test_random_plans_against_the_oracle(seed: int) -> None:
    rng = random.Random(seed)
    sizes = [rng.choice([0, rng.randint(1, 50), rng.randint(1, 5000)])
             for _ in range(rng.randint(0, 7))]
    parallelism = rng.choice([None, 1, 2, 3, 4, 8])
    tasks = read_tasks(_parts(sizes), parallelism)
    nonempty = [p for p, n in enumerate(sizes) if n]
    read = [p.partition for t in tasks for p in t.parts]
    assert sorted(read) == nonempty                      # each once, none empty
    for t in tasks:
        assert t.parts and [p.partition for p in t.parts] == sorted(p.partition for p in t.parts)
        assert all(p == Part(p.partition, 100, 100 + sizes[p.partition]) for p in t.parts)
    if parallelism is None:
        assert len(tasks) == len(nonempty)
        return
    assert len(tasks) == min(len(nonempty), parallelism)   # sizes are far below the cap
    if tasks:
        best = _best_makespan([sizes[p] for p in nonempty], len(tasks))
        m = len(tasks)
        assert max(_loads(tasks)) * 3 * m <= best * (4 * m - 1)   # LPT: <= (4/3 - 1/3m) OPT


UNPICKLE = """
import pickle, sys
source = pickle.loads(sys.stdin.buffer.read())({"topic": "t"})
from pyspark.sql.types import BinaryType, StructField, StructType
schema = StructType([StructField("value", BinaryType())])
print(source.name(), source.reader(schema).parallelism, source.streamReader(schema).parallelism)
"""


def test_the_registered_source_takes_the_sessions_parallelism_to_the_planner_processes() -> None:
    """Spark pickles the registered class and unpickles it in planner processes of its own: the
    parallelism must travel with the class, not be looked up in a module there."""
    root = str(Path(__file__).resolve().parents[2])
    data = cloudpickle.dumps(StrataDataSource.for_session(5))
    out = subprocess.run([sys.executable, "-c", UNPICKLE], input=data, capture_output=True,
                         env={**os.environ, "PYTHONPATH": root}, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().split() == ["strata", "5", "5"]
    assert StrataDataSource.spark_parallelism is None       # the module's class is untouched
