"""What a cluster's start loads where. Every node actor's process imports its body before the
directory answers, and the start waits for the slowest node; the driver works out each
directory's listener settings before it creates any actor. A cluster without ``listeners`` serves
no Kafka protocol, so neither its driver nor its nodes may load the protocol's schemas (kio) or
the Kafka server (0.4 s of CPU per process); a node never cleans, so it loads no cleaner
(``cluster.kafka.node_broker``, ``cluster.runtime.worker_body``); and neither a node nor a cleaner
loads numba (0.2 s of CPU) before it runs a kernel on data that needs one (``storage.jit``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import ray

from cluster.naming import node_actor_name

ROOT = str(Path(__file__).resolve().parents[2])

KAFKA = ("kio", "node.kafka.config", "node.kafka.server", "cluster.kafka.brokers",
         "cluster.metrics.group_offsets")
CLEANER = ("cleaner.cleaner", "cluster.cleaning.worker")
NUMBA = ("numba",)
CLEANER_ONLY = ("cleaner.cleaner", "cleaner.kernels")

NODE_PROBE = f"""
import sys, tempfile
import cluster.runtime.actors
from cluster.runtime.actor_bodies import NodeBody
from cluster.kafka.node_broker import NodeBroker
from cluster.handles import LocalHandle
from node.logdir import LogDir

path = tempfile.mkdtemp()
logdir = LogDir.open(path)
broker = NodeBroker(path, {{}}, LocalHandle(None, "coordinator"), lambda *names: None)
assert broker.serve(logdir) is None and broker.endpoint() is None
assert broker.committed_offsets(1.0) == ()
broker.close()
logdir.close()
print(sorted(m for m in {KAFKA + CLEANER + NUMBA!r} if m in sys.modules))
"""

CLEANER_PROBE = f"""
import json, sys, tempfile
from pathlib import Path
import cluster.runtime.actors
from cluster.runtime.worker_body import WorkerBody
from cluster.cleaning.clean_assignment import CleanAssignment
from cluster.cleaning.worker import CleanerWorker
from cleaner.config import CleanerConfig
from storage import Log, LogConfig, Record
from storage.files import TopicPartition

swaps = []
worker = CleanerWorker(0, CleanerConfig(dedupe_buffer_size=1 << 20),
                       lambda log_dir: lambda *swap: swaps.append(swap))
loaded = [sorted(m for m in {CLEANER_ONLY + NUMBA!r} if m in sys.modules)]
root = Path(tempfile.mkdtemp())
config = LogConfig(cleanup_policy="compact", segment_bytes=1024)
log = Log.open(root / "t-0", config)
for i in range(300):
    log.append([Record(key=b"k%d" % (i % 3), value=b"v" * 20)])
uncleanable = log.active_segment.base_offset
log.close()
result = worker.clean(CleanAssignment(1, TopicPartition("t", 0), str(root), str(root / "t-0"),
                                      config, 0, uncleanable))
loaded.append(sorted(m for m in {CLEANER_ONLY + NUMBA!r} if m in sys.modules))
print(json.dumps([loaded, len(swaps), result.stats.messages_read, uncleanable]))
"""

DRIVER_PROBE = f"""
import sys
import cluster.runtime.attach, cluster.runtime.deploy
from cluster.config import BrokerConfig
from cluster.kafka.listeners import directory_properties

broker = BrokerConfig.from_properties({{"log.cleaner.threads": "1"}})
assert [directory_properties(broker.properties, i) for i in range(3)] == [{{}}, {{}}, {{}}]
print(sorted(m for m in {KAFKA!r} if m in sys.modules))
"""


def _run(probe: str) -> str:
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_nodes_body_and_its_broker_without_listeners_load_neither_kio_nor_the_cleaner() -> None:
    assert _run(NODE_PROBE) == "[]"


def test_a_cleaner_loads_the_cleaner_and_numba_at_its_first_clean_only() -> None:
    loaded, swaps, read, uncleanable = json.loads(_run(CLEANER_PROBE))
    assert loaded == [[], ["cleaner.cleaner", "cleaner.kernels", "numba"]]
    assert swaps >= 1 and read == uncleanable > 0      # the clean itself ran as before


def test_the_listener_settings_of_a_cluster_without_listeners_load_no_kafka_code() -> None:
    assert _run(DRIVER_PROBE) == "[]"


def _loaded_in(cluster: Any, log_dir: str, names: tuple[str, ...]) -> list[str]:
    handle = ray.get_actor(node_actor_name(log_dir), namespace=cluster.namespace)
    return ray.get(handle.__ray_call__.remote(
        lambda self: sorted(m for m in names if m in sys.modules)), timeout=60)


@pytest.mark.parametrize("listeners, loaded", [(None, []), ("PLAINTEXT://127.0.0.1:0", ["kio"])],
                         ids=["without-listeners", "with-listeners"])
def test_a_node_actor_loads_the_kafka_protocol_only_when_its_cluster_serves_kafka(
        start_cluster: Callable[..., Any], listeners: str | None, loaded: list[str]) -> None:
    config = {"listeners": listeners} if listeners else {}
    cluster = start_cluster(dirs=2, config=config)
    cluster.create_topic("t", partitions=2)
    for log_dir in cluster.description.log_dirs:
        assert _loaded_in(cluster, log_dir, ("kio",)) == loaded
        assert _loaded_in(cluster, log_dir, CLEANER + NUMBA) == []
    assert bool(cluster.kafka_brokers()) == bool(listeners)
