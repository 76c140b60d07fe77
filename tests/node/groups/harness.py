"""A group coordinator on a real ``__consumer_offsets`` log in tmp_path, driven by a fake clock
and Kafka's MockCoordinatorTimer pattern (``FakeTimer``): ``sleep(ms)`` advances the clock and
runs the timeouts that are due. The request builders mirror Kafka's
``GroupMetadataManagerTestContext`` (JoinGroupRequestBuilder's defaults included)."""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from node.groups.config import GroupCoordinatorConfig
from node.groups.coordinator import GroupCoordinator
from node.groups.messages import (
    Heartbeat,
    JoinGroup,
    JoinGroupResult,
    LeaveGroup,
    LeaveGroupResult,
    LeavingMember,
    SyncGroup,
    SyncGroupResult,
)
from node.groups.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    decode_group_metadata_value,
    decode_key,
)
from node.groups.timer import FakeTimer
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import Log

GROUP = "group-id"
PROTOCOL_TYPE = "consumer"
DEFAULT_PROTOCOLS: tuple[tuple[str, bytes], ...] = (("range", b"\x00\x01"),)
# Kafka's test context: min session 10 ms, max 10 minutes, initial delay 3 s
TEST_CONFIG = GroupCoordinatorConfig(group_min_session_timeout_ms=10,
                                     group_max_session_timeout_ms=10 * 60 * 1000,
                                     group_initial_rebalance_delay_ms=3000)


def join_request(group_id: str = GROUP, member_id: str = "", *,
                 group_instance_id: str | None = None, client_id: str = "client",
                 session_timeout_ms: int = 10000, rebalance_timeout_ms: int = 300000,
                 protocol_type: str = PROTOCOL_TYPE,
                 protocols: tuple[tuple[str, bytes], ...] = DEFAULT_PROTOCOLS,
                 require_known_member_id: bool = True,
                 supports_skip_assignment: bool = False) -> JoinGroup:
    return JoinGroup(group_id=group_id, member_id=member_id, group_instance_id=group_instance_id,
                     client_id=client_id, client_host="/127.0.0.1",
                     session_timeout_ms=session_timeout_ms,
                     rebalance_timeout_ms=rebalance_timeout_ms, protocol_type=protocol_type,
                     protocols=protocols, require_known_member_id=require_known_member_id,
                     supports_skip_assignment=supports_skip_assignment)


