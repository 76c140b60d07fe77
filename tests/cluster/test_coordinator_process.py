"""What the coordinator actor's process loads. A cluster's start waits for its coordinator, which
is created with the node actors (or once they have read their directories' identity, for
directories on other hosts); its process imports its body beside the nodes importing theirs, and
every second of that import is a second of ``strata cluster start``. The body needs
no record kernels (a state record is encoded by the node that appends it), so the process must
load neither numba nor the storage engine's record code nor the protocol's schemas."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])

PROBE = """
import sys
import cluster.runtime.actors
from cluster.runtime.coordinator_body import CoordinatorBody
heavy = sorted(m for m in ("numba", "storage.records", "storage.kernels", "storage.log",
                           "cleaner.kernels", "node.server", "kio") if m in sys.modules)
assert not heavy, heavy
"""


def test_the_coordinators_body_loads_neither_numba_nor_the_storage_engine_nor_kio() -> None:
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
