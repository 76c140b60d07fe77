"""Coordinator benchmarks over the Kafka protocol with librdkafka (confluent-kafka), on a Ray
cluster of ``DIRS`` directories each serving a Kafka listener (as ``bench_kafka``):

* offset commits: a consumer committing synchronously once per poll (one partition), commits/s
  beside a produce round trip (acks=all, ``linger.ms=0``, one record of ``COMMIT_RECORD_BYTES``,
  about an OffsetCommit record's key and value, flushed before the next): both are one request
  that appends one small batch to one partition and answers once it is written, so the ratio is
  the price of the group coordinator's path over the produce path;
* a commit of ``WIDE`` partitions at once (one OffsetCommit, one batch of ``WIDE`` records in
  one ``__consumer_offsets`` partition) beside a produce round trip of one batch of ``WIDE``
  such records into one partition;
* a rebalance: three members of a group subscribed to a topic of ``REBALANCE_PARTITIONS``
  partitions; the time from the third member's subscribe to every member holding its
  assignment (4 partitions each), with ``group.initial.rebalance.delay.ms`` 0 and Kafka's
  default 3000, both when the three subscribe to an empty group (the delay applies: Kafka's
  InitialDelayedJoin) and when the third joins a stable group of two (it does not). Beside
  each, the floor the settings put under it: members heartbeat every ``HEARTBEAT_MS`` (not
  librdkafka's default 3000, which would be most of the figure) and learn of a rebalance at
  their next heartbeat; a new group waits the delay twice when members join during the first
  (Kafka re-arms it once for them);
* transactions: a transactional producer, each transaction one record into each of
  ``TXN_PARTITIONS`` partitions then ``commit_transaction``, transactions/s beside the same
  writes by an idempotent producer flushed after each ten (the transaction's AddPartitions,
  EndTxn and markers are the difference).

The client shares the machine's cores with the brokers.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from benchmarks.common import Figure

DIRS = 3
COMMIT_TOPIC, WIDE_TOPIC, REBALANCE_TOPIC, TXN_TOPIC = "commits", "wide", "rebalance", "txn"
COMMIT_RECORD_BYTES = 64
WIDE = 100
REBALANCE_PARTITIONS = 12
HEARTBEAT_MS = 100
TXN_PARTITIONS = 10
KAFKA_DEFAULT_DELAY_MS = 3000


def run(quick: bool = False) -> list[Figure]:
    import ray

    from cluster.runtime.head import head_system_config

    commits = 300 if quick else 2000
    wide_commits = 30 if quick else 200
    rounds = 2 if quick else 5
    transactions = 100 if quick else 500
    root = Path(tempfile.mkdtemp(prefix="strata-bench-groups-"))
    figures: list[Figure] = []
    ray.init(address="local", resources=_resources(root), include_dashboard=False,
             logging_level="WARNING", log_to_driver=False, _system_config=head_system_config())
    try:
        with _cluster(root, "fast", {"group.initial.rebalance.delay.ms": "0"}) as bootstrap:
            round_trip_ms = _produce_round_trip_ms(bootstrap, COMMIT_TOPIC, 1, commits)
            wide_round_trip_ms = _produce_round_trip_ms(bootstrap, WIDE_TOPIC, WIDE,
                                                        wide_commits)
            figures.append(_commit_figure(bootstrap, commits, round_trip_ms))
            figures.append(_wide_commit_figure(bootstrap, wide_commits, wide_round_trip_ms))
            figures += _rebalance_figures(bootstrap, 0, rounds)
            figures.append(_transaction_figure(bootstrap, transactions))
        with _cluster(root, "default", {}) as bootstrap:
            figures += _rebalance_figures(bootstrap, KAFKA_DEFAULT_DELAY_MS, rounds)
    finally:
        ray.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    return figures


def _resources(root: Path) -> dict[str, float]:
    from cluster.runtime.head import head_resources
    from cluster.naming import abs_dir

    return head_resources([abs_dir(root / f"{run}-d{i}") for run in ("fast", "default")
                           for i in range(DIRS)])


@contextmanager
def _cluster(root: Path, name: str, config: Mapping[str, str]) -> Iterator[str]:
    """A cluster of ``DIRS`` directories serving Kafka listeners on ephemeral ports with the
    benchmark's topics and the broker ``config``: its bootstrap servers. Stopped on exit."""
    from cluster import Cluster
    from cluster.naming import abs_dir

    dirs = [abs_dir(root / f"{name}-d{i}") for i in range(DIRS)]
    cluster = Cluster.start(log_dirs=dirs, cleaners=1, namespace=f"bench-groups-{name}",
                            config={"listeners": "PLAINTEXT://127.0.0.1:0", **config})
    try:
        for topic, partitions in ((COMMIT_TOPIC, 1), (WIDE_TOPIC, WIDE),
                                  (REBALANCE_TOPIC, REBALANCE_PARTITIONS),
                                  (TXN_TOPIC, TXN_PARTITIONS)):
            cluster.create_topic(topic, partitions=partitions)
        yield cluster.bootstrap_servers
    finally:
        cluster.stop()


