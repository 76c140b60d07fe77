"""Transaction-aware cleaning: Kafka's LogCleanerTest transaction cases (and LogCleanerManagerTest's
testUndecidedTransactionalDataNotCleanable), ported as v2 batches on real segment files.

Kafka's helpers map to ours: ``appendTransactionalAsLeader(log, pid, epoch)`` is ``txn_producer``
(keys as values, sequences from 0), ``commitMarker``/``abortMarker`` appended with
``origin = COORDINATOR`` is ``commit``/``abort`` (``Log.append_end_txn_marker``),
``cleaner.doClean(LogToClean(tp, log, dirty, activeSegment.baseOffset), currentTime)`` is ``clean``,
and ``runTwoPassClean`` is ``two_pass_clean`` (a clean at ``now``, then one past the delete
horizon, ``now + delete.retention.ms + 1``).
"""

from __future__ import annotations

import random
from typing import Callable

import pytest

from cleaner.cleanable import cleanable_offsets
from cleaner.cleaner import Cleaner
from cleaner.offset_map import OffsetMap
from storage import files
from storage.clock import FakeClock
from storage.log import Log
from storage.records import ControlType, Record, build_batch
from storage.scheduler import FakeScheduler
from storage.txn_index import AbortedTxn
from storage.view import LogView
from tests.cleaner.kafka_logs import (
    INT_MAX,
    LARGE_TIMESTAMP,
    LONG_MAX,
    TOMBSTONE_RETENTION_MS,
    MakeLog,
    batches,
    key,
    keys_in_log,
    last_offsets_per_batch,
    make_cleaner,
    offsets_in_log,
)

Append = Callable[[list[int]], None]


class KafkaTestOffsetMap(OffsetMap):
    """A real offset map whose ``clear`` keeps the latest offset, as Kafka's test FakeOffsetMap
    does: a clean from the end of the previous one (runTwoPassClean) then cleans the whole
    log again instead of nothing."""

    def clear(self) -> None:
        latest = self.latest_offset
        super().clear()
        self.update_latest_offset(latest)


def kafka_cleaner(clock: FakeClock, *, max_message_size: int = 64 * 1024) -> Cleaner:
    """LogCleanerTest's ``makeCleaner(Int.MaxValue)`` with its FakeOffsetMap behaviour."""
    cleaner = make_cleaner(INT_MAX, clock, max_message_size=max_message_size)
    cleaner.offset_map = KafkaTestOffsetMap(cleaner.offset_map.memory, 0.75)
    return cleaner


@pytest.fixture
def cleaner(clock: FakeClock) -> Cleaner:
    return kafka_cleaner(clock)


def txn_producer(log: Log, producer_id: int, epoch: int = 0, *,
                 origin: str = "client") -> Append:
    """Kafka's appendTransactionalAsLeader: each call appends one transactional batch of the keys
    (value = key), sequences continuing from 0."""
    sequence = 0

    def append(keys: list[int]) -> None:
        nonlocal sequence
        now = log.clock.milliseconds()
        log.append_batch(build_batch([Record(key(k), key(k), now) for k in keys],
                                     producer_id=producer_id, producer_epoch=epoch,
                                     base_sequence=sequence, is_transactional=True),
                         origin=origin)
        sequence += len(keys)
    return append


def commit(log: Log, producer_id: int, epoch: int = 0) -> None:
    log.append_end_txn_marker(ControlType.COMMIT, producer_id=producer_id, producer_epoch=epoch)


def abort(log: Log, producer_id: int, epoch: int = 0) -> None:
    log.append_end_txn_marker(ControlType.ABORT, producer_id=producer_id, producer_epoch=epoch)


def plain(log: Log, k: int, v: int | bytes) -> None:
    value = v if isinstance(v, bytes) else key(v)
    log.append_batch(build_batch([Record(key(k), value, log.clock.milliseconds())]))


def clean(cleaner: Cleaner, log: Log, dirty: int, now: int | None = None) -> int:
    """Kafka's doClean(LogToClean(tp, log, dirty, activeSegment.baseOffset), currentTime)._1."""
    return cleaner.clean(log, dirty, now,
                         first_uncleanable_offset=log.active_segment.base_offset
                         ).next_dirty_offset


def two_pass_clean(cleaner: Cleaner, log: Log, dirty: int, now: int) -> int:
    """Kafka's runTwoPassClean: the first pass sets delete horizons, the second is past them."""
    clean(cleaner, log, dirty, now)
    return clean(cleaner, log, dirty, now + TOMBSTONE_RETENTION_MS + 1)


