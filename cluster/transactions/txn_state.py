"""The state of one transaction of the cluster's transaction coordinator, its settings, and the
records that make it durable (Kafka's TransactionMetadata, TransactionState and
TransactionLog, read for behaviour).

A *transaction* is named by its ``transactional_id`` and the producer epoch the coordinator gave
it at ``begin``; unlike Kafka, where one producer id belongs to one transactional id, a Strata
transaction has *members*: every producer id that registered partitions in it (one per Spark task
attempt). Its end decides, per member, commit or abort, in one durable record.

States and their allowed previous states (Kafka's ``TransactionState.validPreviousStates``; an
Empty transaction may also be ended, which Kafka refuses, so that a Spark job that wrote no rows
commits):

    Empty           <- Empty, CompleteCommit, CompleteAbort          (begin: epoch + 1)
    Ongoing         <- Empty, Ongoing                                (add_partitions)
    PrepareCommit   <- Empty, Ongoing                                (end, commit)
    PrepareAbort    <- Empty, Ongoing                                (end, abort; timeout)
    CompleteCommit  <- PrepareCommit                                 (every marker written)
    CompleteAbort   <- PrepareAbort

A transaction of the *Kafka kind* (``TxnKind.KAFKA``: a Kafka client's transactional producer,
over the protocol) is Kafka's own: one ``producer_id`` for the transactional id across its
transactions, the only member; the epoch is bumped only by InitProducerId and by the
coordinator fencing it (an Ongoing transaction aborted by a new InitProducerId or after its
timeout); the markers carry the producer's epoch. Its states follow Kafka's
``TransactionState`` exactly (no end of an Empty transaction; Ongoing straight after a Complete
one, the client's next transaction):

    Empty           <- Empty, CompleteCommit, CompleteAbort          (InitProducerId: epoch + 1)
    Ongoing         <- Empty, Ongoing, CompleteCommit, CompleteAbort (AddPartitionsToTxn)
    PrepareCommit   <- Ongoing                                       (EndTxn, commit)
    PrepareAbort    <- Ongoing                                       (EndTxn, abort; fencing)
    CompleteCommit  <- PrepareCommit
    CompleteAbort   <- PrepareAbort

Kafka's PrepareEpochFence is not a state here: fencing writes PrepareAbort with the bumped epoch
in one record (the coordinator completes it before it answers).

Record layout of the state log (a compacted log; each record is the whole state of one key, so
compaction keeps exactly what a restart needs):

    key   b"txn:" + transactional_id (UTF-8)
    value JSON object {"v": 1, "id": str, "epoch": int, "state": str (the names above),
          "timeout_ms": int, "start_ms": int (-1 while Empty), "update_ms": int, "tag": str,
          "members": {str(producer id): [[topic, partition], ...]},
          "commit": [producer ids committed (Prepare/CompleteCommit only)],
          "sink_batch": int (the last micro-batch id committed under this id, -1 none),
          "kind": "kafka", "producer_id": int, "last_epoch": int: only in a record of the
          Kafka kind}

    key   b"coordinator-epoch"
    value JSON object {"v": 1, "epoch": int}: raised by every coordinator that loads the
          partition, written in it before the coordinator's first record there, and stamped on
          the markers of its transactions (Kafka's coordinatorEpoch, one per partition)

The state log has ``transaction.state.log.num.partitions`` partitions (50 by default, as Kafka's
``__transaction_state``); the records of a transactional id live in partition
``partition_for(id)``, so a partition that cannot be read or written costs only the ids that map
to it.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from node.kafka.transactions import ProducerFencedError as KafkaProducerFencedError
from node.groups.placement import java_string_hash, kafka_abs
from node.kafka.transactions import TransactionStateError as KafkaTransactionStateError
from storage.config import INT, check_integer, parse_integer
from storage.errors import InvalidConfigError, StorageError

TXN_KEY_PREFIX = b"txn:"
COORDINATOR_EPOCH_KEY = b"coordinator-epoch"
RECORD_VERSION = 1
DATA_EPOCH = 0       # the producer epoch of every data batch of a member
MARKER_EPOCH = 1     # the producer epoch of every marker: fences a member still appending after it

KEYS: dict[str, str] = {
    "transaction.timeout.ms": "transaction_timeout_ms",
    "transaction.max.timeout.ms": "transaction_max_timeout_ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms":
        "transaction_abort_timed_out_transaction_cleanup_interval_ms",
    "transactional.id.expiration.ms": "transactional_id_expiration_ms",
    "transaction.state.log.num.partitions": "transaction_state_log_num_partitions",
}
_KINDS = {"transaction.timeout.ms": INT, "transaction.max.timeout.ms": INT,
          "transaction.abort.timed.out.transaction.cleanup.interval.ms": INT,
          "transactional.id.expiration.ms": INT, "transaction.state.log.num.partitions": INT}
DEFAULT_STATE_LOG_PARTITIONS = 50     # Kafka's transaction.state.log.num.partitions


class TxnState(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"

    @property
    def open(self) -> bool:
        """Partitions may still be added (Empty or Ongoing)."""
        return self in (TxnState.EMPTY, TxnState.ONGOING)

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                               TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.EMPTY, TxnState.ONGOING}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.EMPTY, TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.EMPTY, TxnState.ONGOING}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
}


class TxnKind(enum.Enum):
    """Whose transaction: a Strata transaction (members, ``DATA_EPOCH``/``MARKER_EPOCH``) or a
    Kafka client's (one producer id, markers with its own epoch)."""

    STRATA = "strata"
    KAFKA = "kafka"


