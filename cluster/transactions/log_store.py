"""The transaction coordinator's state log and marker writer on local ``storage.log.Log``s
(tests, embedded use): ``LogStateStore`` keeps the state records in one log per partition,
``LogMarkerWriter`` appends each marker to its partition's log; both flush before returning, as
``cluster.transactions.txn_store``'s node-backed pair does."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from cluster.transactions.coordinator import Marker
from storage.clock import SYSTEM_CLOCK, Clock
from storage.errors import LogDirOfflineError
from storage.log import Log
from storage.records import Record


class LogStateStore:
    """``StateStore`` on ``storage.log.Log``s, one per partition (compacted or not); ``None`` in
    place of a log stands for a partition that cannot be read or written (``unavailable``)."""

    def __init__(self, logs: Log | Sequence[Log | None], clock: Clock = SYSTEM_CLOCK, *,
                 unavailable: Callable[[int], Exception] | None = None) -> None:
        self.logs = [logs] if isinstance(logs, Log) else list(logs)
        self._clock = clock
        self._unavailable = unavailable or (lambda p: LogDirOfflineError(
            f"state log partition {p} is unavailable", partition=p))

    @property
    def log(self) -> Log:
        """The log of partition 0."""
        first = self.logs[0]
        assert first is not None
        return first

    def partition_count(self) -> int:
        return len(self.logs)

    def _log(self, partition: int) -> Log:
        log = self.logs[partition]
        if log is None:
            raise self._unavailable(partition)
        return log

    def append(self, partition: int, key: bytes, value: bytes | None) -> None:
        log = self._log(partition)
        log.append([Record(key=key, value=value, timestamp=self._clock.milliseconds())])
        log.flush()

    def read(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        for record in self._log(partition).read():
            if record.key is not None:
                yield record.key, record.value


class LogMarkerWriter:
    """``MarkerWriter`` on local ``Log``s: ``logs(topic, partition)`` gives one, or None when the
    partition is gone."""

    def __init__(self, logs: Callable[[str, int], Log | None]) -> None:
        self._logs = logs

    def write_markers(self, markers: Sequence[Marker]) -> None:
        for marker in markers:
            target = self._logs(marker.topic, marker.partition)
            if target is None:
                continue
            target.append_end_txn_marker(marker.control_type, producer_id=marker.producer_id,
                                         producer_epoch=marker.producer_epoch,
                                         coordinator_epoch=marker.coordinator_epoch)
            target.flush()
