"""The coordinator under real threads and its real timer: consumers on their own threads join,
sync, heartbeat and commit at once, with the system clock; the group settles on one generation
with every member's assignment, and every answer arrives."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

from kio.schema.errors import ErrorCode

from node.groups.coordinator import GroupCoordinator
from node.groups.messages import (
    CommittedOffset,
    Heartbeat,
    OffsetCommit,
    OffsetFetch,
    SyncGroup,
)
from storage.config import LogConfig
from storage.log import Log
from tests.node.groups.harness import GROUP, TEST_CONFIG, join_request

CONSUMERS = 6
TIMEOUT_S = 30


def _consume(coordinator: GroupCoordinator, index: int, results: dict[int, tuple[str, int,
             bytes]], errors: list[BaseException], start: threading.Barrier) -> None:
    try:
        request = join_request(client_id=f"c{index}", session_timeout_ms=10000,
                               rebalance_timeout_ms=10000)
        start.wait(TIMEOUT_S)
        first = coordinator.join_group(request).result(TIMEOUT_S)
        assert first.error_code == ErrorCode.member_id_required
        request = dataclasses.replace(request, member_id=first.member_id)
        while True:
            joined = coordinator.join_group(request).result(TIMEOUT_S)
            assert joined.error_code == ErrorCode.none, joined
            assignments = tuple((m.member_id, m.member_id.encode()) for m in joined.members)
            synced = coordinator.sync_group(SyncGroup(
                GROUP, joined.generation_id, joined.member_id, None, "consumer", "range",
                assignments)).result(TIMEOUT_S)
            if synced.error_code == ErrorCode.rebalance_in_progress:
                continue
            assert synced.error_code == ErrorCode.none, synced
            heartbeat = coordinator.heartbeat(Heartbeat(
                GROUP, joined.generation_id, joined.member_id)).result(TIMEOUT_S)
            if heartbeat == ErrorCode.rebalance_in_progress:
                continue
            commit = coordinator.commit_offsets(OffsetCommit(
                GROUP, joined.generation_id, joined.member_id, None,
                (CommittedOffset("t", index, index),))).result(TIMEOUT_S)
            if commit.partitions[0].error_code != ErrorCode.none:
                continue
            results[index] = (joined.member_id, joined.generation_id, synced.assignment)
            return
    except BaseException as err:  # noqa: BLE001 - reported by the test
        errors.append(err)


def test_concurrent_consumers_settle_on_one_generation(tmp_path: Path) -> None:
    config = dataclasses.replace(TEST_CONFIG, group_initial_rebalance_delay_ms=200)
    coordinator = GroupCoordinator(config)      # the system clock and a real timer thread
    log = Log.open(tmp_path / "__consumer_offsets-0", LogConfig(cleanup_policy="compact"))
    coordinator.load(coordinator.partition_for(GROUP), log)
    results: dict[int, tuple[str, int, bytes]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(CONSUMERS)
    threads = [threading.Thread(target=_consume, args=(coordinator, i, results, errors, start))
               for i in range(CONSUMERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT_S * 4)
    try:
        assert not errors, errors
        assert len(results) == CONSUMERS
        described = coordinator.describe_groups([GROUP]).result(TIMEOUT_S)[0]
        assert described.state == "Stable"
        members = {m.member_id: m.assignment for m in described.members}
        assert {member_id for member_id, _, _ in results.values()} == set(members)
        for member_id, _, assignment in results.values():
            assert members[member_id] == member_id.encode()
        fetched = coordinator.fetch_offsets(OffsetFetch(GROUP, None)).result(TIMEOUT_S)
        assert sorted(p.offset for p in fetched.partitions) == list(range(CONSUMERS))
    finally:
        coordinator.close()
        log.close()

