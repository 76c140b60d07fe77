"""``DrillProducer``: an idempotent producer that keeps a ledger (``ops.drills.ledger``).

Each producer has its own producer id and writes batches of unique values to its targets in
turn, one call in flight at a time, each appended with ``flush=True`` (so an acknowledgement means
durable). Every batch carries Kafka's idempotence fields (producer id, epoch 0, the partition's
next base sequence), so a batch retried after a failure that may have stored it (a node killed or
restarting, a timeout, a directory offline) is stored once: the log drops the retry and answers
with the original offsets (``storage.producer_state``). A target whose batch failed keeps it in
hand and retries it at its next turn while the other targets go on (a directory offline never
stops the producer's other partitions). A batch is retried until it is acknowledged, or until the producer is stopped and its stop deadline passes; the ledger holds it
as in doubt from the moment it is sent until then (so a drill may verify while producers run). A batch refused outright with a record error (an out-of-order sequence, a
fenced epoch: idempotent state the log lost) is counted as ``refused`` and its target dropped;
drills treat a refusal as a failure.

Owned by the drill that starts it: ``start`` runs one thread, ``stop`` ends it and joins it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ops.drills.ledger import Ledger

logger = logging.getLogger(__name__)

HandleFor = Callable[[str, int], Any]
"""``handle_for(topic, partition)`` -> the node handle to append to (refreshed after failures)."""


class DrillProducer:
    def __init__(self, producer_id: int, targets: Sequence[tuple[str, int]], ledger: Ledger,
                 handle_for: HandleFor, on_unavailable: Callable[[str, int], None], *,
                 records_per_batch: int = 20, keys: int = 40, value_bytes: int = 64,
                 call_timeout_s: float = 30.0, pace_s: float = 0.005,
                 on_moved: Callable[[str, int, Exception], None] | None = None) -> None:
        self.producer_id = producer_id
        self._on_moved = on_moved
        self.targets = list(targets)
        self._ledger = ledger
        self._handle_for = handle_for
        self._on_unavailable = on_unavailable
        self.records_per_batch = records_per_batch
        self.keys = keys
        self.value_bytes = value_bytes
        self.call_timeout_s = call_timeout_s
        self.pace_s = pace_s
        self._sequences = {t: 0 for t in self.targets}
        self._pending: dict[tuple[str, int], tuple[list[tuple[bytes, bytes]], bytes, float,
                                                   bool]] = {}
        self._retry_at: dict[tuple[str, int], float] = {}
        self._stop = threading.Event()
        self._running = threading.Event()
        self._running.set()
        self._deadline = float("inf")
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.acked_batches = 0
        self.duplicates = 0
        self.retries = 0
        self.refused = 0
        self.gave_up = 0
        self.errors: Counter[str] = Counter()
        self.last_error: str | None = None
        self.failure: BaseException | None = None

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"drill-producer-{self.producer_id}",
                                        daemon=True)
        self._thread.start()

    def pause(self) -> None:
        """Finish the batch in hand, then wait until ``resume``."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def stop(self, deadline_s: float = 60.0) -> None:
        """Stop after the batch in hand is acknowledged, retrying it for up to ``deadline_s``."""
        self._deadline = time.monotonic() + deadline_s
        self._stop.set()
        self._running.set()
        if self._thread is not None:
            self._thread.join(deadline_s + self.call_timeout_s + 5)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"producer_id": self.producer_id, "targets": len(self.targets),
                    "acked_batches": self.acked_batches, "duplicates_dropped": self.duplicates,
                    "retries": self.retries, "refused": self.refused, "gave_up": self.gave_up,
                    "errors": dict(self.errors), "last_error": self.last_error,
                    "failure": None if self.failure is None else repr(self.failure)}

    # ---- the loop ----------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            turn = 0
            while not self._stop.is_set() and self.targets:
                if not self._running.is_set():
                    self._running.wait()
                    continue
                target = self.targets[turn % len(self.targets)]
                turn += 1
                if time.monotonic() >= self._retry_at.get(target, 0.0):
                    self._send(target)
                if self.pace_s:
                    self._stop.wait(self.pace_s)
            # stopping: settle the batches still in hand, until the deadline
            while self._pending and time.monotonic() < self._deadline:
                for target in list(self._pending):
                    self._send(target)
                if self._pending:
                    time.sleep(0.1)
            with self._lock:
                self.gave_up += len(self._pending)
        except BaseException as err:  # noqa: BLE001 - reported by the drill
            logger.exception("drill producer %d failed", self.producer_id)
            self.failure = err

    def batch(self, topic: str, partition: int, sequence: int) -> list[tuple[bytes, bytes]]:
        records = []
        for i in range(sequence, sequence + self.records_per_batch):
            key = b"p%d-k%d" % (self.producer_id, i % self.keys)
            head = b"%d/%s/%d/%d/" % (self.producer_id, topic.encode(), partition, i)
            records.append((key, head + b"x" * max(0, self.value_bytes - len(head))))
        return records

    def _send(self, target: tuple[str, int]) -> None:
        """One attempt at the target's batch in hand (a new one when none is): a failure that
        may have stored it keeps it in hand for the target's next turn (other targets go on
        meanwhile), with a growing backoff."""
        from cluster.errors import ActorUnavailableError
        from node.errors import PartitionMovedError, UnknownPartitionError
        from storage.errors import InvalidRecordError
        from storage.records import Record, build_batch

        topic, partition = target
        sequence = self._sequences[target]
        pending = self._pending.get(target)
        if pending is None:
            records = self.batch(topic, partition, sequence)
            now = int(time.time() * 1000)
            data = build_batch([Record(key=k, value=v, timestamp=now) for k, v in records],
                               producer_id=self.producer_id, producer_epoch=0,
                               base_sequence=sequence)
            self._ledger.in_doubt(topic, partition, records)   # in flight: may be stored
            pending = self._pending[target] = (records, data, 0.05, False)
        records, data, backoff, doubtful = pending
        try:
            handle = self._handle_for(topic, partition)
            infos = handle.call("append_batches", [(topic, partition, data)], True,
                                timeout=self.call_timeout_s)
        except InvalidRecordError as err:
            with self._lock:
                self.refused += 1
                self.errors[type(err).__name__] += 1
                self.last_error = f"{type(err).__name__}: {err}"
            if not doubtful:
                self._ledger.settle(records)
            logger.warning("producer %d: %s-%d refused a batch: %s", self.producer_id,
                           topic, partition, err)
            del self._pending[target]
            self.targets.remove(target)
            return
        except Exception as err:  # noqa: BLE001 - may or may not be stored: retry later
            with self._lock:
                self.retries += 1
                self.errors[type(err).__name__] += 1
                self.last_error = f"{type(err).__name__}: {err}"[:500]
            if isinstance(err, ActorUnavailableError):
                self._on_unavailable(topic, partition)
            elif self._on_moved is not None and isinstance(err, (PartitionMovedError,
                                                                 UnknownPartitionError)):
                self._on_moved(topic, partition, err)   # the partition moved: follow it
            self._pending[target] = (records, data, min(backoff * 2, 0.5), True)
            self._retry_at[target] = time.monotonic() + backoff
            return
        del self._pending[target]
        self._retry_at.pop(target, None)
        info = infos[0]
        if info.duplicate and info.first_offset < 0:
            # stored long ago, offsets no longer cached: present, but not placeable
            self._ledger.in_doubt(topic, partition, records)
        else:
            self._ledger.acknowledge(topic, partition, info.first_offset, records)
        self._sequences[target] = sequence + len(records)
        with self._lock:
            self.acked_batches += 1
            self.duplicates += int(info.duplicate)


def combined_stats(producers: Sequence[DrillProducer]) -> dict[str, Any]:
    each = [p.stats() for p in producers]
    errors: Counter[str] = Counter()
    for s in each:
        errors.update(s["errors"])
    return {"producers": len(each),
            "acked_batches": sum(s["acked_batches"] for s in each),
            "duplicates_dropped": sum(s["duplicates_dropped"] for s in each),
            "retries": sum(s["retries"] for s in each),
            "refused": sum(s["refused"] for s in each),
            "gave_up": sum(s["gave_up"] for s in each),
            "errors": dict(errors), "each": each}