VALID_PREVIOUS_KAFKA: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                               TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.EMPTY, TxnState.ONGOING, TxnState.COMPLETE_COMMIT,
                                 TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
}


class TransactionStateError(KafkaTransactionStateError):
    """A transaction operation its state does not allow (Kafka's INVALID_TXN_STATE): adding
    partitions to a transaction that is ending or ended, committing one that was aborted."""


class ProducerFencedError(KafkaProducerFencedError):
    """The caller's epoch of ``transactional_id`` is not the current one: a later ``begin`` (or
    the coordinator, aborting it after ``transaction.timeout.ms``) took over (Kafka's
    PRODUCER_FENCED)."""


class UnknownTransactionError(StorageError):
    """The coordinator has no transaction ``transactional_id``."""


@dataclass(frozen=True)
class TransactionConfig:
    """Kafka's transaction settings (broker keys; ``transaction.timeout.ms`` is Kafka's producer
    key, here the default timeout of a transaction that does not give one)."""

    transaction_timeout_ms: int = 60_000
    transaction_max_timeout_ms: int = 900_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    """An ended transaction's id is forgotten (a tombstone in the state log) after this long
    without a new transaction; never a streaming sink's, whose last batch id it keeps."""
    transaction_state_log_num_partitions: int = DEFAULT_STATE_LOG_PARTITIONS
    """The partitions of the state log when it is created (Kafka's key); a state log that
    exists keeps its own count, as Kafka's does (``partition_for``)."""

    def __post_init__(self) -> None:
        for key, name in KEYS.items():
            check_integer(key, getattr(self, name), _KINDS[key], 1)
        if self.transaction_timeout_ms > self.transaction_max_timeout_ms:
            raise InvalidConfigError(
                f"transaction.timeout.ms={self.transaction_timeout_ms} is above "
                f"transaction.max.timeout.ms={self.transaction_max_timeout_ms}",
                key="transaction.timeout.ms", value=self.transaction_timeout_ms)

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> TransactionConfig:
        """Build from the dotted keys of ``KEYS``; unknown keys are refused."""
        fields: dict[str, int] = {}
        for key, raw in properties.items():
            if key not in KEYS:
                raise InvalidConfigError(f"unknown transaction config key {key!r}", key=key,
                                         value=raw)
            fields[KEYS[key]] = parse_integer(key, raw)
        return cls(**fields)


Member = tuple[str, int]   # (topic, partition)


