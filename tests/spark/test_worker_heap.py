"""A Spark Python worker that loaded the reader's kernels (and joined Ray) keeps what it loaded out
of the garbage collector's sight: PySpark collects after every task of a reused worker, and a full
collection over Ray, numba and pyarrow costs more CPU than decoding the task's rows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import gc, time
from cluster.spark.connection import warm_up
assert gc.get_freeze_count() == 0
warm_up()
frozen = gc.get_freeze_count()
assert frozen > 10_000, frozen
warm_up()                                   # nothing new loaded: nothing frozen again
assert gc.get_freeze_count() == frozen
garbage = []
garbage.append(garbage)                     # a cycle made after the freeze is still collected
del garbage
assert gc.collect() >= 1
start = time.process_time()
gc.collect()
print(frozen, time.process_time() - start)
"""


def test_warm_up_freezes_what_the_worker_loaded_so_collections_after_tasks_stay_cheap() -> None:
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    frozen, seconds = out.stdout.split()
    assert float(seconds) < 0.01, f"a collection after the freeze took {seconds} s"
