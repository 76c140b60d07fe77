"""A move pauses cleaning of its partition through the coordinator for the whole move, with the
explicit reason ``move`` (in one process: two node servers over real directories with the
cluster's seams, the coordinator reached by a link object, the source node by a ``LocalHandle``;
no Ray)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cluster.cleaning.coordinator import Coordinator
from cluster.handles import LocalHandle
from cluster.runtime.node_service import CoordinatorPauses, RemoteMoveSource
from node.server import LogDirServer
from storage.files import TopicPartition
from storage.records import Record, build_batch
from tests.cluster.fakes import SMALL_CLEANER, ManualWorker

COMPACT = {"cleanup.policy": "compact", "segment.bytes": "4096"}


class Link:
    """``cluster.runtime.node_service.PauseLink`` straight to a coordinator object."""

    def __init__(self) -> None:
        self.coordinator: Coordinator | None = None     # set once the coordinator exists

    def abort_and_pause(self, topic: str, partition: int, reason: str = "") -> bool:
        if reason:
            self.coordinator.pause_for(topic, partition, reason, 5)
        else:
            self.coordinator.abort_and_pause(topic, partition, 5, operator=False)
        return True

    def resume(self, topic: str, partition: int, reason: str = "") -> None:
        if reason:
            self.coordinator.resume_for(topic, partition, reason)
        else:
            self.coordinator.resume(topic, partition, operator=False)


def test_a_move_holds_a_pause_of_cleaning_named_move_until_it_is_done(tmp_path: Path) -> None:
    link = Link()
    a = LogDirServer(tmp_path / "a", start_tasks=False, cleaning_pauses=CoordinatorPauses(link))
    handles = {str(a.path): LocalHandle(a, "node-a")}
    coordinator = Coordinator(handles, [ManualWorker()], SMALL_CLEANER)
    link.coordinator = coordinator
    seen: list[Any] = []

    class Watching(LocalHandle):
        def call(self, method: str, *args: Any, timeout: float | None = None,
                 **kwargs: Any) -> Any:
            if method == "move_switch_out":
                seen.append((coordinator.pause_reasons("t", 0), coordinator.pauses("t", 0)))
            return super().call(method, *args, **kwargs)

    b = LogDirServer(tmp_path / "b", start_tasks=False, cleaning_pauses=CoordinatorPauses(link),
                     move_sources=lambda d: RemoteMoveSource(Watching(a, "node-a")))
    a.create_partition("t", 0, COMPACT)
    for i in range(50):
        a.append_batch("t", 0, build_batch([Record(key=b"k%d" % (i % 5), value=b"v" * 50,
                                                   timestamp=i)] * 3))
    assert coordinator.pause_reasons("t", 0) == {}
    result = b.move_in("t", 0, str(a.path))
    assert result.log_end_offset == 150
    # during the copy: the move's pause; during the switch the source's own pause nests on it
    assert seen == [({"move": 1}, (0, 1))]
    assert coordinator.pause_reasons("t", 0) == {} and coordinator.pauses("t", 0) == (0, 0)
    assert not coordinator.manager.is_cleaning_in_state_paused(TopicPartition("t", 0))
    a.close(), b.close()
