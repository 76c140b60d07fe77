"""A Spark Python worker that joined Ray ends quietly on SIGTERM. Spark ends its Python workers
(an idle one, the planner of a stopped streaming query) with SIGTERM; Ray's core worker installs
a failure-signal handler that printed a stack dump ("SIGTERM received ...") for each of them, so
every ordinary end looked like a crash in the console."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])

WORKER = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_DFL)      # what pyspark.daemon gives each worker
from cluster.spark.connection import ensure_ray
ensure_ray(sys.argv[1])
print("joined", flush=True)
time.sleep(60)
"""


def test_a_worker_that_joined_ray_ends_on_sigterm_without_a_stack_dump(ray_session: str) -> None:
    env = {**os.environ, "PYTHONPATH": ROOT}
    worker = subprocess.Popen([sys.executable, "-c", WORKER, ray_session], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline().strip() == "joined", worker.stderr.read()
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
    finally:
        worker.kill()
    assert worker.returncode == -signal.SIGTERM
    assert "SIGTERM received" not in err and "PC: @" not in err, err
