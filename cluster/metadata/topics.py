"""``TopicMetadata``: which directory holds which partition, and each topic's overrides.

There is no metadata store besides the directories: every node lists its partitions and keeps its
topics' overrides (``topic-configs.json``), so the table is rebuilt by asking the nodes (after a
coordinator restart too). A directory that cannot be asked keeps the routes learned before. A
partition held by no directory while a move into one runs (the source has committed, the target
not yet promoted the copy) is routed to the move's target: it exists all along, and is never
created a second time (by a create or a client's auto-creation) in that moment.
New partitions are placed by ``cluster.metadata.placement``.

A partition that two directories hold is routed to neither (``route`` raises
``DuplicatePartitionError`` naming both), and its topic cannot be created again. While known
directories are missing (a start told to go on without them, ``missing_dirs``), no partition is
created at all (``MissingLogDirError``): any of them may live in a missing directory, and a
second copy would be created beside it.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Callable

from cluster.metadata.dir_identity import duplicate_partition_error, duplicate_partitions
from cluster.errors import (ActorUnavailableError, InvalidPartitionsError, MissingLogDirError,
                            TopicExistsError, UnknownTopicError)
from cluster.handles import Handle
from cluster.naming import is_internal
from cluster.metadata.placement import DirRoom, place
from storage import files
from storage.config import BROKER_SYNONYMS, TOPIC_KEYS, LogConfig
from storage.errors import InvalidConfigError, StorageError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: dict[int, str]          # partition -> log directory
    config: dict[str, str]              # the topic's overrides

    @property
    def internal(self) -> bool:
        """A topic the cluster keeps for itself (``cluster.naming.INTERNAL_TOPICS``)."""
        return is_internal(self.name)


class TopicMetadata:
    """Thread-safe. ``nodes`` maps each log directory to its node handle. The table lock guards
    the maps only and is never held across a call to a node (a slow node delays no route); the
    changes of one topic are serialised by a lock of that topic (``_topic_lock``), and a topic
    being created or deleted is refused a second create or delete (``TopicExistsError``)."""

    def __init__(self, nodes: Mapping[str, Handle], default_config: LogConfig,
                 call_timeout_s: float = 60.0, *,
                 missing_dirs: Mapping[str, int] | None = None) -> None:
        self._nodes = dict(nodes)
        self._missing = dict(missing_dirs or {})
        self._held_by: dict[str, list[tuple[str, int]]] = {}
        self._duplicates: dict[tuple[str, int], list[str]] = {}
        self._default = default_config
        self._timeout = call_timeout_s
        self._lock = threading.RLock()
        self._routes: dict[str, dict[int, str]] = {}
        self._configs: dict[str, dict[str, str]] = {}
        self._busy: set[str] = set()        # topics being created or deleted now
        self._deleting: set[str] = set()    # topics a directory records as being deleted
        self._held: dict[str, dict[int, str]] = {}
        self._topic_locks: dict[str, threading.Lock] = {}

    @property
    def missing_dirs(self) -> dict[str, int]:
        """The known directories this start went on without (path -> node id)."""
        return dict(self._missing)

    def refresh(self) -> None:
        """Ask every node what it holds; a node that cannot answer keeps its old routes. A topic
        some directory is still deleting (``topic_deletions``) is not routed; ``resume_deletions``
        finishes it. The lock is held only while the answers are merged, never during a call."""
        pendings = {d: (h.submit("partitions"), h.submit("topic_configs"),
                        h.submit("topic_deletions"), h.submit("move_status"))
                    for d, h in self._nodes.items()}
        answers = {}
        for log_dir, (parts, configs, deletions, moves) in pendings.items():
            try:
                answers[log_dir] = (parts.result(self._timeout), configs.result(self._timeout),
                                    deletions.result(self._timeout), _moves_in(moves,
                                                                               self._timeout))
            except (ActorUnavailableError, StorageError) as err:
                logger.warning("cannot list the partitions of %s: %s", log_dir, err)
        with self._lock:
            moving_in: dict[tuple[str, int], str] = {}
            for log_dir, (held, overrides, deleting, moves) in answers.items():
                self._held_by[log_dir] = [(t, p) for t, p in held]
                for routes in self._routes.values():
                    for p in [p for p, d in routes.items() if d == log_dir]:
                        del routes[p]
                for topic, partition in held:
                    self._routes.setdefault(topic, {})[partition] = log_dir
                for topic, config in overrides.items():
                    self._configs[topic] = dict(config)
                self._deleting.update(deleting)
                moving_in.update({tp: log_dir for tp in moves})
            for (topic, partition), log_dir in moving_in.items():
                # held by no directory for a moment: the source has committed the move and the
                # target not yet promoted it; the partition exists, and is the target's
                self._routes.setdefault(topic, {}).setdefault(partition, log_dir)
            for topic in self._deleting:
                self._routes.pop(topic, None)
            self._duplicates = duplicate_partitions(self._held_by)
            for topic, partition in self._duplicates:
                self._routes.get(topic, {}).pop(partition, None)
            self._routes = {t: r for t, r in self._routes.items() if r}
        if self._duplicates:
            logger.error("%s", duplicate_partition_error(self._duplicates))

    def resume_deletions(self, on_progress: Progress | None = None) -> list[str]:
        """Finish every topic delete a directory recorded and did not complete (a crash or a stop
        in the middle of ``delete_topic``); returns the topics finished."""
        with self._lock:
            pending = sorted(self._deleting - self._busy)
        done = []
        for topic in pending:
            try:
                self.delete_topic(topic, on_progress=on_progress, resumed=True)
                done.append(topic)
            except (ActorUnavailableError, StorageError) as err:
                logger.warning("cannot finish the deletion of topic %s yet: %s", topic, err)
        return done

    def route(self, topic: str, partition: int) -> str:
        with self._lock:
            found = self._routes.get(topic, {}).get(partition)
        if found is None:
            self.refresh()
            with self._lock:
                found = self._routes.get(topic, {}).get(partition)
        if found is None:
            with self._lock:
                dirs = self._duplicates.get((topic, partition))
            if dirs:
                raise duplicate_partition_error({(topic, partition): dirs})
            raise UnknownTopicError(f"the cluster has no partition {topic}-{partition}"
                                    + self._missing_note(), topic=topic, partition=partition)
        return found

    def _missing_note(self) -> str:
        if not self._missing:
            return ""
        return (f" (the log directories {', '.join(sorted(self._missing))} are missing from "
                "this start: it may live there)")

    def _refuse_creation(self, name: str) -> None:
        """No partition of ``name`` is created while a known directory is missing, or while a
        partition of it is held twice."""
        if self._missing:
            raise MissingLogDirError(
                f"no partition of topic {name} is created while the log directories "
                f"{', '.join(sorted(self._missing))} are missing (it may live there already); "
                "start the cluster with every directory", topic=name,
                missing=dict(self._missing))
        with self._lock:
            twice = {tp: d for tp, d in self._duplicates.items() if tp[0] == name}
        if twice:
            raise duplicate_partition_error(twice)

    def set_route(self, topic: str, partition: int, log_dir: str) -> None:
        """Route ``topic``-``partition`` to ``log_dir`` (it moved there)."""
        with self._lock:
            self._routes.setdefault(topic, {})[partition] = log_dir

    def routes(self, topic: str | None = None) -> dict[str, dict[int, str]]:
        with self._lock:
            if topic is None:
                return {t: dict(r) for t, r in self._routes.items()}
            if topic not in self._routes:
                raise UnknownTopicError(f"the cluster has no topic {topic}", topic=topic)
            return {topic: dict(self._routes[topic])}

    def overrides(self, topic: str) -> dict[str, Any]:
        """``topic``'s config overrides; ``UnknownTopicError`` when the cluster has no such
        topic."""
        with self._lock:
            if topic not in self._routes:
                raise UnknownTopicError(f"the cluster has no topic {topic}", topic=topic)
            return dict(self._configs.get(topic, {}))

    def topics(self) -> list[TopicInfo]:
        with self._lock:
            return [TopicInfo(t, dict(sorted(r.items())), dict(self._configs.get(t, {})))
                    for t, r in sorted(self._routes.items())]

    def create_topic(self, name: str, partitions: int, config: Mapping[str, Any],
                     rooms: list[DirRoom], on_progress: Progress | None = None) -> TopicInfo:
        """Create ``name``: each directory gets one ``create_partitions`` call for its share, all
        at once. The topic is routed only once every partition exists; when a directory fails,
        the partitions created are deleted again (durably, see ``delete_topic``) and the error
        is raised: a half-created topic is never left routed. ``TopicExistsError`` for a topic
        that exists, is being created or is being deleted."""
        files.validate_topic(name)
        partitions = files.validate_partition_count(partitions, name)
        overrides = {str(k): _text(v) for k, v in config.items()}
        self._default.with_overrides(overrides)   # refuse bad settings before touching a node
        self._refuse_creation(name)
        with self._lock:
            if self._routes.get(name) or name in self._busy or name in self._deleting:
                state = ("is being deleted" if name in self._deleting
                         else "is being created or deleted" if name in self._busy
                         else "already exists")
                raise TopicExistsError(f"topic {name} {state}", topic=name)
            self._busy.add(name)
        try:
            chosen = place(rooms, partitions)
            by_dir: dict[str, list[int]] = {}
            for partition, log_dir in enumerate(chosen):
                by_dir.setdefault(log_dir, []).append(partition)
            _report(on_progress, "create partitions", 0, partitions)
            try:
                self._each_dir("create_partitions", name, by_dir, on_progress,
                               "create partitions", partitions, overrides)
            except BaseException:
                logger.warning("creating topic %s failed; deleting what was created", name)
                try:
                    self._delete_everywhere(name, by_dir, None)
                except BaseException:  # noqa: BLE001 - recorded: finished at the next refresh
                    logger.warning("rollback of topic %s incomplete", name, exc_info=True)
                    with self._lock:
                        self._deleting.add(name)
                raise
            created = dict(enumerate(chosen))
            with self._lock:
                self._routes[name] = created
                self._configs[name] = overrides
            return TopicInfo(name, created, overrides)
        finally:
            with self._lock:
                self._busy.discard(name)

    def _each_dir(self, method: str, topic: str, by_dir: Mapping[str, list[int]],
                  on_progress: Progress | None, stage: str, total: int, *extra: Any) -> int:
        """``method(topic, partitions, *extra)`` on every directory of ``by_dir`` at once, in
        slices of ``BATCH`` partitions (so progress can be reported); the first error is raised
        once every call has ended. Returns the sum of the answers."""
        slices = [(d, parts[i:i + BATCH]) for d, parts in by_dir.items()
                  for i in range(0, max(len(parts), 1), BATCH)]
        done = answered = 0
        error: BaseException | None = None
        queues = {d: [s for dd, s in slices if dd == d] for d in by_dir}
        inflight = {d: self._nodes[d].submit(method, topic, q.pop(0), *extra)
                    for d, q in queues.items() if q}
        sizes = {d: len(by_dir[d][:BATCH]) for d in inflight}
        while inflight:
            for d in list(inflight):
                pending = inflight.pop(d)
                try:
                    answered += int(pending.result(self._timeout) or 0)
                except BaseException as err:  # noqa: BLE001 - raised below, after the others
                    error = error or err
                    queues[d].clear()
                done += sizes[d]
                _report(on_progress, stage, done, total)
                if queues[d] and error is None:
                    batch = queues[d].pop(0)
                    sizes[d] = len(batch)
                    inflight[d] = self._nodes[d].submit(method, topic, batch, *extra)
        if error is not None:
            raise error
        return answered

    def _delete_everywhere(self, name: str, by_dir: Mapping[str, list[int]],
                           on_progress: Progress | None) -> int:
        """Mark ``name`` as being deleted in every directory (durable before the first partition
        goes), then delete the partitions of ``by_dir``."""
        marks = {d: h.submit("mark_topic_deleting", name) for d, h in self._nodes.items()}
        marked = []
        for log_dir, pending in marks.items():
            try:
                pending.result(self._timeout)
                marked.append(log_dir)
            except (ActorUnavailableError, StorageError):
                if by_dir.get(log_dir):
                    raise
                logger.warning("cannot mark %s as being deleted in %s", name, log_dir)
        total = sum(len(p) for p in by_dir.values())
        _report(on_progress, "delete partitions", 0, total)
        # every marked directory is called, with nothing to delete too: that clears its mark
        everywhere = {d: list(by_dir.get(d, [])) for d in sorted({*by_dir, *marked})}
        return self._each_dir("delete_partitions", name, everywhere, on_progress,
                              "delete partitions", total)

    def alter_topic_config(self, name: str, config: Mapping[str, Any],
                           delete: Iterable[str] = ()) -> TopicInfo:
        """Kafka's ``kafka-configs --alter --add-config/--delete-config`` of a topic: set the keys
        of ``config`` and remove those of ``delete`` from its overrides, then hand the new set to
        every directory holding a partition of it, which persists it and applies it to the live
        logs. Refused, naming the key and changing nothing (``InvalidConfigError``): an unknown
        key, a bad value, a key both set and deleted, the deletion of a key that is not
        overridden (Kafka's "Invalid config(s)"), a broker key (``log.retention.ms``: Kafka's
        kafka-configs takes topic keys only). ``UnknownTopicError`` for an unknown topic.
        Each directory's change is idempotent: after a directory failed half-way, running the
        same alter again completes it."""
        changes = {str(k): _text(v) for k, v in config.items()}
        deletes = [str(k) for k in delete]
        broker_keys = sorted(k for k in changes if k not in TOPIC_KEYS)
        if broker_keys and broker_keys[0] in BROKER_SYNONYMS:
            raise InvalidConfigError(
                f"topic {name}: {broker_keys[0]} is a broker key; the topic key is "
                f"{BROKER_SYNONYMS[broker_keys[0]][0]}", key=broker_keys[0], topic=name)
        both = sorted(set(changes) & set(deletes))
        if both:
            raise InvalidConfigError(f"topic {name}: {both[0]} is both set and deleted",
                                     key=both[0], topic=name)
        with self._topic_lock(name):
            with self._lock:
                routes = self.routes(name)[name]
                old = dict(self._configs.get(name, {}))
            missing = [k for k in deletes if k not in old]
            if missing:
                raise InvalidConfigError(
                    f"topic {name} has no override {missing[0]} to delete (its overrides: "
                    f"{', '.join(sorted(old)) or 'none'})", key=missing[0], topic=name)
            new = {**old, **changes}
            for key in deletes:
                new.pop(key)
            self._default.with_overrides(new)   # refuses naming the key, before any node call
            for log_dir in sorted(set(routes.values())):
                self._nodes[log_dir].call("alter_topic_config", name, new, timeout=self._timeout)
            with self._lock:
                self._configs[name] = new
            return TopicInfo(name, dict(sorted(routes.items())), dict(new))

    def add_partitions(self, name: str, total: int, rooms: list[DirRoom]) -> TopicInfo:
        """Kafka's ``kafka-topics --alter --partitions``: grow ``name`` to ``total`` partitions,
        the new ones numbered after the last and placed by ``cluster.metadata.placement.place`` with
        the topic's current spread, each created with the topic's overrides.
        ``InvalidPartitionsError`` when ``total`` is not above the current count."""
        files.validate_topic(name)
        total = files.validate_partition_count(total, name)
        with self._topic_lock(name):
            with self._lock:
                routes = self.routes(name)[name]
                overrides = dict(self._configs.get(name, {}))
            self._refuse_creation(name)
            current = max(routes) + 1
            if total <= current:
                raise InvalidPartitionsError(
                    f"topic {name} has {current} partitions; {total} would not be an increase",
                    topic=name, current=current, requested=total)
            chosen = place(rooms, total - current,
                           topic_partitions=Counter(routes.values()))
            by_dir: dict[str, list[int]] = {}
            for partition, log_dir in enumerate(chosen, start=current):
                by_dir.setdefault(log_dir, []).append(partition)
            try:
                self._each_dir("create_partitions", name, by_dir, None, "create partitions",
                               len(chosen), overrides)
            finally:
                self.refresh()      # route what exists now, whatever failed
            with self._lock:
                return TopicInfo(name, dict(sorted(self._routes.get(name, {}).items())),
                                 overrides)

    def _topic_lock(self, name: str) -> threading.Lock:
        """The lock that serialises the changes of one topic (held across node calls: it blocks
        only other changes of that topic, never a route)."""
        with self._lock:
            return self._topic_locks.setdefault(name, threading.Lock())

    def delete_topic(self, name: str, on_progress: Progress | None = None, *,
                     resumed: bool = False) -> int:
        """Delete every partition of ``name``; returns how many went. Every directory records the
        deletion first (``mark_topic_deleting``), so a delete interrupted by a crash or a stop is
        finished after the restart (``resume_deletions``); the topic is unrouted at once. Each
        directory gets one ``delete_partitions`` call per ``BATCH`` partitions."""
        with self._lock:
            if name in self._busy:
                raise TopicExistsError(f"topic {name} is being created or deleted", topic=name)
            if not resumed:
                self.routes(name)      # UnknownTopicError for a topic that is not there
            self._busy.add(name)
        try:
            self.refresh_topic(name)
            with self._lock:
                routes = dict(self._held.pop(name, {}))
            by_dir: dict[str, list[int]] = {}
            for partition, log_dir in sorted(routes.items()):
                by_dir.setdefault(log_dir, []).append(partition)
            with self._lock:
                self._deleting.add(name)
                self._routes.pop(name, None)
            deleted = self._delete_everywhere(name, by_dir, on_progress)
            with self._lock:
                self._deleting.discard(name)
                self._configs.pop(name, None)
            return deleted
        finally:
            with self._lock:
                self._busy.discard(name)

    def refresh_topic(self, name: str) -> None:
        """Ask every node which partitions of ``name`` it holds (into ``_held``), so a delete
        also finds partitions a stale table does not route."""
        pendings = {d: h.submit("partitions") for d, h in self._nodes.items()}
        held: dict[int, str] = {}
        with self._lock:
            held.update(self._routes.get(name, {}))
        for log_dir, pending in pendings.items():
            try:
                for topic, partition in pending.result(self._timeout):
                    if topic == name:
                        held[partition] = log_dir
            except (ActorUnavailableError, StorageError) as err:
                logger.warning("cannot list the partitions of %s: %s", log_dir, err)
        with self._lock:
            self._held[name] = held


BATCH = 2000     # partitions per create/delete call: progress every few seconds at most

Progress = Callable[[str, int, int], None]   # (stage, done, total)


def _report(on_progress: Progress | None, stage: str, done: int, total: int) -> None:
    if on_progress is not None:
        try:
            on_progress(stage, done, total)
        except Exception:  # noqa: BLE001 - a progress display must not break the operation
            logger.warning("progress callback failed", exc_info=True)


def _moves_in(pending: Any, timeout_s: float) -> list[tuple[str, int]]:
    """The partitions a node's ``move_status`` answer shows moving in now; none when it cannot
    say (an offline directory lists its interrupted copies from the disk it lost)."""
    try:
        return [(m.topic, m.partition) for m in pending.result(timeout_s) if m.running]
    except StorageError:
        return []


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