@dataclass(frozen=True)
class TxnMetadata:
    """One transactional id's state; transitions make new values (``transition``)."""

    transactional_id: str
    epoch: int
    state: TxnState
    timeout_ms: int
    start_ms: int = -1
    update_ms: int = -1
    tag: str = ""
    members: Mapping[int, frozenset[Member]] = field(default_factory=dict)
    commit: frozenset[int] = frozenset()
    sink_batch: int = -1
    kind: TxnKind = TxnKind.STRATA
    producer_id: int = -1
    """The Kafka kind's one producer id (-1 for a Strata transaction)."""
    last_epoch: int = -1
    """The Kafka kind's epoch before a bump its producer asked for (Kafka's
    ``lastProducerEpoch``: a retry of that InitProducerId gets the same epoch); -1 after any
    other bump, so a fenced producer's retry stays fenced."""

    @property
    def marker_epoch(self) -> int:
        """The producer epoch of this transaction's markers: ``MARKER_EPOCH`` for a Strata
        transaction, the producer's own epoch for the Kafka kind."""
        return self.epoch if self.kind == TxnKind.KAFKA else MARKER_EPOCH

    def transition(self, state: TxnState, now_ms: int, **changes: Any) -> TxnMetadata:
        valid = VALID_PREVIOUS_KAFKA if self.kind == TxnKind.KAFKA else VALID_PREVIOUS
        if self.state not in valid[state]:
            raise TransactionStateError(
                f"transaction {self.transactional_id} (epoch {self.epoch}) cannot go from "
                f"{self.state.value} to {state.value}", transactional_id=self.transactional_id,
                state=self.state.value, target=state.value)
        return replace(self, state=state, update_ms=now_ms, **changes)

    def forgettable(self, now_ms: int, expiration_ms: int) -> bool:
        """Ended (or never used) for longer than ``expiration_ms``, and no sink's record
        (Kafka's transactional.id.expiration.ms)."""
        return (self.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
                and self.sink_batch < 0 and now_ms > self.update_ms + expiration_ms)

    def expired(self, now_ms: int) -> bool:
        """Ongoing for longer than its timeout (Kafka's timedOutTransactions)."""
        return self.state == TxnState.ONGOING and now_ms > self.start_ms + self.timeout_ms

    def markers(self) -> list[tuple[str, int, int, bool]]:
        """``(topic, partition, producer id, commit)`` of every member partition, sorted."""
        committing = self.state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)
        return sorted((topic, partition, pid, committing and pid in self.commit)
                      for pid, parts in self.members.items() for topic, partition in parts)

    # ---- records -----------------------------------------------------------------------------
    def key(self) -> bytes:
        return TXN_KEY_PREFIX + self.transactional_id.encode()

    def value(self) -> bytes:
        kafka = ({"kind": self.kind.value, "producer_id": self.producer_id,
                  "last_epoch": self.last_epoch}
                 if self.kind == TxnKind.KAFKA else {})
        return json.dumps({
            "v": RECORD_VERSION, "id": self.transactional_id, "epoch": self.epoch,
            "state": self.state.value, "timeout_ms": self.timeout_ms,
            "start_ms": self.start_ms, "update_ms": self.update_ms, "tag": self.tag,
            "members": {str(pid): sorted([t, p] for t, p in parts)
                        for pid, parts in sorted(self.members.items())},
            "commit": sorted(self.commit), "sink_batch": self.sink_batch, **kafka,
        }, separators=(",", ":")).encode()

    @classmethod
    def from_record(cls, key: bytes, value: bytes) -> TxnMetadata:
        try:
            raw = json.loads(value)
            if raw.get("v") != RECORD_VERSION:
                raise ValueError(f"record version {raw.get('v')!r}")
            found = cls(
                transactional_id=str(raw["id"]), epoch=int(raw["epoch"]),
                state=TxnState(raw["state"]), timeout_ms=int(raw["timeout_ms"]),
                start_ms=int(raw["start_ms"]), update_ms=int(raw["update_ms"]),
                tag=str(raw["tag"]),
                members={int(pid): frozenset((str(t), int(p)) for t, p in parts)
                         for pid, parts in raw["members"].items()},
                commit=frozenset(int(p) for p in raw["commit"]),
                sink_batch=int(raw["sink_batch"]),
                kind=TxnKind(raw.get("kind", TxnKind.STRATA.value)),
                producer_id=int(raw.get("producer_id", -1)),
                last_epoch=int(raw.get("last_epoch", -1)))
        except (ValueError, KeyError, TypeError) as err:
            raise StorageError(f"transaction state record {key!r} is unreadable: {err}",
                               key=key.decode(errors="replace")) from None
        if found.key() != key:
            raise StorageError(f"transaction state record {key!r} holds transaction "
                               f"{found.transactional_id!r}", key=key.decode(errors="replace"))
        return found


def partition_for(transactional_id: str, partitions: int) -> int:
    """The state log partition of ``transactional_id`` (Kafka's
    ``TransactionStateManager.partitionFor``: ``Utils.abs(id.hashCode) % partitions``)."""
    return kafka_abs(java_string_hash(transactional_id)) % partitions


def coordinator_epoch_value(epoch: int) -> bytes:
    return json.dumps({"v": RECORD_VERSION, "epoch": epoch}).encode()


def parse_coordinator_epoch(value: bytes) -> int:
    try:
        return int(json.loads(value)["epoch"])
    except (ValueError, KeyError, TypeError) as err:
        raise StorageError(f"coordinator epoch record is unreadable: {err}",
                           key=COORDINATOR_EPOCH_KEY.decode()) from None
