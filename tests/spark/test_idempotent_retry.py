"""A retried idempotent task (``transactional=false``) sends only the records the log does not
hold yet (``cluster.client.data_path.skip_held``), so the log's duplicate rule (an exact retry of
one of the last five batches) never has to reach further back, and a batch cut where the first
attempt did not cut is re-encoded from the first record the log lacks."""

from __future__ import annotations

from cluster.client.data_path import skip_held
from storage.records import Compression, Record, RecordBatch, build_batch

PID = 77


class _HeldSequences:
    """A stand-in for the cluster client at the boundary: the last sequence each partition
    holds of the producer."""

    def __init__(self, held: dict[tuple[str, int], int]) -> None:
        self.held = held
        self.asked: list[tuple[str, int]] = []

    def last_sequence(self, topic: str, partition: int, producer_id: int) -> int:
        assert producer_id == PID
        self.asked.append((topic, partition))
        return self.held.get((topic, partition), -1)


def _batch(first_seq: int, count: int) -> bytes:
    return build_batch([Record(b"k%d" % (first_seq + i), b"v%d" % (first_seq + i), 1000)
                        for i in range(count)], producer_id=PID, producer_epoch=0,
                       base_sequence=first_seq, compression=Compression.LZ4)


def test_a_retry_skips_held_batches_and_cuts_a_straddling_one() -> None:
    cluster = _HeldSequences({("t", 0): 14, ("t", 1): -1})
    items = [("t", 0, _batch(0, 10)), ("t", 1, _batch(0, 3)), ("t", 0, _batch(10, 10)),
             ("t", 0, _batch(20, 5))]
    sent = list(skip_held(iter(items), cluster, PID))
    assert cluster.asked == [("t", 0), ("t", 1)]              # once per partition
    assert [(t, p) for t, p, _ in sent] == [("t", 1), ("t", 0), ("t", 0)]
    assert sent[0][2] == items[1][2] and sent[2][2] == items[3][2]   # untouched
    straddling = RecordBatch(sent[1][2])
    assert straddling.header.base_sequence == 15
    assert straddling.header.producer_id == PID
    assert straddling.compression == Compression.LZ4
    assert [r.value for r in straddling.records()] == [b"v%d" % i for i in range(15, 20)]
