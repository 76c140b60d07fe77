"""Drills that kill a coordinator Kafka clients depend on: the node actor hosting a consumer
group's coordinator (``group-coordinator``) and the coordinator actor running the transaction
coordinator (``transaction-coordinator``). Both start a cluster of their own whose directories
are Kafka brokers on fixed ports (a restarted node listens where its clients expect it)."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections import Counter
from typing import Any

from ops.drills import inject
from ops.drills.base import DrillContext, topic_configs

GROUP_PARTITIONS = 6
OFFSETS_PARTITIONS = 6
MEMBERS = 3
BATCH = 25                     # records a member processes before its synchronous commit
PROCESS_S = 0.02               # the work each batch stands for (keeps consumption going on)
TXN_RECORDS = 10               # records per transaction
TXN_PARTITIONS = 3


def free_port_base(count: int) -> int:
    """A port P with P .. P + count - 1 free on 127.0.0.1 now (the port rule of ``listeners``
    gives the i-th directory port P + i)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        if base + count > 65535:
            continue
        held = []
        try:
            for i in range(count):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError(f"no {count} consecutive free ports on 127.0.0.1")


def _open_brokers(ctx: DrillContext, **extra: str) -> Any:
    dirs = ctx.options.dirs
    config = {"listeners": f"PLAINTEXT://127.0.0.1:{free_port_base(dirs)}",
              "group.initial.rebalance.delay.ms": "0",
              "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS), **extra}
    return ctx.open_env(own=True, config=config)


def _fill(ctx: DrillContext, bootstrap: str, topic: str, records: int) -> None:
    """Produce ``records`` records (acks=all, idempotent) and put each in the ledger at the
    offset its delivery report names."""
    import confluent_kafka as ck

    producer = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                            "linger.ms": 5})
    failures: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            ctx.ledger.acknowledge(msg.topic(), msg.partition(), msg.offset(),
                                   [(msg.key(), msg.value())])
    for i in range(records):
        producer.produce(topic, key=b"k%d" % (i % ctx.options.keys), value=b"r%08d" % i,
                         partition=i % GROUP_PARTITIONS, on_delivery=delivered)
        producer.poll(0)
    left = producer.flush(ctx.options.timeout_s)
    if failures or left:
        raise RuntimeError(f"filling {topic}: {left} undelivered, errors {failures[:3]}")


class _GroupRun:
    """What the members of the drill's group did: every record they processed (with the
    committed offset of its partition, as last acknowledged to any member, at that moment) and
    every committed offset a watcher saw."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: Counter[tuple[int, int]] = Counter()
        self.committed: dict[int, int] = {}
        self.early_duplicates: list[str] = []
        self.commit_errors: Counter[str] = Counter()
        self.commits = 0
        self.backwards: list[str] = []
        self.watched: dict[int, int] = {}
        self.failures: list[str] = []

    def processed(self, partition: int, offset: int) -> None:
        with self.lock:
            if self.seen[(partition, offset)] and offset < self.committed.get(partition, 0):
                self.early_duplicates.append(
                    f"{partition}@{offset} again, committed {self.committed[partition]}")
            self.seen[(partition, offset)] += 1

    def acknowledged(self, offsets: dict[int, int]) -> None:
        with self.lock:
            self.commits += 1
            for p, o in offsets.items():
                self.committed[p] = max(o, self.committed.get(p, 0))


def _member(bootstrap: str, group: str, topic: str, run: _GroupRun, stop: threading.Event,
            name: str) -> None:
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "session.timeout.ms": 10000, "socket.timeout.ms": 5000})
    try:
        c.subscribe([topic])
        while not stop.is_set():
            batch = c.consume(BATCH, 0.5)
            mine = [m for m in batch if m.error() is None]
            for m in mine:
                run.processed(m.partition(), m.offset())
            if not mine:
                continue
            time.sleep(PROCESS_S)
            try:
                done = c.commit(asynchronous=False)
            except ck.KafkaException as err:
                with run.lock:
                    run.commit_errors[err.args[0].name()] += 1
                continue
            run.acknowledged({tp.partition: tp.offset for tp in done or []
                              if tp.error is None and tp.offset >= 0})
    except Exception as err:  # noqa: BLE001 - the drill reports it
        with run.lock:
            run.failures.append(f"{name}: {type(err).__name__}: {err}")
    finally:
        c.close()


def _watch(bootstrap: str, group: str, topic: str, run: _GroupRun,
           stop: threading.Event) -> None:
    """OffsetFetch of the group's committed offsets (never joining it) every 100 ms."""
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "enable.auto.commit": False, "socket.timeout.ms": 5000})
    try:
        asked = [ck.TopicPartition(topic, p) for p in range(GROUP_PARTITIONS)]
        while not stop.wait(0.1):
            try:
                found = c.committed(asked, timeout=5)
            except ck.KafkaException:
                continue
            with run.lock:
                for tp in found:
                    if tp.error is not None or tp.offset < 0:
                        continue
                    before = run.watched.get(tp.partition, -1)
                    if tp.offset < before:
                        run.backwards.append(f"{tp.partition}: {before} -> {tp.offset}")
                    run.watched[tp.partition] = max(before, tp.offset)
    finally:
        c.close()


