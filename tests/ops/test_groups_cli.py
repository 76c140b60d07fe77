"""``strata groups``: kafka-consumer-groups' listing, describing, offset resets and deletes,
against a real broker (a ``KafkaServer`` over a real directory) whose groups real librdkafka
consumers made; what the command reports is checked against kafka-python's admin client."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

import confluent_kafka as ck
import pytest
from kafka import KafkaAdminClient

from node import LogDir
from node.kafka.config import KafkaServerConfig
from node.kafka.server import KafkaServer
from ops.cli.main import main

TOPIC = "orders"
PARTITIONS = 3
PER_PARTITION = 10
DEADLINE_S = 30.0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[KafkaServer]:
    """A broker holding ``orders`` (3 partitions of 10 records each, written at known times)."""
    logdir = LogDir.open(tmp_path / "logs", start_tasks=False)
    logdir.create_logs(TOPIC, range(PARTITIONS))
    config = KafkaServerConfig.from_properties({
        "listeners": "PLAINTEXT://127.0.0.1:0", "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "1000"})
    with KafkaServer(logdir, config) as server:
        producer = ck.Producer({"bootstrap.servers": server.bootstrap_servers, "linger.ms": 0})
        for partition in range(PARTITIONS):
            for i in range(PER_PARTITION):
                producer.produce(TOPIC, value=b"v%d" % i, partition=partition,
                                 timestamp=1_000_000 + i * 1000)
        assert producer.flush(DEADLINE_S) == 0
        yield server
    logdir.close()


def consumer(server: KafkaServer, group: str, **config: Any) -> ck.Consumer:
    settings = {"bootstrap.servers": server.bootstrap_servers, "group.id": group,
                "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000, "client.id": f"client-of-{group}"}
    settings.update(config)
    return ck.Consumer(settings)


def consume_and_commit(server: KafkaServer, group: str, count: int,
                       keep: bool = False) -> ck.Consumer | None:
    """A member of ``group`` that reads ``count`` records over ``orders`` and commits them
    synchronously; closed (the group left Empty) unless ``keep``."""
    c = consumer(server, group)
    c.subscribe([TOPIC])
    got = 0
    deadline = time.monotonic() + DEADLINE_S
    while got < count and time.monotonic() < deadline:
        message = c.poll(0.5)
        if message is None or message.error():
            continue
        got += 1
        c.commit(message=message, asynchronous=False)
    assert got == count
    if keep:
        return c
    c.close()
    return None


def strata(capsys: pytest.CaptureFixture[str], server: KafkaServer,
           *words: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["groups", *words, "--bootstrap-server", server.bootstrap_servers,
                 "--timeout", "10"])
    out, err = capsys.readouterr()
    return code, out, err


def rows(out: str) -> list[list[str]]:
    lines = [line.split() for line in out.splitlines() if line.strip()]
    return lines[1:]   # without the header


def committed(server: KafkaServer, group: str) -> dict[tuple[str, int], int]:
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers)
    try:
        offsets = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()}


def test_list_names_every_group_and_filters_by_state(capsys, broker):
    consume_and_commit(broker, "idle", 4)
    active = consume_and_commit(broker, "busy", 2, keep=True)
    try:
        code, out, _ = strata(capsys, broker, "list")
        assert code == 0
        assert out.split() == ["busy", "idle"]
        code, out, _ = strata(capsys, broker, "list", "--state")
        assert rows(out) == [["busy", "Stable"], ["idle", "Empty"]]
        code, out, _ = strata(capsys, broker, "list", "--state", "empty")
        assert rows(out) == [["idle", "Empty"]]
    finally:
        active.close()


def test_describe_reports_committed_offsets_log_end_and_lag_of_an_empty_group(capsys, broker):
    consume_and_commit(broker, "idle", 4)
    expected = committed(broker, "idle")
    code, out, err = strata(capsys, broker, "describe", "idle")
    assert code == 0
    assert "Consumer group 'idle' has no active members." in err
    table = rows(out)
    assert {(r[1], int(r[2])): int(r[3]) for r in table} == expected
    for group, topic, partition, current, end, lag, member, host, client in table:
        assert (group, topic) == ("idle", TOPIC)
        assert int(end) == PER_PARTITION
        assert int(lag) == PER_PARTITION - int(current)
        assert (member, host, client) == ("-", "-", "-")


def test_describe_names_the_member_of_every_assigned_partition(capsys, broker):
    active = consume_and_commit(broker, "busy", 1, keep=True)
    try:
        code, out, _ = strata(capsys, broker, "describe", "busy")
        assert code == 0
        table = rows(out)
        assert sorted(int(r[2]) for r in table) == list(range(PARTITIONS))
        assert {r[8] for r in table} == {"client-of-busy"}
        members = {r[6] for r in table}
        assert len(members) == 1 and members.pop().startswith("client-of-busy-")
        assert sum(r[3] != "-" for r in table) == 1      # one partition committed
        code, out, _ = strata(capsys, broker, "describe", "busy", "--members", "--verbose")
        (member,) = rows(out)
        assert member[-2:] == [str(PARTITIONS), f"{TOPIC}(0,1,2)"]
        code, out, _ = strata(capsys, broker, "describe", "busy", "--state")
        (state,) = rows(out)
        host, port = broker.advertised_address()
        assert state == ["busy", f"{host}:{port}", "(0)", "range", "Stable", "1"]
    finally:
        active.close()


def test_describe_of_an_unknown_group_says_it_does_not_exist(capsys, broker):
    code, _, err = strata(capsys, broker, "describe", "nobody")
    assert code == 1
    assert "Consumer group 'nobody' does not exist." in err


def test_reset_offsets_of_an_active_group_is_refused_with_its_state(capsys, broker):
    active = consume_and_commit(broker, "busy", 1, keep=True)
    try:
        before = committed(broker, "busy")
        code, _, err = strata(capsys, broker, "reset-offsets", "busy", "--all-topics",
                              "--to-earliest", "--execute")
        assert code == 1
        assert ("Assignments can only be reset if the group 'busy' is inactive, but the "
                "current state is Stable.") in err
        assert committed(broker, "busy") == before
    finally:
        active.close()


def test_reset_offsets_is_a_dry_run_until_execute(capsys, broker):
    consume_and_commit(broker, "idle", 6)
    before = committed(broker, "idle")
    code, out, err = strata(capsys, broker, "reset-offsets", "idle", "--topic", TOPIC,
                            "--to-earliest")
    assert code == 0
    assert "--execute option is missing" in err
    assert {(r[1], int(r[2])): int(r[3]) for r in rows(out)} == {
        (TOPIC, p): 0 for p in range(PARTITIONS)}
    assert committed(broker, "idle") == before
    code, out, _ = strata(capsys, broker, "reset-offsets", "idle", "--topic", TOPIC,
                          "--to-latest", "--execute")
    assert code == 0
    assert committed(broker, "idle") == {(TOPIC, p): PER_PARTITION for p in range(PARTITIONS)}


def test_reset_offsets_to_an_offset_or_by_a_shift_is_clamped_to_the_log(capsys, broker):
    consume_and_commit(broker, "idle", 3)
    had = committed(broker, "idle")
    code, out, _ = strata(capsys, broker, "reset-offsets", "idle", "--topic", f"{TOPIC}:0,1",
                          "--to-offset", "1000", "--execute")
    assert code == 0
    assert committed(broker, "idle") == {**had, (TOPIC, 0): PER_PARTITION,
                                               (TOPIC, 1): PER_PARTITION}
    code, out, _ = strata(capsys, broker, "reset-offsets", "idle", "--topic", f"{TOPIC}:0",
                          "--shift-by", "-4", "--execute")
    assert code == 0
    assert committed(broker, "idle")[(TOPIC, 0)] == PER_PARTITION - 4
    code, out, _ = strata(capsys, broker, "reset-offsets", "idle", "--topic", f"{TOPIC}:0",
                          "--shift-by", "-1000", "--execute")
    assert committed(broker, "idle")[(TOPIC, 0)] == 0


def test_reset_offsets_by_shift_needs_a_committed_offset(capsys, broker):
    consume_and_commit(broker, "idle", 1)
    uncommitted = [p for p in range(PARTITIONS) if (TOPIC, p) not in committed(broker, "idle")]
    code, _, err = strata(capsys, broker, "reset-offsets", "idle", "--topic",
                          f"{TOPIC}:{uncommitted[0]}", "--shift-by", "1", "--execute")
    assert code == 2
    assert f"{TOPIC}-{uncommitted[0]}" in err and "no committed offset" in err


def test_reset_offsets_to_a_datetime_takes_the_first_offset_at_or_after_it(capsys, broker):
    consume_and_commit(broker, "idle", 1)
    code, out, _ = strata(capsys, broker, "reset-offsets", "idle", "--topic", TOPIC,
                          "--to-datetime", "1970-01-01T00:16:43.500", "--json")
    assert code == 0
    plan = json.loads(out)
    # record i of each partition was written at 1,000,000 + i * 1000 ms: 1,003,500 -> i = 4
    assert {o["partition"]: o["new_offset"] for o in plan["offsets"]} == {
        p: 4 for p in range(PARTITIONS)}
    assert plan["executed"] is False


def test_delete_removes_an_empty_group_and_refuses_an_active_one(capsys, broker):
    consume_and_commit(broker, "idle", 2)
    active = consume_and_commit(broker, "busy", 1, keep=True)
    try:
        code, out, _ = strata(capsys, broker, "delete", "idle")
        assert code == 0
        assert "Deletion of requested consumer groups ('idle') was successful." in out
        assert committed(broker, "idle") == {}
        code, out, _ = strata(capsys, broker, "delete", "busy", "nobody")
        assert code == 1
        assert "* Group 'busy' could not be deleted due to: NON_EMPTY_GROUP" in out
        assert "* Group 'nobody' could not be deleted due to: GROUP_ID_NOT_FOUND" in out
    finally:
        active.close()
    code, out, _ = strata(capsys, broker, "list")
    assert out.split() == ["busy"]


def test_delete_offsets_forgets_one_partition_of_an_empty_group(capsys, broker):
    consume_and_commit(broker, "idle", 6)
    before = committed(broker, "idle")
    (gone, *kept) = sorted(before)
    code, out, _ = strata(capsys, broker, "delete-offsets", "idle", "--topic",
                          f"{gone[0]}:{gone[1]}")
    assert code == 0
    assert rows(out) == [[gone[0], str(gone[1]), "Successful"]]
    assert committed(broker, "idle") == {tp: before[tp] for tp in kept}


def test_groups_without_a_reachable_broker_fail_in_one_line(capsys):
    capsys.readouterr()
    code = main(["groups", "list", "--bootstrap-server", "127.0.0.1:1", "--timeout", "1"])
    _, err = capsys.readouterr()
    assert code == 1
    assert err.startswith("strata groups: error: no bootstrap server answered")
    assert err.count("\n") == 1
