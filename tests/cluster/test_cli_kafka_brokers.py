"""``strata cluster start --config server.properties`` with ``listeners``, end to end in real
``strata`` processes: every log directory is a Kafka broker on the port rule's port, ``cluster
status`` prints the bootstrap servers, and kcat bootstraps from them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.cluster.test_cli_cluster import Strata, strata  # noqa: F401 - the fixture
from ops.drills.coordinators import free_port_base
from tests.cluster.test_kafka_brokers import TIMEOUT_S, kcat


def test_cluster_start_with_server_properties_listeners_serves_kafka_and_status_names_it(
        strata: Strata, tmp_path: Path) -> None:  # noqa: F811 - the fixture
    base = free_port_base(3)
    config = tmp_path / "server.properties"
    config.write_text("# one broker per log directory: 127.0.0.1:P, P + 1, P + 2\n"
                      "broker.id=0\n"
                      f"listeners=PLAINTEXT://127.0.0.1:{base}\n"
                      "num.partitions=3\n")
    dirs = [tmp_path / f"d{i}" for i in range(3)]
    expected = ",".join(f"127.0.0.1:{base + i}" for i in range(3))
    started = json.loads(strata(*strata.start_args(*dirs), f"--config={config}",
                                "--json").stdout)
    strata.address = started["address"]
    assert (started["bootstrap_servers"], started["security_protocol"]) == (expected,
                                                                           "PLAINTEXT")

    status = strata("cluster", "status")
    assert f"Kafka bootstrap servers (PLAINTEXT): {expected}" in status.stdout
    assert strata.json("cluster", "status")["bootstrap_servers"] == expected
    strata("topic", "create", "lines", "--partitions=3")
    listing = json.loads(subprocess.run([kcat(), "-b", expected, "-L", "-J"],
                                        capture_output=True, text=True, timeout=TIMEOUT_S,
                                        check=True).stdout)
    assert {b["id"]: b["name"].split("/")[0] for b in listing["brokers"]} == {
        i: f"127.0.0.1:{base + i}" for i in range(3)}      # the i-th directory: node i, P + i
    topic = next(t for t in listing["topics"] if t["topic"] == "lines")
    assert sorted(p["leader"] for p in topic["partitions"]) == [0, 1, 2]
    subprocess.run([kcat(), "-b", expected, "-P", "-t", "lines", "-p", "2"], input="one\ntwo\n",
                   text=True, timeout=TIMEOUT_S, check=True)
    consumed = strata("consume", "lines", "--partition=2", "--value-only").stdout
    assert consumed.splitlines() == ["one", "two"]

    # a Kafka consumer group, seen by `strata groups` through the cluster's own listeners
    subprocess.run([kcat(), "-b", expected, "-G", "readers", "-e", "-q",
                    "-X", "auto.offset.reset=earliest", "lines"],
                   capture_output=True, text=True, timeout=TIMEOUT_S, check=True)
    assert strata("groups", "list").stdout.split() == ["readers"]
    described = strata.json("groups", "describe", "readers")["groups"][0]
    assert described["state"] == "Empty"
    assert [(r["topic"], r["partition"], r["current_offset"], r["lag"])
            for r in described["partitions"]] == [("lines", 2, 2, 0)]
    strata("groups", "reset-offsets", "readers", "--topic", "lines:2", "--to-earliest",
           "--execute")
    described = strata.json("groups", "describe", "readers")["groups"][0]
    assert [(r["current_offset"], r["lag"]) for r in described["partitions"]] == [(0, 2)]
    assert strata.json("cluster", "stop")["stopped"]


def test_cluster_start_refuses_a_malformed_listener_before_starting_anything(
        strata: Strata, tmp_path: Path) -> None:  # noqa: F811 - the fixture
    config = tmp_path / "server.properties"
    config.write_text("listeners=PLAINTEXT://127.0.0.1:65534\n")
    result = strata(*strata.start_args(tmp_path / "a", tmp_path / "b", tmp_path / "c"),
                    f"--config={config}", check=False)
    assert result.returncode == 2
    assert "listeners" in result.stderr and "65536" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert strata.head_processes() == [] and not (tmp_path / "a").exists()