def group_coordinator(ctx: DrillContext) -> None:
    """kill -9 the node actor hosting a consumer group's coordinator twice: while the group
    rebalances as its last member joins, and while its members consume and commit after each
    batch. Ray restarts it, its coordinator loads the group back from ``__consumer_offsets``,
    the members go on; every record is processed, twice only after the
    last acknowledged commit of its partition; no committed offset goes backwards; the final
    commits are the log end offsets."""
    from node.groups.config import OFFSETS_TOPIC
    from node.groups.placement import partition_for

    env = _open_brokers(ctx)
    bootstrap = env.cluster.bootstrap_servers
    tag = f"{int(time.time()) % 100000}{ctx.options.seed}"
    topic = f"drill-{ctx.name}-{tag}-log"
    group = f"drill-{ctx.name}-{tag}"
    env.create_topic(topic, GROUP_PARTITIONS, topic_configs(ctx.options)[0])
    ctx.log_topic = topic
    total = ctx.options.warmup_records * 4
    _fill(ctx, bootstrap, topic, total)
    run = _GroupRun()
    stop = threading.Event()
    members = [threading.Thread(target=_member, args=(bootstrap, group, topic, run, stop,
                                                      f"member-{i}"), daemon=True)
               for i in range(MEMBERS)]
    threads = [*members, threading.Thread(target=_watch, args=(bootstrap, group, topic, run,
                                                               stop), daemon=True)]
    for t in threads:
        if t is not members[-1]:
            t.start()
    try:
        ctx.wait(lambda: len(run.seen) >= total // 4 and run.commits >= MEMBERS - 1,
                 "a quarter of the topic processed and committed by the first members")
        # FindCoordinator names the broker of the directory holding the group's partition
        log_dir = env.cluster.partition_dir(OFFSETS_TOPIC,
                                            partition_for(group, OFFSETS_PARTITIONS))
        # 1. mid-rebalance: the last member joins; the kill lands while the group rebalances
        members[-1].start()
        state = ctx.wait(lambda: _rebalancing(bootstrap, group), "the group rebalancing as "
                         "its last member joins")
        old = env.kill_node(log_dir)
        ctx.inject("kill -9 of the node actor hosting the group's coordinator mid-rebalance",
                   log_dir, pid=old, group=group, state=state)
        new = env.wait_node_back(log_dir, old, ctx.options.timeout_s)
        ctx.check("Ray restarted the node actor (mid-rebalance)", new != old,
                  f"pid {old} -> {new}")
        ctx.wait(lambda: len(run.seen) >= total // 2 or run.failures,
                 "half of the topic processed after the kill mid-rebalance")
        # 2. mid-commit: the members commit after every batch
        before = len(run.seen)
        old = env.kill_node(log_dir)
        ctx.inject("kill -9 of the node actor hosting the group's coordinator mid-commit",
                   log_dir, pid=old, group=group, processed_before=before)
        new = env.wait_node_back(log_dir, old, ctx.options.timeout_s)
        ctx.check("Ray restarted the node actor (mid-commit)", new != old,
                  f"pid {old} -> {new}")
        ctx.wait(lambda: len(run.seen) >= total or run.failures, "every record processed")
        ends = {p: env.cluster.offsets(topic, p)[1] for p in range(GROUP_PARTITIONS)}
        ctx.wait(lambda: all(run.watched.get(p) == e for p, e in ends.items()),
                 "committed offsets at the log end")
    finally:
        stop.set()
        for t in threads:
            if t.is_alive():
                t.join(30)
    twice = sum(1 for n in run.seen.values() if n > 1)
    ctx.check("the members went on after the restart", not run.failures and
              len(run.seen) > before, f"{len(run.seen) - before} records processed after the "
              f"kill; failures {run.failures[:3]}")
    ctx.check("every record of the topic was processed at least once",
              len(run.seen) == total, f"{len(run.seen)} of {total}")
    ctx.check("records processed twice are only those after their partition's last commit",
              not run.early_duplicates,
              f"{twice} processed twice; too early: {run.early_duplicates[:3]}")
    ctx.check("no partition's committed offset went backwards", not run.backwards,
              f"{run.backwards[:3]}")
    ctx.check("the final committed offsets are the log end offsets",
              all(run.watched.get(p) == e for p, e in ends.items()),
              f"committed {dict(sorted(run.watched.items()))}, log end {ends}")
    ctx.report.recovery.update({
        "group": group, "records": total, "processed_twice": twice, "commits": run.commits,
        "commit_errors": dict(run.commit_errors), "coordinator_dir": log_dir})
    ctx.finish()


