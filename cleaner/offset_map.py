"""``OffsetMap``: the cleaner's fixed-memory table from key hash to the latest offset of that key.

Kafka's ``SkimpyOffsetMap`` with a different hash and a different table discipline, same contract:

* ``memory`` bytes are given; every entry takes 24 bytes (a 16-byte key hash and an int64 offset),
  so ``slots = memory // 24`` and the cleaner stops mapping at ``floor(slots * load_factor)``
  entries (``is_full``). ``put`` of a hash already present overwrites its offset.
* The hash is SipHash-1-3 with 128-bit output under a random 128-bit key drawn per map instance,
  so a producer cannot craft keys that collide (MD5, Kafka's choice, is both craftable and slow).
  Two distinct keys share an entry only by a 2**-128 accident. SipHash-1-3 (one round per
  message word, three per output word) is the variant Rust's standard hash maps and rustc's
  SipHasher128 use, judged by one of SipHash's designers enough against hash flooding, the
  attack a keyed table hash is there to stop (a MAC would want SipHash-2-4). Same keyed
  construction and output, 9 rounds for a 16-byte key instead of 14 (measured: eight keys in
  the vector lanes 14% faster, a key alone 40%).

Table: slot ``i`` = ``[h0, h1, offset]`` (three uint64 words, 24 bytes); a slot whose hash is zero
is empty, and a key whose first hash word comes out zero gets first word 1.

Discipline: *ordered* linear probing without wrap-around (Amble and Knuth, 1974). A key's home slot
is ``((h0 >> 32) * n) >> 32`` for a table of ``n`` slots, which grows with the hash, and occupied
slots are kept sorted by ``(h0, h1)``. Invariant: every slot between an entry and its home is
occupied. Lookups stop as soon as they pass the key's sorted place, so a miss costs about as much
as a hit even at load factor 0.9, and the table can be filled to 100% (an insertion that runs into
the end of the table shifts its neighbours left instead of wrapping).

Growth: the whole ``memory`` is reserved at construction with ``np.zeros``, which the kernel maps
lazily (untouched pages cost nothing), but only the first ``table_slots`` slots are used: 64 Ki at
first, multiplied by 4 whenever the table passes half full (or the load factor, if lower), never
beyond ``slots``: past half full, ordered linear probing's displacements grow, and with them the
mispredicted branches of every lookup and the shifts of every insertion (measured: a map of 40 Ki
keys in 256 Ki slots looks keys up 15% faster than in 64 Ki). Because
the layout is sorted and every entry's new position is at or after its old one, growth rehashes in
place, back to front, with no second table: resident memory never exceeds ``allocated_bytes``,
which never exceeds ``memory``, even during a rehash. ``clear`` zeroes only the part in use and
shrinks back to 64 Ki slots, so a small log after a large one does not pay for the large table.

Not thread-safe: one map belongs to one cleaner. The kernels (``offset_map_kernels``) release the
GIL.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from cleaner.kernels import map_batches
from cleaner.offset_map_kernels import (
    BAD_INDEX,
    BYTES_PER_ENTRY,
    LATEST,
    NO_ROOM,
    NULLS,
    OUT_OF_BOUNDS,
    SIZE,
    STATUS,
    TABLE_SLOTS,
    WORDS_PER_ENTRY,
    get_kernel,
    hash_kernel,
    put_kernel,
)
from storage.errors import StorageError
from storage.records import BatchScan

DEFAULT_LOAD_FACTOR = 0.9
INITIAL_TABLE_SLOTS = 64 * 1024  # 1.5 MiB: a log of up to 32 Ki keys never touches more
GROWTH_FACTOR = 4  # fewer rehashes than doubling (each moves every entry); measured faster
GROWTH_LOAD_FACTOR = 0.5  # a table below the cap grows past min(load factor, this): see the doc


class OffsetMapFullError(StorageError):
    """A scalar ``put`` of a new key into a map whose every slot is taken (Kafka's
    "Attempt to add a new entry to a full offset map"). The batch API never raises it: it stops at
    the load factor and reports where."""


def _key_words(key: bytes) -> tuple[np.uint64, np.uint64]:
    if len(key) != 16:
        raise ValueError(f"a SipHash key is 16 bytes, got {len(key)}")
    words = np.frombuffer(key, dtype="<u8")
    return np.uint64(words[0]), np.uint64(words[1])


def siphash128(key: bytes, data: bytes) -> bytes:
    """SipHash-1-3-128 of ``data`` under the 16-byte ``key``, as its 16 output bytes (checked
    against rustc's published SipHasher128 test vectors)."""
    k0, k1 = _key_words(key)
    buf = np.frombuffer(bytes(data) or b"\0", dtype=np.uint8)
    out = np.empty((1, 2), dtype=np.uint64)
    hash_kernel(k0, k1, buf, np.zeros(1, np.int64), np.array([len(data)], np.int64), out)
    return out.astype("<u8").tobytes()


@dataclass(frozen=True, slots=True)
class MapLookup:
    """What a kernel needs to look keys up in an ``OffsetMap`` (``get_kernel``'s arguments) and
    the map's latest offset; valid until the map's next ``put``, ``put_batch(es)`` or ``clear``."""

    table: np.ndarray
    table_slots: int
    k0: np.uint64
    k1: np.uint64
    latest_offset: int


@dataclass(frozen=True, slots=True)
class MapProgress:
    """How far ``OffsetMap.put_batches`` went: the batch to go on from (``next``), the records
    put or skipped (``consumed``), and ``status``: ``kernels.DONE``, ``kernels.MAP_FULL`` (the map
    filled up inside batch ``next``) or ``kernels.PER_BATCH`` (batch ``next`` cannot be read by the
    kernel; nothing of it was put)."""

    next: int
    consumed: int
    status: int


class OffsetMap:
    """Key hash -> latest offset, in at most ``memory`` bytes (24 per slot). See the module doc.

    ``slots`` and ``utilization`` have Kafka's meaning (capacity of the whole ``memory``), whatever
    part of it the table currently uses (``table_slots``, ``allocated_bytes``). Not thread-safe.
    """

    def __init__(self, memory: int, load_factor: float = DEFAULT_LOAD_FACTOR, *,
                 hash_key: bytes | None = None, initial_slots: int = INITIAL_TABLE_SLOTS) -> None:
        if memory < BYTES_PER_ENTRY:
            raise ValueError(f"an offset map needs at least {BYTES_PER_ENTRY} bytes, got {memory}")
        if not 0.0 < load_factor <= 1.0:
            raise ValueError(f"load factor {load_factor} is outside (0, 1]")
        if initial_slots < 1:
            raise ValueError(f"initial_slots must be positive, got {initial_slots}")
        self._memory = memory
        self._load_factor = float(load_factor)
        self._slots = memory // BYTES_PER_ENTRY
        self._usable = int(self._slots * self._load_factor)
        self._initial = min(initial_slots, self._slots)
        self._k0, self._k1 = _key_words(hash_key if hash_key is not None else os.urandom(16))
        self._table = np.zeros(self._slots * WORDS_PER_ENTRY, dtype=np.uint64)
        self._state = np.zeros(6, dtype=np.int64)
        self._state[TABLE_SLOTS] = self._initial
        self._state[LATEST] = -1

    # -- Kafka's OffsetMap interface -----------------------------------------------------------

    @property
    def slots(self) -> int:
        """Capacity of the configured memory: ``memory // 24``."""
        return self._slots

    @property
    def size(self) -> int:
        return int(self._state[SIZE])

    @property
    def latest_offset(self) -> int:
        """The offset of the last ``put`` or ``update_latest_offset``; -1 after ``clear``."""
        return int(self._state[LATEST])

    @property
    def utilization(self) -> float:
        return self.size / self._slots

    @property
    def usable_slots(self) -> int:
        """``floor(slots * load_factor)``: the size at which the cleaner stops mapping."""
        return self._usable

    @property
    def is_full(self) -> bool:
        return self.size >= self._usable

    @property
    def load_factor(self) -> float:
        return self._load_factor

    @property
    def memory(self) -> int:
        return self._memory

    @property
    def table_slots(self) -> int:
        """Slots the table currently uses (grows by doubling up to ``slots``)."""
        return int(self._state[TABLE_SLOTS])

    @property
    def allocated_bytes(self) -> int:
        """Bytes of the table in use; the only part of the reservation ever touched."""
        return self.table_slots * BYTES_PER_ENTRY

    @property
    def null_keys_skipped(self) -> int:
        """Entries with key length -1 that ``put_batch`` skipped since the last ``clear``."""
        return int(self._state[NULLS])

    def update_latest_offset(self, offset: int) -> None:
        self._state[LATEST] = offset

    def clear(self) -> None:
        """Forget every entry; zeroes only the part of the table in use (nothing when it holds
        no entry: an empty slot is all zeros) and shrinks it."""
        if self.size:
            self._table[: self.table_slots * WORDS_PER_ENTRY] = 0
        self._state[:] = 0
        self._state[TABLE_SLOTS] = self._initial
        self._state[LATEST] = -1

    def put(self, key: bytes, offset: int) -> None:
        """Map ``key`` to ``offset`` (overwriting); raises ``OffsetMapFullError`` when a new key
        finds every slot taken. Does not stop at the load factor: the cleaner checks ``is_full``."""
        buf = np.frombuffer(bytes(key) or b"\0", dtype=np.uint8)
        self._put(buf, np.zeros(1, np.int64), np.array([len(key)], np.int64),
                  np.array([offset], np.int64), self._slots + 1)
        if self._state[STATUS] == NO_ROOM:
            raise OffsetMapFullError(
                f"attempt to add a new entry to a full offset map ({self._slots} slots)",
                slots=self._slots)

    def get(self, key: bytes) -> int:
        """The offset last put for ``key``, or -1."""
        buf = np.frombuffer(bytes(key) or b"\0", dtype=np.uint8)
        return int(self.get_batch(buf, np.zeros(1, np.int64), np.array([len(key)], np.int64))[0])

    # -- batch API, the cleaner's hot path -----------------------------------------------------

    def put_batch(self, key_buffer: np.ndarray, key_starts: np.ndarray, key_lengths: np.ndarray,
                  offsets: np.ndarray) -> int:
        """Put keys ``key_buffer[start:start+length]`` -> ``offsets[i]`` in order.

        Entries with length -1 (null keys) are skipped and counted in ``null_keys_skipped``.
        Before each keyed entry, stops if the map is full (``size >= usable_slots``, Kafka's
        ``buildOffsetMap``). Returns how many leading entries were consumed (put or skipped):
        ``len(offsets)`` unless the map filled up, else the index of the first entry not put, so
        the caller can stop mid-segment (KAFKA-3894).
        """
        if not len(key_starts) == len(key_lengths) == len(offsets):
            raise ValueError("key_starts, key_lengths and offsets differ in length")
        consumed = self._put(key_buffer, key_starts, key_lengths,
                             np.asarray(offsets, dtype=np.int64), self._usable)
        return consumed

    def get_batch(self, key_buffer: np.ndarray, key_starts: np.ndarray,
                  key_lengths: np.ndarray) -> np.ndarray:
        """Offsets mapped for each key (int64), -1 where absent or the key is null."""
        if len(key_starts) != len(key_lengths):
            raise ValueError("key_starts and key_lengths differ in length")
        out = np.empty(len(key_starts), dtype=np.int64)
        bad = get_kernel(self._table, self.table_slots, self._k0, self._k1,
                          _as_bytes(key_buffer), _as_index(key_starts), _as_index(key_lengths), out)
        if bad >= 0:
            raise ValueError(f"key {bad} lies outside the key buffer")
        return out

    def put_batches(self, buf: np.ndarray, scan: BatchScan, first: int, last: int,
                    start: int) -> MapProgress:
        """Put the keys of the batches ``first..last-1`` of ``scan`` (over ``buf``) in order,
        each record at or past offset ``start``, stopping at the first batch that is not plain
        (see ``cleaner.kernels``) and at the load factor as ``put_batch`` does. The latest
        offset follows every batch wholly put whose last offset is at or past ``start``."""
        nxt, consumed, status = map_batches(
            self._table, self._state, self._slots, min(self._load_factor, GROWTH_LOAD_FACTOR),
            GROWTH_FACTOR, self._usable, self._k0, self._k1, buf, scan.positions, scan.sizes,
            scan.last_offsets, first, last, start)
        return MapProgress(int(nxt), int(consumed), int(status))

    def lookup(self) -> MapLookup:
        """The table and hash key for a lookup kernel (see ``MapLookup``)."""
        return MapLookup(self._table, self.table_slots, self._k0, self._k1, self.latest_offset)

    def _put(self, buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, offsets: np.ndarray,
             stop_at: int) -> int:
        consumed = put_kernel(self._table, self._state, self._slots,
                              min(self._load_factor, GROWTH_LOAD_FACTOR), GROWTH_FACTOR, stop_at,
                               self._k0, self._k1, _as_bytes(buf), _as_index(starts),
                               _as_index(lengths), offsets)
        if self._state[STATUS] == OUT_OF_BOUNDS:
            raise ValueError(f"key {int(self._state[BAD_INDEX])} lies outside the key buffer")
        return int(consumed)

    def __repr__(self) -> str:
        return (f"OffsetMap(size={self.size}, slots={self._slots}, "
                f"table_slots={self.table_slots}, latest_offset={self.latest_offset})")


def _as_bytes(buf: np.ndarray | bytes | bytearray | memoryview) -> np.ndarray:
    array = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf
    if array.dtype != np.uint8 or array.ndim != 1:
        raise TypeError(f"key buffer must be a 1-d uint8 array, got {array.dtype} {array.shape}")
    if array.size == 0:
        return np.zeros(1, np.uint8)
    return array


def _as_index(values: np.ndarray) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype not in (np.int64, np.int32):
        array = array.astype(np.int64)
    return array
