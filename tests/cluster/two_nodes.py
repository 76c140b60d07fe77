"""A Strata cluster on a two-node Ray cluster on this host (``ray.cluster_utils.Cluster``), each
Ray node declaring its own log directory and its own host: node actors must land on the Ray node
that holds their directory's resource, cleaners on their host, and produce and cleaning must work
across the nodes.

Run by tests/cluster/test_two_nodes.py as ``python -m tests.cluster.two_nodes ROOT`` in a
process of its own (a ``ray.init`` of the test session cannot share a process with a second
cluster). Asserts inside; on success prints one line ``TWO-NODES OK {json}``. Every Ray process it
started is stopped before it exits, on failure too.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

T0 = 1_700_000_000_000
COMPACT = {"cleanup.policy": "compact", "segment.bytes": 8192, "min.cleanable.dirty.ratio": 0.1}
FAST = {"log.cleaner.backoff.ms": 100, "log.cleaner.dedupe.buffer.size": 4 << 20}


def main(root: Path) -> dict[str, object]:
    import ray
    from ray.cluster_utils import Cluster as RayCluster

    from cluster import Cluster
    from cluster.naming import dir_resource, host_resource, node_actor_name
    from storage.records import Record

    hosts = {"host-a": str(root / "a" / "d0"), "host-b": str(root / "b" / "d1")}
    temp_dir = tempfile.mkdtemp(prefix="strata-2n-", dir="/tmp")   # short: Ray's socket paths
    nodes = RayCluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "temp_dir": temp_dir,
        "resources": {dir_resource(hosts["host-a"]): 1, host_resource("host-a"): 1000}})
    try:
        nodes.add_node(num_cpus=1, resources={dir_resource(hosts["host-b"]): 1,
                                              host_resource("host-b"): 1000})
        nodes.wait_for_nodes()
        c = Cluster.start(log_dirs=list(hosts.values()), cleaners=1, config=FAST,
                          address=nodes.address, namespace="two-nodes")
        try:
            holder = {key[len("strata_dir:"):]: n["NodeID"] for n in ray.nodes() if n["Alive"]
                      for key in n["Resources"] if key.startswith("strata_dir:")}
            host_node = {key[len("strata_host:"):]: n["NodeID"] for n in ray.nodes()
                         if n["Alive"] for key in n["Resources"] if key.startswith("strata_host:")}
            assert len(set(holder.values())) == 2, holder
            placed = {}
            for host, log_dir in hosts.items():
                info = ray.get(ray.get_actor(node_actor_name(log_dir),
                                             namespace=c.namespace).info.remote())
                assert info["node_id"] == holder[log_dir], (log_dir, info, holder)
                assert info["host"] == host and info["host_declared"], info
                placed[log_dir] = info["node_id"]
            workers = {}
            for name, host in c.description.workers:
                info = ray.get(ray.get_actor(name, namespace=c.namespace).info.remote())
                assert info["node_id"] == host_node[host], (name, info, host_node)
                workers[info["cleaner_id"]] = host
            assert sorted(workers.values()) == ["host-a", "host-b"], workers

            info = c.create_topic("s", partitions=2, config=COMPACT)
            assert sorted(info.partitions.values()) == sorted(hosts.values()), info
            oracle = {}
            for p in range(2):
                batch = [Record(key=b"k%d" % (i % 40), value=b"v%d" % i, timestamp=T0 + i)
                         for i in range(4000)]
                c.produce("s", p, batch, batch_bytes=4096)
                oracle[p] = {r.key: r.value for r in batch}
            for p in range(2):
                c.trigger_clean("s", p, roll=True, wait=True, timeout_s=120)
            for p in range(2):
                got = list(c.consume("s", p))
                assert {r.key: r.value for r in got} == oracle[p], p
                assert len(got) == 40, len(got)
            cleaned = {}
            for s in c.cleaner_status().recent:
                if s.outcome == "cleaned":
                    cleaned[s.log_dir] = workers[s.cleaner_id]
            for host, log_dir in hosts.items():
                assert cleaned.get(log_dir) == host, cleaned    # by the cleaner of its host
            return {"nodes": placed, "workers": workers, "cleaned_by": cleaned}
        finally:
            c.stop()
    finally:
        ray.shutdown()
        nodes.shutdown()


if __name__ == "__main__":
    result = main(Path(sys.argv[1]))
    print("TWO-NODES OK " + json.dumps(result, sort_keys=True), flush=True)