class Harness:
    """One coordinator holding the partition of ``GROUP`` (and any other loaded with
    ``load``), its log under ``root``."""

    def __init__(self, root: Path, clock: FakeClock,
                 config: GroupCoordinatorConfig = TEST_CONFIG) -> None:
        self.root = root
        self.clock = clock
        self.config = config
        self.timer = FakeTimer(clock)
        self.coordinator = GroupCoordinator(config, clock, self.timer)
        self.logs: dict[int, Log] = {}
        self.partition = self.coordinator.partition_for(GROUP)
        self.load(self.partition)

    def open_log(self, partition: int) -> Log:
        log = self.logs.get(partition)
        if log is None or log.is_closed:
            log = Log.open(self.root / f"__consumer_offsets-{partition}",
                           LogConfig(cleanup_policy="compact"), clock=self.clock)
            self.logs[partition] = log
        return log

    def load(self, partition: int) -> None:
        self.coordinator.load(partition, self.open_log(partition))

    def restart(self) -> Harness:
        """A new coordinator (new timer) loading the same logs, reopened from disk."""
        self.coordinator.close()
        for log in self.logs.values():
            log.close()
        again = Harness.__new__(Harness)
        again.root, again.clock, again.config = self.root, self.clock, self.config
        again.timer = FakeTimer(self.clock)
        again.coordinator = GroupCoordinator(self.config, self.clock, again.timer)
        again.logs = {}
        again.partition = self.partition
        for partition in self.logs:
            again.load(partition)
        return again

    def sleep(self, ms: int) -> list[str]:
        """Kafka's ``context.sleep``: advance the clock, run the timeouts now due."""
        self.clock.advance(ms)
        return self.timer.poll()

    # ---- requests ------------------------------------------------------------------------------
    def join(self, request: JoinGroup | None = None, **kwargs: Any) -> Future[JoinGroupResult]:
        return self.coordinator.join_group(request or join_request(**kwargs))

    def sync(self, member_id: str, generation_id: int, *, group_id: str = GROUP,
             group_instance_id: str | None = None,
             assignments: tuple[tuple[str, bytes], ...] = (),
             protocol_type: str | None = None,
             protocol_name: str | None = None) -> Future[SyncGroupResult]:
        return self.coordinator.sync_group(SyncGroup(
            group_id=group_id, generation_id=generation_id, member_id=member_id,
            group_instance_id=group_instance_id, protocol_type=protocol_type,
            protocol_name=protocol_name, assignments=assignments))

    def heartbeat(self, member_id: str, generation_id: int, *, group_id: str = GROUP,
                  group_instance_id: str | None = None) -> ErrorCode:
        return self.coordinator.heartbeat(Heartbeat(group_id, generation_id, member_id,
                                                    group_instance_id)).result(0)

    def leave(self, *members: tuple[str, str | None], group_id: str = GROUP) -> LeaveGroupResult:
        return self.coordinator.leave_group(LeaveGroup(group_id, tuple(
            LeavingMember(member_id, instance) for member_id, instance in members))).result(0)

    # ---- scenarios (Kafka's test context helpers) ------------------------------------------
    def join_dynamic_member(self, request: JoinGroup | None = None) -> JoinGroupResult:
        """A dynamic member's two joins (MEMBER_ID_REQUIRED, then with its id); the second
        join's answer once the join phase ends (the initial delay is slept through)."""
        request = request or join_request()
        first = self.join(request).result(0)
        assert first.error_code == ErrorCode.member_id_required, first
        second = self.join(dataclasses.replace(request, member_id=first.member_id))
        if not second.done():
            self.sleep(self.config.group_initial_rebalance_delay_ms)
        return second.result(0)

    def join_and_sync_leader(self, request: JoinGroup | None = None,
                             assignment: bytes = b"assignment") -> JoinGroupResult:
        """One dynamic member joins a new group, leads it and syncs: the group is Stable."""
        joined = self.join_dynamic_member(request)
        assert joined.error_code == ErrorCode.none, joined
        synced = self.sync(joined.member_id, joined.generation_id,
                           assignments=((joined.member_id, assignment),)).result(0)
        assert synced.error_code == ErrorCode.none, synced
        return joined

    def join_static_member_and_sync(self, instance_id: str, *, leader_assignment: bool = True
                                    ) -> JoinGroupResult:
        """A static member joins the group (Empty or new) and syncs (Kafka's
        ``staticMembersJoinAndRebalance`` for one member)."""
        joined = self.join(join_request(group_instance_id=instance_id))
        if not joined.done():
            self.sleep(self.config.group_initial_rebalance_delay_ms)
        result = joined.result(0)
        assert result.error_code == ErrorCode.none, result
        self.sync(result.member_id, result.generation_id,
                  group_instance_id=instance_id,
                  assignments=((result.member_id, b"a"),) if leader_assignment else ()
                  ).result(0)
        return result

    # ---- what the log holds ------------------------------------------------------------------
    def group_records(self, partition: int | None = None
                      ) -> list[tuple[str, GroupMetadataValue | None]]:
        log = self.logs[self.partition if partition is None else partition]
        found = []
        for record in log.read():
            assert record.key is not None
            key = decode_key(record.key)
            if isinstance(key, GroupMetadataKey):
                found.append((key.group, None if record.value is None
                              else decode_group_metadata_value(record.value)))
        return found

    def group(self, group_id: str = GROUP) -> Any:
        """The live ``ClassicGroup`` (assertions only)."""
        state = self.coordinator._partitions[self.coordinator.partition_for(group_id)]
        return state.membership.groups.get(group_id)
