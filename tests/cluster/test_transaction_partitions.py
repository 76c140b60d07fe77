"""The transaction state log in partitions, as Kafka's ``__transaction_state``: an id's partition
is ``Utils.abs(id.hashCode) % partitions``; a partition that cannot be read or written costs only
the ids that map to it; a state log written with one partition keeps it. On real files: local
``Log``s, and real ``LogDirServer`` nodes behind in-process handles (no Ray)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.metadata.topics import TopicMetadata
from cluster.metadata.placement import DirRoom
from cluster.transactions.coordinator import TransactionCoordinator
from cluster.transactions.txn_state import (COORDINATOR_EPOCH_KEY, DATA_EPOCH, TXN_KEY_PREFIX,
                               TransactionConfig, TxnState, java_string_hash, kafka_abs,
                               partition_for)
from cluster.transactions.log_store import LogMarkerWriter, LogStateStore
from cluster.transactions.txn_store import STATE_TOPIC, NodeMarkerWriter, NodeStateStore
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import LogDirOfflineError
from storage.log import READ_COMMITTED, Log
from storage.records import Record, build_batch
from tests.cluster.fakes import open_nodes


def test_partition_for_is_kafkas_abs_of_the_java_hash_code_modulo_the_partitions() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00   # UTF-16 surrogates
    assert java_string_hash("polygenelubricants") == -2**31         # Integer.MIN_VALUE
    assert kafka_abs(-2**31) == 0 and kafka_abs(-7) == 7
    assert partition_for("polygenelubricants", 50) == 0               # abs() alone gives 48
    assert partition_for("hello", 50) == 99162322 % 50
    negative = next(f"id-{i}" for i in range(1000) if java_string_hash(f"id-{i}") < 0)
    assert partition_for(negative, 50) == -java_string_hash(negative) % 50


def ids_by_partition(partitions: int, wanted: set[int]) -> dict[int, str]:
    found: dict[int, str] = {}
    i = 0
    while set(found) != wanted:
        tid = f"job-{i}"
        found.setdefault(partition_for(tid, partitions), tid)
        found = {p: t for p, t in found.items() if p in wanted}
        i += 1
    return found


class _Logs:
    def __init__(self, root: Path, clock: FakeClock) -> None:
        self.root, self.clock = root, clock
        self.data: dict[tuple[str, int], Log] = {}

    def log(self, topic: str, partition: int) -> Log:
        if (topic, partition) not in self.data:
            self.data[(topic, partition)] = Log.open(self.root / f"{topic}-{partition}",
                                                     clock=self.clock)
        return self.data[(topic, partition)]

    def state(self, partition: int) -> Log:
        return Log.open(self.root / f"{STATE_TOPIC}-{partition}",
                        LogConfig(cleanup_policy="compact"), clock=self.clock)


def test_an_unreadable_state_partition_costs_only_the_ids_that_map_to_it(
        tmp_path: Path, clock: FakeClock) -> None:
    logs = _Logs(tmp_path, clock)
    state: list[Log | None] = [logs.state(p) for p in range(5)]
    lost = state[2]
    state[2] = None
    store = LogStateStore(state, clock)
    tc = TransactionCoordinator(store, LogMarkerWriter(logs.log), clock=clock)
    tc.load()
    assert tc.partitions == 5 and tc.unloaded_partitions() == [2]
    ids = ids_by_partition(5, {1, 2})
    with pytest.raises(LogDirOfflineError, match="partition 2"):
        tc.begin(ids[2])
    txn = tc.begin(ids[1])
    tc.add_partitions(ids[1], txn.epoch, 7, [("t", 0)])
    logs.log("t", 0).append([Record(key=b"k", value=b"v", timestamp=1)], producer_id=7,
                            producer_epoch=DATA_EPOCH, base_sequence=0, is_transactional=True)
    assert tc.end(ids[1], txn.epoch, commit=True).committed
    assert [r.value for r in logs.log("t", 0).read(isolation=READ_COMMITTED)] == [b"v"]
    store.logs[2] = lost                       # the directory is back
    tc.tick()
    assert tc.unloaded_partitions() == []
    assert tc.begin(ids[2]).epoch == 0


def test_each_id_s_records_and_its_partition_s_epoch_live_in_its_own_partition(
        tmp_path: Path, clock: FakeClock) -> None:
    logs = _Logs(tmp_path, clock)
    state = [logs.state(p) for p in range(3)]
    tc = TransactionCoordinator(LogStateStore(state, clock), LogMarkerWriter(logs.log),
                                clock=clock)
    tc.load()
    ids = ids_by_partition(3, {0, 2})
    for tid in ids.values():
        tc.end(tid, tc.begin(tid).epoch, commit=False)
    for partition, log in enumerate(state):
        keys = [r.key for r in log.read()]
        mine = [tid for p, tid in ids.items() if p == partition]
        assert keys == ([COORDINATOR_EPOCH_KEY] + [TXN_KEY_PREFIX + mine[0].encode()] * 3
                        if mine else [])
    for log in state:
        log.close()
    again = TransactionCoordinator(LogStateStore([logs.state(p) for p in range(3)], clock),
                                   LogMarkerWriter(logs.log), clock=clock)
    again.load()
    assert again.coordinator_epoch == 2
    assert {t.transactional_id for t in again.transactions()} == set(ids.values())


# ---- on real node servers (the cluster's store, without Ray) ----------------------------------
def rooms_of(nodes) -> list[DirRoom]:
    return [DirRoom(d, 1 << 30, 0, h.target.stats().partitions_count) for d, h in nodes.items()]


def node_coordinator(nodes, partitions: int, clock: FakeClock
                     ) -> tuple[TransactionCoordinator, TopicMetadata]:
    meta = TopicMetadata(nodes, LogConfig())
    meta.refresh()
    store = NodeStateStore(meta, nodes, lambda: rooms_of(nodes), clock, partitions=partitions)
    tc = TransactionCoordinator(store, NodeMarkerWriter(
        nodes, lambda t, p: meta.routes().get(t, {}).get(p)),
                                TransactionConfig(), clock=clock)
    tc.load()
    return tc, meta


def test_the_state_log_is_spread_and_an_offline_directory_costs_only_its_ids(
        tmp_path: Path, clock: FakeClock, immutable) -> None:
    nodes = open_nodes(tmp_path, 3)
    tc, meta = node_coordinator(nodes, 50, clock)
    meta.create_topic("t", 3, {}, rooms_of(nodes))
    tc.begin("probe")                                 # creates the state log
    routes = meta.routes(STATE_TOPIC)[STATE_TOPIC]
    assert sorted(routes) == list(range(50)) and tc.partitions == 50
    assert {len([p for p, d in routes.items() if d == x]) for x in nodes} <= {16, 17}
    victim = routes[partition_for("probe", 50)]
    healthy_topic = next(p for p, d in meta.routes("t")["t"].items() if d != victim)
    mapped = {tid: routes[partition_for(tid, 50)] for tid in (f"job-{i}" for i in range(60))}
    doomed = [t for t, d in mapped.items() if d == victim]
    spared = [t for t, d in mapped.items() if d != victim]

    segment = next((Path(victim) / f"{STATE_TOPIC}-{partition_for('probe', 50)}").glob("*.log"))
    immutable(segment)
    with pytest.raises(LogDirOfflineError):
        tc.begin("probe")
    assert not nodes[victim].target.log_dir.online
    for tid in doomed[:3]:
        with pytest.raises(LogDirOfflineError):
            tc.begin(tid)
    for pid, tid in enumerate(spared[:5], start=100):
        txn = tc.begin(tid)
        tc.add_partitions(tid, txn.epoch, pid, [("t", healthy_topic)])
        node = nodes[meta.route("t", healthy_topic)]
        node.call("append_batch", "t", healthy_topic, build_batch(
            [Record(key=b"k", value=tid.encode(), timestamp=1)], producer_id=pid,
            producer_epoch=DATA_EPOCH, base_sequence=0, is_transactional=True))
        assert tc.end(tid, txn.epoch, commit=True).committed

    # a coordinator started while the directory is offline loads the other partitions
    again, _ = node_coordinator(nodes, 50, clock)
    assert again.unloaded_partitions() == sorted(p for p, d in routes.items() if d == victim)
    assert again.describe(spared[0]).state == TxnState.COMPLETE_COMMIT
    with pytest.raises(LogDirOfflineError):
        again.describe(doomed[0])


def test_a_state_log_written_with_one_partition_keeps_it_and_its_state(
        tmp_path: Path, clock: FakeClock) -> None:
    nodes = open_nodes(tmp_path, 2)
    old, meta = node_coordinator(nodes, 1, clock)
    txn = old.begin("old-job")
    old.end("old-job", txn.epoch, commit=True)
    ongoing = old.begin("open-job")
    old.add_partitions("open-job", ongoing.epoch, 5, [("t", 0)])
    new, meta = node_coordinator(nodes, 50, clock)
    assert new.partitions == 1
    assert new.describe("old-job").state == TxnState.COMPLETE_COMMIT
    assert new.describe("open-job").state == TxnState.ONGOING
    new.end("open-job", ongoing.epoch, commit=False)
    new.begin("fresh")
    assert sorted(meta.routes(STATE_TOPIC)[STATE_TOPIC]) == [0]
