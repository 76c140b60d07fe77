"""Records split into v2 batches of a bounded size (``encode_batches``): what a producer does
before it sends, whether the client encodes (``Cluster.produce``) or the node that holds the
partition does (``Cluster.produce_records``). Importing this module loads no encoder (numba):
the batch builder is imported on the first batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from storage.batch_layout import HEADER_SIZE
from storage.record_format import Record

_BATCH_OVERHEAD = HEADER_SIZE    # the v2 batch header (storage.batch_layout)


def encode_batches(records: Iterable[Record | bytes], batch_bytes: int, *,
                   build: Callable[[list[Record]], bytes] | None = None) -> Iterator[bytes]:
    """Encoded v2 batches of at most about ``batch_bytes`` (a batch closes before a record that
    would take it past the limit; a single larger record makes a batch of its own, which the log
    refuses with a clear error); pre-encoded batches pass through. ``build`` encodes one batch
    (a transactional producer stamps its id and sequences there; default ``build_batch``)."""
    from storage.record_builder import build_batch, max_record_size

    build = build or build_batch
    pending: list[Record] = []
    size = _BATCH_OVERHEAD
    for item in records:
        if isinstance(item, (bytes, bytearray, memoryview)):
            if pending:
                yield build(pending)
                pending, size = [], _BATCH_OVERHEAD
            yield bytes(item)
            continue
        record_size = max_record_size(item)
        if pending and size + record_size > batch_bytes:
            yield build(pending)
            pending, size = [], _BATCH_OVERHEAD
        pending.append(item)
        size += record_size
    if pending:
        yield build(pending)
