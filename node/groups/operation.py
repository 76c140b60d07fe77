"""``OperationOutput``: what one coordinator operation leaves to do once its state changes are
made (Kafka's ``CoordinatorResult``): the records to append to the partition, the callbacks to
run once they are durable (Kafka's append future), and the answers to give.

The coordinator appends and flushes the records, then runs the callbacks (which may give more
answers), then completes every future; when the append fails, every answer of the operation
becomes NOT_COORDINATOR instead (``not_coordinator``).
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Callable

from kio.schema.errors import ErrorCode

from node.groups.messages import (
    GroupDeletion,
    JoinGroupResult,
    LeaveGroupResult,
    OffsetCommitResult,
    OffsetDeleteResult,
    OffsetFetchResult,
    PartitionError,
    SyncGroupResult,
)
from node.groups.records import CoordinatorRecord


class OperationOutput:
    """Filled by one operation under its partition's lock, drained by the coordinator."""

    def __init__(self) -> None:
        self.records: list[CoordinatorRecord] = []
        self.after_append: list[Callable[[], None]] = []
        self.answers: list[tuple[Future[Any], Any]] = []

    def append(self, record: CoordinatorRecord) -> None:
        self.records.append(record)

    def complete(self, future: Future[Any], answer: Any) -> None:
        self.answers.append((future, answer))

    def on_appended(self, callback: Callable[[], None]) -> None:
        self.after_append.append(callback)

    def take(self) -> tuple[list[CoordinatorRecord], list[Callable[[], None]],
                            list[tuple[Future[Any], Any]]]:
        taken = self.records, self.after_append, self.answers
        self.records, self.after_append, self.answers = [], [], []
        return taken


def not_coordinator(answer: Any) -> Any:
    """``answer`` as it reads when the coordinator could not write its records (Kafka maps a
    storage error on the coordinator's append to NOT_COORDINATOR)."""
    error = ErrorCode.not_coordinator
    if isinstance(answer, JoinGroupResult):
        return JoinGroupResult(error_code=error, member_id=answer.member_id)
    if isinstance(answer, SyncGroupResult):
        return SyncGroupResult(error_code=error)
    if isinstance(answer, LeaveGroupResult):
        return LeaveGroupResult(error_code=error)
    if isinstance(answer, OffsetCommitResult):
        return OffsetCommitResult(tuple(PartitionError(p.topic, p.partition, error)
                                        for p in answer.partitions))
    if isinstance(answer, OffsetDeleteResult):
        return OffsetDeleteResult(error_code=error)
    if isinstance(answer, OffsetFetchResult):
        return OffsetFetchResult(answer.group_id, error)
    if isinstance(answer, GroupDeletion):
        return GroupDeletion(answer.group_id, error)
    if isinstance(answer, list):
        return [not_coordinator(item) for item in answer]
    if isinstance(answer, ErrorCode):
        return error
    return answer
