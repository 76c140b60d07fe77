"""``TransactionCoordinator``: the cluster's transactions (Kafka's TransactionCoordinator and
TransactionStateManager, one for the whole cluster, hosted by the coordinator actor).

    begin(id, timeout_ms, tag)            -> TxnInfo (the id's epoch + 1; an open one is aborted)
    add_partitions(id, epoch, pid, parts)    durable before it returns; then the producer appends
    end(id, epoch, commit, producer_ids, sink_batch) -> TxnOutcome
    abort_expired()                          Ongoing for longer than its timeout -> aborted
    load()                                   after a restart: complete what was decided

Every decision is a record of the *state log* (``StateStore``), durable before anything acts on
it: a member's partitions before it appends (so an abort can always reach them), the end's
decision (PrepareCommit / PrepareAbort, naming per member commit or abort, and for a streaming
sink the micro-batch id it commits) before any marker is written, then CompleteCommit /
CompleteAbort once every marker is written and flushed. ``load`` re-sends the markers of every
Prepare* (a marker written twice only adds an empty control batch: idempotent) and aborts the
Ongoing transactions that timed out while no coordinator ran.

Where the state log lives: in the cluster, an internal compacted topic ``__strata_transactions``
(``cluster.transactions.txn_store.NodeStateStore``), written through the node actors with
``flush=True``. The coordinator actor has no directory of its own and Ray may restart it on another
host; the nodes' directories survive a kill -9 of the coordinator, and the log directories are
already what a cluster restart recovers. Unit tests and embedded users give ``storage.log.Log``s
(``cluster.transactions.txn_store.LogStateStore``).

The state log is partitioned as Kafka's ``__transaction_state``: a transactional id's records live
in partition ``abs(javaHashCode(id)) % partitions`` (``txn_state.partition_for``), each partition
with its own coordinator epoch. A partition that cannot be read at the load stays *unloaded*:
every call of an id that maps to it tries to read it again and raises why it cannot (the
directory's ``LogDirOfflineError``, an unknown partition of a missing directory), and ``tick``
tries it too; the other ids are served meanwhile (Kafka's coordinator answers
COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR for the partitions it has not loaded).

A Strata transaction's markers carry producer epoch ``MARKER_EPOCH`` (members append with
``DATA_EPOCH``), so a member still appending when its transaction ended (a zombie Spark task
attempt) is fenced by the log (``InvalidProducerEpochError``) and can never reopen a transaction
on that partition; a member registering after the end is refused here
(``TransactionStateError``/``ProducerFencedError``).

A Kafka client's transactional producer (over the protocol, ``node.kafka.txn_apis``) is served
by the same coordinator as a transaction of the *Kafka kind* (``TxnKind.KAFKA``, its rules in
``cluster.transactions.txn_kafka``): ``init_producer_id``, ``add_kafka_partitions``, ``end_kafka``,
``verify_kafka``. Its one producer id keeps its epoch across transactions; the markers carry
that epoch, and fencing (a new InitProducerId of an Ongoing transaction, a timeout) aborts with
the epoch bumped, so the fenced producer's later appends fail at the log and its later calls
here with ``ProducerFencedError``. The state log, the loading, the completion of decided
transactions after a restart and the timeouts are the same for both kinds; a call of one kind
on a transactional id of the other is ``TransactionStateError``.

Thread-safe: one lock per transactional id, held across its durable writes (so two ends of one
transaction serialize); the table has its own lock, never held across a write.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from cluster.transactions.txn_kafka import (
    InitStep,
    bumped,
    check_kind,
    check_producer,
    end_step,
    init_step,
    new_kafka_txn,
    with_partitions,
)
from cluster.transactions.txn_state import (
    COORDINATOR_EPOCH_KEY,
    MARKER_EPOCH,
    TXN_KEY_PREFIX,
    ProducerFencedError,
    TransactionConfig,
    TransactionStateError,
    TxnKind,
    TxnMetadata,
    TxnState,
    UnknownTransactionError,
    coordinator_epoch_value,
    parse_coordinator_epoch,
    partition_for,
)
from node.kafka.transactions import (
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
)
from storage.clock import SYSTEM_CLOCK, Clock
from storage.errors import InvalidConfigError, StorageError
from storage.record_format import ControlType

logger = logging.getLogger(__name__)

PRODUCER_ID_BITS = 62


class StateStore(Protocol):
    """The durable, keyed state log, in partitions."""

    def partition_count(self) -> int:
        """The partitions of the state log: those of the existing log, else the configured
        count (the log is created with it at the first append)."""
        ...

    def append(self, partition: int, key: bytes, value: bytes | None) -> None:
        """Append one record (None: a tombstone) to ``partition``; durable (flushed) when it
        returns. Raises the typed error of a partition that cannot be written (its directory
        offline or missing)."""
        ...

    def read(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        """Every record of ``partition``, oldest first (none when the log does not exist yet).
        Raises the typed error of a partition that cannot be read."""
        ...


@dataclass(frozen=True)
class Marker:
    topic: str
    partition: int
    producer_id: int
    control_type: ControlType
    coordinator_epoch: int
    producer_epoch: int = MARKER_EPOCH


class MarkerWriter(Protocol):
    def write_markers(self, markers: Sequence[Marker]) -> None:
        """Append every marker (with its ``producer_epoch``) and flush the partitions; a
        partition that no longer exists is skipped. Raises when one could not be written."""
        ...


@dataclass(frozen=True)
class TxnInfo:
    """What a participant needs: the id and the epoch of the transaction it joins."""

    transactional_id: str
    epoch: int
    tag: str
    timeout_ms: int


@dataclass(frozen=True)
class TxnOutcome:
    """The end of one transaction."""

    transactional_id: str
    epoch: int
    committed: bool
    committed_producers: tuple[int, ...]
    aborted_producers: tuple[int, ...]
    markers: int
    replayed_batch: bool = False     # the sink batch was committed before: everything aborted


class TransactionCoordinator:
    def __init__(self, store: StateStore, markers: MarkerWriter,
                 config: TransactionConfig | None = None, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config or TransactionConfig()
        self._store = store
        self._markers = markers
        self._clock = clock
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()
        self._txns: dict[str, TxnMetadata] = {}
        self._id_locks: dict[str, threading.Lock] = {}
        self._loaded = False
        self._partitions = 1
        self._unloaded: set[int] = set()
        self._epochs: dict[int, int] = {}
        self._epoch_written: set[int] = set()

    # ---- loading -----------------------------------------------------------------------------
    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def coordinator_epoch(self) -> int:
        """The highest coordinator epoch of the partitions loaded (0 before the load)."""
        with self._lock:
            return max(self._epochs.values(), default=0)

    @property
    def partitions(self) -> int:
        """The state log's partition count, as the load found it."""
        return self._partitions

    def unloaded_partitions(self) -> list[int]:
        """The state log partitions not loaded yet: they could not be read (their directory is
        offline or missing); their transactional ids fail until a later try reads them."""
        with self._lock:
            return sorted(self._unloaded)

    def partition_of(self, transactional_id: str) -> int:
        """The state log partition of ``transactional_id`` (Kafka's ``partitionFor``)."""
        return partition_for(transactional_id, self._partitions)

    def load(self) -> list[TxnOutcome]:
        """Read every partition of the state log, take each one's next coordinator epoch
        (written in the partition before this coordinator's first record there, so a cluster
        that never uses transactions writes nothing), complete every Prepare* transaction and
        abort the Ongoing ones past their timeout. Returns what it ended. A partition that cannot
        be read is tried again at every ``tick`` and at every call of an id that maps to it.
        Idempotent: a second call only runs ``tick``."""
        with self._lock:
            first = not self._loaded
        if first:
            with self._load_lock:
                if not self._loaded:
                    count = self._store.partition_count()
                    with self._lock:
                        self._partitions = count
                        self._unloaded = set(range(count))
                        self._loaded = True
            self._load_unloaded()
        return self.tick()

    def _load_unloaded(self) -> None:
        """Try every partition not loaded yet; one that fails is logged and stays unloaded."""
        for partition in self.unloaded_partitions():
            try:
                self._load_partition(partition)
            except StorageError as err:
                logger.warning("transaction state partition %d cannot be loaded: %s", partition,
                               err)

    def _load_partition(self, partition: int) -> None:
        """Read ``partition`` into the table (raises what the store raised)."""
        with self._load_lock:
            with self._lock:
                if partition not in self._unloaded:
                    return
            txns: dict[str, TxnMetadata] = {}
            epoch = 0
            for key, value in self._store.read(partition):
                if key == COORDINATOR_EPOCH_KEY and value is not None:
                    epoch = max(epoch, parse_coordinator_epoch(value))
                elif key.startswith(TXN_KEY_PREFIX):
                    tid = key[len(TXN_KEY_PREFIX):].decode()
                    if value is None:
                        txns.pop(tid, None)
                    else:
                        txns[tid] = TxnMetadata.from_record(key, value)
            with self._lock:
                for tid, meta in txns.items():
                    self._txns.setdefault(tid, meta)
                self._epochs[partition] = epoch + 1
                self._unloaded.discard(partition)

    def _require(self, transactional_id: str) -> int:
        """The id's partition, loaded now if it was not (raises why it cannot be)."""
        partition = self.partition_of(transactional_id)
        with self._lock:
            loaded = partition not in self._unloaded
        if not loaded:
            self._load_partition(partition)
        return partition

    def tick(self) -> list[TxnOutcome]:
        """The periodic work: complete the decided transactions whose markers are not all
        written yet (after a restart, or a node that failed a marker), ``abort_expired``, and
        forget the ids ended longer than ``transactional.id.expiration.ms`` ago."""
        if not self._loaded:
            return []
        self._load_unloaded()
        with self._lock:
            pending = [t.transactional_id for t in self._txns.values() if t.state.preparing]
        done = []
        for tid in pending:
            with self._id_lock(tid):
                meta = self._txns[tid]
                if meta.state.preparing:
                    done.append(self._complete(meta))
        ended = done + self.abort_expired()
        self._forget_expired_ids()
        return ended

    def _forget_expired_ids(self) -> int:
        now = self._clock.milliseconds()
        expiration = self.config.transactional_id_expiration_ms
        with self._lock:
            old = [t.transactional_id for t in self._txns.values()
                   if t.forgettable(now, expiration)]
        forgotten = 0
        for tid in old:
            with self._id_lock(tid):
                meta = self._txns.get(tid)
                if meta is None or not meta.forgettable(self._clock.milliseconds(), expiration):
                    continue
                self._store.append(self.partition_of(tid), meta.key(), None)
                with self._lock:
                    del self._txns[tid]
                forgotten += 1
        return forgotten

    def _check_loaded(self) -> None:
        if not self._loaded:
            raise StorageError("the transaction coordinator is still loading its state log",
                               loaded=False)

    # ---- the API -----------------------------------------------------------------------------
    def begin(self, transactional_id: str, timeout_ms: int | None = None, tag: str = "", *,
              join: bool = False) -> TxnInfo:
        """Start a transaction of ``transactional_id`` (Kafka's InitProducerId): a new epoch,
        state Empty. An open transaction of the id is aborted first (the previous producer is
        fenced), unless ``join`` and its ``tag`` equals ``tag``: then it is returned as it is
        (how the tasks of one streaming micro-batch find the transaction of that batch). Tags of
        decimal digits are ordered: a join with a tag below the open one's is fenced
        (``ProducerFencedError``: a late task of an earlier micro-batch)."""
        self._check_loaded()
        if not transactional_id:
            raise InvalidConfigError("a transactional id must not be empty",
                                     key="transactional.id")
        timeout = self.config.transaction_timeout_ms if timeout_ms is None else timeout_ms
        if not isinstance(timeout, int) or isinstance(timeout, bool) or not \
                0 < timeout <= self.config.transaction_max_timeout_ms:
            raise InvalidConfigError(
                f"transaction timeout {timeout!r} ms of {transactional_id} is not in 1.."
                f"transaction.max.timeout.ms={self.config.transaction_max_timeout_ms}",
                key="transaction.timeout.ms", value=timeout)
        self._require(transactional_id)
        with self._id_lock(transactional_id):
            meta = self._txns.get(transactional_id)
            if meta is not None and meta.kind != TxnKind.STRATA:
                raise TransactionStateError(
                    f"transactional id {transactional_id} belongs to a Kafka producer",
                    transactional_id=transactional_id, kind=meta.kind.value)
            if meta is not None and meta.state.open:
                if join and meta.tag == tag:
                    return _info(meta)
                if join and _older(tag, meta.tag):
                    raise ProducerFencedError(
                        f"transaction {transactional_id}: {tag!r} is older than the open "
                        f"{meta.tag!r} (a late task of an earlier micro-batch)",
                        transactional_id=transactional_id, tag=tag, current_tag=meta.tag)
                self._end(meta, commit=False, producer_ids=None, sink_batch=None, bump=True)
                meta = self._txns[transactional_id]
            now = self._clock.milliseconds()
            if meta is None:
                fresh = TxnMetadata(transactional_id, 0, TxnState.EMPTY, timeout, update_ms=now,
                                    tag=tag)
            else:
                fresh = meta.transition(TxnState.EMPTY, now, epoch=meta.epoch + 1, tag=tag,
                                        timeout_ms=timeout, start_ms=-1, members={},
                                        commit=frozenset())
            self._write(fresh)
            return _info(fresh)

    def add_partitions(self, transactional_id: str, epoch: int, producer_id: int,
                       partitions: Iterable[tuple[str, int]]) -> None:
        """Register ``partitions`` of member ``producer_id`` (Kafka's AddPartitionsToTxn),
        durably; only then may the member append transactional batches there (with
        ``DATA_EPOCH``). ``ProducerFencedError`` for an epoch that is not the current one,
        ``TransactionStateError`` when the transaction is ending or ended."""
        self._check_loaded()
        parts = frozenset((str(t), int(p)) for t, p in partitions)
        if not isinstance(producer_id, int) or producer_id < 0:
            raise InvalidConfigError(f"producer id {producer_id!r} is not an int >= 0",
                                     key="producer_id", value=producer_id)
        self._require(transactional_id)
        with self._id_lock(transactional_id):
            meta = self._current(transactional_id, epoch)
            if not meta.state.open:
                raise TransactionStateError(
                    f"transaction {transactional_id} (epoch {epoch}) is {meta.state.value}: "
                    f"producer {producer_id} cannot add partitions", state=meta.state.value,
                    transactional_id=transactional_id, epoch=epoch, producer_id=producer_id)
            known = meta.members.get(producer_id, frozenset())
            if parts <= known:
                return
            now = self._clock.milliseconds()
            members = {**meta.members, producer_id: known | parts}
            start = meta.start_ms if meta.state == TxnState.ONGOING else now
            self._write(meta.transition(TxnState.ONGOING, now, members=members, start_ms=start))

    def end(self, transactional_id: str, epoch: int, commit: bool,
            producer_ids: Iterable[int] | None = None,
            sink_batch: int | None = None) -> TxnOutcome:
        """Commit or abort (Kafka's EndTxn). With ``commit``, the members in ``producer_ids``
        (all when None) are committed and every other member aborted, in one durable decision;
        ``sink_batch`` (a streaming sink's micro-batch id) is recorded in it, and when it is not
        above the last one committed under this id the batch is a replay: every member is
        aborted (``replayed_batch``). A retried end of a completed transaction returns its
        outcome again; ``TransactionStateError`` when it ended the other way,
        ``ProducerFencedError`` for an old epoch (the coordinator aborted it on timeout, or a
        later ``begin`` took the id over)."""
        self._check_loaded()
        self._require(transactional_id)
        with self._id_lock(transactional_id):
            meta = self._current(transactional_id, epoch)
            if meta.state.preparing:      # decided, markers not all written: finish it
                self._complete(meta)
                meta = self._txns[transactional_id]
            if meta.state.complete:
                done = meta.state == TxnState.COMPLETE_COMMIT
                if done != commit:
                    raise TransactionStateError(
                        f"transaction {transactional_id} (epoch {epoch}) already ended with "
                        f"{meta.state.value}", transactional_id=transactional_id,
                        state=meta.state.value, epoch=epoch)
                return _outcome(meta)
            return self._end(meta, commit, producer_ids, sink_batch, bump=False)

    def abort_expired(self) -> list[TxnOutcome]:
        """Abort every Ongoing transaction older than its timeout, bumping its epoch so that
        its owner is fenced (Kafka's abortTimedOutTransactions)."""
        if not self._loaded:
            return []
        now = self._clock.milliseconds()
        with self._lock:
            expired = [t.transactional_id for t in self._txns.values() if t.expired(now)]
        done = []
        for tid in expired:
            with self._id_lock(tid):
                meta = self._txns.get(tid)
                if meta is None or not meta.expired(self._clock.milliseconds()):
                    continue
                logger.info("aborting transaction %s (epoch %d): open for more than %d ms",
                            tid, meta.epoch, meta.timeout_ms)
                done.append(self._end(meta, commit=False, producer_ids=None, sink_batch=None,
                                      bump=True))
        return done

    def describe(self, transactional_id: str) -> TxnMetadata:
        self._check_loaded()
        self._require(transactional_id)
        with self._lock:
            meta = self._txns.get(transactional_id)
        if meta is None:
            raise UnknownTransactionError(f"no transaction {transactional_id!r}",
                                          transactional_id=transactional_id)
        return meta

    def transactions(self) -> list[TxnMetadata]:
        self._check_loaded()
        with self._lock:
            return sorted(self._txns.values(), key=lambda t: t.transactional_id)

    # ---- a Kafka client's transactions (TxnKind.KAFKA; rules: cluster.transactions.txn_kafka) --
    def init_producer_id(self, transactional_id: str, timeout_ms: int,
                         producer_id: int = -1, producer_epoch: int = -1) -> tuple[int, int]:
        """InitProducerId with a transactional id: (producer id, epoch). A new id gets a new
        producer id and epoch 0; an Empty or ended one its next epoch; an Ongoing one is aborted
        with its epoch bumped (fencing its producer) and ``ConcurrentTransactionsError`` raised,
        so that the client asks again and gets the epoch after. ``InvalidTransactionTimeoutError``
        for a timeout not in 1..``transaction.max.timeout.ms``; ``ProducerFencedError`` for a v3+
        client's producer id or epoch that is not the current one."""
        self._check_loaded()
        if not transactional_id:
            raise InvalidConfigError("a transactional id must not be empty",
                                     key="transactional.id")
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            raise InvalidTransactionTimeoutError(
                f"transaction timeout {timeout_ms} ms of {transactional_id} is not in 1.."
                f"transaction.max.timeout.ms={self.config.transaction_max_timeout_ms}",
                transactional_id=transactional_id, timeout_ms=timeout_ms)
        self._require(transactional_id)
        with self._id_lock(transactional_id):
            meta = self._txns.get(transactional_id)
            now = self._clock.milliseconds()
            if meta is None:
                fresh = new_kafka_txn(transactional_id, self._new_producer_id(), timeout_ms, now)
            elif init_step(meta, producer_id, producer_epoch) == InitStep.FENCE:
                logger.info("InitProducerId of %s: aborting its open transaction (epoch %d)",
                            transactional_id, meta.epoch)
                self._end(meta, commit=False, producer_ids=None, sink_batch=None, bump=True)
                raise ConcurrentTransactionsError(
                    f"transaction {transactional_id} was open: aborted, retry",
                    transactional_id=transactional_id)
            else:
                fresh = bumped(meta, producer_epoch, timeout_ms, now, self._new_producer_id)
                if fresh is meta:
                    return meta.producer_id, meta.epoch
            self._write(fresh)
            return fresh.producer_id, fresh.epoch

    def add_kafka_partitions(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, partitions: Iterable[tuple[str, int]]) -> None:
        """AddPartitionsToTxn: durable when it returns. ``InvalidProducerIdMappingError`` for
        an unknown id or another producer id, ``ProducerFencedError`` for another epoch,
        ``ConcurrentTransactionsError`` while the transaction is ending."""
        self._check_loaded()
        self._require(transactional_id)
        with self._id_lock(transactional_id):
            meta = self._kafka_txn(transactional_id)
            changed = with_partitions(meta, producer_id, producer_epoch, partitions,
                                      self._clock.milliseconds())
            if changed is not None:
                self._write(changed)

    def end_kafka(self, transactional_id: str, producer_id: int, producer_epoch: int,
                  commit: bool) -> None:
        """EndTxn: the markers are written when it returns; a retry of an ended transaction
        returns. Errors as ``add_kafka_partitions``, and ``TransactionStateError`` for an Empty
        transaction or one that ended the other way."""
        self._check_loaded()
        self._require(transactional_id)
        with self._id_lock(transactional_id):
            meta = self._kafka_txn(transactional_id)
            if end_step(meta, producer_id, producer_epoch, commit):
                self._end(meta, commit, producer_ids=None, sink_batch=None, bump=False)

    def verify_kafka(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     topic: str, partition: int) -> bool:
        """Whether ``topic``-``partition`` is in the Ongoing transaction of
        ``transactional_id`` with exactly that producer id and epoch."""
        self._check_loaded()
        self._require(transactional_id)
        with self._lock:
            meta = self._txns.get(transactional_id)
        if meta is None or meta.state != TxnState.ONGOING:
            return False
        try:
            check_producer(meta, producer_id, producer_epoch)
        except StorageError:
            return False
        return (topic, partition) in meta.members.get(producer_id, frozenset())

    def _kafka_txn(self, transactional_id: str) -> TxnMetadata:
        with self._lock:
            meta = self._txns.get(transactional_id)
        if meta is None:
            raise InvalidProducerIdMappingError(
                f"transactional id {transactional_id} has no producer: InitProducerId first",
                transactional_id=transactional_id)
        check_kind(meta)
        return meta

    def _new_producer_id(self) -> int:
        """A producer id for a Kafka transactional id: 62 random bits, as a Strata member's
        (``txn_client.new_producer_id``), kept in the id's state record."""
        return secrets.randbits(PRODUCER_ID_BITS)

    # ---- internals (the id's lock held) ------------------------------------------------------
    def _id_lock(self, transactional_id: str) -> threading.Lock:
        with self._lock:
            return self._id_locks.setdefault(transactional_id, threading.Lock())

    def _current(self, transactional_id: str, epoch: int) -> TxnMetadata:
        with self._lock:
            meta = self._txns.get(transactional_id)
        if meta is None:
            raise UnknownTransactionError(f"no transaction {transactional_id!r}; begin it first",
                                          transactional_id=transactional_id)
        if meta.kind != TxnKind.STRATA:
            raise TransactionStateError(
                f"transactional id {transactional_id} belongs to a Kafka producer",
                transactional_id=transactional_id, kind=meta.kind.value)
        if epoch != meta.epoch:
            raise ProducerFencedError(
                f"transaction {transactional_id}: epoch {epoch} is fenced, the current epoch is "
                f"{meta.epoch} ({meta.state.value}; it was aborted after its timeout of "
                f"{meta.timeout_ms} ms, or begun again)", transactional_id=transactional_id,
                epoch=epoch, current_epoch=meta.epoch)
        return meta

    def _end(self, meta: TxnMetadata, commit: bool, producer_ids: Iterable[int] | None,
             sink_batch: int | None, bump: bool) -> TxnOutcome:
        now = self._clock.milliseconds()
        chosen = set(meta.members) if producer_ids is None else set(producer_ids)
        replayed = commit and sink_batch is not None and sink_batch <= meta.sink_batch
        if commit and not replayed:
            prepared = meta.transition(
                TxnState.PREPARE_COMMIT, now, commit=frozenset(chosen & set(meta.members)),
                sink_batch=meta.sink_batch if sink_batch is None else sink_batch)
        else:
            prepared = meta.transition(TxnState.PREPARE_ABORT, now, commit=frozenset())
        if bump:
            prepared = replace(prepared, epoch=meta.epoch + 1, last_epoch=-1)
        self._write(prepared)
        outcome = self._complete(prepared)
        return replace(outcome, replayed_batch=replayed) if replayed else outcome

    def _complete(self, prepared: TxnMetadata) -> TxnOutcome:
        epoch = self._epochs[self.partition_of(prepared.transactional_id)]
        self._markers.write_markers([
            Marker(topic, partition, pid, ControlType.COMMIT if commit else ControlType.ABORT,
                   epoch, prepared.marker_epoch)
            for topic, partition, pid, commit in prepared.markers()])
        target = (TxnState.COMPLETE_COMMIT if prepared.state == TxnState.PREPARE_COMMIT
                  else TxnState.COMPLETE_ABORT)
        done = prepared.transition(target, self._clock.milliseconds())
        self._write(done)
        return _outcome(done)

    def _write(self, meta: TxnMetadata) -> None:
        partition = self.partition_of(meta.transactional_id)
        if partition not in self._epoch_written:
            self._store.append(partition, COORDINATOR_EPOCH_KEY,
                               coordinator_epoch_value(self._epochs[partition]))
            with self._lock:
                self._epoch_written.add(partition)
        self._store.append(partition, meta.key(), meta.value())
        with self._lock:
            self._txns[meta.transactional_id] = meta


def _older(tag: str, than: str) -> bool:
    return tag.isdigit() and than.isdigit() and int(tag) < int(than)


def _info(meta: TxnMetadata) -> TxnInfo:
    return TxnInfo(meta.transactional_id, meta.epoch, meta.tag, meta.timeout_ms)


def _outcome(meta: TxnMetadata) -> TxnOutcome:
    committed = meta.state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)
    members = sorted(meta.members)
    yes = tuple(p for p in members if committed and p in meta.commit)
    return TxnOutcome(meta.transactional_id, meta.epoch, committed, yes,
                      tuple(p for p in members if p not in yes),
                      sum(len(parts) for parts in meta.members.values()))
