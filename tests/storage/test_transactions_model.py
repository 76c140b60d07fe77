"""A model-based test of transactions in the log (hypothesis RuleBasedStateMachine): plain,
idempotent and transactional producers, commit and abort markers, retries, rolls, truncation,
log-start advances with retention, clean reopen and kill-and-reopen with and without indexes. After
every step the log must agree with a plain in-memory model of Kafka's semantics: the offsets of
every data record, the last stable offset, the read_committed view and the aborted-transaction
index entries. (Compaction is the cleaner's and is not modelled here.)"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import Log
from storage.producer_state import ORIGIN_COORDINATOR
from storage.records import ControlType, Record, build_batch, build_end_txn_marker
from storage.txn_index import AbortedTxn

NOW = 1_700_000_000_000
TXN_PRODUCERS = (1, 2, 3)
IDEMPOTENT_PRODUCERS = (11,)
CONFIG = LogConfig(segment_bytes=2048, file_delete_delay_ms=0)


@dataclass(frozen=True)
class Entry:
    """One appended batch in the model: its offsets, its producer (-1 for none), whether it is a
    transactional data batch, or the marker type (None for data)."""

    first: int
    last: int
    producer: int
    transactional: bool = False
    marker: ControlType | None = None


class TransactionsModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="txn-model-"))
        self.generation = 0
        self.clock = FakeClock(NOW)
        self.log = Log.open(self._dir(), CONFIG, clock=self.clock)
        self.entries: list[Entry] = []
        self.log_start = 0
        self.floor = 0          # truncation never goes below it (see advance_log_start)

    def _dir(self) -> Path:
        return self.root / f"g{self.generation}" / "t-0"

    # ---- the model ---------------------------------------------------------------------------
    @property
    def end(self) -> int:
        return self.entries[-1].last + 1 if self.entries else 0

    def transactions(self) -> list[tuple[int, int, int | None, ControlType | None]]:
        """(producer, first offset, marker offset or None, marker type) of every non-empty
        transaction, in the order they began."""
        out: list[tuple[int, int, int | None, ControlType | None]] = []
        open_at: dict[int, int] = {}
        for e in self.entries:
            if e.marker is not None:
                if e.producer in open_at:
                    i = open_at.pop(e.producer)
                    out[i] = (out[i][0], out[i][1], e.first, e.marker)
            elif e.transactional and e.producer not in open_at:
                open_at[e.producer] = len(out)
                out.append((e.producer, e.first, None, None))
        return out

    def last_stable_offset(self) -> int:
        open_firsts = [first for _, first, marker, _ in self.transactions() if marker is None]
        return max(min(open_firsts), self.log_start) if open_firsts else self.end

    def aborted_entries(self) -> list[AbortedTxn]:
        """The entries Kafka writes: for each abort, the LSO once it closed = the first offset of
        the earliest transaction of another producer open at the marker, else marker + 1."""
        txns = self.transactions()
        out = []
        for producer, first, marker, kind in txns:
            if kind != ControlType.ABORT:
                continue
            others = [f for p, f, m, _ in txns
                      if p != producer and f < marker and (m is None or m > marker)]
            out.append(AbortedTxn(producer, first, marker, min(others) if others else marker + 1))
        return sorted(out, key=lambda t: t.last_offset)

    def committed_offsets(self, start: int) -> list[int]:
        aborted = {(p, f, m) for p, f, m, kind in self.transactions() if kind == ControlType.ABORT}
        stable = self.last_stable_offset()
        skipped: set[int] = set()
        for producer, first, marker in aborted:
            for e in self.entries:
                if e.producer == producer and e.transactional and first <= e.first <= marker:
                    skipped.update(range(e.first, e.last + 1))
        return [o for o in self.data_offsets(start) if o < stable and o not in skipped]

    def data_offsets(self, start: int) -> list[int]:
        return [o for e in self.entries if e.marker is None
                for o in range(max(e.first, start), e.last + 1)]

    def next_sequence(self, producer: int) -> int:
        return sum(e.last - e.first + 1 for e in self.entries
                   if e.producer == producer and e.marker is None)

    def is_open(self, producer: int) -> bool:
        return any(p == producer and m is None for p, _, m, _ in self.transactions())

    # ---- rules -------------------------------------------------------------------------------
    def _append(self, data: bytes, entry_producer: int, transactional: bool, count: int,
                origin: str = "client", marker: ControlType | None = None) -> None:
        info = self.log.append_batch(data, origin=origin)
        assert not info.duplicate and info.first_offset == self.end
        self.entries.append(Entry(info.first_offset, info.last_offset, entry_producer,
                                  transactional, marker))
        assert info.last_offset - info.first_offset + 1 == count

    @rule(n=st.integers(1, 4))
    def append_plain(self, n: int) -> None:
        self._append(build_batch([Record(value=b"p%d" % i, timestamp=NOW) for i in range(n)]),
                     -1, False, n)

    @rule(producer=st.sampled_from(TXN_PRODUCERS + IDEMPOTENT_PRODUCERS), n=st.integers(1, 4),
          retry=st.booleans())
    def append_from_producer(self, producer: int, n: int, retry: bool) -> None:
        transactional = producer in TXN_PRODUCERS
        data = build_batch([Record(key=b"k%d" % i, value=b"v" * 20, timestamp=NOW)
                            for i in range(n)], producer_id=producer, producer_epoch=0,
                           base_sequence=self.next_sequence(producer),
                           is_transactional=transactional)
        self._append(data, producer, transactional, n)
        if retry:
            again = self.log.append_batch(data)
            assert again.duplicate and again.last_offset == self.end - 1

    @rule(data=st.data(), commit=st.booleans())
    def end_transaction(self, data: st.DataObject, commit: bool) -> None:
        """A marker for an open transaction, or for an empty one when none is open."""
        open_producers = [p for p in TXN_PRODUCERS if self.is_open(p)]
        producer = data.draw(st.sampled_from(open_producers or list(TXN_PRODUCERS)))
        kind = ControlType.COMMIT if commit else ControlType.ABORT
        self._append(build_end_txn_marker(kind, producer_id=producer, producer_epoch=0,
                                          coordinator_epoch=0, timestamp=NOW),
                     producer, True, 1, ORIGIN_COORDINATOR, kind)

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        if self.end <= self.floor:
            return
        target = data.draw(st.integers(self.floor, self.end))
        boundaries = [e.first for e in self.entries if e.first >= target] + [self.end]
        target = boundaries[0]                      # the log truncates whole batches
        self.log.truncate_to(target)
        self.entries = [e for e in self.entries if e.last < target]

    @rule(data=st.data())
    def advance_log_start(self, data: st.DataObject) -> None:
        """DeleteRecords then retention, to an offset no transaction spans (Kafka's retention
        of an open or later-reopened transaction loses its state, as here; not modelled)."""
        spans = [(f, m if m is not None else self.end + 1) for _, f, m, _ in self.transactions()]
        choices = [o for o in range(self.log_start, min(self.end, self.log_start + 40) + 1)
                   if not any(f < o <= m for f, m in spans)]
        if not choices:
            return
        start = data.draw(st.sampled_from(choices))
        self.log.maybe_increment_log_start_offset(start)
        self.log.delete_old_segments()
        self.log_start = max(self.log_start, start)
        self.floor = max(self.floor, self.log_start)

    @rule(kill=st.booleans(), drop_indexes=st.booleans())
    def reopen(self, kill: bool, drop_indexes: bool) -> None:
        old = self.log
        self.generation += 1
        target = self._dir()
        if kill:
            shutil.copytree(old.dir, target)        # as a kill -9 leaves it (page cache intact)
            old.close()
        else:
            old.flush()
            old.close()
            shutil.copytree(old.dir, target)
        if drop_indexes:
            for path in [*target.glob("*.index"), *target.glob("*.txnindex")]:
                path.unlink()
        clean = not kill and not drop_indexes
        self.log = Log.open(target, CONFIG, clock=self.clock, log_start_offset=self.log_start,
                            recovery_point=self.end if clean else None, had_clean_shutdown=clean)

    # ---- invariants --------------------------------------------------------------------------
    @invariant()
    def offsets_and_last_stable_offset_agree(self) -> None:
        assert self.log.log_end_offset == self.end
        assert self.log.last_stable_offset == self.last_stable_offset()

    @invariant()
    def reads_agree(self) -> None:
        start = self.log.log_start_offset
        assert [r.offset for r in self.log.read(start)] == self.data_offsets(start)
        assert [r.offset for r in self.log.read(start, isolation="read_committed")] \
            == self.committed_offsets(start)

    @invariant()
    def aborted_index_agrees(self) -> None:
        first_base = self.log.segments()[0].base_offset
        actual = [t for s in self.log.segments() for t in s.txn_index.all_aborted_txns()]
        assert actual == [t for t in self.aborted_entries() if t.last_offset >= first_base]

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)


TransactionsModel.TestCase.settings = settings(max_examples=60, stateful_step_count=50,
                                               deadline=None)
test_transactions_model = TransactionsModel.TestCase
