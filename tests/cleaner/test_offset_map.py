"""OffsetMap: Kafka's OffsetMapTest scenarios, the SipHash reference vectors, growth, batch API."""

from __future__ import annotations

import numpy as np
import pytest

from cleaner.offset_map import BYTES_PER_ENTRY, OffsetMap, OffsetMapFullError, siphash128
from cleaner.offset_map_kernels import LANES, hash_kernel

REFERENCE_KEY = bytes(range(16))
# vectors_sip128 of the SipHash reference implementation (veorq/SipHash vectors.h): SipHash-2-4 with
# 128-bit output, key 00..0f, message 00..(n-1) for n = 0..63
SIP128_VECTORS = """
a3817f04ba25a8e66df67214c7550293 da87c1d86b99af44347659119b22fc45 8177228da4a45dc7fca38bdef60affe4
9c70b60c5267a94e5f33b6b02985ed51 f88164c12d9c8faf7d0f6e7c7bcd5579 1368875980776f8854527a07690e9627
14eeca338b208613485ea0308fd7a15e a1f1ebbed8dbc153c0b84aa61ff08239 3b62a9ba6258f5610f83e264f31497b4
264499060ad9baabc47f8b02bb6d71ed 00110dc378146956c95447d3f3d0fbba 0151c568386b6677a2b4dc6f81e5dc18
d626b266905ef35882634df68532c125 9869e247e9c08b10d029934fc4b952f7 31fcefac66d7de9c7ec7485fe4494902
5493e99933b0a8117e08ec0f97cfc3d9 6ee2a4ca67b054bbfd3315bf85230577 473d06e8738db89854c066c47ae47740
a426e5e423bf4885294da481feaef723 78017731cf65fab074d5208952512eb1 9e25fc833f2290733e9344a5e83839eb
568e495abe525a218a2214cd3e071d12 4a29b54552d16b9a469c10528eff0aae c9d184ddd5a9f5e0cf8ce29a9abf691c
2db479ae78bd50d8882a8a178a6132ad 8ece5f042d5e447b5051b9eacb8d8f6f 9c0b53b4b3c307e87eaee08678141f66
abf248af69a6eae4bfd3eb2f129eeb94 0664da1668574b88b935f3027358aef4 aa4b9dc4bf337de90cd4fd3c467c6ab7
ea5c7f471faf6bde2b1ad7d4686d2287 2939b0183223fafc1723de4f52c43d35 7c3956ca5eeafc3e363e9d556546eb68
77c6077146f01c32b6b69d5f4ea9ffcf 37a6986cb8847edf0925f0f1309b54de a705f0e69da9a8f907241a2e923c8cc8
3dc47d1f29c448461e9e76ed904f6711 0d62bf01e6fc0e1a0d3c4751c5d3692b 8c03468bca7c669ee4fd5e084bbee7b5
528a5bb93baf2c9c4473cce5d0d22bd9 df6a301e95c95dad97ae0cc8c6913bd8 801189902c857f39e73591285e70b6db
e617346ac9c231bb3650ae34ccca0c5b 27d93437efb721aa401821dcec5adf89 89237d9ded9c5e78d8b1c9b166cc7342
4a6d8091bf5e7d651189fa94a250b14c 0e33f96055e7ae893ffc0e3dcf492902 e61c432b720b19d18ec8d84bdc63151b
f7e5aef549f782cf379055a608269b16 438d030fd0b7a54fa837f2ad201a6403 a590d3ee4fbf04e3247e0d27f286423f
5fe2c1a172fe93c4b15cd37caef9f538 2c97325cbd06b36eb2133dd08b3a017c 92c814227a6bca949ff0659f002ad39e
dce850110bd8328cfbd50841d6911d87 67f14984c7da791248e32bb5922583da 1938f2cf72d54ee97e94166fa91d2a36
74481e9646ed49fe0f6224301604698e 57fca5de98a9d6d8006438d0583d8a1d 9fecde1cefdc1cbed4763674d9575359
e3040c00eb28f15366ca73cbd872e740 7697009a6a831dfecca91c5993670f7a 5853542321f567a005d547a4f04759bd
5150d1772f50834a503e069a973fbd7c
""".split()


