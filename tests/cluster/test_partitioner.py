"""The default partitioner matches Kafka's murmur2 exactly (Kafka's own test vectors and
kafka-python's independent implementation), compiled and interpreted alike."""

from __future__ import annotations

import random

from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from cluster.client.murmur import murmur2_hash, partitions_of
from cluster.client.partitioner import murmur2, partitions_for_keys

KAFKA_VECTORS = {b"21": -973932308, b"foobar": -790332482,
                 b"a-little-bit-long-string": -985981536,
                 b"a-little-bit-longer-string": -1486304829,
                 b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
                 b"abc": 479470107}


def test_murmur2_matches_kafka_test_vectors() -> None:
    """Kafka's UtilsTest.testMurmur2 vectors."""
    for key, expected in KAFKA_VECTORS.items():
        assert murmur2(key) == expected, key


def test_partitions_match_kafka_python_for_random_keys() -> None:
    rng = random.Random(3)
    keys = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))) for _ in range(2000)]
    got = partitions_for_keys(keys, 12).tolist()
    expected = [(kafka_python_murmur2(k) & 0x7FFFFFFF) % 12 for k in keys]
    assert got == expected


def test_the_interpreted_hash_is_kafkas_murmur2() -> None:
    """``cluster.client.murmur.murmur2_hash`` run as plain Python (what a small ``strata produce``
    routes with) gives Kafka's vectors, as the compiled kernel does."""
    for key, expected in KAFKA_VECTORS.items():
        assert murmur2_hash(key, 0, len(key)) == expected & 0xFFFFFFFF, key


def test_interpreted_and_compiled_partitions_agree_for_random_keys() -> None:
    rng = random.Random(5)
    keys = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 70))) for _ in range(3000)]
    for count in (1, 7, 12, 1000):
        assert partitions_of(keys, count) == partitions_for_keys(keys, count).tolist(), count