# ---- the produce baseline --------------------------------------------------------------------
def _produce_round_trip_ms(bootstrap: str, topic: str, records: int, repeats: int) -> float:
    """Mean ms of a produce round trip (acks=all) of one batch of ``records`` records of
    ``COMMIT_RECORD_BYTES`` into partition 0 of ``topic``, flushed before the next."""
    import confluent_kafka as ck

    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                            "batch.num.messages": max(records, 1)})
    value = b"v" * COMMIT_RECORD_BYTES
    producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(records):
            producer.produce(topic, value=value, partition=0)
        assert producer.flush(30) == 0
        times.append((time.perf_counter() - start) * 1000)
    return statistics.fmean(times)


# ---- offset commits --------------------------------------------------------------------------
def _consumer(bootstrap: str, group: str, **config: object):
    import confluent_kafka as ck

    return ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                        "enable.auto.commit": False, "auto.offset.reset": "earliest", **config})


def _commit_figure(bootstrap: str, commits: int, round_trip_ms: float) -> Figure:
    """A consumer of partition 0 committing each polled record's offset synchronously."""
    import confluent_kafka as ck

    consumer = _consumer(bootstrap, "bench-commit")
    consumer.assign([ck.TopicPartition(COMMIT_TOPIC, 0, 0)])
    polled = []
    while len(polled) < commits:       # the produce baseline wrote more records than this
        msg = consumer.poll(10.0)
        assert msg is not None and msg.error() is None, msg and msg.error()
        polled.append(msg)
    consumer.commit(message=polled[0], asynchronous=False)     # the coordinator found
    start = time.perf_counter()
    for msg in polled:
        consumer.commit(message=msg, asynchronous=False)
    seconds = time.perf_counter() - start
    committed = consumer.committed([ck.TopicPartition(COMMIT_TOPIC, 0)], timeout=10)
    consumer.close()
    assert committed[0].offset == polled[-1].offset() + 1, committed
    return Figure("offset commit, sync once per poll, 1 partition (librdkafka)",
                  commits / seconds, "commits/s", baseline=1000 / round_trip_ms,
                  baseline_name="produce round trip acks=all, 1 record",
                  note=f"{commits} commits; baseline {round_trip_ms:.2f} ms per produce of one "
                       f"{COMMIT_RECORD_BYTES} B record; a commit is answered once its record "
                       "is flushed to disk, a produce once appended")


def _wide_commit_figure(bootstrap: str, commits: int, round_trip_ms: float) -> Figure:
    """One synchronous commit of ``WIDE`` partitions' offsets, ``commits`` times."""
    import confluent_kafka as ck

    consumer = _consumer(bootstrap, "bench-wide-commit")
    consumer.commit(offsets=[ck.TopicPartition(WIDE_TOPIC, p, 0) for p in range(WIDE)],
                    asynchronous=False)
    start = time.perf_counter()
    for i in range(1, commits + 1):
        consumer.commit(offsets=[ck.TopicPartition(WIDE_TOPIC, p, i) for p in range(WIDE)],
                        asynchronous=False)
    seconds = time.perf_counter() - start
    committed = consumer.committed([ck.TopicPartition(WIDE_TOPIC, p) for p in range(WIDE)],
                                   timeout=10)
    consumer.close()
    assert [tp.offset for tp in committed] == [commits] * WIDE, committed[:3]
    return Figure(f"offset commit of {WIDE} partitions at once (librdkafka)",
                  commits / seconds, "commits/s", baseline=1000 / round_trip_ms,
                  baseline_name=f"produce round trip acks=all, one batch of {WIDE} records",
                  note=f"{commits * WIDE / seconds:,.0f} partition offsets/s")


