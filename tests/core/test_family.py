"""Families, groups, reservations and stale endpoints as values: metas in, decisions out (no IO)."""

from __future__ import annotations

import dataclasses

from fray.core import family, reservations
from fray.core.model import Attempt, Control, End, Meta, RunSpec
from fray.core.capacity import Capacity, Request
from fray.core.scheduler import Admission, Ledger

T0 = 1_800_000_000.0


def meta(run_id: str, *, parent: str | None = None, parent_attempt: int | None = 1, phase: str = "queued",
         attempts: list[Attempt] | None = None, group: dict | None = None, reservation: str | None = None,
         cpus: int = 1, gpus: int = 0) -> Meta:
    m = Meta(run_id=run_id, name=run_id.split("-")[2], created_at=T0,
             submitted_by={"user": "u", "host": "h", "cwd": "/"},
             script={"source": "x", "frozen": "script.py", "sha256": "0" * 64},
             spec=dataclasses.replace(RunSpec(), cpus=cpus, gpus=gpus), phase=phase, attempts=attempts or [],
             parent_run_id=parent, parent_attempt=parent_attempt if parent else None, group=group,
             reservation=reservation)
    if phase == "ended":
        m.end = End("completed_success", "done", T0)
    return m


def attempt(number: int, state: str = "running", cause: str | None = None, stop_reason: str | None = None) -> Attempt:
    return Attempt(number=number, state=state, backend="local", submitted_at=T0, cause=cause, stop_reason=stop_reason)


PARENT = "20261122-101010-parent-aaaa"
CHILD = "20261122-101011-child-bbbb"
GRANDCHILD = "20261122-101012-grand-cccc"


def test_children_of_a_running_parent_keep_running():
    metas = {PARENT: meta(PARENT, phase="active", attempts=[attempt(1)]),
             CHILD: meta(CHILD, parent=PARENT, phase="active", attempts=[attempt(1)])}
    assert family.stop_orders(metas, metas) == {}


def test_an_ended_parent_stops_its_children_but_not_ended_ones():
    done_child = "20261122-101013-done-dddd"
    metas = {PARENT: meta(PARENT, phase="ended", attempts=[attempt(1, "ended", "success")]),
             CHILD: meta(CHILD, parent=PARENT, phase="active", attempts=[attempt(1)]),
             done_child: meta(done_child, parent=PARENT, phase="ended")}
    orders = family.stop_orders(metas, metas)
    assert list(orders) == [CHILD]
    assert PARENT in orders[CHILD] and "ended (completed_success)" in orders[CHILD]


def test_a_stopping_or_restarted_parent_attempt_stops_what_it_launched():
    stopping = {PARENT: meta(PARENT, phase="active", attempts=[attempt(1, "stopping", stop_reason="stopped")]),
                CHILD: meta(CHILD, parent=PARENT)}
    assert "is stopping attempt 1 (stopped)" in family.stop_orders(stopping, stopping)[CHILD]
    restarted = {PARENT: meta(PARENT, phase="active", attempts=[attempt(1, "ended", "lost"), attempt(2)]),
                 CHILD: meta(CHILD, parent=PARENT, parent_attempt=1),
                 GRANDCHILD: meta(GRANDCHILD, parent=PARENT, parent_attempt=2)}
    orders = family.stop_orders(restarted, restarted)
    assert list(orders) == [CHILD] and "attempt 1 of its parent" in orders[CHILD]


def test_a_vanished_parent_stops_the_child_an_unreadable_one_decides_nothing():
    metas = {CHILD: meta(CHILD, parent=PARENT)}
    assert "no longer exists" in family.stop_orders(metas, metas)[CHILD]
    assert family.stop_orders({**metas, PARENT: None}, [CHILD, PARENT]) == {}


def test_the_order_reaches_the_policy_as_a_stop_request_that_is_never_written():
    control = Control()
    effective = family.effective_control(control, "its parent run X ended (failed)")
    assert effective.stop_requested and "parent run X" in effective.updated_by
    assert not control.stop_requested  # the person's control is untouched
    assert family.effective_control(control, None) is control


def _ledger_admitter(cpus: int, gpus: int = 0, held: dict | None = None, in_flight=()) -> reservations.Admitter:
    return reservations.Admitter({"local": Ledger(Capacity(cpus=cpus, mem_mb=None, gpus=gpus))}, held or {}, in_flight)


def _group(size: int, *, cpus: list[int], present: int | None = None) -> dict[str, list[tuple[Meta, Control]]]:
    members = [meta(f"20261122-10101{i}-m{i}-000{i}", group={"id": "g-1", "size": size, "index": i}, cpus=c)
               for i, c in enumerate(cpus)][: present if present is not None else size]
    return {"g-1": [(m, Control()) for m in members]}


def _plan(groups, admitter):
    def admit(m: Meta) -> Admission:
        return admitter.admit("local", Request(m.spec.cpus, None, 0), None)

    return family.plan_groups(groups, T0, admit, admitter.snapshot, admitter.restore)