def _rebalancing(bootstrap: str, group: str) -> str | None:
    """The group's state while it rebalances (DescribeGroups), else None."""
    from ops.tools.kafka_admin import KafkaAdmin, KafkaAdminError

    try:
        with KafkaAdmin(bootstrap, timeout_s=5.0) as admin:
            state = admin.describe_group(group).state
    except KafkaAdminError:
        return None
    return state if state in ("PreparingRebalance", "CompletingRebalance") else None


class _TxnRun:
    """What the transactional producer did: the values of its committed transactions, those of
    its aborted ones, the errors it aborted on, and how it ended."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.committed: list[bytes] = []
        self.aborted: list[bytes] = []
        self.transactions = 0
        self.abort_reasons: Counter[str] = Counter()
        self.retried_commits = 0
        self.finished = False
        self.failure: str | None = None


def _retrying(call: Any, run: _TxnRun, timeout_s: float) -> None:
    """``call(timeout)`` again while librdkafka says its error is retriable."""
    import confluent_kafka as ck

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            call(10.0)
            return
        except ck.KafkaException as err:
            if not err.args[0].retriable() or time.monotonic() > deadline:
                raise
            with run.lock:
                run.retried_commits += 1


def _transactions(bootstrap: str, topic: str, count: int, run: _TxnRun,
                  timeout_s: float) -> None:
    """``count`` transactions of ``TXN_RECORDS`` records each; one that fails with an abortable
    error is aborted and its records produced again in a new transaction (new values: the
    attempt is part of each value)."""
    import confluent_kafka as ck

    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-txn",
                     "linger.ms": 5, "socket.timeout.ms": 5000, "message.timeout.ms": 30000,
                     "transaction.timeout.ms": 60000})
    try:
        _retrying(p.init_transactions, run, timeout_s)
        for i in range(count):
            attempt = 0
            while True:
                values = [b"t%05d-a%d-r%02d" % (i, attempt, j) for j in range(TXN_RECORDS)]
                try:
                    p.begin_transaction()
                    for j, value in enumerate(values):
                        p.produce(topic, value=value, partition=j % TXN_PARTITIONS)
                    _retrying(p.commit_transaction, run, timeout_s)
                except ck.KafkaException as err:
                    if not err.args[0].txn_requires_abort():
                        raise
                    _retrying(p.abort_transaction, run, timeout_s)
                    with run.lock:
                        run.aborted += values
                        run.abort_reasons[err.args[0].name()] += 1
                    attempt += 1
                    continue
                with run.lock:
                    run.committed += values
                    run.transactions += 1
                break
        run.finished = True
    except Exception as err:  # noqa: BLE001 - the drill reports it
        run.failure = f"{type(err).__name__}: {err}"
    finally:
        p.flush(5)


def _read_committed(bootstrap: str, topic: str, expected: int, timeout_s: float
                    ) -> list[bytes]:
    """Every value a read_committed consumer reads from the start of ``topic`` (until it has
    ``expected`` and one more quiet second, or ``timeout_s``)."""
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                     "enable.auto.commit": False, "isolation.level": "read_committed",
                     "socket.timeout.ms": 5000})
    try:
        c.assign([ck.TopicPartition(topic, p, 0) for p in range(TXN_PARTITIONS)])
        got: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        quiet_until = None
        while time.monotonic() < deadline:
            if len(got) >= expected:
                quiet_until = quiet_until or time.monotonic() + 1.0
                if time.monotonic() > quiet_until:
                    break
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        return got
    finally:
        c.close()


def _watermarks(bootstrap: str, topic: str, isolation: str) -> list[int]:
    """The end offset of every partition a consumer of ``isolation`` is told: the last stable
    offset for read_committed, the high watermark for read_uncommitted."""
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-ends",
                     "isolation.level": isolation, "socket.timeout.ms": 5000})
    try:
        return [c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10,
                                        cached=False)[1] for p in range(TXN_PARTITIONS)]
    finally:
        c.close()


def transaction_coordinator(ctx: DrillContext) -> None:
    """kill -9 the coordinator actor (the transaction coordinator) while a librdkafka
    transactional producer commits transactions in a loop, aborting and retrying one that fails
    with an abortable error: Ray restarts it; the producer finishes its loop; a read_committed
    consumer reads every committed transaction's records exactly once and no aborted one's;
    every partition's last stable offset is its log end (no transaction left open)."""
    from ops.drills.ledger import EXAMPLES, Verification

    env = _open_brokers(ctx, **{"transaction.state.log.num.partitions": "3"})
    bootstrap = env.cluster.bootstrap_servers
    tag = f"{int(time.time()) % 100000}{ctx.options.seed}"
    topic = f"drill-{ctx.name}-{tag}-log"
    env.create_topic(topic, TXN_PARTITIONS, topic_configs(ctx.options)[0])
    ctx.log_topic = topic
    count = (ctx.options.warmup_records + ctx.options.after_records) // TXN_RECORDS
    run = _TxnRun()
    loop = threading.Thread(target=_transactions, daemon=True,
                            args=(bootstrap, topic, count, run, ctx.options.timeout_s))
    loop.start()
    try:
        ctx.wait(lambda: run.failure or run.transactions >= count // 2,
                 "half of the transactions committed")
        coordinator = env.coordinator()
        old = env.in_actor(coordinator, inject.pid)
        before = run.transactions
        os.kill(old, signal.SIGKILL)
        ctx.inject("kill -9 of the coordinator mid-transactions", coordinator.name, pid=old,
                   transactions_before=before)
        new = ctx.wait(lambda: (p := env.in_actor(env.coordinator(), inject.pid, timeout=10))
                       != old and p, "the coordinator restarted")
        ctx.check("Ray restarted the coordinator", new != old, f"pid {old} -> {new}")
    finally:
        loop.join(ctx.options.timeout_s * 2)
    ctx.check("the producer finished its loop", run.finished and run.transactions == count,
              f"{run.transactions} of {count} transactions committed ({before} before the "
              f"kill), {len(run.aborted) // TXN_RECORDS} aborted "
              f"{dict(run.abort_reasons)}; failure: {run.failure}")
    ends = _watermarks(bootstrap, topic, "read_uncommitted")
    stable = ctx.wait(lambda: (s := _watermarks(bootstrap, topic, "read_committed")) == ends
                      and s, "every last stable offset at the log end")
    ctx.check("no transaction left open: the last stable offset is the log end",
              stable == ends, f"last stable offsets {stable}, log end {ends}")
    read = _read_committed(bootstrap, topic, len(run.committed), ctx.options.timeout_s)
    found = Counter(read)
    committed = set(run.committed)
    aborted = set(run.aborted)
    v = Verification(partitions=TXN_PARTITIONS, log_records=len(read),
                     acknowledged=len(committed))
    lost = sorted(committed - set(found))
    twice = sorted((value, n) for value, n in found.items() if n > 1)
    invented = sorted(value for value in found if value not in committed)
    v.lost, v.duplicated, v.phantom = len(lost), len(twice), len(invented)
    v.examples = {
        "lost": [{"value": value.decode()} for value in lost[:EXAMPLES]],
        "duplicated": [{"value": value.decode(), "times": n} for value, n in twice[:EXAMPLES]],
        "phantom": [{"value": value.decode(), "aborted": value in aborted}
                    for value in invented[:EXAMPLES]]}
    ctx.check("a read_committed consumer reads every committed record once and no aborted one",
              v.ok, f"{len(read)} read, {len(committed)} committed, "
              f"{len(aborted)} aborted")
    ctx.report.verification = v.to_json()
    ctx.report.producers = {"transactions": run.transactions, "aborted": len(run.aborted)
                            // TXN_RECORDS, "abort_reasons": dict(run.abort_reasons),
                            "retried_calls": run.retried_commits}
