"""Consumer groups over the Kafka protocol with real clients against a served directory:
confluent-kafka (librdkafka), kafka-python (consumer and admin), aiokafka and kcat subscribe with
a group id, split the partitions, commit, and resume from the committed offsets, across a restart
of the server too; a member killed with kill -9 is dropped when its session runs out."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from node.groups.config import OFFSETS_TOPIC
from node.kafka.server import KafkaServer
from node.logdir import LogDir
from tests.node.kafka.clients import poll_messages, produce_all, producer
from tests.node.kafka.conftest import Serve

GROUPS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "4"}
SESSION = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
DEADLINE_S = 30.0


def group_consumer(server: KafkaServer, group: str, **config: Any) -> ck.Consumer:
    """A librdkafka consumer of ``group`` reading from the earliest offset, committing only
    when told."""
    settings = {"bootstrap.servers": server.bootstrap_servers, "group.id": group,
                "auto.offset.reset": "earliest", "enable.auto.commit": False,
                "enable.partition.eof": False, "socket.timeout.ms": 5000, **SESSION}
    settings.update(config)
    return ck.Consumer(settings)


def fill(server: KafkaServer, topic: str, partitions: int, per_partition: int,
         start: int = 0) -> None:
    p = producer(server.bootstrap_servers)
    for partition in range(partitions):
        produce_all(p, topic, [b"%d-%d" % (partition, start + i) for i in range(per_partition)],
                    partition=partition)


def test_a_group_member_reads_everything_and_the_next_resumes_from_its_commit(
        logdir: LogDir, serve: Serve) -> None:
    server = serve(dotted=GROUPS)
    logdir.create_logs("t", range(3))
    fill(server, "t", 3, 10)
    first = group_consumer(server, "readers")
    first.subscribe(["t"])
    got = poll_messages_within(first, 30)
    assert sorted((m.partition(), m.offset()) for m in got) == [
        (p, o) for p in range(3) for o in range(10)]
    first.commit(asynchronous=False)
    first.close()
    fill(server, "t", 3, 5, start=10)
    second = group_consumer(server, "readers")
    try:
        second.subscribe(["t"])
        resumed = poll_messages_within(second, 15)
        assert sorted((m.partition(), m.offset()) for m in resumed) == [
            (p, o) for p in range(3) for o in range(10, 15)]
        committed = second.committed([ck.TopicPartition("t", p) for p in range(3)], timeout=10)
        assert [tp.offset for tp in committed] == [10, 10, 10]
    finally:
        second.close()
    assert any(t == OFFSETS_TOPIC for t, _ in logdir.logs())


def poll_messages_within(c: ck.Consumer, count: int) -> list[Any]:
    """``count`` messages of what ``c`` is assigned, the group's join included."""
    return poll_messages(c, count, DEADLINE_S)


def test_two_members_split_the_partitions_and_the_survivor_takes_them_all(
        logdir: LogDir, serve: Serve) -> None:
    server = serve(dotted=GROUPS)
    logdir.create_logs("t", range(4))
    members = [group_consumer(server, "pair") for _ in range(2)]
    seen: list[tuple[int, int]] = []

    def assignments() -> list[set[int]]:
        return [{tp.partition for tp in m.assignment()} for m in members]

    def poll_each() -> None:
        for m in members:
            msg = m.poll(0.1)
            if msg is not None:
                assert msg.error() is None, msg.error()
                seen.append((msg.partition(), msg.offset()))
                m.commit(message=msg, asynchronous=False)

    try:
        for m in members:
            m.subscribe(["t"])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and not (all(assignments())
                                                   and sum(map(len, assignments())) == 4):
            poll_each()
        first, second = assignments()
        assert first and second and not first & second and first | second == set(range(4))
        fill(server, "t", 4, 5)
        deadline = time.monotonic() + DEADLINE_S
        while len(seen) < 20 and time.monotonic() < deadline:
            poll_each()
        assert sorted(seen) == [(p, o) for p in range(4) for o in range(5)]
        members[0].close()
        survivor = members[1]
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and len(survivor.assignment()) < 4:
            msg = survivor.poll(0.1)
            assert msg is None or msg.error() is not None or (
                msg.partition(), msg.offset()) not in seen
        assert {tp.partition for tp in survivor.assignment()} == set(range(4))
        fill(server, "t", 4, 5, start=5)
        got = poll_messages_within(survivor, 20)
        seen.extend((m.partition(), m.offset()) for m in got)
        assert sorted(seen) == [(p, o) for p in range(4) for o in range(10)]
    finally:
        members[1].close()


