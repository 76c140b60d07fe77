"""A model-based test of classic group membership (hypothesis RuleBasedStateMachine): dynamic
members join (at once, or first asking for a member id: KIP-394's pending members), rejoin,
sync, heartbeat and leave while time passes, against a coordinator on a
real log driven by a fake clock and timer. After every step the group must agree with a plain
model of Kafka's rules: its state, generation, leader and members, and every JoinGroup and
SyncGroup answer (when it came, its error and generation)."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from kio.schema.errors import ErrorCode

from node.groups.config import NEW_MEMBER_JOIN_TIMEOUT_MS
from storage.clock import FakeClock
from tests.node.groups.harness import TEST_CONFIG, Harness, join_request

SESSION_MS = 5000
REBALANCE_MS = 10000
DELAY_MS = TEST_CONFIG.group_initial_rebalance_delay_ms
REQUEST = join_request(session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS,
                       require_known_member_id=False)
OK = ErrorCode.none


@dataclass
class Member:
    join: Future[Any] | None = None        # the real future of a parked JoinGroup
    sync: Future[Any] | None = None        # the real future of a parked SyncGroup
    is_new: bool = True
    instance: str | None = None             # a static member's group.instance.id


@dataclass
class Model:
    """Kafka's classic group rules (GroupMetadataManager), written plainly: one group, dynamic
    members, a timer of (deadline, sequence) per key."""

    now: int
    state: str = "Empty"
    previous: str = "Dead"
    generation: int = 0
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_sync: set[str] = field(default_factory=set)
    pending: dict[str, None] = field(default_factory=dict)      # KIP-394, in arrival order
    new_member_added: bool = False
    timers: dict[str, tuple[int, int, Callable[[], None]]] = field(default_factory=dict)
    seq: int = 0
    answers: list[tuple[Future[Any], ErrorCode, int | None]] = field(default_factory=list)
    # (replaced, retry): a parked request replaced by its retry gets the retry's answer
    alike: list[tuple[Future[Any], Future[Any]]] = field(default_factory=list)

    # ---- timer ---------------------------------------------------------------------------------
    def schedule(self, key: str, delay: int, operation: Callable[[], None]) -> None:
        self.seq += 1
        self.timers[key] = (self.now + delay, self.seq, operation)

    def cancel(self, key: str) -> None:
        self.timers.pop(key, None)

    def advance(self, ms: int) -> None:
        """The clock jumps by ``ms``; then every due timeout runs in (deadline, scheduling)
        order, those it schedules counting from the new time (Kafka's MockCoordinatorTimer)."""
        self.now += ms
        while True:
            due = [(d, s, k) for k, (d, s, _) in self.timers.items() if d <= self.now]
            if not due:
                return
            _, _, key = min(due)
            _, _, operation = self.timers.pop(key)
            operation()

    # ---- helpers -------------------------------------------------------------------------------
    def transition(self, state: str) -> None:
        self.previous, self.state = self.state, state

    def answer(self, future: Future[Any] | None, error: ErrorCode,
               generation: int | None = None) -> None:
        if future is not None:
            self.answers.append((future, error, generation))

    def rebalance_timeout(self) -> int:
        """The largest rebalance timeout of the members: 0 without members, as Kafka's."""
        return REBALANCE_MS if self.members else 0

    def all_joined(self) -> bool:
        return all(m.join is not None for m in self.members.values()) and not self.pending

    def heartbeat_timer(self, member_id: str, timeout: int = SESSION_MS) -> None:
        self.schedule(f"hb-{member_id}", timeout, lambda: self.expire(member_id))

    def remove(self, member_id: str) -> None:
        # an id replaced by its static member's new one may linger among those to sync
        self.members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)

    # ---- Kafka's rules -------------------------------------------------------------------------
    def prepare_rebalance(self) -> None:
        if self.state == "CompletingRebalance":
            for member in self.members.values():
                self.answer(member.sync, ErrorCode.rebalance_in_progress)
                if member.sync is not None:
                    member.sync = None
                    self.heartbeat_timer(self.id_of(member))
        self.pending_sync.clear()
        self.cancel("sync")
        initial = self.state == "Empty"
        if initial:
            remaining = max(self.rebalance_timeout() - DELAY_MS, 0)
            self.schedule("join", DELAY_MS, lambda: self.initial_timeout(DELAY_MS, remaining))
        self.transition("PreparingRebalance")
        if not initial:
            if self.all_joined():
                self.complete_join()
            else:
                self.schedule("join", self.rebalance_timeout(), self.complete_join)

    def id_of(self, member: Member) -> str:
        return next(k for k, v in self.members.items() if v is member)

    def initial_timeout(self, delay: int, remaining: int) -> None:
        if self.new_member_added and remaining != 0:
            self.new_member_added = False
            new_delay = min(DELAY_MS, remaining)
            left = max(remaining - delay, 0)
            self.schedule("join", new_delay, lambda: self.initial_timeout(new_delay, left))
        else:
            self.complete_join()

    def maybe_rebalance_or_complete(self) -> None:
        if self.state in ("Empty", "Stable", "CompletingRebalance"):
            self.prepare_rebalance()
        elif self.state == "PreparingRebalance" and self.previous != "Empty" \
                and self.all_joined():
            self.complete_join()

    def complete_join(self) -> None:
        self.cancel("join")
        for member_id in [k for k, m in self.members.items()
                          if m.join is None and m.instance is None]:
            self.remove(member_id)
            self.cancel(f"hb-{member_id}")
        if self.members and (self.leader is None or self.members[self.leader].join is None):
            rejoined = next((k for k, m in self.members.items() if m.join is not None), None)
            if rejoined is None:
                # no static member rejoined: wait for their sessions to run out
                self.schedule("join", self.rebalance_timeout(), self.complete_join)
                return
            self.leader = rejoined
        self.generation += 1
        if not self.members:
            self.leader = None
            self.transition("Empty")
            return
        self.transition("CompletingRebalance")
        for member_id, member in self.members.items():
            self.answer(member.join, OK, self.generation)
            member.join = None
            self.heartbeat_timer(member_id)
            member.is_new = False
            self.pending_sync.add(member_id)
        generation = self.generation
        self.schedule("sync", self.rebalance_timeout(), lambda: self.expire_sync(generation))

    def expire_sync(self, generation: int) -> None:
        if generation == self.generation and self.state in ("CompletingRebalance", "Stable") \
                and self.pending_sync:
            for member_id in list(self.pending_sync):
                self.remove(member_id)
                self.cancel(f"hb-{member_id}")
            self.prepare_rebalance()

    def expire(self, member_id: str) -> None:
        if member_id in self.pending:
            del self.pending[member_id]
            if self.state == "PreparingRebalance" and self.all_joined():
                self.complete_join()
            return
        member = self.members.get(member_id)
        if member is None:
            return
        satisfied = not member.is_new and (member.join is not None or member.sync is not None)
        if satisfied:
            return
        self.answer(member.join, ErrorCode.unknown_member_id)
        self.remove(member_id)
        if self.state in ("Stable", "CompletingRebalance"):
            self.maybe_rebalance_or_complete()
        elif self.state == "PreparingRebalance" and self.all_joined():
            self.complete_join()


class GroupMembershipModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="group-model-"))
        self.clock = FakeClock()
        self.groups = Harness(self.root, self.clock)
        self.model = Model(now=self.clock.milliseconds())
        self.created = False

    def teardown(self) -> None:
        self.groups.coordinator.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def member_ids(self) -> list[str]:
        return list(self.model.members)

    # ---- rules ---------------------------------------------------------------------------------
    @rule()
    def new_member_joins(self) -> None:
        future = self.groups.join(REQUEST)
        self.created = True
        self.add_member(self.groups.group().member_ids[-1], future)

    @rule()
    def new_member_asks_for_an_id(self) -> None:
        answer = self.groups.join(dataclasses.replace(REQUEST, require_known_member_id=True)
                                  ).result(0)
        self.created = True
        assert answer.error_code == ErrorCode.member_id_required
        self.model.pending[answer.member_id] = None
        self.model.heartbeat_timer(answer.member_id)

    @precondition(lambda self: bool(self.model.pending))
    @rule(data=st.data())
    def pending_member_joins(self, data: st.DataObject) -> None:
        member_id = data.draw(st.sampled_from(list(self.model.pending)))
        future = self.groups.join(dataclasses.replace(REQUEST, member_id=member_id,
                                                      require_known_member_id=True))
        del self.model.pending[member_id]
        self.add_member(member_id, future)

    @precondition(lambda self: bool(self.model.pending))
    @rule(data=st.data())
    def pending_member_leaves(self, data: st.DataObject) -> None:
        model = self.model
        member_id = data.draw(st.sampled_from(list(model.pending)))
        answer = self.groups.leave((member_id, None))
        assert answer.members[0].error_code == OK
        del model.pending[member_id]
        model.cancel(f"hb-{member_id}")
        if model.state != "Empty":        # Kafka rebalances for a pending member's leave too
            model.maybe_rebalance_or_complete()

    def instance_of(self, member_id: str) -> str | None:
        return self.model.members[member_id].instance

    @rule(instance=st.sampled_from(["static-1", "static-2"]))
    def static_member_joins(self, instance: str) -> None:
        """A static member joins with no member id: a new member, or its instance's new id
        replacing the old one (KIP-345)."""
        model = self.model
        future = self.groups.join(dataclasses.replace(REQUEST, group_instance_id=instance))
        self.created = True
        new_id = self.groups.group().static_member_id(instance)
        old_id = next((k for k, m in model.members.items() if m.instance == instance), None)
        if old_id is None:
            self.add_member(new_id, future, instance)
            return
        current_leader = model.leader
        old = model.members.pop(old_id)
        model.answer(old.join, ErrorCode.fenced_instance_id)
        model.answer(old.sync, ErrorCode.fenced_instance_id)
        model.members[new_id] = Member(join=future, is_new=False, instance=instance)
        if current_leader == old_id:
            model.leader = new_id
        model.cancel(f"hb-{old_id}")
        model.heartbeat_timer(new_id)
        if model.state == "Stable":      # the same protocols: no rebalance, the same generation
            model.answer(future, OK, model.generation)
            model.members[new_id].join = None
        elif model.state == "CompletingRebalance":
            model.prepare_rebalance()
        elif model.previous != "Empty" and model.all_joined():
            model.complete_join()

    def add_member(self, member_id: str, future: Future[Any],
                   instance: str | None = None) -> None:
        model = self.model
        assert member_id not in model.members
        model.members[member_id] = Member(join=future, instance=instance)
        if model.state == "PreparingRebalance" and model.previous == "Empty":
            model.new_member_added = True
        if model.leader is None:
            model.leader = member_id
        model.heartbeat_timer(member_id, NEW_MEMBER_JOIN_TIMEOUT_MS)
        model.maybe_rebalance_or_complete()

    @precondition(lambda self: bool(self.model.members))
    @rule(data=st.data())
    def member_rejoins(self, data: st.DataObject) -> None:
        model = self.model
        member_id = data.draw(st.sampled_from(self.member_ids()))
        future = self.groups.join(dataclasses.replace(
            REQUEST, member_id=member_id, group_instance_id=self.instance_of(member_id)))
        member = model.members[member_id]
        if model.state == "PreparingRebalance":
            if member.join is not None:
                model.alike.append((member.join, future))
            member.join = future
            model.maybe_rebalance_or_complete()
        elif model.state == "CompletingRebalance":
            model.answer(future, OK, model.generation)     # same metadata: same generation
        elif model.state == "Stable":
            if member_id == model.leader:
                member.join = future
                model.maybe_rebalance_or_complete()
            else:
                model.answer(future, OK, model.generation)
        else:
            model.answer(future, ErrorCode.unknown_member_id)

    @precondition(lambda self: bool(self.model.members))
    @rule(data=st.data(), stale=st.booleans())
    def member_syncs(self, data: st.DataObject, stale: bool) -> None:
        model = self.model
        member_id = data.draw(st.sampled_from(self.member_ids()))
        generation = model.generation - 1 if stale else model.generation
        future = self.groups.sync(member_id, generation,
                                  group_instance_id=self.instance_of(member_id),
                                  assignments=((member_id, b"x"),))
        member = model.members[member_id]
        if model.state == "Empty":
            model.answer(future, ErrorCode.unknown_member_id)
        elif generation != model.generation:
            model.answer(future, ErrorCode.illegal_generation)
        elif model.state == "PreparingRebalance":
            model.answer(future, ErrorCode.rebalance_in_progress)
        elif model.state == "CompletingRebalance":
            if member.sync is not None:
                model.alike.append((member.sync, future))
            member.sync = future
            model.pending_sync.discard(member_id)
            if not model.pending_sync:
                model.cancel("sync")
            if member_id == model.leader:
                for other_id, other in model.members.items():
                    if other.sync is not None:
                        model.answer(other.sync, OK)
                        other.sync = None
                        model.heartbeat_timer(other_id)
                model.transition("Stable")
        else:
            model.pending_sync.discard(member_id)
            if not model.pending_sync:
                model.cancel("sync")
            model.answer(future, OK)

    @precondition(lambda self: bool(self.model.members))
    @rule(data=st.data())
    def member_heartbeats(self, data: st.DataObject) -> None:
        model = self.model
        member_id = data.draw(st.sampled_from(self.member_ids()))
        answer = self.groups.heartbeat(member_id, model.generation,
                                       group_instance_id=self.instance_of(member_id))
        if model.state == "Empty":
            expected = ErrorCode.unknown_member_id
        else:
            model.heartbeat_timer(member_id)
            expected = (ErrorCode.rebalance_in_progress if model.state == "PreparingRebalance"
                        else OK)
        assert answer == expected, (answer, expected, model.state)

    @precondition(lambda self: bool(self.model.members))
    @rule(data=st.data())
    def member_leaves(self, data: st.DataObject) -> None:
        model = self.model
        member_id = data.draw(st.sampled_from(self.member_ids()))
        answer = self.groups.leave((member_id, self.instance_of(member_id)))
        assert answer.members[0].error_code == OK
        model.cancel(f"hb-{member_id}")
        model.answer(model.members[member_id].join, ErrorCode.unknown_member_id)
        model.remove(member_id)
        if model.state in ("Stable", "CompletingRebalance"):
            model.maybe_rebalance_or_complete()
        elif model.state == "PreparingRebalance":
            model.maybe_rebalance_or_complete()

    @rule(ms=st.sampled_from([1, 500, 1000, 2999, 3000, 4999, 5000, 10000]))
    def time_passes(self, ms: int) -> None:
        self.groups.sleep(ms)
        self.model.advance(ms)

    # ---- what must agree -----------------------------------------------------------------------
    @invariant()
    def group_agrees_with_the_model(self) -> None:
        group = self.groups.group()
        model = self.model
        if not self.created:
            assert group is None
            return
        assert str(group.state) == model.state
        assert group.generation_id == model.generation
        assert group.member_ids == list(model.members)
        assert group.num_pending_join_members() == len(model.pending)
        assert (group.leader_id if group.member_ids else None) == \
            (model.leader if model.members else None)

    @invariant()
    def answers_agree_with_the_model(self) -> None:
        expected = {id(f): (f, e, g) for f, e, g in self.model.answers}
        for future, error, generation in expected.values():
            assert future.done(), (error, generation)
            result = future.result(0)
            code = result.error_code
            assert code == error, (code, error)
            if generation is not None:
                assert result.generation_id == generation
        for replaced, retry in self.model.alike:
            assert replaced.done() == retry.done()
            if retry.done():
                assert replaced.result(0) == retry.result(0)
        for member in self.model.members.values():
            for parked in (member.join, member.sync):
                if parked is not None and id(parked) not in expected:
                    assert not parked.done(), parked.result(0)


TestGroupMembershipModel = GroupMembershipModel.TestCase