def key(i: int) -> bytes:
    return str(i).encode()


def pack(keys: list[bytes | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A key buffer with starts and lengths (-1 for a null key), as the cleaner passes them."""
    data = b"".join(k for k in keys if k is not None)
    starts, lengths, position = [], [], 0
    for k in keys:
        starts.append(position)
        lengths.append(-1 if k is None else len(k))
        position += 0 if k is None else len(k)
    return (np.frombuffer(data or b"\0", dtype=np.uint8).copy(), np.array(starts, np.int64),
            np.array(lengths, np.int32))


def check_table_invariants(m: OffsetMap) -> None:
    """Sorted by hash; every slot between an entry and its home is occupied."""
    n = m.table_slots
    table = m._table[: 3 * n].reshape(n, 3)
    occupied = np.flatnonzero(table[:, 0] != 0)
    assert len(occupied) == m.size
    h0, h1 = table[occupied, 0], table[occupied, 1]
    ascending = (h0[1:] > h0[:-1]) | ((h0[1:] == h0[:-1]) & (h1[1:] > h1[:-1]))
    assert ascending.all(), "slots are not sorted by hash"
    homes = ((h0 >> np.uint64(32)) * np.uint64(n)) >> np.uint64(32)
    low = np.minimum(homes.astype(np.int64), occupied)
    high = np.maximum(homes.astype(np.int64), occupied)
    empties = np.concatenate([[0], np.cumsum(table[:, 0] == 0)])
    gaps = empties[high + 1] - empties[low]
    assert (gaps == 0).all(), f"an empty slot between entry and home at {occupied[gaps != 0]}"


def test_siphash128_matches_every_reference_vector() -> None:
    assert len(SIP128_VECTORS) == 64
    message = bytes(range(64))
    for length, expected in enumerate(SIP128_VECTORS):
        assert siphash128(REFERENCE_KEY, message[:length]).hex() == expected, length


def test_keys_hashed_eight_at_a_time_match_every_reference_vector() -> None:
    """Eight keys of one length go through the vector lanes; each must hash as the reference
    does, whatever its position in the buffer (unaligned starts included)."""
    k0, k1 = (np.uint64(w) for w in np.frombuffer(REFERENCE_KEY, dtype="<u8"))
    message = bytes(range(64))
    for length, expected in enumerate(SIP128_VECTORS):
        buf = np.frombuffer(b"x" + message[:length] * LANES + b"\0", dtype=np.uint8)
        starts = 1 + np.arange(LANES, dtype=np.int64) * length
        out = np.empty((LANES, 2), dtype=np.uint64)
        hash_kernel(k0, k1, buf, starts, np.full(LANES, length, np.int64), out)
        assert {row.astype("<u8").tobytes().hex() for row in out} == {expected}, length


def test_a_lookup_through_the_lanes_finds_what_was_put_one_key_at_a_time() -> None:
    keys = [b"%016d" % i for i in range(40)] + [b"short", b"a-longer-key-%d" % 7, b""]
    m = OffsetMap(1 << 16)
    for i, k in enumerate(keys):
        m.put(k, i)
    buf, starts, lengths = pack(keys)
    assert m.get_batch(buf, starts, lengths).tolist() == list(range(len(keys)))


@pytest.mark.parametrize("items", [10, 100, 1000, 5000])
def test_put_then_get_returns_every_offset(items: int) -> None:
    m = OffsetMap(int(items / 0.5 * BYTES_PER_ENTRY))
    for i in range(items):
        m.put(key(i), i)
    for i in range(items):
        assert m.get(key(i)) == i
    assert m.size == items
    check_table_invariants(m)


def test_put_overwrites_the_offset_of_an_existing_key() -> None:
    m = OffsetMap(4096)
    m.put(b"k", 1)
    m.put(b"k", 7)
    assert m.get(b"k") == 7
    assert m.size == 1


def test_clear_forgets_entries_and_latest_offset() -> None:
    m = OffsetMap(4000)
    for i in range(10):
        m.put(key(i), i)
    m.clear()
    for i in range(10):
        assert m.get(key(i)) == -1
    assert m.size == 0
    assert m.latest_offset == -1


def test_get_of_a_missing_key_in_a_full_map_is_minus_one() -> None:
    m = OffsetMap(4096)
    i = 37
    while m.size < m.slots:
        m.put(key(i), i)
        i += 1
    assert m.get(key(i)) == -1
    assert m.get(key(i - 1)) == i - 1
    check_table_invariants(m)
    with pytest.raises(OffsetMapFullError):
        m.put(key(i), i)
    m.put(key(40), 4)  # overwriting still works when full
    assert m.get(key(40)) == 4


def test_latest_offset_follows_put_and_update() -> None:
    m = OffsetMap(4096)
    assert m.latest_offset == -1
    m.put(b"a", 5)
    assert m.latest_offset == 5
    m.update_latest_offset(99)
    assert m.latest_offset == 99


def test_utilization_and_capacity_use_kafka_meaning() -> None:
    m = OffsetMap(24 * 100, load_factor=0.75)
    assert m.slots == 100
    assert m.usable_slots == 75
    for i in range(50):
        m.put(key(i), i)
    assert m.utilization == 0.5
    assert not m.is_full
    for i in range(50, 75):
        m.put(key(i), i)
    assert m.is_full


def test_growth_keeps_every_entry_and_never_exceeds_the_memory() -> None:
    memory = 24 * 10_000 + 7
    m = OffsetMap(memory, initial_slots=16)
    sizes = set()
    for i in range(9000):
        m.put(key(i), i)
        sizes.add(m.table_slots)
        assert m.allocated_bytes <= memory
    assert len(sizes) > 3 and m.table_slots == m.slots == 10_000
    check_table_invariants(m)
    assert all(m.get(key(i)) == i for i in range(9000))
    assert m._table.nbytes <= memory


def test_growth_during_a_batch_keeps_order_and_entries() -> None:
    rng = np.random.default_rng(7)
    keys = [bytes(rng.integers(0, 256, int(rng.integers(0, 40)), dtype=np.uint8)) for _ in range(20_000)]
    buf, starts, lengths = pack(keys)
    offsets = np.arange(len(keys), dtype=np.int64)
    m = OffsetMap(24 * 40_000, initial_slots=64)
    assert m.put_batch(buf, starts, lengths, offsets) == len(keys)
    check_table_invariants(m)
    latest = {k: i for i, k in enumerate(keys)}
    assert m.size == len(latest)
    got = m.get_batch(buf, starts, lengths)
    assert got.tolist() == [latest[k] for k in keys]


def test_clear_shrinks_the_table_back() -> None:
    m = OffsetMap(24 * 10_000, initial_slots=16)
    for i in range(5000):
        m.put(key(i), i)
    assert m.table_slots > 16
    m.clear()
    assert m.table_slots == 16 and m.allocated_bytes == 16 * 24
    m.put(b"x", 1)
    assert m.get(b"x") == 1


def test_two_maps_hash_the_same_key_differently() -> None:
    a, b = OffsetMap(4096), OffsetMap(4096)
    a.put(b"same", 1)
    b.put(b"same", 1)
    slot_a = a._table[: 3 * a.table_slots].reshape(-1, 3)
    slot_b = b._table[: 3 * b.table_slots].reshape(-1, 3)
    hash_a = slot_a[slot_a[:, 0] != 0][0, :2].tolist()
    hash_b = slot_b[slot_b[:, 0] != 0][0, :2].tolist()
    assert hash_a != hash_b


def test_a_fixed_hash_key_makes_the_layout_reproducible() -> None:
    a = OffsetMap(4096, hash_key=REFERENCE_KEY)
    b = OffsetMap(4096, hash_key=REFERENCE_KEY)
    for i in range(50):
        a.put(key(i), i)
        b.put(key(i), i)
    assert np.array_equal(a._table, b._table)


def test_empty_key_is_a_key() -> None:
    m = OffsetMap(4096)
    m.put(b"", 3)
    assert m.get(b"") == 3
    assert m.get(b"\0") == -1


def test_put_batch_skips_null_keys_and_counts_them() -> None:
    m = OffsetMap(4096)
    buf, starts, lengths = pack([b"a", None, b"b", None])
    assert m.put_batch(buf, starts, lengths, np.array([0, 1, 2, 3])) == 4
    assert m.size == 2
    assert m.null_keys_skipped == 2
    assert m.latest_offset == 2
    assert m.get_batch(buf, starts, lengths).tolist() == [0, -1, 2, -1]


def test_put_batch_stops_at_the_load_factor_and_reports_where() -> None:
    m = OffsetMap(24 * 4, load_factor=0.75)  # 3 usable slots
    buf, starts, lengths = pack([b"0", b"1", b"0", None, b"2", b"3", b"4"])
    consumed = m.put_batch(buf, starts, lengths, np.arange(7))
    assert consumed == 5  # the null key is consumed; the map is full before "3"
    assert m.is_full and m.size == 3
    assert m.latest_offset == 4
    assert [m.get(k) for k in (b"0", b"1", b"2", b"3")] == [2, 1, 4, -1]
    assert m.put_batch(buf, starts[5:], lengths[5:], np.arange(5, 7)) == 0


def test_put_batch_stops_before_an_existing_key_once_full_like_kafka() -> None:
    m = OffsetMap(24 * 2, load_factor=0.5)  # 1 usable slot (KAFKA-3894 partial segments)
    buf, starts, lengths = pack([b"0", b"0"])
    assert m.put_batch(buf, starts, lengths, np.array([0, 1])) == 1
    assert m.get(b"0") == 0


def test_batch_api_accepts_bytes_and_int64_lengths() -> None:
    m = OffsetMap(4096)
    data = b"aabbb"
    starts = np.array([0, 2], np.int64)
    lengths = np.array([2, 3], np.int64)
    assert m.put_batch(data, starts, lengths, np.array([10, 11])) == 2
    assert m.get_batch(memoryview(data), starts, lengths).tolist() == [10, 11]


def test_out_of_bounds_keys_are_refused() -> None:
    m = OffsetMap(4096)
    with pytest.raises(ValueError, match="key 1"):
        m.put_batch(np.zeros(4, np.uint8), np.array([0, 2]), np.array([2, 3]), np.array([0, 1]))
    with pytest.raises(ValueError, match="key 0"):
        m.get_batch(np.zeros(4, np.uint8), np.array([-1]), np.array([2]))


def test_a_map_too_small_for_one_entry_is_refused() -> None:
    with pytest.raises(ValueError):
        OffsetMap(23)
    with pytest.raises(ValueError):
        OffsetMap(4096, load_factor=0)


@pytest.mark.parametrize("slots", [1, 2, 3, 7, 64, 500])
def test_a_table_fills_to_every_slot_with_its_invariants(slots: int) -> None:
    for seed in range(5):
        m = OffsetMap(24 * slots, load_factor=1.0, hash_key=bytes([seed]) * 16, initial_slots=2)
        for i in range(slots):
            m.put(key(i), i)
            check_table_invariants(m)
        assert [m.get(key(i)) for i in range(slots)] == list(range(slots))
        assert m.get(key(slots)) == -1