def aborted_txns(log: Log) -> list[AbortedTxn]:
    return log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset)


def committed_view(log: Log) -> dict[bytes, bytes | None]:
    """The latest committed value per key, as a read_committed reader sees it."""
    latest: dict[bytes, bytes | None] = {}
    for r in log.read(isolation="read_committed"):
        latest[r.key] = r.value
    return latest


# ---- the reported bug -----------------------------------------------------------------------
def test_an_aborted_value_never_wins_its_key_and_the_cleaned_segment_keeps_the_txn_index(
        make_log: MakeLog, cleaner: Cleaner, scheduler: FakeScheduler) -> None:
    """The issue's reproduction: a plain ``a=committed-1``, a transactional ``a=ABORTED`` from
    producer 5 and its abort marker; after a clean read_committed still shows committed-1 and the
    abort stays indexed in the cleaned segment's .txnindex."""
    log = make_log()
    plain(log, 0, b"committed-1")
    log.append_batch(build_batch([Record(key(0), b"ABORTED", log.clock.milliseconds())],
                                 producer_id=5, producer_epoch=0, base_sequence=0,
                                 is_transactional=True))
    abort(log, 5)
    log.roll()
    before = committed_view(log)
    assert before == {key(0): b"committed-1"}
    index_before = aborted_txns(log)
    clean(cleaner, log, 0)
    assert committed_view(log) == before
    assert aborted_txns(log) == index_before
    txn_index = files.txn_index_file(log.dir, 0)
    assert txn_index.exists() and txn_index.stat().st_size == 34
    assert not list(log.dir.glob("*.cleaned")) and not list(log.dir.glob("*.swap"))
    # the aborted batch stays as an empty batch (its producer's last sequence), with no record
    assert [r.value for b in batches(log) if not b.is_control for r in b.records()] == \
        [b"committed-1"]
    # and it survives a reopen: the index is the segment's own file
    log.close()
    reopened = Log.open(log.dir, log.config, clock=log.clock, scheduler=scheduler)
    try:
        assert committed_view(reopened) == before
        assert aborted_txns(reopened) == index_before
    finally:
        reopened.close()


# ---- Kafka's LogCleanerTest --------------------------------------------------------------------
def test_basic_transaction_aware_cleaning(make_log: MakeLog, cleaner: Cleaner) -> None:
    """Ports testBasicTransactionAwareCleaning."""
    log = make_log(segment_bytes=2048)
    p1, p2 = txn_producer(log, 1), txn_producer(log, 2)
    p1([1, 2])
    p2([2, 3])
    p1([3, 4])
    abort(log, 1)
    commit(log, 2)
    p1([2])
    commit(log, 1)
    aborted = log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset)
    log.roll()
    clean(cleaner, log, 0)
    assert keys_in_log(log) == [3, 2]
    assert offsets_in_log(log) == [3, 6, 7, 8, 9]
    assert log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset) == aborted


def test_clean_with_transactions_spanning_segments(make_log: MakeLog, cleaner: Cleaner) -> None:
    """Ports testCleanWithTransactionsSpanningSegments."""
    log = make_log(segment_bytes=1024)
    p1, p2, p3 = txn_producer(log, 1), txn_producer(log, 2), txn_producer(log, 3)
    p1([1, 2])
    p3([2, 3])
    p2([3, 4])
    log.roll()
    p2([5, 6])
    p3([6, 7])
    p1([7, 8])
    abort(log, 2)
    p3([8, 9])
    commit(log, 3)
    p1([9, 10])
    abort(log, 1)
    # only the records of the first segment are cleaned
    dirty = clean(cleaner, log, 0)
    assert keys_in_log(log) == [2, 3, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10]
    log.roll()
    p2([11])
    p1([12])
    # finally only the keys of producer 3 remain (and the new ones)
    clean(cleaner, log, dirty)
    assert keys_in_log(log) == [2, 3, 6, 7, 8, 9, 11, 12]