KILLED_MEMBER = """
import sys, time
import confluent_kafka as ck
c = ck.Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                 "auto.offset.reset": "earliest", "enable.auto.commit": False,
                 "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
c.subscribe(["t"])
while True:
    msg = c.poll(0.1)
    if msg is not None and msg.error() is None:
        print(msg.partition(), msg.offset(), flush=True)      # read, then committed
        c.commit(message=msg, asynchronous=False)
"""


def test_a_killed_members_session_expires_and_the_survivor_reads_the_rest_once(
        logdir: LogDir, serve: Serve) -> None:
    """A member killed with kill -9 sends no LeaveGroup: its session runs out
    (``session.timeout.ms``), the group rebalances, and the survivor takes its partitions from
    their committed offsets; with a synchronous commit after each record, only the last record
    the killed member read of a partition (maybe not committed) can be read again."""
    server = serve(dotted=GROUPS)
    logdir.create_logs("t", range(4))
    fill(server, "t", 4, 5)
    killed = subprocess.Popen([sys.executable, "-c", KILLED_MEMBER, server.bootstrap_servers,
                               "victim"], stdout=subprocess.PIPE, text=True)
    survivor = group_consumer(server, "victim")
    seen: list[tuple[int, int]] = []
    try:
        assert killed.stdout is not None
        first_read = killed.stdout.readline()                           # it reads
        assert first_read
        survivor.subscribe(["t"])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and not survivor.assignment():
            poll_into(survivor, seen)
        mine = {tp.partition for tp in survivor.assignment()}
        assert 0 < len(mine) < 4                                        # split in two
        fill(server, "t", 4, 5, start=5)
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and not any(o >= 5 for _, o in seen):
            poll_into(survivor, seen)
        killed.kill()
        killed_read = [tuple(map(int, line.split()))
                       for line in [first_read, *killed.stdout]]
        killed.wait(DEADLINE_S)
        deadline = time.monotonic() + 6 + DEADLINE_S                    # the session runs out
        while time.monotonic() < deadline and len(survivor.assignment()) < 4:
            poll_into(survivor, seen)
        assert {tp.partition for tp in survivor.assignment()} == set(range(4))
        fill(server, "t", 4, 5, start=10)
        everything = {(p, o) for p in range(4) for o in range(15)}
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and set(seen) | set(killed_read) != everything:
            poll_into(survivor, seen)
    finally:
        survivor.close()
        if killed.poll() is None:
            killed.kill()
    assert set(seen) | set(killed_read) == everything
    assert len(seen) == len(set(seen))                                  # each once here
    last_of_killed = {max(o for q, o in killed_read if q == p)
                      for p in {p for p, _ in killed_read}}
    again = set(seen) & set(killed_read)
    assert all(o in last_of_killed for _, o in again), again


def poll_into(member: ck.Consumer, seen: list[tuple[int, int]]) -> None:
    """One poll of ``member``; a record read is committed synchronously and noted."""
    msg = member.poll(0.1)
    if msg is not None and msg.error() is None:
        seen.append((msg.partition(), msg.offset()))
        member.commit(message=msg, asynchronous=False)


def test_committed_offsets_survive_a_restart_over_the_same_directory(
        tmp_path: Path, serve: Serve) -> None:
    path = tmp_path / "restarted"
    directory = LogDir.open(path, start_tasks=False)
    try:
        server = serve(directory, dotted=GROUPS)
        directory.create_logs("t", range(2))
        fill(server, "t", 2, 6)
        c = group_consumer(server, "durable")
        c.subscribe(["t"])
        poll_messages_within(c, 12)
        c.commit(offsets=[ck.TopicPartition("t", 0, 4), ck.TopicPartition("t", 1, 6)],
                 asynchronous=False)
        c.close()
        server.close()
    finally:
        directory.close()
    reopened = LogDir.open(path, start_tasks=False)
    try:
        server = serve(reopened, dotted=GROUPS)
        c = group_consumer(server, "durable")
        try:
            committed = c.committed([ck.TopicPartition("t", 0), ck.TopicPartition("t", 1)],
                                    timeout=15)
            assert [tp.offset for tp in committed] == [4, 6]
            c.subscribe(["t"])
            resumed = poll_messages_within(c, 2)
            assert sorted((m.partition(), m.offset()) for m in resumed) == [(0, 4), (0, 5)]
        finally:
            c.close()
    finally:
        server.close()
        reopened.close()