# ---- rebalances ------------------------------------------------------------------------------
class _Member:
    """A consumer subscribed to ``REBALANCE_TOPIC`` that records what it was assigned."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.assigned: list[int] = []
        self.consumer = _consumer(bootstrap, group, **{
            "heartbeat.interval.ms": HEARTBEAT_MS, "session.timeout.ms": 6000,
            "partition.assignment.strategy": "range"})

    def subscribe(self) -> None:
        def on_assign(_consumer: object, partitions: list) -> None:
            self.assigned = sorted(tp.partition for tp in partitions)

        def on_revoke(_consumer: object, _partitions: list) -> None:
            self.assigned = []
        self.consumer.subscribe([REBALANCE_TOPIC], on_assign=on_assign, on_revoke=on_revoke)


def _settle(members: list[_Member], deadline_s: float = 60.0) -> None:
    """Poll every member until each holds ``REBALANCE_PARTITIONS / len(members)`` partitions
    and together they hold all of them."""
    share = REBALANCE_PARTITIONS // len(members)
    deadline = time.perf_counter() + deadline_s
    while True:
        held = [m.assigned for m in members]
        if all(len(a) == share for a in held) and \
                sorted(p for a in held for p in a) == list(range(REBALANCE_PARTITIONS)):
            return
        assert time.perf_counter() < deadline, f"no stable assignment: {held}"
        for m in members:
            m.consumer.poll(0.005)


def _timed_rebalance(bootstrap: str, group: str, empty_group: bool) -> float:
    """Seconds from the third member's subscribe to every member holding its assignment; with
    ``empty_group`` the three subscribe together to a new group, else two form it first."""
    members = [_Member(bootstrap, group) for _ in range(3)]
    try:
        if not empty_group:
            for m in members[:2]:
                m.subscribe()
            _settle(members[:2])
        else:
            for m in members[:2]:
                m.subscribe()
        start = time.perf_counter()
        members[2].subscribe()
        _settle(members)
        return time.perf_counter() - start
    finally:
        for m in members:
            m.consumer.close()


def _rebalance_figures(bootstrap: str, delay_ms: int, rounds: int) -> list[Figure]:
    """Each rebalance beside the floor the protocol's settings put under it: a member learns of
    a rebalance at its next heartbeat (``HEARTBEAT_MS``); a new group waits
    ``group.initial.rebalance.delay.ms``, twice when members joined during the first wait (Kafka's
    InitialDelayedJoin re-arms it once for them, up to the rebalance timeout)."""
    figures = []
    for empty_group, what in ((True, "3 members join an empty group"),
                              (False, "a 3rd member joins a stable group of 2")):
        runs = [_timed_rebalance(bootstrap, f"bench-rebalance-{delay_ms}-{empty_group}-{i}",
                                 empty_group) * 1000 for i in range(rounds)]
        if empty_group and delay_ms:
            floor, floor_name = 2 * delay_ms, "2 x group.initial.rebalance.delay.ms"
        else:
            floor, floor_name = HEARTBEAT_MS, "heartbeat.interval.ms"
        figures.append(Figure(
            f"rebalance, {what}, {REBALANCE_PARTITIONS} partitions, delay {delay_ms} ms",
            statistics.median(runs), "ms", baseline=floor, baseline_name=floor_name,
            note=f"median of {rounds} (max {max(runs):.0f} ms); "
                 f"group.initial.rebalance.delay.ms={delay_ms}"))
    return figures


# ---- transactions ----------------------------------------------------------------------------
def _transaction_figure(bootstrap: str, transactions: int) -> Figure:
    import confluent_kafka as ck

    value = b"t" * COMMIT_RECORD_BYTES
    txn = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-txn",
                       "linger.ms": 0})
    txn.init_transactions(30)

    def one_transaction() -> None:
        txn.begin_transaction()
        for p in range(TXN_PARTITIONS):
            txn.produce(TXN_TOPIC, value=value, partition=p)
        txn.commit_transaction(30)
    one_transaction()
    txn_s = _seconds(transactions, one_transaction)
    plain = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 0})

    def same_writes() -> None:
        for p in range(TXN_PARTITIONS):
            plain.produce(TXN_TOPIC, value=value, partition=p)
        assert plain.flush(30) == 0
    same_writes()
    plain_s = _seconds(transactions, same_writes)
    return Figure(f"transactions, {TXN_PARTITIONS} partitions each, commit (librdkafka)",
                  transactions / txn_s, "txn/s", baseline=transactions / plain_s,
                  baseline_name=f"idempotent produce of the same {TXN_PARTITIONS} records, "
                                "flushed",
                  note=f"{transactions} transactions of {TXN_PARTITIONS} x "
                       f"{COMMIT_RECORD_BYTES} B records")


def _seconds(times: int, fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    for _ in range(times):
        fn()
    return time.perf_counter() - start
