"""A topic deletion pauses the cleaning of its compacted partitions in one coordinator call and
releases them in one (issue 15: deleting a big compacted topic made one call per partition, each
a round trip to the coordinator actor). In one process: a real node server over a real directory
with the cluster's pause seam, the real coordinator reached through a link object that counts
the calls crossing the actor boundary."""

from __future__ import annotations

from pathlib import Path

from cluster.cleaning.coordinator import Coordinator
from cluster.handles import LocalHandle
from cluster.runtime.node_service import CoordinatorPauses
from node.server import LogDirServer
from storage.files import TopicPartition
from tests.cluster.fakes import SMALL_CLEANER, ManualWorker

COMPACT = {"cleanup.policy": "compact", "segment.bytes": "4096"}
PARTITIONS = 200


class CountingLink:
    """``cluster.runtime.node_service.PauseLink`` straight to a coordinator object, counting each
    call (each is one actor call in a cluster) and what the node still lists when it comes."""

    def __init__(self, server: LogDirServer | None) -> None:
        self.server = server
        self.coordinator: Coordinator | None = None
        self.calls: list[str] = []
        self.listed_at: dict[str, int] = {}
        self.paused: list[tuple[int, int]] = []

    def _listed(self, topic: str) -> int:
        return sum(1 for tp in self.server.log_dir.logs() if tp.topic == topic)

    def abort_and_pause(self, topic: str, partition: int, reason: str = "") -> bool:
        self.calls.append("pause")
        self.coordinator.abort_and_pause(topic, partition, 5, operator=False)
        return True

    def resume(self, topic: str, partition: int, reason: str = "") -> None:
        self.calls.append("resume")
        self.coordinator.resume(topic, partition, operator=False)

    def abort_and_pause_many(self, partitions: list[tuple[str, int]]) -> bool:
        self.calls.append("pause_many")
        self.listed_at["pause_many"] = self._listed(partitions[0][0])
        self.coordinator.pause_many(partitions, 5)
        self.paused = [self.coordinator.pauses(t, p) for t, p in partitions]
        return True

    def resume_many(self, partitions: list[tuple[str, int]]) -> None:
        self.calls.append("resume_many")
        self.listed_at["resume_many"] = self._listed(partitions[0][0])
        self.coordinator.resume_many(partitions)


def node_with_coordinator(tmp_path: Path) -> tuple[LogDirServer, Coordinator, CountingLink]:
    """A node server whose cleaning pauses go to a real coordinator through a ``CountingLink``."""
    link = CountingLink(None)
    server = LogDirServer(tmp_path / "d", start_tasks=False,
                          cleaning_pauses=CoordinatorPauses(link))
    link.server = server
    coordinator = Coordinator({str(server.path): LocalHandle(server, "node")}, [ManualWorker()],
                              SMALL_CLEANER)
    link.coordinator = coordinator
    return server, coordinator, link


def test_deleting_a_200_partition_compacted_topic_pauses_its_cleaning_in_one_call(
        tmp_path: Path) -> None:
    server, coordinator, link = node_with_coordinator(tmp_path)
    assert server.create_partitions("big", range(PARTITIONS), COMPACT) == PARTITIONS
    server.create_partition("kept", 0, COMPACT)

    assert server.delete_partitions("big", range(PARTITIONS)) == PARTITIONS

    assert link.calls == ["pause_many", "resume_many"]   # not 200 of each
    # taken before the first rename, every partition paused; released after the last
    assert link.listed_at == {"pause_many": PARTITIONS, "resume_many": 0}
    assert link.paused == [(0, 1)] * PARTITIONS
    assert all(coordinator.pauses("big", p) == (0, 0) for p in range(PARTITIONS))
    assert not any(coordinator.manager.is_cleaning_in_state_paused(TopicPartition("big", p))
                   for p in range(PARTITIONS))
    assert [tp.topic for tp in server.log_dir.logs()] == ["kept"]
    assert not any(p.name.startswith("big-") and not p.name.endswith("-delete")
                   for p in server.path.iterdir())
    server.close()


def test_one_partition_deleted_alone_still_holds_its_pause_across_the_rename(
        tmp_path: Path) -> None:
    server, coordinator, link = node_with_coordinator(tmp_path)
    server.create_partition("t", 0, COMPACT)
    assert server.delete_partition("t", 0)
    assert link.calls == ["pause_many", "resume_many"]
    assert link.listed_at == {"pause_many": 1, "resume_many": 0}
    assert coordinator.pauses("t", 0) == (0, 0)
    server.close()
