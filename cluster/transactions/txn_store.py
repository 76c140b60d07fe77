"""The transaction coordinator's state log and marker writer on the node actors.

``NodeStateStore``: the internal compacted topic ``__strata_transactions``, created at the first
write with ``transaction.state.log.num.partitions`` partitions (50 by default, as Kafka's
``__transaction_state``) placed over the directories like any topic
(``cluster.metadata.placement``), so a cluster that never uses transactions has none; appended with
``flush=True`` through the node holding the partition, read back at load with ``read_records``. A
state log that exists keeps the partition count it has, as Kafka's does (``TransactionStateManager``
takes the count of the existing topic): a cluster written when the state log had one partition keeps
it, and every transactional id maps to partition 0, where its state is. While known directories are
missing (a start told to go on without them) a partition count can only be trusted up to the
configured one: the larger of the two is taken, and the partitions not routed fail their ids.
``NodeMarkerWriter``: markers grouped by directory, one ``write_txn_markers`` call per node (the
node flushes before answering). ``cluster.transactions.log_store`` has the same on local
``storage.log.Log``s (tests, embedded use).

This module runs in the coordinator's process and loads no part of the storage engine: a state
record is encoded by the node that appends it (``append_records_or_moved``), so the coordinator
starts without numba and the record kernels.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence

from cluster.errors import TopicExistsError, UnknownTopicError
from cluster.handles import Handle
from cluster.metadata.topics import TopicMetadata
from cluster.naming import TRANSACTION_STATE_TOPIC
from cluster.metadata.placement import DirRoom
from cluster.transactions.coordinator import Marker
from cluster.transactions.txn_state import DEFAULT_STATE_LOG_PARTITIONS
from storage.clock import SYSTEM_CLOCK, Clock
from storage.record_format import Record

logger = logging.getLogger(__name__)

STATE_TOPIC = TRANSACTION_STATE_TOPIC
STATE_TOPIC_CONFIG = {"cleanup.policy": "compact"}
READ_CHUNK = 10_000
CALL_TIMEOUT_S = 120.0


class NodeStateStore:
    """``StateStore`` on the node actors; ``partitions`` is the count a new state log gets."""

    def __init__(self, metadata: TopicMetadata, nodes: Mapping[str, Handle],
                 rooms: Callable[[], list[DirRoom]], clock: Clock = SYSTEM_CLOCK,
                 partitions: int = DEFAULT_STATE_LOG_PARTITIONS) -> None:
        self._meta = metadata
        self._nodes = nodes
        self._rooms = rooms
        self._clock = clock
        self._partitions = partitions

    def partition_count(self) -> int:
        routes = self._routes()
        if routes is None:
            return self._partitions
        held = max(routes) + 1
        return max(held, self._partitions) if self._meta.missing_dirs else held

    def _routes(self, refresh: bool = True) -> dict[int, str] | None:
        """The routes of the state log (asking the nodes again when the table has none, with
        ``refresh``); None when it does not exist."""
        for attempt in range(2 if refresh else 1):
            try:
                return self._meta.routes(STATE_TOPIC)[STATE_TOPIC]
            except (UnknownTopicError, KeyError):
                if attempt == 0 and refresh:
                    self._meta.refresh()
        return None

    def _node(self, partition: int, create: bool) -> Handle | None:
        """The node of ``partition``; None when the state log does not exist (and not
        ``create``; a read trusts the table, which ``partition_count`` refreshed at the load).
        ``UnknownTopicError`` for a partition the existing log does not route."""
        routes = self._routes(refresh=create)
        if routes is None:
            if not create:
                return None
            try:
                self._meta.create_topic(STATE_TOPIC, self._partitions, STATE_TOPIC_CONFIG,
                                        self._rooms())
            except TopicExistsError:    # another call created it meanwhile
                pass
            routes = self._routes()
            assert routes is not None
        if partition not in routes:
            return self._nodes[self._meta.route(STATE_TOPIC, partition)]   # raises why not
        return self._nodes[routes[partition]]

    def log_dir(self, partition: int) -> str:
        """The directory holding ``partition`` of the state log, which is created first when
        it does not exist (Kafka creates ``__transaction_state`` at the first FindCoordinator
        of a transactional id). Raises the typed error of a partition not routed."""
        self._node(partition, create=True)
        return self._meta.route(STATE_TOPIC, partition)

    def append(self, partition: int, key: bytes, value: bytes | None) -> None:
        node = self._node(partition, create=True)
        assert node is not None
        record = Record(key=key, value=value, timestamp=self._clock.milliseconds())
        _, refused = node.call("append_records_or_moved", [(STATE_TOPIC, partition, [record])],
                               True, timeout=CALL_TIMEOUT_S)
        if refused:
            raise refused[0][1]    # moved away or not there yet: the caller's typed error

    def read(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        node = self._node(partition, create=False)
        if node is None:
            return
        offset = 0
        while True:
            records = node.call("read_records", STATE_TOPIC, partition, offset, None,
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
            by_dir[log_dir].append((m.topic, m.partition, m.producer_id, m.producer_epoch,
                                    int(m.control_type), m.coordinator_epoch))
        pendings = [self._nodes[d].submit("write_txn_markers", items)
                    for d, items in by_dir.items()]
        for pending in pendings:
            pending.result(CALL_TIMEOUT_S)