def test_a_group_starts_whole_when_every_member_fits():
    admitter = _ledger_admitter(4)
    plan = _plan(_group(3, cpus=[1, 1, 2]), admitter)
    assert len(plan.granted) == 3 and not plan.waiting and not plan.stop
    assert admitter.ledger("local").used_cpus == 4


def test_a_group_that_does_not_fit_now_waits_whole_and_holds_nothing():
    admitter = _ledger_admitter(3)
    plan = _plan(_group(3, cpus=[1, 1, 2]), admitter)
    assert not plan.granted and len(plan.waiting) == 3
    assert "starts all together; member 2" in next(iter(plan.waiting.values()))
    assert admitter.ledger("local").used_cpus == 0  # the trial was undone


def test_a_group_with_a_member_that_can_never_start_is_stopped_whole():
    plan = _plan(_group(2, cpus=[1, 64]), _ledger_admitter(4))
    assert len(plan.stop) == 2 and "can never start" in next(iter(plan.stop.values()))


def test_a_member_that_ended_before_the_start_stops_the_rest_of_its_group():
    groups = _group(3, cpus=[1, 1, 1])
    members = groups["g-1"]
    members[1][0].phase = "ended"
    plan = _plan(groups, _ledger_admitter(8))
    assert sorted(plan.stop) == sorted([members[0][0].run_id, members[2][0].run_id])
    assert "ended before the group started" in plan.stop[members[0][0].run_id]


def test_a_group_waits_until_all_its_members_are_written():
    plan = _plan(_group(3, cpus=[1, 1, 1], present=2), _ledger_admitter(8))
    assert not plan.granted and "all 3 members" in next(iter(plan.waiting.values()))


def test_a_reservation_holds_its_min_from_others_and_caps_its_jobs_at_max():
    held = {"r-1": reservations.Held("r-1", "local", Request(3, None, 0), Request(4, None, 0), T0 + 60)}
    admitter = _ledger_admitter(8, held=held)
    assert not admitter.admit("local", Request(6, None, 0), None).admitted  # 3 of 8 are held for r-1
    assert admitter.admit("local", Request(4, None, 0), None).admitted
    assert admitter.admit("local", Request(2, None, 0), "r-1").admitted  # its own jobs use the held part
    assert admitter.admit("local", Request(1, None, 0), "r-1").admitted
    assert admitter.admit("local", Request(1, None, 0), "r-1").admitted  # beyond min, within max: the free CPU
    refused = admitter.admit("local", Request(1, None, 0), "r-1")
    assert not refused.admitted and "at its max" in refused.reason
    assert not admitter.admit("local", Request(1, None, 0), "gone").admitted


def test_a_reservation_counts_jobs_already_running_in_it():
    held = {"r-1": reservations.Held("r-1", "local", Request(0, None, 0), Request(2, None, 0), T0 + 60)}
    admitter = _ledger_admitter(8, held=held, in_flight=[("r-1", Request(2, None, 0))])
    assert not admitter.admit("local", Request(1, None, 0), "r-1").admitted


def test_runs_of_a_released_or_expired_reservation_are_ordered_to_stop():
    records = [{"reservation_id": "old", "backend": "local", "expires_at": T0 - 1,
                "min": {"cpus": 0, "mem_mb": None, "gpus": 0}, "max": {"cpus": 1, "mem_mb": None, "gpus": 0}}]
    live = reservations.live(records, T0)
    assert live == {}
    orders = reservations.orders([meta(CHILD, reservation="old"), meta(PARENT)], live)
    assert list(orders) == [CHILD]


def test_endpoints_of_ended_runs_and_earlier_attempts_are_stale():
    running = meta(CHILD, phase="active", attempts=[attempt(1, "ended", "lost"), attempt(2)])
    assert family.stale_endpoint(CHILD, 2, running, True) is None
    assert "on attempt 2" in family.stale_endpoint(CHILD, 1, running, True)
    ended_attempt = meta(CHILD, phase="queued", attempts=[attempt(1, "ended", "lost")])
    assert "has ended" in family.stale_endpoint(CHILD, 1, ended_attempt, True)
    assert "has ended" in family.stale_endpoint(CHILD, 1, meta(CHILD, phase="ended"), True)
    assert "no longer exists" in family.stale_endpoint(CHILD, 1, None, False)
    assert family.stale_endpoint(CHILD, 1, None, True) is None  # unreadable: keep
    assert family.stale_endpoint(None, None, None, False) is None  # not a fray job's


def test_tree_puts_children_under_parents_oldest_first():
    rows = [{"run_id": "3-c2", "parent_run_id": "1-p", "created_at": 3.0},
            {"run_id": "2-c1", "parent_run_id": "1-p", "created_at": 2.0},
            {"run_id": "4-g", "parent_run_id": "2-c1"}, {"run_id": "1-p", "parent_run_id": None},
            {"run_id": "5-orphan", "parent_run_id": "0-gone"}]
    assert [(d, r["run_id"]) for d, r in family.tree(rows)] == [(0, "1-p"), (1, "2-c1"), (2, "4-g"), (1, "3-c2"),
                                                                (0, "5-orphan")]