def test_kafka_python_consumer_and_admin_list_describe_fetch_offsets_and_delete_a_group(
        logdir: LogDir, serve: Serve) -> None:
    server = serve(dotted=GROUPS)
    logdir.create_logs("t", range(2))
    fill(server, "t", 2, 4)
    consumer = KafkaConsumer("t", bootstrap_servers=server.bootstrap_servers, group_id="kp",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=6000, heartbeat_interval_ms=500,
                             request_timeout_ms=10000, consumer_timeout_ms=20000)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers,
                             request_timeout_ms=10000)
    try:
        got = []
        for message in consumer:
            got.append((message.partition, message.offset))
            if len(got) == 8:
                break
        assert sorted(got) == [(p, o) for p in range(2) for o in range(4)]
        consumer.commit()
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed["kp"]["protocol_type"] == "consumer"
        described = admin.describe_groups(["kp"])["kp"]
        assert described["error"] is None and described["group_state"] == "Stable"
        assert (described["protocol_type"], described["protocol_data"]) == ("consumer",
                                                                             "range")
        [member] = described["members"]
        assert member["client_host"] == "/127.0.0.1"
        offsets = admin.list_group_offsets("kp")["kp"]
        assert {tp: meta.offset for tp, meta in offsets.items()} == {
            KpTopicPartition("t", 0): 4, KpTopicPartition("t", 1): 4}
    finally:
        consumer.close()
    try:
        assert admin.delete_groups(["kp"]) == {"kp": "OK"}
        assert admin.list_group_offsets("kp") == {"kp": {}}
        assert "kp" not in [g["group_id"] for g in admin.list_groups()]
    finally:
        admin.close()


def test_aiokafka_group_consumer_commits_and_a_new_member_sees_the_commit(
        logdir: LogDir, serve: Serve) -> None:
    server = serve(dotted=GROUPS)
    logdir.create_logs("t", range(2))
    fill(server, "t", 2, 3)

    async def run() -> tuple[list[tuple[int, int]], list[int | None]]:
        consumer = AIOKafkaConsumer("t", bootstrap_servers=server.bootstrap_servers,
                                    group_id="aio", auto_offset_reset="earliest",
                                    enable_auto_commit=False, session_timeout_ms=6000,
                                    heartbeat_interval_ms=500, request_timeout_ms=10000)
        await consumer.start()
        got: list[tuple[int, int]] = []
        try:
            while len(got) < 6:
                batch = await consumer.getmany(timeout_ms=1000)
                got.extend((m.partition, m.offset) for ms in batch.values() for m in ms)
            await consumer.commit()
        finally:
            await consumer.stop()
        reader = AIOKafkaConsumer(bootstrap_servers=server.bootstrap_servers, group_id="aio",
                                  enable_auto_commit=False, request_timeout_ms=10000)
        await reader.start()
        try:
            committed = [await reader.committed(AioTopicPartition("t", p)) for p in range(2)]
        finally:
            await reader.stop()
        return got, committed

    got, committed = asyncio.run(asyncio.wait_for(run(), DEADLINE_S))
    assert sorted(got) == [(p, o) for p in range(2) for o in range(3)]
    assert committed == [3, 3]


def test_kcat_balanced_consumer_reads_once_and_resumes_after_its_commit(
        logdir: LogDir, serve: Serve) -> None:
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.fail("kcat is missing: run scripts/setup-kcat")
    server = serve(dotted=GROUPS)
    logdir.create_logs("lines", range(2))
    fill(server, "lines", 2, 3)

    def balanced() -> list[str]:
        out = subprocess.run([kcat, "-b", server.bootstrap_servers, "-G", "kc", "-e", "-q",
                              "-X", "auto.offset.reset=earliest",
                              "-X", "session.timeout.ms=6000",
                              "lines"], capture_output=True, text=True, timeout=DEADLINE_S,
                             check=True).stdout
        return sorted(out.splitlines())

    assert balanced() == sorted(f"{p}-{i}" for p in range(2) for i in range(3))
    fill(server, "lines", 2, 1, start=3)
    assert balanced() == ["0-3", "1-3"]