def test_commit_marker_removal(make_log: MakeLog, cleaner: Cleaner) -> None:
    """Ports testCommitMarkerRemoval."""
    log = make_log(segment_bytes=256)
    producer = txn_producer(log, 1)
    producer([1])
    producer([2, 3])
    commit(log, 1)
    producer([2])
    commit(log, 1)
    log.roll()
    # the marker cannot go in this pass: its transaction still has records
    dirty = clean(cleaner, log, 0, LARGE_TIMESTAMP)
    assert keys_in_log(log) == [1, 3, 2]
    assert offsets_in_log(log) == [0, 2, 3, 4, 5]
    producer([1, 3])
    commit(log, 1)
    log.roll()
    # the commit marker at 3 stays: there were still records of its transaction
    dirty = clean(cleaner, log, dirty, LARGE_TIMESTAMP)
    assert keys_in_log(log) == [2, 1, 3]
    assert offsets_in_log(log) == [3, 4, 5, 6, 7, 8]
    # again at the same time: the marker is not removed before its horizon
    dirty = clean(cleaner, log, dirty, LARGE_TIMESTAMP)
    assert keys_in_log(log) == [2, 1, 3]
    assert offsets_in_log(log) == [3, 4, 5, 6, 7, 8]
    # past the horizon it goes
    clean(cleaner, log, dirty, LONG_MAX)
    assert keys_in_log(log) == [2, 1, 3]
    assert offsets_in_log(log) == [4, 5, 6, 7, 8]


def test_abort_marker_removal(make_log: MakeLog, cleaner: Cleaner) -> None:
    """Ports testAbortMarkerRemoval."""
    log = make_log(segment_bytes=256)
    producer = txn_producer(log, 1)
    producer([1])
    producer([2, 3])
    abort(log, 1)
    producer([3])
    commit(log, 1)
    log.roll()
    # the aborted records go; the abort marker stays
    dirty = clean(cleaner, log, 0, LARGE_TIMESTAMP)
    assert keys_in_log(log) == [3]
    assert offsets_in_log(log) == [3, 4, 5]
    # the first pass gives the abort marker its delete horizon, the second removes it
    two_pass_clean(cleaner, log, dirty, LARGE_TIMESTAMP)
    assert keys_in_log(log) == [3]
    assert offsets_in_log(log) == [4, 5]


def test_empty_batch_removal_with_sequence_reuse(make_log: MakeLog, cleaner: Cleaner) -> None:
    """Ports testEmptyBatchRemovalWithSequenceReuse (the group coordinator's batches all begin at
    sequence 0; its data is appended with the coordinator's origin, unchecked as Kafka's
    REPLICATION origin is)."""
    log = make_log(segment_bytes=2048)
    first = txn_producer(log, 1, origin="coordinator")
    first([1])
    commit(log, 1)
    second = txn_producer(log, 1, origin="coordinator")
    second([2])
    commit(log, 1)
    plain(log, 1, 1)
    plain(log, 2, 1)
    log.roll()
    # both transactional batches are cleaned; the last stays as an empty batch (sequence, epoch)
    clean(cleaner, log, 0, LARGE_TIMESTAMP)
    assert offsets_in_log(log) == [1, 3, 4, 5]
    assert last_offsets_per_batch(log) == [1, 2, 3, 4, 5]
    # the first pass gives the first marker its horizon, the second removes it
    two_pass_clean(cleaner, log, 0, LARGE_TIMESTAMP)
    assert offsets_in_log(log) == [3, 4, 5]
    assert last_offsets_per_batch(log) == [2, 3, 4, 5]


def test_committed_transaction_spanning_segments(make_log: MakeLog, cleaner: Cleaner) -> None:
    """Ports testCommittedTransactionSpanningSegments."""
    log = make_log(segment_bytes=128)
    txn_producer(log, 1)([1])
    log.roll()
    commit(log, 1)
    log.roll()
    # the record and the marker both stay
    two_pass_clean(cleaner, log, 0, LARGE_TIMESTAMP)
    assert offsets_in_log(log) == [0, 1]
    assert last_offsets_per_batch(log) == [0, 1]


def test_aborted_transaction_spanning_segments(make_log: MakeLog, cleaner: Cleaner) -> None:
    """Ports testAbortedTransactionSpanningSegments: the batch stays (empty) as its producer's
    last, and the marker stays while a batch of its transaction remains."""
    log = make_log(segment_bytes=128)
    txn_producer(log, 1)([1])
    log.roll()
    abort(log, 1)
    log.roll()
    clean(cleaner, log, 0, LARGE_TIMESTAMP)
    assert offsets_in_log(log) == [1]
    assert last_offsets_per_batch(log) == [0, 1]
    # still both after a second clean
    clean(cleaner, log, 0, LONG_MAX)
    assert offsets_in_log(log) == [1]
    assert last_offsets_per_batch(log) == [0, 1]


