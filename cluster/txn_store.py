"""The transaction coordinator's state log and marker writer on the node actors.

``NodeStateStore``: the internal compacted topic ``__strata_transactions`` (one partition,
created at the first write, so a cluster that never uses transactions has none), appended with
``flush=True`` through the node holding it, read back at load with ``read_records``.
``NodeMarkerWriter``: markers grouped by directory, one ``write_txn_markers`` call per node (the
node flushes before answering). ``LogStateStore`` and ``LogMarkerWriter``: the same on local
``storage.log.Log``s (tests, embedded use).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence

from cluster.errors import UnknownTopicError
from cluster.handles import Handle
from cluster.metadata import TopicMetadata
from cluster.naming import TRANSACTION_STATE_TOPIC
from cluster.placement import DirRoom
from cluster.transactions import Marker
from cluster.txn_state import MARKER_EPOCH
from storage.clock import SYSTEM_CLOCK, Clock
from storage.log import Log
from storage.records import Record, build_batch

logger = logging.getLogger(__name__)

STATE_TOPIC = TRANSACTION_STATE_TOPIC
STATE_TOPIC_CONFIG = {"cleanup.policy": "compact"}
READ_CHUNK = 10_000
CALL_TIMEOUT_S = 120.0


class NodeStateStore:
    def __init__(self, metadata: TopicMetadata, nodes: Mapping[str, Handle],
                 rooms: Callable[[], list[DirRoom]], clock: Clock = SYSTEM_CLOCK) -> None:
        self._meta = metadata
        self._nodes = nodes
        self._rooms = rooms
        self._clock = clock

    def _node(self, create: bool) -> Handle | None:
        routes = self._routes()
        if routes is None and create:
            self._meta.create_topic(STATE_TOPIC, 1, STATE_TOPIC_CONFIG, self._rooms())
            routes = self._routes()
        return None if routes is None else self._nodes[routes[0]]

    def _routes(self) -> dict[int, str] | None:
        for attempt in range(2):
            try:
                return self._meta.routes(STATE_TOPIC)[STATE_TOPIC]
            except (UnknownTopicError, KeyError):
                if attempt == 0:
                    self._meta.refresh()
        return None

    def append(self, key: bytes, value: bytes | None) -> None:
        node = self._node(create=True)
        assert node is not None
        batch = build_batch([Record(key=key, value=value, timestamp=self._clock.milliseconds())])
        node.call("append_batches", [(STATE_TOPIC, 0, batch)], True, timeout=CALL_TIMEOUT_S)

    def read_all(self) -> Iterator[tuple[bytes, bytes | None]]:
        node = self._node(create=False)
        if node is None:
            return
        offset = 0
        while True:
            records = node.call("read_records", STATE_TOPIC, 0, offset, None,
                                "read_uncommitted", READ_CHUNK, timeout=CALL_TIMEOUT_S)
            for record in records:
                if record.key is not None:
                    yield record.key, record.value
            if len(records) < READ_CHUNK:
                return
            offset = records[-1].offset + 1


class NodeMarkerWriter:
    """``MarkerWriter`` through the node actors; ``route(topic, partition)`` names the
    directory holding a partition, or None when it no longer exists."""

    def __init__(self, nodes: Mapping[str, Handle],
                 route: Callable[[str, int], str | None]) -> None:
        self._nodes = nodes
        self._route = route

    def write_markers(self, markers: Sequence[Marker]) -> None:
        by_dir: dict[str, list[tuple[str, int, int, int, int, int]]] = defaultdict(list)
        for m in markers:
            log_dir = self._route(m.topic, m.partition)
            if log_dir is None:
                logger.info("partition %s-%d is gone: no marker for producer %d", m.topic,
                            m.partition, m.producer_id)
                continue
            by_dir[log_dir].append((m.topic, m.partition, m.producer_id, MARKER_EPOCH,
                                    int(m.control_type), m.coordinator_epoch))
        pendings = [self._nodes[d].submit("write_txn_markers", items)
                    for d, items in by_dir.items()]
        for pending in pendings:
            pending.result(CALL_TIMEOUT_S)


# ---- a state log and markers on local Logs (tests, embedded use) ------------------------------
class LogStateStore:
    """``StateStore`` on one ``storage.log.Log`` (compacted or not)."""

    def __init__(self, log: Log, clock: Clock = SYSTEM_CLOCK) -> None:
        self.log = log
        self._clock = clock

    def append(self, key: bytes, value: bytes | None) -> None:
        self.log.append([Record(key=key, value=value, timestamp=self._clock.milliseconds())])
        self.log.flush()

    def read_all(self) -> Iterator[tuple[bytes, bytes | None]]:
        for record in self.log.read():
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
                                         producer_epoch=MARKER_EPOCH,
                                         coordinator_epoch=marker.coordinator_epoch)
            target.flush()
