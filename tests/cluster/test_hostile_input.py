"""Hostile input at the cluster's doors (issue 12), without Ray: the client (``Cluster`` over real
node servers and a real coordinator service behind ``LocalHandle``s), the ``strata`` CLI's
arguments, and the Spark source's ``startingOffsets`` option. Partition numbers, partition counts,
topic names and offsets Kafka refuses are refused with a typed error and write nothing. The tables
live in tests/storage/test_hostile_input.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import cluster.client.client as client_module
from ops.cli import main as cli
from cluster.client.client import Cluster
from ops.cli import topic_partition
from cluster.runtime.coordinator_service import CoordinatorService
from cluster.handles import LocalHandle
from cluster.naming import COORDINATOR_NAME
from cluster.status import ClusterDescription
from cluster.spark import options
from cluster.spark.errors import SourceOptionError
from ops.tools import UsageError
from storage.errors import InvalidOffsetError, InvalidTopicError
from storage.records import Record
from tests.cluster.fakes import open_nodes
from tests.storage.test_hostile_input import (
    BAD_OFFSETS,
    BAD_PARTITIONS,
    BAD_TOPICS,
    snapshot_files,
)

BAD_COUNTS = [pytest.param(0, id="zero"), pytest.param(-1, id="negative"),
              pytest.param(1.5, id="float"), pytest.param(True, id="true"),
              pytest.param(2**31, id="2^31"), pytest.param("2", id="text"),
              pytest.param(None, id="none")]


@pytest.fixture
def local_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    """A ``Cluster`` client whose coordinator and two nodes run in this process on real files,
    holding topic ``t`` with partitions 0 and 1 (one record each)."""
    nodes = open_nodes(tmp_path, 2)
    description = ClusterDescription(
        namespace="test", log_dirs=tuple(nodes), node_names={d: h.name for d, h in nodes.items()},
        node_hosts={}, workers=(), properties={}, head_started_by_strata=False)
    service = CoordinatorService(description, node_handle=lambda _name, d: nodes[d],
                                 worker_handle=lambda name, _host: LocalHandle(None, name),
                                 start_loop=False)
    by_name = {COORDINATOR_NAME: LocalHandle(service, COORDINATOR_NAME),
               **{h.name: h for h in nodes.values()}}
    monkeypatch.setattr(client_module, "lookup", lambda name, *_args: by_name[name])
    c = Cluster(description)
    c.create_topic("t", 2)
    for p in (0, 1):
        c.produce("t", p, [Record(key=b"k", value=f"v{p}".encode(), timestamp=0)], flush=True)
    yield c
    for handle in nodes.values():
        handle.target.close()


PARTITION_CALLS: dict[str, Callable[[Cluster, Any], Any]] = {
    "produce": lambda c, p: c.produce("t", p, [Record(key=b"x", value=b"y", timestamp=0)]),
    "produce_batches": lambda c, p: c.produce_batches([("t", 0, b""), ("t", p, b"")]),
    "consume": lambda c, p: list(c.consume("t", p)),
    "flush": lambda c, p: c.flush("t", p),
    "offsets": lambda c, p: c.offsets("t", p),
    "partition_dir": lambda c, p: c.partition_dir("t", p),
    "explain": lambda c, p: c.explain("t", p),
    "trigger_clean": lambda c, p: c.trigger_clean("t", p),
    "pause_cleaning": lambda c, p: c.pause_cleaning("t", p),
    "resume_cleaning": lambda c, p: c.resume_cleaning("t", p),
}


@pytest.mark.parametrize("call", sorted(PARTITION_CALLS))
@pytest.mark.parametrize("partition", BAD_PARTITIONS)
def test_the_client_refuses_a_partition_number_that_is_not_an_int32(
        local_cluster: Cluster, tmp_path: Path, call: str, partition: object) -> None:
    before = snapshot_files(tmp_path)
    with pytest.raises(InvalidTopicError) as raised:
        PARTITION_CALLS[call](local_cluster, partition)
    assert raised.value.topic == "t" and raised.value.partition is partition
    assert snapshot_files(tmp_path) == before


@pytest.mark.parametrize("method", ["abort_and_pause", "resume", "trigger_clean",
                                    "request_clean"])
@pytest.mark.parametrize("partition", BAD_PARTITIONS)
def test_the_coordinator_refuses_a_bad_partition_from_a_client_that_does_not_check(
        local_cluster: Cluster, method: str, partition: object) -> None:
    with pytest.raises(InvalidTopicError) as raised:
        local_cluster._coordinator.call(method, "t", partition)
    assert raised.value.partition is partition
    # True and 1.0 paused partition 1 before: a resume would then find a pause to release
    assert local_cluster._coordinator.call("resume", "t", 1) is False


def test_produce_to_partition_true_no_longer_lands_in_partition_1(local_cluster: Cluster) -> None:
    """The exact reproduction: ``True == 1``, so the old client appended to partition 1."""
    with pytest.raises(InvalidTopicError):
        local_cluster.produce("t", True, [Record(key=b"x", value=b"y", timestamp=0)])
    assert [r.value for r in local_cluster.consume("t", 1)] == [b"v1"]


def test_a_numpy_partition_number_is_a_partition(local_cluster: Cluster) -> None:
    local_cluster.produce("t", np.int64(1), [Record(key=b"x", value=b"y", timestamp=0)])
    assert [r.value for r in local_cluster.consume("t", np.int32(1))] == [b"v1", b"y"]


@pytest.mark.parametrize("name", BAD_TOPICS)
def test_the_client_refuses_a_bad_topic_name_before_any_call(local_cluster: Cluster,
                                                             tmp_path: Path, name: object) -> None:
    before = snapshot_files(tmp_path)
    with pytest.raises(InvalidTopicError):
        local_cluster.create_topic(name, 1)   # type: ignore[arg-type]
    assert snapshot_files(tmp_path) == before
    assert [t.name for t in local_cluster.list_topics()] == ["t"]


@pytest.mark.parametrize("count", BAD_COUNTS)
def test_a_partition_count_outside_1_to_2_pow_31_is_refused(local_cluster: Cluster,
                                                            tmp_path: Path, count: object) -> None:
    before = snapshot_files(tmp_path)
    with pytest.raises(InvalidTopicError) as raised:
        local_cluster.create_topic("u", count)   # type: ignore[arg-type]
    assert raised.value.topic == "u" and raised.value.partitions is count
    # and by the coordinator itself, for a client that does not check
    with pytest.raises(InvalidTopicError):
        local_cluster._coordinator.call("create_topic", "u", count, {})
    assert snapshot_files(tmp_path) == before
    assert [t.name for t in local_cluster.list_topics()] == ["t"]


@pytest.mark.parametrize("argument", ["from_offset", "max_offset"])
@pytest.mark.parametrize("offset", [*BAD_OFFSETS, pytest.param(-1, id="negative")])
def test_consume_refuses_an_offset_that_is_not_an_integer(local_cluster: Cluster,
                                                         argument: str, offset: object) -> None:
    with pytest.raises(InvalidOffsetError) as raised:
        list(local_cluster.consume("t", 0, **{argument: offset}))
    assert raised.value.argument == argument and raised.value.offset is offset
    assert "t-0" in str(raised.value)


# ---- the CLI: refused while parsing, before any connection --------------------------------------
@pytest.mark.parametrize("argv", [
    ["produce", "t", "--partition", "2147483648"],
    ["produce", "t", "--partition", "-1"],
    ["produce", "t", "--partition", "1.5"],
    ["produce", "t", "--partition", "1_0"],
    ["produce", "t", "--partition", "٣"],
    ["consume", "t", "--partition", "9223372036854775808"],
    ["consume", "t", "--from-offset", "0.5"],
    ["consume", "t", "--from-offset", "-1"],
    ["consume", "t", "--offset", "9223372036854775808"],
    ["cleaner", "explain", "t", "--partition", "2147483648"],
    ["cleaner", "trigger", "t", "--partition", " 1"],
    ["topic", "create", "t", "--partitions", "0"],
    ["topic", "create", "t", "--partitions", "2147483648"],
    ["topic", "create", "t", "--partitions", "1.5"],
])
def test_the_cli_refuses_numbers_kafka_cannot_hold_without_connecting(
        argv: list[str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ops.cli import cleaning, consume, produce, topics

    def no_connection(_args: object) -> None:
        raise AssertionError("the CLI connected before refusing its arguments")
    for module in (cleaning, consume, produce, topics):
        monkeypatch.setattr(module, "connect", no_connection)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert repr(argv[-1]) in err or argv[-1] in err
    assert "Traceback" not in err


@pytest.mark.parametrize("text", ["t-2147483648", "t-1.5", "t-²", "t-+1", "t-"])
def test_topic_partition_arguments_hold_an_int32_partition(text: str) -> None:
    with pytest.raises(UsageError):
        topic_partition(text)


def test_topic_partition_arguments_keep_dashes_in_the_topic() -> None:
    assert topic_partition("my-topic-2147483647") == ("my-topic", 2**31 - 1)


# ---- the Spark source's startingOffsets ---------------------------------------------------------
@pytest.mark.parametrize("raw", [
    '{"1.5": 0}', '{"2147483648": 0}', '{"-1": 0}', '{" 1": 0}', '{"1_0": 0}', '{"٣": 0}',
    '{"0": 1.5}', '{"0": true}', '{"0": "5"}', '{"0": 9223372036854775808}', '{"0": -3}',
    '{"t": {"0": 0.5}}', '{"other": {"0": 1}}',
])
def test_starting_offsets_take_int32_partitions_and_integer_offsets(raw: str) -> None:
    with pytest.raises(SourceOptionError) as raised:
        options.starting_offsets({"startingOffsets": raw}, "t")
    assert raised.value.option == "startingOffsets"


def test_starting_offsets_keep_earliest_latest_and_exact_offsets() -> None:
    assert options.starting_offsets(
        {"startingOffsets": '{"t": {"0": 42, "1": -2, "2147483647": -1}}'}, "t"
    ) == (options.EARLIEST, {0: 42, 1: -2, 2**31 - 1: -1})