def test_deleted_batches_with_no_messages_read(make_log: MakeLog, clock: FakeClock) -> None:
    """Ports testDeletedBatchesWithNoMessagesRead (with its markers): 100-byte read buffers."""
    cleaner = kafka_cleaner(clock, max_message_size=100)
    log = make_log(max_message_bytes=100, segment_bytes=1000)
    producer = txn_producer(log, 1)
    producer([1])
    abort(log, 1)
    producer([2])
    producer([2])
    commit(log, 1)
    log.roll()
    clean(cleaner, log, 0, LARGE_TIMESTAMP)
    assert keys_in_log(log) == [2]
    assert offsets_in_log(log) == [1, 3, 4]
    # the first pass gives the abort marker its horizon, the second removes it
    two_pass_clean(cleaner, log, 0, LARGE_TIMESTAMP)
    assert keys_in_log(log) == [2]
    assert offsets_in_log(log) == [3, 4]


def test_commit_marker_retention_with_empty_batch(make_log: MakeLog, cleaner: Cleaner) -> None:
    """Ports testCommitMarkerRetentionWithEmptyBatch."""
    log = make_log(segment_bytes=256)
    producer1, producer2 = txn_producer(log, 1), txn_producer(log, 2)
    producer1([2, 3])                        # offsets 0, 1
    log.roll()
    producer2([2, 3])                        # 2, 3
    commit(log, 2)                           # 4
    log.roll()
    plain(log, 2, 2)                         # 5
    plain(log, 3, 3)                         # 6
    commit(log, 1)                           # 7
    log.roll()
    # the records go first; both producers keep an empty batch
    dirty = clean(cleaner, log, 0, LARGE_TIMESTAMP)
    assert keys_in_log(log) == [2, 3]
    assert offsets_in_log(log) == [4, 5, 6, 7]
    assert last_offsets_per_batch(log) == [1, 3, 4, 5, 6, 7]
    # the empty batches stay while they hold their producers' last sequences
    dirty = clean(cleaner, log, dirty, LARGE_TIMESTAMP)
    assert keys_in_log(log) == [2, 3]
    assert offsets_in_log(log) == [4, 5, 6, 7]
    assert last_offsets_per_batch(log) == [1, 3, 4, 5, 6, 7]
    # a new record of producer 2 lets its empty batch go
    producer2([1])                           # 8
    commit(log, 2)                           # 9
    log.roll()
    dirty = clean(cleaner, log, dirty, LARGE_TIMESTAMP)
    assert keys_in_log(log) == [2, 3, 1]
    assert offsets_in_log(log) == [4, 5, 6, 7, 8, 9]
    assert last_offsets_per_batch(log) == [1, 4, 5, 6, 7, 8, 9]
    # the first pass gives producer 2's first commit marker its horizon, the second removes it
    two_pass_clean(cleaner, log, dirty, LARGE_TIMESTAMP)
    assert keys_in_log(log) == [2, 3, 1]
    assert offsets_in_log(log) == [5, 6, 7, 8, 9]
    assert last_offsets_per_batch(log) == [1, 5, 6, 7, 8, 9]


def test_abort_marker_retention_with_empty_batch(make_log: MakeLog, cleaner: Cleaner) -> None:
    """Ports testAbortMarkerRetentionWithEmptyBatch: the abort stays indexed while its marker
    stays, and leaves the index with it."""
    log = make_log(segment_bytes=256)
    producer = txn_producer(log, 1)
    producer([2, 3])                         # last offset 1
    abort(log, 1)                            # 2
    log.roll()

    def assert_aborted_transaction_indexed() -> None:
        txns = log.collect_aborted_transactions(0, 100)
        assert [(t.producer_id, t.first_offset, t.last_offset) for t in txns] == [(1, 0, 2)]

    assert_aborted_transaction_indexed()
    # the records go first
    dirty = clean(cleaner, log, 0, LARGE_TIMESTAMP)
    assert_aborted_transaction_indexed()
    assert keys_in_log(log) == []
    assert offsets_in_log(log) == [2]                  # the abort marker stays
    assert last_offsets_per_batch(log) == [1, 2]       # and the empty batch
    # the empty batch stays on a later clean: it still holds the last sequence
    dirty = two_pass_clean(cleaner, log, dirty, LARGE_TIMESTAMP)
    assert_aborted_transaction_indexed()
    assert keys_in_log(log) == []
    assert offsets_in_log(log) == [2]
    assert last_offsets_per_batch(log) == [1, 2]
    # a new last sequence lets the empty batch go
    producer([1])
    log.roll()
    dirty = clean(cleaner, log, dirty, LARGE_TIMESTAMP)
    assert_aborted_transaction_indexed()
    assert keys_in_log(log) == [1]
    assert offsets_in_log(log) == [2, 3]     # the marker stays: the empty batch was read
    assert last_offsets_per_batch(log) == [2, 3]
    # the first pass gives the abort marker its horizon, the second removes it
    two_pass_clean(cleaner, log, dirty, LARGE_TIMESTAMP)
    assert keys_in_log(log) == [1]
    assert offsets_in_log(log) == [3]
    assert last_offsets_per_batch(log) == [3]
    # the aborted transaction is not kept in the index either
    assert log.collect_aborted_transactions(0, 100) == []


