"""OffsetMap: Kafka's OffsetMapTest scenarios, the SipHash reference vectors, growth, batch API."""

from __future__ import annotations

import numpy as np
import pytest

from cleaner.offset_map import BYTES_PER_ENTRY, OffsetMap, OffsetMapFullError, siphash128
from cleaner.offset_map_kernels import LANES, hash_kernel

REFERENCE_KEY = bytes(range(16))
# SipHash-1-3 with 128-bit output, key 00..0f, message 00..(n-1) for n = 0..63: the published
# TEST_VECTOR of rustc's SipHasher128 (rust-lang/rust,
# compiler/rustc_data_structures/src/sip128/tests.rs), each row its 16 output bytes
SIP128_VECTORS = """
e77ebcb22788a5befd62db6add303001 fc6f370460d3eda85e0573cc2b2ff063 75787f090569839b855bc9548c6aea95
6bc5ccfa1edcf79f4823187712ebd743 0c784e71ac2b285a9f8e92e78fbf2c25 f328db89345b620c795229a42695843e
dcd03d29f743e7100951b0e83985a6f8 1084b923f2aae0c3a62f2ec80848ab77 aa12fee1d5e3dab4724f16ab35f9c799
81ddb8042cf33994f4720e0094137c42 4faa541d5d498e89ba0ea4c387b22fb4 723b9af3554491dbb1d6633dfc6e0c4e
e53f92859e4819a8dc0695739fea8c65 b2f858c7c9ea801d53d603596d657844 87e76268dbc9227226b0ca665f64e378
c17e5505b2bd526c2921cdec1e7e0109 d0a8d95715518eebb513b0f83d9e1793 234126f93fbb668d975112e8febdf7ec
ef42f03db78f704d023c449f16b7092b abf76238c20af161b2314b4d5526bce9 3c2c2f11bb90cf0be335ca9b2e91e9b7
2a7a680f22a02a92f45149d20fece0ef c9a8d130231dd43e42e6456957f83779 1d127b84405ceab99fd8775a9be6c559
9e4bf837bcfd92cace09d2061a84d04a 39031a965d73b4af5a274d18f973b1d2 7f4d0a1209d67e4ed06f7538e1cfad64
e61ee240fbdcce38969f4cd24927dd93 4c3ba2b37b0fdd8cfa5e95c189b29414 e06fd4ca066fecdd54068a5ad8896f86
5ca84c34139c6580a88af24990720706 42ea961c5b3c858b17c3e550dfa79010 406c44dee67857b2943160f30c7417d3
c5f57bae1320fcf4b4e868e71d56c66b 04bf737a5b676be7c3de05017df4bff9 5163c9c03f1907ea1044ed5c30727b4f
37a110f002718edad24b3f9ee453f140 b9877e381aedd3da08c33e75ff23ac10 7c5004005ec5da4c5ac9440e5c723193
81b8243783dbc646ca9d0cd82abdb46c 505720543eb9b413d50b3cfad9eef938 945f594de72411e4d335be874456d8f3
37923b3e371777b21170bf9d7e62f602 3ad4e7c85764964611eb0a6c4d62de56 cd91396c44af4f5185578d9dd9803f0a
fe28158e727b868f3903c9acda64a258 40cc10b8288ce5f0bc3ac0b68a0eebc8 6f1490f540699a3cd4974420ecc92737
d505f1b75e1a84a603c43583b2ed0308 491573cfd72bb4682b7ca5880e1c8d6f 3ed69cfe45ab403f2fd2ad959ba27666
8be839ef1b20b57c83ba7eb6a8c22b6a 1409186ab42231fedee18162cf1cb4ca 2bf3ccc24ab672cf151fb8d2f3f3069b
b9b93a2882d6025cdb8c56fa13f7537b d97cca3694fb206db8bd1f3650c33322 94ec2e19a40be41af3940d6b30c49384
4b41603f209a045be140a341a3dffe10 23fbcb309f1cf094890755ab1b426569 e7d9b65690918a2b232f2f5c12c8300e
ade83cf7e7f3847b36fa4b54b00dce61 0610c5f2ee571c8ac80cbfe538bdf1c7 271d5d00fbdb5d155d9dcea97cb40218
4c5800e34efe426f079f6b0aa75260ad
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