# ---- Kafka's LogCleanerManagerTest -------------------------------------------------------------
def test_undecided_transactional_data_is_not_cleanable(make_log: MakeLog,
                                                       clock: FakeClock) -> None:
    """Ports LogCleanerManagerTest.testUndecidedTransactionalDataNotCleanable on a real log."""
    compaction_lag = 60 * 60 * 1000
    log = make_log(segment_bytes=1024, min_compaction_lag_ms=compaction_lag)
    now = clock.milliseconds()
    log.append_batch(build_batch([Record(b"1", b"a", now), Record(b"2", b"b", now)],
                                 producer_id=15, producer_epoch=0, base_sequence=0,
                                 is_transactional=True))
    log.append_batch(build_batch([Record(b"3", b"c", now)], producer_id=15, producer_epoch=0,
                                 base_sequence=2, is_transactional=True))
    log.roll()
    clock.advance(compaction_lag + 1)
    # the compaction lag is past, but the undecided data is not cleanable
    offsets = cleanable_offsets(log, 0, clock.milliseconds())
    assert (offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset) == (0, 0)
    log.append_end_txn_marker(ControlType.ABORT, producer_id=15, producer_epoch=0,
                              coordinator_epoch=15)
    log.roll()
    # the first segment is cleanable at once
    offsets = cleanable_offsets(log, 0, clock.milliseconds())
    assert (offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset) == (0, 3)
    clock.advance(compaction_lag + 1)
    # the second after the compaction lag
    offsets = cleanable_offsets(log, 0, clock.milliseconds())
    assert (offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset) == (0, 4)


def test_a_clean_with_the_default_bound_stops_at_the_last_stable_offset(
        make_log: MakeLog, cleaner: Cleaner) -> None:
    """``Cleaner.clean`` without an explicit bound never maps or cleans past the first offset of
    an open transaction: its data may still be aborted."""
    log = make_log(segment_bytes=1024)
    plain(log, 0, b"committed-1")
    log.roll()
    log.append_batch(build_batch([Record(key(0), b"OPEN", log.clock.milliseconds())],
                                 producer_id=7, producer_epoch=0, base_sequence=0,
                                 is_transactional=True))
    log.roll()
    plain(log, 1, b"later")
    log.roll()
    assert log.last_stable_offset == 1
    result = cleaner.clean(log, 0)
    assert result.first_uncleanable_offset == 1
    abort(log, 7)
    assert committed_view(log) == {key(0): b"committed-1", key(1): b"later"}


# ---- read_committed is preserved by every clean ------------------------------------------------
@pytest.mark.parametrize("seed", range(12))
def test_read_committed_latest_values_survive_every_clean(make_log: MakeLog, clock: FakeClock,
                                                          seed: int) -> None:
    """Random interleavings of plain records, committed and aborted transactions of three
    producers (keys overlapping), rolls and cleans at random times: after each clean,
    read_committed shows the same latest value per key as before it."""
    rng = random.Random(seed)
    cleaner = make_cleaner(INT_MAX, clock)
    log = make_log(segment_bytes=rng.choice([256, 512, 1024]))
    sequences = {pid: 0 for pid in (1, 2, 3)}
    open_txn: set[int] = set()
    dirty = 0
    now = clock.milliseconds()
    for step in range(60):
        action = rng.random()
        k = rng.randrange(6)
        if action < 0.25:
            plain(log, k, f"plain-{step}".encode())
        elif action < 0.6:
            pid = rng.choice([1, 2, 3])
            value = f"p{pid}-{step}".encode() if rng.random() < 0.9 else None
            log.append_batch(build_batch([Record(key(k), value, clock.milliseconds())],
                                         producer_id=pid, producer_epoch=0,
                                         base_sequence=sequences[pid], is_transactional=True))
            sequences[pid] += 1
            open_txn.add(pid)
        elif action < 0.8 and open_txn:
            pid = rng.choice(sorted(open_txn))
            (commit if rng.random() < 0.5 else abort)(log, pid)
            open_txn.discard(pid)
        elif action < 0.9:
            log.roll()
        else:
            before = committed_view(log)
            now += rng.choice([0, TOMBSTONE_RETENTION_MS + 1])
            dirty = cleaner.clean(log, min(dirty, log.last_stable_offset), now).next_dirty_offset
            dirty = min(dirty, log.active_segment.base_offset)
            after = {k: v for k, v in committed_view(log).items()}
            assert {k: v for k, v in after.items() if v is not None} == \
                {k: v for k, v in before.items() if v is not None}, f"step {step}"


# ---- a cleaner worker's read-only view ---------------------------------------------------------
def test_a_view_clean_carries_the_txn_index_through_the_owners_swap(
        make_log: MakeLog, clock: FakeClock) -> None:
    """A cleaner on a ``LogView`` (another process) reads the aborted transactions from the
    ``.txnindex`` files, writes the retained ones to the ``.cleaned`` segment's index, and the
    owner's ``replace_cleaned`` renames it with the segment; when a later clean keeps no entry,
    the old segment's index goes with it and no stale index is left at that base."""
    log = make_log(segment_bytes=1024)
    p5 = txn_producer(log, 5)
    plain(log, 0, b"committed-1")
    p5([0])                                       # a=0 in a transaction that aborts
    abort(log, 5)
    log.roll()
    p5([1])
    commit(log, 5)
    log.roll()
    index_path = files.txn_index_file(log.dir, 0)
    before = committed_view(log)
    indexed = aborted_txns(log)
    assert len(indexed) == 1 and index_path.exists()

    def view_clean(now: int) -> None:
        view = LogView.open(log.dir, log.config, log.replace_cleaned, clock=clock)
        try:
            make_cleaner(INT_MAX, clock).clean(
                view, 0, now, first_uncleanable_offset=log.active_segment.base_offset)
        finally:
            view.close()
        assert not [p for p in log.dir.iterdir() if p.suffix in (".cleaned", ".swap")]

    now = clock.milliseconds()
    view_clean(now)           # the aborted batch goes; its marker stays, and so does its entry
    assert committed_view(log) == before
    assert aborted_txns(log) == indexed
    assert index_path.exists() and index_path.stat().st_size == 34
    view_clean(now)           # no batch of the abort is left: its marker gets a delete horizon
    assert committed_view(log) == before
    assert aborted_txns(log) == [] and not index_path.exists()
    assert [b.last_offset for b in batches(log) if b.is_control] == [2, 4]
    view_clean(now + TOMBSTONE_RETENTION_MS + 1)  # past the horizon the marker goes
    assert committed_view(log) == before
    assert [b.last_offset for b in batches(log) if b.is_control] == [4]


def test_a_crash_before_the_swap_completes_keeps_the_cleaned_txn_index(
        make_log: MakeLog, cleaner: Cleaner, scheduler: FakeScheduler) -> None:
    """A crash after the cleaned segment became ``.swap`` (its ``.txnindex.swap`` beside it) and
    before the final rename: the loader completes the swap and the aborted transaction is still
    indexed, so read_committed still skips it."""
    log = make_log(segment_bytes=1024)
    plain(log, 0, b"committed-1")
    txn_producer(log, 5)([0])
    plain(log, 1, b"x")
    abort(log, 5)
    log.roll()
    plain(log, 2, b"y")
    log.roll()
    before, indexed = committed_view(log), aborted_txns(log)
    clean(cleaner, log, 0)
    log.close()
    for path in (files.log_file(log.dir, 0), files.txn_index_file(log.dir, 0)):
        path.rename(path.with_name(path.name + files.SWAP_SUFFIX))
    reopened = Log.open(log.dir, log.config, recovery_point=0, had_clean_shutdown=False,
                        clock=log.clock, scheduler=scheduler)
    try:
        assert committed_view(reopened) == before == {key(0): b"committed-1", key(1): b"x",
                                                      key(2): b"y"}
        assert aborted_txns(reopened) == indexed
    finally:
        reopened.close()
